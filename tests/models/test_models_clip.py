"""Open-vocabulary group mode and the world CLIP (concept_grounding.models.clip)."""

import pytest
import torch

from concept_grounding import load_vocabulary
from concept_grounding.models import (
    WordTokenizer,
    WorldCLIP,
    load_clip,
    toy_concept_dataset,
    train_world_clip,
)
from concept_grounding.models.clip import (
    NONE_PROMPT,
    attribute_prompt,
    caption_for_attributes,
    clip_group_predict,
    clip_group_scores,
    group_prompts,
)
from concept_grounding.models.data import to_tensors


class FakeClip(torch.nn.Module):
    """Image i's embedding is a basis vector; each prompt's embedding is set by a table."""

    def __init__(self, prompt_vectors: dict[str, torch.Tensor]):
        super().__init__()
        self.table = prompt_vectors
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def encode_image(self, images):
        return images.flatten(1)[:, :4]

    def encode_text(self, texts):
        return torch.stack([self.table[t] for t in texts])


def test_prompts_follow_the_vocabulary():
    vocab = load_vocabulary()
    assert attribute_prompt("has_crown_color::black") == "a photo of a bird with a black crown"
    assert attribute_prompt("has_bill_shape::needle") == "a photo of a bird with a needle bill"
    assert attribute_prompt("has_breast_pattern::spotted") == "a photo of a bird with a spotted breast"
    assert attribute_prompt("has_shape::duck-like") == "a photo of a duck-like bird"
    assert attribute_prompt("has_wing_color::orange") == "a photo of a bird with an orange wing"
    prompts = group_prompts("crown_color", vocab, include_none=True)
    assert len(prompts) == 16 and prompts[-1] == NONE_PROMPT and len(set(prompts)) == 16
    for group in vocab.groups:  # every group's prompts are distinct
        assert len(set(group_prompts(group, vocab))) == len(vocab.groups[group]), group
    with pytest.raises(ValueError, match="unknown attribute group"):
        group_prompts("crest_colour", vocab)


def test_group_scores_argmax_with_a_fake_model():
    vocab = load_vocabulary()
    prompts = group_prompts("bill_length", vocab, include_none=True)  # 3 values + none
    basis = torch.eye(4)
    # prompt k points at basis vector (k + 1) % 4, so image i matches prompt (i - 1) % 4
    model = FakeClip({p: basis[(k + 1) % 4] * (k + 2) for k, p in enumerate(prompts)})
    images = torch.zeros(4, 3, 2, 2)
    images.view(4, -1)[:, :4] = basis * 5.0
    scores = clip_group_scores(model, lambda texts: list(texts), images, "bill_length", vocab, include_none=True)
    assert scores.shape == (4, 4)
    expected = torch.zeros(4, 4)
    for i in range(4):
        expected[i, (i - 1) % 4] = 1.0  # cosine similarity, not the raw dot product
    assert torch.allclose(scores, expected, atol=1e-6)
    assert clip_group_predict(scores).tolist() == [3, 0, 1, 2]
    assert clip_group_scores(model, lambda t: list(t), images, "bill_length", vocab).shape == (4, 3)


def test_group_scores_dispatch_to_a_transformers_clip():
    from transformers import CLIPConfig, CLIPModel

    config = CLIPConfig(
        text_config=dict(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=32,
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        ),
        vision_config=dict(
            image_size=16,
            patch_size=8,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
        ),
        projection_dim=8,
    )
    torch.manual_seed(0)
    model = CLIPModel(config)
    tok = WordTokenizer.from_vocabulary(context_length=20)

    def hf_tokenizer(texts, padding=True, return_tensors="pt"):
        ids = tok(texts) % 64
        return {"input_ids": ids, "attention_mask": (ids > 0).long()}

    images = torch.rand(3, 3, 16, 16)
    scores = clip_group_scores(model, hf_tokenizer, images, "wing_pattern")
    text = torch.nn.functional.normalize(
        model.get_text_features(**hf_tokenizer(group_prompts("wing_pattern"))).pooler_output, dim=-1
    )
    image = torch.nn.functional.normalize(model.get_image_features(pixel_values=images).pooler_output, dim=-1)
    assert torch.allclose(scores, image @ text.T, atol=1e-5)


def test_word_tokenizer_covers_every_prompt():
    tok = WordTokenizer.from_vocabulary(load_vocabulary())
    tokens = tok([attribute_prompt(a) for a in load_vocabulary().attributes])
    assert int((tokens == 1).sum()) == 0  # no unknown words
    assert (tokens.argmax(1) == (tokens > 0).sum(1) - 1).all()  # end-of-text is the highest id, last
    caption = caption_for_attributes(["has_size::small_(5_-_9_in)", "has_crown_color::black"])
    assert caption == "a photo of a small bird with a black crown" and int((tok(caption) == 1).sum()) == 0


def test_world_clip_learns_colours_and_round_trips(tmp_path):
    ds = toy_concept_dataset(n_per_class=8, image_size=32, seed=0)
    # plain InfoNCE (one positive per row), whose loss can fall towards 0
    model, tok = train_world_clip(
        ds,
        image_size=32,
        epochs=24,
        batch_size=32,
        progress=False,
        multi_positive=False,
        class_caption_rate=0.0,
        model_kwargs=dict(embed_dim=32, vision_width=32, text_width=32, vision_layers=1, text_layers=1, head_width=16),
    )
    losses = model.history.losses
    assert losses[-1] < 0.8 * losses[0]
    images = to_tensors(ds, None, 32).images
    scores = clip_group_scores(model, tok, images, "primary_color")
    model.save_pretrained(tmp_path)
    handle = load_clip(tmp_path)
    assert handle.backend.name == "world" and isinstance(handle.model, WorldCLIP)
    for (name, a), (_, b) in zip(model.state_dict().items(), handle.model.state_dict().items()):
        assert torch.equal(a, b), name
    assert torch.equal(clip_group_scores(handle.model, handle.tokenizer, images, "primary_color"), scores)
    pil = [ds[i]["image"] for i in range(2)]
    assert torch.allclose(
        clip_group_scores(handle.model, handle.tokenizer, pil, "primary_color", preprocess=handle.preprocess),
        scores[:2],
        atol=1e-6,
    )


def test_unknown_model_names_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown open_clip model"):
        load_clip("ViT-Q-99", backend="open_clip")
    with pytest.raises(ValueError, match="cannot load CLIP-like model"):
        load_clip(str(tmp_path / "no-such-model"), local_files_only=True)
    with pytest.raises(ValueError, match="backend"):
        load_clip("x", backend="jax")


def test_tiny_open_clip_architecture_works_with_group_scores():
    import open_clip

    tok = WordTokenizer.from_vocabulary(context_length=16)
    model = open_clip.CLIP(
        16,
        vision_cfg=dict(layers=1, width=16, head_width=8, patch_size=8, image_size=16),
        text_cfg=dict(context_length=16, vocab_size=tok.vocab_size, width=16, heads=2, layers=1),
    )
    scores = clip_group_scores(model, tok, torch.rand(2, 3, 16, 16), "eye_color", include_none=True)
    assert scores.shape == (2, 15) and (scores.abs() <= 1 + 1e-6).all()


def test_tiny_world_clip_loss_decreases():
    import concept_grounding.world as world_mod

    world = world_mod.BirdWorld(world_mod.WorldConfig(image_size=64, class_names=("017.Cardinal", "073.Blue_Jay")))
    dd = world.to_dataset_dict(8, 1)
    model, tok = train_world_clip(
        dd,
        image_size=64,
        epochs=6,
        batch_size=16,
        progress=False,
        model_kwargs=dict(embed_dim=32, vision_width=32, text_width=32, vision_layers=1, text_layers=1, head_width=16),
    )
    assert model.history.losses[-1] < model.history.losses[0]
    assert clip_group_scores(model, tok, to_tensors(dd["test"], None, 64).images, "crown_color").shape == (2, 15)


def test_multi_positive_clip_loss_treats_matching_captions_as_positives():
    from concept_grounding.models.clip import caption_matches, clip_loss

    attributes = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    named = torch.tensor([[True, False, False], [False, False, True], [False, False, True]])
    matches = caption_matches(attributes, named)
    # caption 0 names attribute 0 (images 0, 1 have it); captions 1, 2 name attribute 2 (images 1, 2)
    assert matches.tolist() == [[True, False, False], [True, True, True], [False, True, True]]
    logits = torch.zeros(3, 3)
    assert torch.isclose(clip_loss(logits), torch.log(torch.tensor(3.0)))
    # uniform logits: the multi-positive CE equals log 3 too (cross-entropy against any target distribution)
    assert torch.isclose(clip_loss(logits, matches), torch.log(torch.tensor(3.0)))
    # logits that put all mass on the positives score lower than logits that put it on the diagonal only
    good = torch.where(matches, 5.0, -5.0)
    diagonal = torch.eye(3) * 10 - 5
    assert clip_loss(good, matches) < clip_loss(diagonal, matches)


def test_class_captions_take_the_class_as_their_positives():
    import torch

    from concept_grounding.models.clip import class_caption
    from concept_grounding.models.clip.world import with_class_captions

    torch.manual_seed(0)
    labels = torch.tensor([0, 1, 0])
    attr_pos = torch.eye(3, dtype=torch.bool)
    captions, pos = with_class_captions(["a", "b", "c"], None, attr_pos, labels, ["017.Cardinal", "073.Blue_Jay"], 1.0)
    assert captions == [class_caption("017.Cardinal"), class_caption("073.Blue_Jay"), class_caption("017.Cardinal")]
    assert pos.tolist() == [[True, False, True], [False, True, False], [True, False, True]]
    captions, pos = with_class_captions(["a", "b", "c"], None, attr_pos, labels, ["017.Cardinal", "073.Blue_Jay"], 0.0)
    assert captions == ["a", "b", "c"] and pos.tolist() == attr_pos.tolist()


#: token ids of the world CLIP's tokenizer, computed with the hand-written tokenizer it had before
#: it was built on the ``tokenizers`` library: saved world CLIPs must read the same ids.
PINNED_WORLD_IDS = {
    "a photo of a bird with a black crown": [2, 3, 205, 188, 3, 29, 310, 3, 30, 74, 317, 0],
    "A Photo of a DUCK-LIKE bird!": [2, 3, 205, 188, 3, 81, 29, 317, 0, 0, 0, 0],
    "a photo of a blue jay.": [2, 3, 205, 188, 3, 32, 143, 317, 0, 0, 0, 0],
    "zebra, crown--color -x- é bird 42": [2, 1, 74, 1, 1, 29, 1, 317, 0, 0, 0, 0],
    "": [2, 317, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    "a bird with a black crown and a striped wing and a red breast and a yellow belly": [
        2,
        3,
        29,
        310,
        3,
        30,
        74,
        10,
        3,
        261,
        306,
        317,
    ],
}


def test_world_tokenizer_ids_are_pinned():
    tok = WordTokenizer.from_vocabulary(context_length=12)
    assert (len(tok.words), tok.vocab_size) == (314, 318)
    texts = list(PINNED_WORLD_IDS)
    out = tok(texts)
    assert out.dtype == torch.long and out.tolist() == list(PINNED_WORLD_IDS.values())
    assert tok(texts[0]).tolist() == [PINNED_WORLD_IDS[texts[0]]]  # one string is a batch of one
    assert WordTokenizer(["a", "bird", "a"], context_length=6)(["a bird", "a dodo"]).tolist() == [
        [2, 3, 4, 5, 0, 0],
        [2, 3, 1, 5, 0, 0],
    ]
