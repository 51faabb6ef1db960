"""Open-vocabulary concept scoring for CLIP-like models, and a small CLIP trained on the world.

SUB's group mode (SPEC 2; Bader et al. Sec. 5.6): for an attribute group (``crown_color``)
every value of the 312-attribute vocabulary becomes a prompt ("a photo of a bird with a
black crown"), optionally plus a "none" prompt ("a photo of a bird"); the image's cosine
similarity with each prompt is computed and the argmax is the value predicted present.

* :func:`group_prompts`, :func:`attribute_prompt`: prompts from the :class:`~concept_grounding.vocabulary.Vocabulary`.
* :func:`clip_group_scores`: ``(N, |group| (+1))`` similarities for open_clip models, transformers
  ``CLIPModel``-like models (``get_image_features`` / ``get_text_features``) and :class:`WorldCLIP`.
* :func:`load_clip`: any open_clip architecture name (``pretrained=`` tag or ``hf-hub:`` id),
  transformers name or local path, or a saved :class:`WorldCLIP` folder.
* :class:`WorldCLIP` + :func:`train_world_clip`: open_clip's ``CLIP(embed_dim, vision_cfg,
  text_cfg)`` in a tiny configuration, randomly initialised and trained contrastively on
  world images with captions built from each image's true attributes, with a word-level
  tokenizer (:class:`WordTokenizer`) over the vocabulary's prompt words.

>>> attribute_prompt("has_crown_color::black")
'a photo of a bird with a black crown'
>>> attribute_prompt("has_size::very_large_(32_-_72_in)")
'a photo of a very large bird'
>>> group_prompts("bill_length", include_none=True)
['a photo of a bird with a bill about the same as head', 'a photo of a bird with a bill longer than head', 'a photo of a bird with a bill shorter than head', 'a photo of a bird']
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from huggingface_hub import PyTorchModelHubMixin
from torch import nn
from torch.nn import functional as F

from ..vocabulary import Vocabulary, class_display_name, load_vocabulary, split_attribute
from .base import HUB_KWARGS, seeded
from .training import fit, random_hflip

if TYPE_CHECKING:
    import datasets

__all__ = [
    "attribute_phrase_for_prompt", "attribute_prompt", "group_prompts", "NONE_PROMPT", "caption_for_attributes",
    "encode_images", "encode_texts", "clip_group_scores", "clip_group_predict", "load_clip", "ClipBundle",
    "WordTokenizer", "WorldCLIP", "train_world_clip",
]

logger = logging.getLogger(__name__)

#: the "none of these" option of group mode.
NONE_PROMPT = "a photo of a bird"
_ADJECTIVE_GROUPS = ("size", "shape")  # phrased "a <value> bird"
_PATTERN_GROUPS = ("breast_pattern", "back_pattern", "tail_pattern", "belly_pattern", "wing_pattern")


def _clean_value(value: str) -> str:
    value = re.sub(r"_?\(.*?\)", "", value)  # "large_(16_-_32_in)" -> "large"
    return value.replace("_", " ").replace("-wings", " wings").strip()


def attribute_phrase_for_prompt(name: str) -> str:
    """The noun phrase of an attribute as it follows "a bird with" (or, for size and shape,
    the adjective before "bird"). ``"has_crown_color::black"`` -> ``"black crown"``."""
    group, value = split_attribute(name)
    value = _clean_value(value)
    if group in _ADJECTIVE_GROUPS:
        return value
    if group.endswith("_color"):
        part = group.removesuffix("_color").replace("_", " ")
        return f"{value} plumage" if part == "primary" else f"{value} {part}"
    if group in _PATTERN_GROUPS:
        return f"{value} {group.removesuffix('_pattern').replace('_', ' ')}"
    if group == "head_pattern":
        return f"{value} head pattern"
    if group == "bill_shape":
        return f"{value} bill"
    if group == "bill_length":
        return f"bill {value}"
    return value  # tail_shape ("forked tail"), wing_shape ("rounded wings")


def _article(phrase: str) -> str:
    if phrase.endswith("wings") or phrase.endswith("underparts") or phrase.endswith("upperparts") or \
            phrase.endswith("plumage"):
        return phrase
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def attribute_prompt(name: str) -> str:
    """One prompt per attribute: ``"a photo of a bird with a black crown"``, ``"a photo of a large bird"``."""
    group, _ = split_attribute(name)
    phrase = attribute_phrase_for_prompt(name)
    if group in _ADJECTIVE_GROUPS:
        return f"a photo of {_article(phrase)} bird"
    return f"a photo of a bird with {_article(phrase)}"


def group_prompts(group: str, vocab: Vocabulary | None = None, include_none: bool = False) -> list[str]:
    """Prompts for every value of ``group`` in vocabulary order (+ :data:`NONE_PROMPT` last)."""
    vocab = vocab or load_vocabulary()
    if group not in vocab.groups:
        raise ValueError(f"unknown attribute group {group!r}; known: {sorted(vocab.groups)}")
    prompts = [attribute_prompt(vocab.attributes[i]) for i in vocab.groups[group]]
    return prompts + [NONE_PROMPT] if include_none else prompts


def caption_for_attributes(names: Sequence[str]) -> str:
    """A training caption naming several attributes: size/shape before "bird", the rest after "with".

    >>> caption_for_attributes(["has_size::small_(5_-_9_in)", "has_crown_color::black", "has_wing_pattern::striped"])
    'a photo of a small bird with a black crown and a striped wing'
    """
    adjectives = [attribute_phrase_for_prompt(n) for n in names if split_attribute(n)[0] in _ADJECTIVE_GROUPS]
    phrases = [_article(attribute_phrase_for_prompt(n)) for n in names if split_attribute(n)[0] not in _ADJECTIVE_GROUPS]
    text = "a photo of " + (_article(" ".join(adjectives)) + " bird" if adjectives else "a bird")
    if phrases:
        text += " with " + (", ".join(phrases[:-1]) + " and " + phrases[-1] if len(phrases) > 1 else phrases[0])
    return text


# ---------------------------------------------------------------------- encoders
def _features(output: Any) -> torch.Tensor:
    if isinstance(output, torch.Tensor):
        return output
    for key in ("image_embeds", "text_embeds", "pooler_output"):
        value = getattr(output, key, None)
        if value is not None:
            return value
    raise TypeError(f"cannot read features from a {type(output).__name__}")


def _device(model: nn.Module) -> torch.device:
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


@torch.no_grad()
def encode_texts(model: Any, tokenizer: Callable, texts: Sequence[str]) -> torch.Tensor:
    """L2-normalised text embeddings ``(T, D)``: ``model.encode_text(tokenizer(texts))`` (open_clip,
    :class:`WorldCLIP`) or ``model.get_text_features(**tokenizer(texts, padding=True, return_tensors="pt"))``
    (transformers)."""
    device = _device(model)
    if hasattr(model, "encode_text"):
        tokens = tokenizer(list(texts))
        tokens = tokens.to(device) if isinstance(tokens, torch.Tensor) else tokens
        out = model.encode_text(tokens)
    elif hasattr(model, "get_text_features"):
        inputs = tokenizer(list(texts), padding=True, return_tensors="pt")
        out = model.get_text_features(**{k: v.to(device) for k, v in inputs.items()})
    else:
        raise TypeError(f"{type(model).__name__} has neither encode_text (open_clip) nor get_text_features (transformers)")
    return F.normalize(_features(out).float(), dim=-1)


@torch.no_grad()
def encode_images(model: Any, images: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """L2-normalised image embeddings ``(N, D)`` of images already in the model's input format."""
    device = _device(model)
    parts = []
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size].to(device)
        if hasattr(model, "encode_image"):
            out = model.encode_image(batch)
        elif hasattr(model, "get_image_features"):
            out = model.get_image_features(pixel_values=batch)
        else:
            raise TypeError(f"{type(model).__name__} has neither encode_image nor get_image_features")
        parts.append(F.normalize(_features(out).float(), dim=-1).cpu())
    return torch.cat(parts)


def clip_group_scores(
    model: Any,
    tokenizer: Callable,
    images: torch.Tensor | Sequence,
    group: str,
    vocab: Vocabulary | None = None,
    include_none: bool = False,
    preprocess: Callable | None = None,
    batch_size: int = 256,
) -> torch.Tensor:
    """Cosine similarities of images with the prompts of one attribute group (SUB group mode).

    Args:
        model: an open_clip model, a transformers CLIP-like model or a :class:`WorldCLIP`.
        tokenizer: its tokenizer (open_clip style: texts -> token tensor; transformers style:
            called with ``padding=True, return_tensors="pt"``).
        images: a tensor ``(N, 3, H, W)`` in the model's input format, or anything
            ``preprocess`` turns into one (e.g. a list of PIL images with :func:`load_clip`'s
            ``preprocess``).
        group: attribute group, e.g. ``"crown_color"``.
        include_none: append the "none" option (:data:`NONE_PROMPT`) as the last column.

    Returns:
        ``(N, |group|)`` or ``(N, |group| + 1)`` cosine similarities in [-1, 1]; columns in
        the order of ``vocab.groups[group]`` (then "none").
    """
    prompts = group_prompts(group, vocab, include_none)
    if preprocess is not None:
        images = preprocess(images)
    if not isinstance(images, torch.Tensor) or images.ndim != 4:
        raise ValueError("images must be a (N, 3, H, W) tensor, or pass preprocess= to convert them")
    was = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        text = encode_texts(model, tokenizer, prompts)
        image = encode_images(model, images, batch_size)
    finally:
        if was:
            model.train()
    return image @ text.T.cpu()


def clip_group_predict(scores: torch.Tensor) -> torch.Tensor:
    """``(N,)`` column index of the highest similarity (the value predicted present)."""
    return scores.argmax(dim=1)


# --------------------------------------------------------------- world tokenizer
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class WordTokenizer:
    """A word-level tokenizer callable like open_clip's: texts -> ``(B, context_length)`` int64.

    Ids: 0 pad, 1 unknown, 2 start, ``3 .. V-2`` words, ``V-1`` end-of-text (the highest id,
    so open_clip's ``argmax`` text pooling finds it). Text is lower-cased and split into
    words (hyphenated words kept whole); long texts are cut to fit.

    >>> tok = WordTokenizer(["a", "bird"], context_length=6)
    >>> tok(["a bird", "a dodo"]).tolist()
    [[2, 3, 4, 5, 0, 0], [2, 3, 1, 5, 0, 0]]
    """

    def __init__(self, words: Sequence[str], context_length: int = 32) -> None:
        self.words = list(dict.fromkeys(words))
        self.context_length = int(context_length)
        self._ids = {w: i + 3 for i, w in enumerate(self.words)}
        self.eot_id = len(self.words) + 3

    @property
    def vocab_size(self) -> int:
        return self.eot_id + 1

    @classmethod
    def from_vocabulary(cls, vocab: Vocabulary | None = None, context_length: int = 32) -> "WordTokenizer":
        """Every word of every attribute prompt, training caption and the none prompt."""
        vocab = vocab or load_vocabulary()
        texts = [attribute_prompt(a) for a in vocab.attributes] + [NONE_PROMPT, "and", "with an"]
        texts += [class_caption(c) for c in vocab.classes]
        words = sorted({w for t in texts for w in _WORD.findall(t.lower())})
        return cls(words, context_length)

    def __call__(self, texts: str | Sequence[str]) -> torch.Tensor:
        texts = [texts] if isinstance(texts, str) else list(texts)
        out = torch.zeros(len(texts), self.context_length, dtype=torch.long)
        for row, text in enumerate(texts):
            ids = [2] + [self._ids.get(w, 1) for w in _WORD.findall(text.lower())][: self.context_length - 2]
            ids.append(self.eot_id)
            out[row, : len(ids)] = torch.tensor(ids)
        return out


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
        vision_cfg = dict(layers=vision_layers, width=vision_width, head_width=head_width, patch_size=patch_size,
                          image_size=image_size, mlp_ratio=2.0)
        text_cfg = dict(context_length=context_length, vocab_size=self._tokenizer.vocab_size, width=text_width,
                        heads=max(1, text_width // head_width), layers=text_layers, mlp_ratio=2.0, pool_type="argmax")
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
            images = F.interpolate(images, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        return self.clip.encode_image((images - 0.5) / 0.25, normalize=normalize)

    def encode_text(self, tokens: torch.Tensor, normalize: bool = False) -> torch.Tensor:
        """token ids ``(B, context_length)`` -> ``(B, embed_dim)``."""
        return self.clip.encode_text(tokens, normalize=normalize)

    def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, B)`` image-to-text logits ``exp(logit_scale) * cos``."""
        image = self.encode_image(images, normalize=True)
        text = self.encode_text(tokens, normalize=True)
        return self.clip.logit_scale.exp() * image @ text.T


def _sample_captions(attributes: torch.Tensor, vocab: Vocabulary, max_phrases: int,
                     min_phrases: int = 1) -> tuple[list[str], torch.Tensor]:
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


def class_caption(class_name: str) -> str:
    """The zero-shot class prompt the world CLIP also trains on (CCI / COVAR classify with it).

    >>> class_caption("073.Blue_Jay")
    'a photo of a blue jay.'
    """
    return f"a photo of a {class_display_name(class_name).lower()}."


def _with_class_captions(captions: list[str], named: torch.Tensor, attr_positives: torch.Tensor,
                         labels: torch.Tensor, class_names: Sequence[str], rate: float) -> tuple[list[str], torch.Tensor]:
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
    dataset: "datasets.Dataset | datasets.DatasetDict",
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
    :func:`~.training.fit`) and random horizontal flips of the images (``augment``).

    Returns:
        ``(model, tokenizer)``, model in eval mode; ``model.history`` is the
        :class:`~.training.TrainHistory`.
    """
    from .data import to_tensors

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

    def loss(batch):
        captions, named = _sample_captions(batch[1], vocab, max_phrases, min_phrases)
        positives = caption_matches(batch[1], named) if multi_positive else None
        if class_caption_rate > 0:
            base = positives if positives is not None else torch.eye(len(captions), dtype=torch.bool)
            captions, positives = _with_class_captions(captions, named, base, batch[2], class_names,
                                                       class_caption_rate)
        return clip_loss(model(batch[0], tokenizer(captions)), positives)

    model.history = fit(loss, model.parameters(), (images, attributes, labels), epochs=epochs, batch_size=batch_size,
                        lr=lr, seed=seed, module=model, desc="world CLIP", progress=progress, schedule=schedule,
                        augment=random_hflip if augment else None, weight_decay=weight_decay)
    return model.eval(), tokenizer


# ------------------------------------------------------------------------ loading
@dataclass
class ClipBundle:
    """``model``, ``tokenizer`` and ``preprocess`` (list of PIL images -> input tensor) of a CLIP-like model."""

    model: Any
    tokenizer: Callable
    preprocess: Callable
    backend: str


def _pil_batch(transform: Callable) -> Callable:
    return lambda images: torch.stack([transform(im) for im in images])


def load_clip(
    name_or_path: str | Path,
    backend: str = "auto",
    pretrained: str | None = None,
    local_files_only: bool | None = None,
    device: str | torch.device = "cpu",
) -> ClipBundle:
    """Load a CLIP-like model for :func:`clip_group_scores`.

    Args:
        name_or_path: a folder saved by :meth:`WorldCLIP.save_pretrained`; an open_clip
            architecture (``"ViT-B-32"``, with ``pretrained="laion2b_s34b_b79k"``) or
            ``"hf-hub:org/name"``; a transformers model id or local folder.
        backend: ``"auto"``, ``"world"``, ``"open_clip"`` or ``"transformers"``.
        local_files_only: for transformers; default: ``HF_HUB_OFFLINE``.

    Raises:
        ValueError: the name is not a model any backend can load (with the backends' reasons).
    """
    if backend not in ("auto", "world", "open_clip", "transformers"):
        raise ValueError(f"backend must be auto, world, open_clip or transformers, got {backend!r}")
    path = Path(str(name_or_path))
    config = path / "config.json"
    is_world = config.is_file() and "words" in json.loads(config.read_text())
    if backend == "world" or (backend == "auto" and is_world):
        model = WorldCLIP.from_pretrained(str(path)).to(device).eval()
        to_tensor = lambda im: torch.from_numpy(np.asarray(im.convert("RGB").resize((model.image_size,) * 2),  # noqa: E731
                                                           dtype=np.float32) / 255.0).permute(2, 0, 1)
        return ClipBundle(model, model.tokenizer, _pil_batch(to_tensor), "world")
    import open_clip

    name = str(name_or_path)
    if backend == "open_clip" or (backend == "auto" and (name in open_clip.list_models() or name.startswith("hf-hub:"))):
        if not (name in open_clip.list_models() or name.startswith("hf-hub:")):
            raise ValueError(f"unknown open_clip model {name!r}; known architectures: {open_clip.list_models()[:8]} ...")
        model, _, transform = open_clip.create_model_and_transforms(name, pretrained=pretrained, device=device)
        return ClipBundle(model.eval(), open_clip.get_tokenizer(name), _pil_batch(transform), "open_clip")
    from huggingface_hub import constants
    from transformers import AutoModel, AutoProcessor

    if local_files_only is None:
        local_files_only = bool(constants.HF_HUB_OFFLINE)
    try:
        model = AutoModel.from_pretrained(name, local_files_only=local_files_only).to(device).eval()
        processor = AutoProcessor.from_pretrained(name, local_files_only=local_files_only)
    except (OSError, ValueError) as error:
        raise ValueError(
            f"cannot load CLIP-like model {name!r}: not a WorldCLIP folder, not an open_clip architecture "
            f"(see open_clip.list_models()), and transformers says: {error}"
        ) from error
    if not hasattr(model, "get_text_features"):
        raise ValueError(f"{name!r} loads as {type(model).__name__}, which has no get_text_features (not CLIP-like)")
    preprocess = lambda images: processor(images=list(images), return_tensors="pt")["pixel_values"]  # noqa: E731
    return ClipBundle(model, processor.tokenizer if hasattr(processor, "tokenizer") else processor, preprocess,
                      "transformers")
