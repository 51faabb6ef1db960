"""Small helpers shared by the world Flux's training stages (as diffusers keeps its
``training_utils.py``): atomic checkpoints, the learning-rate schedule, image tensors."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..fileio import atomic_write_bytes
from .components import FluxTrainConfig

__all__ = []


def training_world(cfg: FluxTrainConfig) -> Any:
    """The :class:`~concept_grounding.world.BirdWorld` whose renders train the pipeline."""
    from ..world import BirdWorld

    return BirdWorld(cfg.world)


def _render_chunk(
    config: Any, indices: Sequence[int], fields: tuple[str, ...], counts: Sequence[int] | None = None
) -> dict[str, np.ndarray]:
    """Render ``indices`` of ``BirdWorld(config)`` (as compositions of ``counts`` birds, when
    given); stack each of ``fields`` (a worker's job)."""
    from ..world import BirdWorld

    world = BirdWorld(config)
    if counts is None:
        drawn = list(world.samples(indices))
    else:
        drawn = [world.composition(i, int(k)) for i, k in zip(indices, counts)]
    return {f: np.stack([np.asarray(getattr(s, f)) for s in drawn]) for f in fields}


def render_fields(
    config: Any,
    indices: Sequence[int],
    fields: tuple[str, ...],
    workers: int = 1,
    desc: str = "render",
    progress: bool = True,
    counts: Sequence[int] | None = None,
) -> dict[str, np.ndarray]:
    """Render world samples ``indices`` of ``BirdWorld(config)`` and stack ``fields`` of each.

    Args:
        config: the :class:`~concept_grounding.world.WorldConfig` (default vocabulary).
        indices: N sample indices; a render depends on ``(config, index)`` only.
        fields: :class:`~concept_grounding.world.BirdSample` attributes, e.g. ``("image", "label")``
            (with ``counts``: :class:`~concept_grounding.world.composition.Composition` attributes).
        workers: processes (``1``: in this process); the result is the same for any count.
        counts: N bird counts: render ``BirdWorld.composition(index, count)`` instead.
    Returns:
        field -> array with a leading axis of N, in the order of ``indices``.

    >>> from concept_grounding.world import WorldConfig
    >>> out = render_fields(WorldConfig(image_size=32), [0, 5], ("image", "label"), progress=False)
    >>> out["image"].shape, out["label"].tolist()
    ((2, 32, 32, 3), [0, 5])
    >>> render_fields(WorldConfig(image_size=32), [0, 5], ("count",), progress=False, counts=[3, 1])["count"].tolist()
    [3, 1]
    """
    from tqdm.auto import tqdm

    indices = [int(i) for i in indices]
    size = 256
    chunks = [indices[i : i + size] for i in range(0, len(indices), size)] or [[]]
    count_chunks = (
        [None] * len(chunks) if counts is None else [list(counts[i : i + size]) for i in range(0, len(indices), size)]
    )
    bar = tqdm(total=len(indices), desc=desc, disable=not progress)
    parts: list[dict[str, np.ndarray]] = []
    if workers <= 1 or len(chunks) == 1:
        for chunk, k in zip(chunks, count_chunks):
            parts.append(_render_chunk(config, chunk, fields, k) if chunk else {})
            bar.update(len(chunk))
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            jobs = pool.map(_render_chunk, [config] * len(chunks), chunks, [fields] * len(chunks), count_chunks)
            for chunk, part in zip(chunks, jobs):
                parts.append(part)
                bar.update(len(chunk))
    bar.close()
    parts = [p for p in parts if p]
    if not parts:
        raise ValueError("render_fields: no indices to render")
    return {f: np.concatenate([p[f] for p in parts]) for f in fields}


def atomic_save(obj: Any, path: Path) -> None:
    """``torch.save`` through :func:`~concept_grounding.fileio.atomic_write_bytes` (a full disk
    is an ``OSError`` naming ``path``, and leaves no temporary file)."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def cosine_lr(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``total``.

    >>> cosine_lr(0, 100, 1.0, 10), cosine_lr(10, 100, 1.0, 10), round(cosine_lr(100, 100, 1.0, 10), 6)
    (0.1, 1.0, 0.0)
    """
    warmup = min(warmup, max(total // 10, 1))
    if step < warmup:
        return base * (step + 1) / warmup
    frac = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * 0.5 * (1.0 + math.cos(math.pi * frac))


def to_tensor(images: np.ndarray) -> Any:
    """uint8 ``(N, H, W, 3)`` -> float ``(N, 3, H, W)`` in [-1, 1] (the VAE's range)."""
    import torch

    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def _word_rows(old_vocab: dict[str, int], new_vocab: dict[str, int]) -> tuple[list[int], list[int]] | None:
    """``(new ids, old ids)`` of the words two word-level vocabularies share, or ``None`` when
    they are the same; a word of ``old_vocab`` missing from ``new_vocab`` is refused."""
    if old_vocab == new_vocab:
        return None
    lost = sorted(set(old_vocab) - set(new_vocab))
    if lost:
        raise ValueError(f"--init-from: this run's vocabulary lacks {len(lost)} of its words (e.g. {lost[0]!r})")
    shared = sorted(old_vocab, key=old_vocab.get)
    return [new_vocab[w] for w in shared], [old_vocab[w] for w in shared]


def grow_vocabulary(
    state: dict[str, Any], target: dict[str, Any], old_vocab: dict[str, int], new_vocab: dict[str, int]
) -> dict[str, Any]:
    """``state`` (a text encoder's weights for ``old_vocab``) fitted to ``target`` (the same
    encoder for ``new_vocab``, a superset): every token-embedding row, shape
    ``(len(old_vocab), D)``, moves to its word's id in ``new_vocab``; the new words keep
    ``target``'s own initial rows. Other weights are returned as they are.

    >>> import torch
    >>> old, new = {"<pad>": 0, "a": 1}, {"<pad>": 0, "a": 1, "bird": 2}
    >>> out = grow_vocabulary({"emb": torch.ones(2, 3)}, {"emb": torch.zeros(3, 3)}, old, new)
    >>> out["emb"].sum(1).tolist()
    [3.0, 3.0, 0.0]
    """
    rows = _word_rows(old_vocab, new_vocab)
    if rows is None:
        return state
    new_ids, old_ids = rows
    out = dict(state)
    for key, value in state.items():
        want = target.get(key)
        if (
            want is not None
            and value.shape[0] == len(old_vocab)
            and want.shape[0] == len(new_vocab)
            and value.shape[1:] == want.shape[1:]
        ):
            grown = want.detach().clone().to(value.dtype)
            grown[new_ids] = value[old_ids]
            out[key] = grown
    return out
