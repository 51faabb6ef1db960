"""Scorers for the VQA filter of :mod:`.filter`: images and one multiple-choice question to
option probabilities, from a vision-language model, a CLIP or an attribute judge (docs/tdg.md)."""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..vocabulary import Vocabulary, load_vocabulary
from .filter import OTHER

if TYPE_CHECKING:
    from ..models.clip import ClipHandle

__all__ = ["VisionLanguageScorer", "CLIPScorer", "AttributeJudgeScorer", "tiny_clip_scorer"]


class VisionLanguageScorer:
    """Option-letter probabilities from a transformers vision-language model (SUB used InternVL-2.5-8B).

    The question is sent as one user turn with the image (through the processor's chat
    template when it has one, else as ``"<image token>\\n" + question``); the next-token
    logits of the letters ``A``, ``B``, ... are softmaxed over the options.

    Args:
        model: an ``AutoModelForImageTextToText`` / LLaVA-style model returning ``logits``.
        processor: its ``AutoProcessor``.
    """

    def __init__(self, model: Any, processor: Any, suffix: str = " Answer with the option's letter.") -> None:
        self.model, self.processor, self.suffix = model, processor, suffix

    def _prompt(self, question: str) -> str:
        text = question + self.suffix
        if getattr(self.processor, "chat_template", None):
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
            return self.processor.apply_chat_template(messages, add_generation_prompt=True)
        image_token = getattr(self.processor, "image_token", None)
        return f"{image_token}\n{text}" if image_token else text

    def _letter_ids(self, n: int) -> list[int]:
        tokenizer = getattr(self.processor, "tokenizer", self.processor)
        ids = []
        for letter in string.ascii_uppercase[:n]:
            pieces = tokenizer.encode(letter, add_special_tokens=False)
            ids.append(pieces[-1])
        unk = getattr(tokenizer, "unk_token_id", None)
        if len(set(ids)) < n or (unk is not None and unk in ids):
            raise ValueError(
                f"the tokenizer has no distinct token for each of the letters A..{string.ascii_uppercase[n - 1]}"
            )
        return ids

    def score(self, images: Sequence[Any], question: str, options: Sequence[str], group: str = "") -> np.ndarray:
        import torch

        prompt, letter_ids = self._prompt(question), self._letter_ids(len(options))
        rows = []
        for image in images:
            inputs = self.processor(images=image, text=prompt, return_tensors="pt").to(self.model.device)
            with torch.no_grad():
                logits = self.model(**inputs).logits[0, -1].float()
            rows.append(torch.softmax(logits[letter_ids], dim=-1).cpu().numpy())
        return np.stack(rows)


class CLIPScorer:
    """Softmax over options of a CLIP's image-text similarities (logit scale included), asked of
    the one CLIP handle (:class:`~concept_grounding.models.clip.ClipHandle`, from ``load_clip``).

    Option texts: ``template.format(option=..., group=...)``; "Other" reads ``other_text``.
    """

    def __init__(
        self,
        clip: ClipHandle,
        template: str = "a photo of a bird with {option} {group}",
        other_text: str = "a photo of a bird",
    ) -> None:
        self.clip, self.template, self.other_text = clip, template, other_text

    def score(self, images: Sequence[Any], question: str, options: Sequence[str], group: str = "") -> np.ndarray:
        import torch

        group_text = group.replace("_", " ")
        texts = [self.other_text if o == OTHER else self.template.format(option=o, group=group_text) for o in options]
        with torch.no_grad():
            img = self.clip.encode_images(self.clip.preprocess(list(images)))
            txt = self.clip.encode_texts(texts).cpu()
            logits = self.clip.model.logit_scale.exp().float().cpu() * img @ txt.T
        return torch.softmax(logits, dim=-1).numpy()


class AttributeJudgeScorer:
    """Option probabilities from an attribute judge's per-attribute probabilities.

    ``predict_proba(images) -> (N, 312)`` independent presence probabilities. For a group
    with values ``v_1..v_k``: scores ``p(v_i)`` and, for "Other", ``prod_i (1 - p(v_i))``,
    normalised to sum to 1.
    """

    def __init__(self, predict_proba: Callable[[Sequence[Any]], np.ndarray], vocab: Vocabulary | None = None) -> None:
        self.predict_proba, self.vocab = predict_proba, vocab or load_vocabulary()

    def score(self, images: Sequence[Any], question: str, options: Sequence[str], group: str) -> np.ndarray:
        p = np.asarray(self.predict_proba(images), dtype=np.float64)[:, list(self.vocab.groups[group])]
        scores = np.concatenate([p, np.prod(1 - p, axis=1, keepdims=True)], axis=1)
        if len(options) != scores.shape[1]:
            raise ValueError(f"options must be the group's {scores.shape[1] - 1} values plus 'Other', got {options}")
        return scores / np.clip(scores.sum(axis=1, keepdims=True), 1e-12, None)


def tiny_clip_scorer(seed: int = 0, image_size: int = 32) -> CLIPScorer:
    """A :class:`CLIPScorer` over a tiny random-weight open_clip CLIP (offline plumbing, tests, demo).

    Its answers are meaningless; use a pretrained model for real filtering. The weights are
    seeded by ``seed``; the caller's global torch RNG state is left as it was.
    """
    import open_clip
    import torch

    from ..models.clip import ClipHandle
    from ..models.clip.loading import pil_batch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = open_clip.CLIP(
            embed_dim=16,
            vision_cfg=open_clip.CLIPVisionCfg(layers=1, width=32, head_width=16, patch_size=8, image_size=image_size),
            text_cfg=open_clip.CLIPTextCfg(context_length=77, vocab_size=49408, width=32, heads=2, layers=1),
        ).eval()
    preprocess = open_clip.image_transform(image_size, is_train=False)
    return CLIPScorer(
        ClipHandle(
            model,
            open_clip.get_tokenizer("ViT-B-32"),
            pil_batch(preprocess),
            "open_clip",
            "tiny random-weight open_clip CLIP",
        )
    )
