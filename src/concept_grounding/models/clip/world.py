"""The world CLIP: open_clip's ``CLIP`` in a tiny configuration with a word-level tokenizer,
trained contrastively on world images with captions built from each image's true attributes.

* :class:`WordTokenizer`: word-level tokenizer over the vocabulary's prompt words.
* :class:`WorldCLIP`: ``[0, 1]`` images in, normalised inside (:func:`~..pixels.normalize_pixels`).
* :func:`train_world_clip`: multi-positive InfoNCE (:func:`clip_loss`) on ``cub_features`` splits,
  through :func:`fit_clip` (any captioner: :mod:`concept_grounding.conceptbed.composition_clip`
  captions the world's compositions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from torch.nn import functional as F

from ...vocabulary import Vocabulary, load_vocabulary
from ..base import HUB_KWARGS, seeded
from ..pixels import normalize_pixels
from ..training import fit, random_hflip
from .prompts import NONE_PROMPT, attribute_prompt, caption_for_attributes, class_caption

if TYPE_CHECKING:
    import datasets

__all__ = ["WordTokenizer", "WorldCLIP", "train_world_clip", "fit_clip", "clip_loss", "caption_matches"]


#: a word: lower-case letters and digits, hyphenated words kept whole ("duck-like").
_WORD = r"[a-z0-9]+(?:-[a-z0-9]+)*"
#: special tokens of :class:`WordTokenizer` (no text splits into them: they are not :data:`_WORD`\ s).
_PAD, _UNK, _START, _END = "<pad>", "<unk>", "<start>", "<end>"


class WordTokenizer:
    """A word-level tokenizer callable like open_clip's: texts -> ``(B, context_length)`` int64.

    A ``tokenizers`` ``WordLevel`` model (the library the world Flux's tokenizers use too,
    :func:`~concept_grounding.worldflux.captions.word_tokenizers`). Ids: 0 pad, 1 unknown,
    2 start, ``3 .. V-2`` words, ``V-1`` end-of-text (the highest id, so open_clip's
    ``argmax`` text pooling finds it). Text is lower-cased and split into words (hyphenated
    words kept whole, anything else between words dropped); long texts are cut to fit.

    >>> tok = WordTokenizer(["a", "bird"], context_length=6)
    >>> tok(["a bird", "a dodo"]).tolist()
    [[2, 3, 4, 5, 0, 0], [2, 3, 1, 5, 0, 0]]
    """

    def __init__(self, words: Sequence[str], context_length: int = 32) -> None:
        from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers, processors
        from tokenizers.models import WordLevel

        self.words = list(dict.fromkeys(words))
        self.context_length = int(context_length)
        self.eot_id = len(self.words) + 3
        ids = {w: i + 3 for i, w in enumerate(self.words)}
        ids.update({_PAD: 0, _UNK: 1, _START: 2, _END: self.eot_id})
        tok = Tokenizer(WordLevel(ids, unk_token=_UNK))
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(_WORD), behavior="removed", invert=True)
        tok.post_processor = processors.TemplateProcessing(
            single=f"{_START} $A {_END}", special_tokens=[(_START, 2), (_END, self.eot_id)]
        )
        tok.enable_truncation(self.context_length)
        tok.enable_padding(pad_id=0, pad_token=_PAD, length=self.context_length)
        self._tokenizer = tok

    @property
    def vocab_size(self) -> int:
        return self.eot_id + 1

    @classmethod
    def from_vocabulary(
        cls, vocab: Vocabulary | None = None, context_length: int = 32, extra_texts: Sequence[str] = ()
    ) -> WordTokenizer:
        """Every word of every attribute prompt, training caption and the none prompt, and of
        ``extra_texts`` (the composition CLIP's counts, relations and actions:
        :func:`concept_grounding.conceptbed.composition_clip.composition_texts`).

        >>> tok = WordTokenizer.from_vocabulary(extra_texts=["two", "in the sky"])
        >>> {"two", "sky"} <= set(tok.words), "sky" in WordTokenizer.from_vocabulary().words
        (True, False)
        """
        vocab = vocab or load_vocabulary()
        texts = [attribute_prompt(a) for a in vocab.attributes] + [NONE_PROMPT, "and", "with an"]
        texts += [class_caption(c) for c in vocab.classes] + list(extra_texts)
        words = sorted({w for t in texts for w in re.findall(_WORD, t.lower())})
        return cls(words, context_length)

    def __call__(self, texts: str | Sequence[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        ids = [e.ids for e in self._tokenizer.encode_batch(texts)]
        return torch.tensor(ids, dtype=torch.long).reshape(len(texts), self.context_length)


class WorldCLIP(nn.Module, PyTorchModelHubMixin, **HUB_KWARGS, tags=["clip", "open_clip"]):
    """open_clip's ``CLIP`` in a tiny configuration (random init) with its word tokenizer.

    Images are ``(B, 3, image_size, image_size)`` in [0, 1] (normalised inside). The config
    (sizes and the tokenizer's ``words``) is saved with the weights by ``save_pretrained``.
    """

    def __init__(
        self,
        words: Sequence[str],
        embed_dim: int = 64,
        image_size: int = 64,
        patch_size: int = 8,
        vision_width: int = 64,
        vision_layers: int = 2,
        text_width: int = 64,
        text_layers: int = 2,
        head_width: int = 32,
        context_length: int = 32,
    ) -> None:
        super().__init__()
        import open_clip

        self.words = list(words)
        self.image_size = int(image_size)
        self._tokenizer = WordTokenizer(self.words, context_length)
        vision_cfg = dict(
            layers=vision_layers,
            width=vision_width,
            head_width=head_width,
            patch_size=patch_size,
            image_size=image_size,
            mlp_ratio=2.0,
        )
        text_cfg = dict(
            context_length=context_length,
            vocab_size=self._tokenizer.vocab_size,
            width=text_width,
            heads=max(1, text_width // head_width),
            layers=text_layers,
            mlp_ratio=2.0,
            pool_type="argmax",
        )
        self.clip = open_clip.CLIP(embed_dim, vision_cfg=vision_cfg, text_cfg=text_cfg)

    @property
    def tokenizer(self) -> WordTokenizer:
        return self._tokenizer

    @property
    def logit_scale(self) -> nn.Parameter:
        return self.clip.logit_scale

    def encode_image(self, images: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        """images ``(B, 3, S, S)`` in [0, 1] -> ``(B, embed_dim)``."""
        if images.shape[-2:] != (self.image_size, self.image_size):
            images = F.interpolate(
                images, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False
            )
        return self.clip.encode_image(normalize_pixels(images), normalize=normalize)

    def encode_text(self, tokens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        """token ids ``(B, context_length)`` -> ``(B, embed_dim)``."""
        return self.clip.encode_text(tokens, normalize=normalize)

    def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, B)`` image-to-text logits ``exp(logit_scale) * cos``."""
        image = self.encode_image(images, normalize=True)
        text = self.encode_text(tokens, normalize=True)
        return self.clip.logit_scale.exp() * image @ text.T


def sample_captions(
    attributes: torch.Tensor, vocab: Vocabulary, max_phrases: int, min_phrases: int = 1
) -> tuple[list[str], torch.Tensor]:
    """Captions of ``min_phrases..max_phrases`` random present attributes per row of
    ``attributes`` ``(B, A)``, and the ``(B, A)`` 0/1 mask of the attributes each names."""
    captions = []
    named = torch.zeros(attributes.shape, dtype=torch.bool)
    for r, row in enumerate(attributes):
        present = torch.nonzero(row > 0.5).flatten()
        if len(present) == 0:
            captions.append(NONE_PROMPT)
            continue
        low = min(max(int(min_phrases), 1), int(max_phrases))
        k = int(torch.randint(low, max_phrases + 1, ()).item())
        chosen = present[torch.randperm(len(present))[:k]].sort().values
        named[r, chosen] = True
        captions.append(caption_for_attributes([vocab.attributes[int(i)] for i in chosen]))
    return captions, named


def with_class_captions(
    captions: list[str],
    named: torch.Tensor,
    attr_positives: torch.Tensor,
    labels: torch.Tensor,
    class_names: Sequence[str],
    rate: float,
) -> tuple[list[str], torch.Tensor]:
    """Swap a random ``rate`` of the captions for :func:`class_caption`; their positives are
    the images of that class (every other caption keeps ``attr_positives``)."""
    swap = torch.rand(len(captions)) < rate
    captions = [class_caption(class_names[int(labels[i])]) if swap[i] else c for i, c in enumerate(captions)]
    same_class = labels[:, None] == labels[None, :]
    return captions, torch.where(swap[None, :], same_class, attr_positives)


def caption_matches(attributes: torch.Tensor, named: torch.Tensor) -> torch.Tensor:
    """``(B, B)`` bool: image ``i`` (``attributes[i]`` > 0.5) has every attribute caption ``j`` names.

    >>> caption_matches(torch.tensor([[1., 1.], [1., 0.]]), torch.tensor([[False, True], [True, False]])).tolist()
    [[True, True], [False, True]]
    """
    present = (attributes > 0.5).float()
    named = named.float()
    return (present @ named.T) >= named.sum(1)[None, :] - 0.5


def clip_loss(logits: torch.Tensor, positives: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric InfoNCE of Radford et al. (2021): mean of image->text and text->image CE.

    ``logits`` ``(B, B)`` image-to-text. Without ``positives`` the target of row / column
    ``i`` is ``i``. With a bool ``positives`` ``(B, B)`` (true on the diagonal), every
    matching pair is a positive: the target of each row / column is uniform over its
    positives (multi-positive InfoNCE; a caption naming "a black crown" describes every
    black-crowned image in the batch, which plain InfoNCE would push away).
    """
    if positives is None:
        target = torch.arange(logits.shape[0])
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
    positives = positives.float() + torch.eye(logits.shape[0])
    positives = positives.clamp(max=1.0)
    rows = positives / positives.sum(1, keepdim=True)
    cols = positives.T / positives.T.sum(1, keepdim=True)
    return (F.cross_entropy(logits, rows) + F.cross_entropy(logits.T, cols)) / 2


def train_world_clip(
    dataset: datasets.Dataset | datasets.DatasetDict,
    *,
    image_size: int = 64,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    max_phrases: int = 3,
    min_phrases: int = 1,
    multi_positive: bool = True,
    class_caption_rate: float = 0.25,
    schedule: str = "onecycle",
    augment: bool = True,
    weight_decay: float = 0.0,
    vocab: Vocabulary | None = None,
    model_kwargs: dict[str, Any] | None = None,
    progress: bool = True,
) -> tuple[WorldCLIP, WordTokenizer]:
    """Train a :class:`WorldCLIP` contrastively on a split in the ``cub_features`` schema.

    Each step captions every image afresh with ``min_phrases..max_phrases`` of its true
    per-image attributes (:func:`caption_for_attributes`), e.g. "a photo of a bird with a
    black crown and a red breast", and minimises :func:`clip_loss`; with ``multi_positive``
    every image that has all of a caption's attributes counts as its positive
    (:func:`caption_matches`). A ``class_caption_rate`` share of the captions name the class
    instead (:func:`class_caption`, e.g. "a photo of a blue jay."), so that the model also
    classifies zero-shot, as CCI and COVAR use it. Adam with a ``schedule`` (peak ``lr``, see
    :func:`~..training.fit`) and random horizontal flips of the images (``augment``).

    Returns:
        ``(model, tokenizer)``, model in eval mode; ``model.history`` is the
        :class:`~..training.TrainHistory`.
    """
    from ..data import to_tensors

    vocab = vocab or load_vocabulary()
    if isinstance(getattr(dataset, "column_names", None), dict):  # a DatasetDict
        if "train" not in dataset:
            raise ValueError(f"train_world_clip needs a 'train' split, got {list(dataset.keys())}")
        dataset = dataset["train"]
    data = to_tensors(dataset, None, image_size, "image", vocab)
    images, attributes, labels = tuple(data)
    class_names = data.class_names or tuple(vocab.classes)
    if not 0.0 <= class_caption_rate <= 1.0:
        raise ValueError(f"class_caption_rate must be in [0, 1], got {class_caption_rate}")
    tokenizer = WordTokenizer.from_vocabulary(vocab, (model_kwargs or {}).get("context_length", 32))
    with seeded(seed):
        model = WorldCLIP(tokenizer.words, image_size=image_size, **(model_kwargs or {}))
    tokenizer = model.tokenizer

    if not 1 <= min_phrases <= max_phrases:
        raise ValueError(f"need 1 <= min_phrases <= max_phrases, got {min_phrases}, {max_phrases}")

    def captioner(batch: tuple[torch.Tensor, ...]) -> tuple[list[str], torch.Tensor | None]:
        captions, named = sample_captions(batch[1], vocab, max_phrases, min_phrases)
        positives = caption_matches(batch[1], named) if multi_positive else None
        if class_caption_rate > 0:
            base = positives if positives is not None else torch.eye(len(captions), dtype=torch.bool)
            captions, positives = with_class_captions(captions, named, base, batch[2], class_names, class_caption_rate)
        return captions, positives

    fit_clip(
        model,
        (images, attributes, labels),
        captioner,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        desc="world CLIP",
        progress=progress,
        schedule=schedule,
        augment=random_hflip if augment else None,
        weight_decay=weight_decay,
    )
    return model, tokenizer


#: batch -> (one caption per image, ``(B, B)`` bool positives or ``None`` for plain InfoNCE).
Captioner = Callable[[tuple[torch.Tensor, ...]], tuple[list[str], "torch.Tensor | None"]]


def fit_clip(model: WorldCLIP, tensors: Sequence[torch.Tensor], captioner: Captioner, **fit_kwargs: Any) -> WorldCLIP:
    """Train ``model`` by :func:`clip_loss` on minibatches of ``tensors`` (images ``(N, 3, S, S)``
    in [0, 1] first) captioned afresh every step by ``captioner``; :func:`~..training.fit` with
    ``fit_kwargs`` (epochs, lr, schedule, augment, ...). Returns ``model`` in eval mode with
    ``model.history``."""
    tokenizer = model.tokenizer

    def loss(batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        captions, positives = captioner(batch)
        return clip_loss(model(batch[0], tokenizer(captions)), positives)

    model.history = fit(loss, model.parameters(), tensors, module=model, **fit_kwargs)
    return model.eval()
