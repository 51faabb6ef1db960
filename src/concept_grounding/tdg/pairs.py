"""TDG's pair of prompts as one batch ``[references; guides]`` (SUB Sec. 3): the two prompts, or their
precomputed embeddings, checked and stacked (:func:`pair_batch`), and a per-pair negative prompt
for both halves (:func:`pair_negative`). Shared by the FLUX.1 and FLUX.2 TDG pipelines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["PairBatch", "pair_batch", "pair_negative", "RENAMED_ARGUMENTS"]

#: Base-pipeline arguments TDG replaces with one per side of the pair.
RENAMED_ARGUMENTS: dict[str, tuple[str, str]] = {
    "prompt": ("reference_prompt", "guide_prompt"),
    "prompt_embeds": ("reference_prompt_embeds", "guide_prompt_embeds"),
    "pooled_prompt_embeds": ("reference_pooled_prompt_embeds", "guide_pooled_prompt_embeds"),
}


def _as_list(prompt: str | list[str], name: str) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    if not isinstance(prompt, (list, tuple)) or not prompt or not all(isinstance(p, str) for p in prompt):
        raise ValueError(f"{name} must be a string or a non-empty list of strings, got {prompt!r}")
    return list(prompt)


@dataclass(frozen=True)
class PairBatch:
    """The base pipeline's prompt arguments for the batch ``[references; guides]``.

    Attributes:
        pairs: n, the number of (reference, guide) prompt pairs.
        prompt: ``[R_1..R_n, G_1..G_n]``, or ``None`` when embeddings were given.
        embeds: base argument name (``"prompt_embeds"``, ...) -> ``[reference; guide]`` rows,
            (2n, ...); empty when prompts were given.
    """

    pairs: int
    prompt: list[str] | None
    embeds: dict[str, torch.Tensor]


def pair_batch(
    reference_prompt: str | list[str] | None,
    guide_prompt: str | list[str] | None,
    embeds: Mapping[str, tuple[torch.Tensor | None, torch.Tensor | None]],
) -> PairBatch:
    """Check TDG's two prompts (or their precomputed embeddings) and stack them as one batch.

    Args:
        reference_prompt, guide_prompt: ``c_R`` and ``c_G``: one string or n strings each.
        embeds: base argument name -> (reference side, guide side), e.g. ``{"prompt_embeds":
            (reference_prompt_embeds, guide_prompt_embeds)}``; each (n, ...) or ``None``. Every
            name of the mapping is then required, both sides of it, with equal shapes; they
            replace the prompts.
    Raises:
        ValueError: one line naming the argument.

    >>> pair_batch(["a red bird", "a blue bird"], ["a bird", "a bird"], {}).prompt
    ['a red bird', 'a blue bird', 'a bird', 'a bird']
    >>> batch = pair_batch(None, None, {"prompt_embeds": (torch.zeros(1, 4, 8), torch.ones(1, 4, 8))})
    >>> batch.embeds["prompt_embeds"].shape
    torch.Size([2, 4, 8])
    >>> pair_batch(None, None, {"prompt_embeds": (torch.zeros(1, 4, 8), torch.ones(1, 5, 8))})
    Traceback (most recent call last):
    ...
    ValueError: reference_prompt_embeds and guide_prompt_embeds must have the same shape, got (1, 4, 8) and (1, 5, 8)
    """
    given = {name: pair for name, pair in embeds.items() if pair[0] is not None or pair[1] is not None}
    if not given:
        if reference_prompt is None or guide_prompt is None:
            raise ValueError(
                "reference_prompt and guide_prompt are required (or reference_prompt_embeds and guide_prompt_embeds)"
            )
        reference, guide = _as_list(reference_prompt, "reference_prompt"), _as_list(guide_prompt, "guide_prompt")
        if len(reference) != len(guide):
            raise ValueError(
                f"reference_prompt and guide_prompt must have the same length, got {len(reference)} and {len(guide)}"
            )
        return PairBatch(len(reference), reference + guide, {})
    if reference_prompt is not None or guide_prompt is not None:
        raise ValueError("give reference_prompt / guide_prompt or their precomputed embeddings, not both")
    missing = [RENAMED_ARGUMENTS[name] for name in embeds if name not in given]
    if missing:
        raise ValueError(
            f"{' and '.join(missing[0])} are required with {' / '.join(RENAMED_ARGUMENTS[next(iter(given))])}"
        )
    stacked = {}
    for name, (reference, guide) in given.items():
        r_name, g_name = RENAMED_ARGUMENTS[name]
        if reference is None or guide is None:
            raise ValueError(f"{r_name} and {g_name} go together: got only {r_name if guide is None else g_name}")
        if reference.shape != guide.shape:
            raise ValueError(
                f"{r_name} and {g_name} must have the same shape, got {tuple(reference.shape)} and {tuple(guide.shape)}"
            )
        stacked[name] = torch.cat([reference, guide])
    pairs = {pair[0].shape[0] for pair in given.values()}
    if len(pairs) != 1:
        raise ValueError(f"every precomputed embedding must have one row per pair, got row counts {sorted(pairs)}")
    return PairBatch(pairs.pop(), None, stacked)


def pair_negative(negative: Any, pairs: int, name: str) -> Any:
    """A per-pair negative (one string, n strings, or (n, ...) embeddings) for both halves of the batch.

    Returns ``None``, 2n strings or (2n, ...) rows: pair ``i``'s negative serves ``R_i`` and ``G_i``.

    >>> pair_negative("blurry", 2, "negative_prompt")
    ['blurry', 'blurry', 'blurry', 'blurry']
    >>> pair_negative(["dark", "blurry"], 2, "negative_prompt")
    ['dark', 'blurry', 'dark', 'blurry']
    """
    if negative is None:
        return None
    if isinstance(negative, torch.Tensor):
        if negative.shape[0] != pairs:
            raise ValueError(f"{name} must have one row per pair ({pairs}), got shape {tuple(negative.shape)}")
        return torch.cat([negative, negative])
    texts = _as_list(negative, name)
    if len(texts) not in (1, pairs):
        raise ValueError(f"{name} must be one string or one per pair ({pairs}), got {len(texts)}")
    return (texts * pairs if len(texts) == 1 else texts) * 2
