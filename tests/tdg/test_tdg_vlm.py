"""The VQA filter's VLM scorer on a tiny random LLaVA saved to disk and loaded the way the CLI loads it."""

import json

import numpy as np
import pytest
from PIL import Image

from concept_grounding.tdg.filter import group_options, vqa_question
from concept_grounding.tdg.filter_scorers import VisionLanguageScorer
from concept_grounding.testing import save_tiny_vlm

GROUP = "tail_pattern"
OPTIONS = group_options(GROUP)
QUESTION = vqa_question(GROUP, OPTIONS)
SUFFIX = " Answer with the option's letter."


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return save_tiny_vlm(tmp_path_factory.mktemp("tiny_vlm"))


def _load(folder):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForImageTextToText.from_pretrained(folder, trust_remote_code=True).eval()
    return model, processor


@pytest.fixture(scope="module")
def loaded(vlm_dir):
    return _load(vlm_dir)


@pytest.fixture
def plain_processor(vlm_dir):
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(vlm_dir)
    processor.chat_template = None
    return processor


def _images():
    rng = np.random.default_rng(0)
    noise = Image.fromarray(rng.integers(0, 256, (24, 20, 3), dtype=np.uint8))
    return [Image.new("RGB", (16, 16), "red"), Image.new("RGB", (40, 30), "blue"), noise]


def _by_hand(model, processor, prompt, images):
    import torch

    letters = [processor.tokenizer.convert_tokens_to_ids(c) for c in "ABCDE"]
    assert len(set(letters)) == 5 and processor.tokenizer.unk_token_id not in letters
    rows = []
    for image in images:
        inputs = processor(images=image, text=prompt, return_tensors="pt")
        with torch.no_grad():
            logits = model(**inputs).logits[0, -1].double().numpy()
        z = np.exp(logits[letters] - logits[letters].max())
        rows.append(z / z.sum())
    return np.stack(rows)


def test_saved_folder_loads_as_llava(vlm_dir, loaded):
    model, processor = loaded
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    assert type(processor).__name__ == "LlavaProcessor" and processor.chat_template
    assert (vlm_dir / "config.json").is_file() and (vlm_dir / "tokenizer.json").is_file()
    # one <image> expands to (16 / 8) ** 2 = 4 vision tokens (CLS dropped), matching the model's features
    ids = processor(images=Image.new("RGB", (16, 16)), text="<image> bird", return_tensors="pt")["input_ids"][0]
    assert int((ids == model.config.image_token_index).sum()) == 4


@pytest.mark.parametrize("chat", [True, False])
def test_scorer_equals_softmax_of_letter_logits(loaded, plain_processor, chat):
    model, processor = loaded[0], loaded[1] if chat else plain_processor
    expected_prompt = f"USER: <image>\n{QUESTION}{SUFFIX}\nASSISTANT:" if chat else f"<image>\n{QUESTION}{SUFFIX}"
    scorer = VisionLanguageScorer(model, processor)
    assert scorer._prompt(QUESTION) == expected_prompt
    images = _images()
    probs = scorer.score(images, QUESTION, OPTIONS, GROUP)
    assert probs.shape == (3, len(OPTIONS)) and np.all(np.isfinite(probs))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(probs, _by_hand(model, processor, expected_prompt, images), rtol=1e-5, atol=1e-7)
    assert not np.allclose(probs[0], probs[1], rtol=0, atol=1e-6)  # the image reaches the answer


def test_plain_prompt_carries_the_image_token(loaded, plain_processor):
    # without a chat template the prompt used to be the bare question: no <image>, and the processor refused it
    probs = VisionLanguageScorer(loaded[0], plain_processor).score(_images()[:1], QUESTION, OPTIONS, GROUP)
    assert probs.shape == (1, len(OPTIONS))


def test_letters_without_distinct_tokens_are_refused(loaded):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    # a vocabulary without the letters: every letter is <unk>, which used to give a silent uniform answer
    words = Tokenizer(WordLevel({"<unk>": 0, "bird": 1}, unk_token="<unk>"))
    words.pre_tokenizer = Whitespace()
    letterless = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>")
    scorer = VisionLanguageScorer(loaded[0], loaded[1])
    assert scorer._letter_ids(len(OPTIONS)) == [loaded[1].tokenizer.convert_tokens_to_ids(c) for c in "ABCDE"]
    with pytest.raises(ValueError, match="distinct token"):
        VisionLanguageScorer(loaded[0], letterless)._letter_ids(len(OPTIONS))


def test_save_is_deterministic(vlm_dir, tmp_path):
    from safetensors.numpy import load_file

    again = save_tiny_vlm(tmp_path / "again")
    a, b = load_file(vlm_dir / "model.safetensors"), load_file(again / "model.safetensors")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert (vlm_dir / "tokenizer.json").read_text() == (again / "tokenizer.json").read_text()


def test_filter_cli_with_vlm_scorer(vlm_dir, loaded, tmp_path):
    from concept_grounding.cli import main

    src, out = tmp_path / "images", tmp_path / "filtered"
    src.mkdir()
    rows, colours = (
        [],
        {"073.Blue_Jay": ["red", "blue", "green", "white"], "017.Cardinal": ["green", "white", "green", "white"]},
    )
    for cls in colours:
        for i, colour in enumerate(colours[cls]):
            name = f"{cls}_{i}.png"
            Image.new("RGB", (16, 16), colour).save(src / name)
            rows.append({"file_name": name, "reference_class": cls, "target_attribute": "has_tail_pattern::solid"})
    (src / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert (
        main(
            [
                "filter",
                "--in",
                str(src),
                "--out",
                str(out),
                "--scorer",
                "vlm",
                "--vlm-model",
                str(vlm_dir),
                "--keep-fraction",
                "0.5",
            ]
        )
        == 0
    )

    report = json.loads((out / "filter_report.json").read_text())
    assert report["total_generated"] == 8 and (out / "filter_report.md").is_file()
    kept = [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]
    assert len(kept) == report["total_kept"]
    # the known answer: the same model scores each pairing's four images; keep the top 2 solid ones
    model, processor = loaded
    scorer = VisionLanguageScorer(model, processor)
    expected = []
    for cls in colours:
        probs = scorer.score([Image.new("RGB", (16, 16), c) for c in colours[cls]], QUESTION, OPTIONS, GROUP)
        correct = [i for i in range(4) if probs[i].argmax() == 0]
        chosen = sorted(correct, key=lambda i: (-probs[i, 0], i))[:2] if len(correct) >= 2 else []
        expected += [(f"{cls}_{i}.png", probs[i, 0]) for i in chosen]
        pairing = next(p for p in report["pairings"] if p["reference_class"] == cls)
        assert pairing["correct"] == len(correct) and pairing["kept"] == len(chosen)
    assert report["pairings_kept"] == 1 and report["pairings_dropped"] == 1  # seed 0: red and blue answer "solid"
    assert [r["file_name"] for r in kept] == [str((src / n).resolve()) for n, _ in expected]
    np.testing.assert_allclose([r["target_probability"] for r in kept], [p for _, p in expected], rtol=1e-5)


@pytest.mark.parametrize(("flag", "expected"), [([], False), (["--trust-remote-code"], True)])
def test_filter_cli_runs_remote_code_only_on_request(vlm_dir, tmp_path, monkeypatch, flag, expected):
    """--vlm-model used to be loaded with trust_remote_code=True, hard-coded."""
    import transformers

    from concept_grounding.cli import main

    seen = []
    for cls in (transformers.AutoProcessor, transformers.AutoModelForImageTextToText):
        original = cls.from_pretrained.__func__

        def spy(klass, name, *args, _original=original, **kwargs):
            seen.append(kwargs.get("trust_remote_code"))
            return _original(klass, name, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    src = tmp_path / "images"
    src.mkdir()
    Image.new("RGB", (16, 16), "red").save(src / "a.png")
    row = {"file_name": "a.png", "reference_class": "017.Cardinal", "target_attribute": "has_tail_pattern::solid"}
    (src / "metadata.jsonl").write_text(json.dumps(row) + "\n")
    assert main(["filter", "--in", str(src), "--out", str(tmp_path / "out"), "--vlm-model", str(vlm_dir), *flag]) == 0
    assert seen == [expected, expected]


def test_the_papers_scorer_architecture_loads_and_scores_like_the_filter(tmp_path):
    """SUB filtered with InternVL 2.5; a tiny model of that architecture in
    transformers' converted form loads through ``filter --scorer vlm`` (build_scorer) and its
    answers are the softmax of the option letters' next-token logits."""
    import torch

    from concept_grounding.tdg.filter_job import FilterConfig, build_scorer
    from concept_grounding.testing import save_tiny_internvl

    folder = save_tiny_internvl(tmp_path / "internvl")
    scorer = build_scorer(FilterConfig(input=tmp_path, out=tmp_path / "o", scorer="vlm", vlm_model=str(folder)))
    assert (
        isinstance(scorer, VisionLanguageScorer) and type(scorer.model).__name__ == "InternVLForConditionalGeneration"
    )
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)) for _ in range(2)]
    probs = scorer.score(images, QUESTION, OPTIONS, GROUP)
    assert probs.shape == (2, len(OPTIONS)) and np.allclose(probs.sum(axis=1), 1.0)
    tokenizer = scorer.processor.tokenizer
    letters = [tokenizer.convert_tokens_to_ids(letter) for letter in "ABCDE"]
    prompt = scorer.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": QUESTION + SUFFIX}]}],
        add_generation_prompt=True,
    )
    assert prompt.count("<IMG_CONTEXT>") == 1
    for image, row in zip(images, probs):
        inputs = scorer.processor(images=image, text=prompt, return_tensors="pt")
        tiles = inputs["pixel_values"].shape[0]  # 16 patches per tile, 4 tokens after the pixel shuffle
        assert int((inputs["input_ids"] == scorer.model.config.image_token_id).sum()) == 4 * tiles
        with torch.no_grad():
            logits = scorer.model(**inputs).logits[0, -1]
        assert np.allclose(row, torch.softmax(logits[letters], -1).numpy(), atol=1e-6)
    assert not np.allclose(probs[0], probs[1])  # the image reaches the answer
