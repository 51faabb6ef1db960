"""Concept Location Metric (CLM), Aysel et al. (2025), Sec. 3.4, Eq. 11 and Sec. 4.4.2.

For the ``l`` most important concepts of an image (ranked as in :mod:`.concept_existence`), the share
whose body-part centre lies among the ``alpha * M1 * M2 / 12`` highest pixels of the concept's
upsampled activation map:

    rho_l = (1/l) * sum_{s=1..l} 1_{Omega_iq_is}(p_iq_is)                   (Eq. 11)

Paper settings: alpha = 1, 3, 6; l = 1, 3, 5. Higher is better. The points the paper leaves open
(part-less concepts, paired parts, which pixel is a centre, ties in ``Omega``): docs/concept_metrics.md.

>>> import numpy as np
>>> maps = np.zeros((1, 2, 4, 4)); maps[0, 0, 0, 0] = 1.0; maps[0, 1, 3, 3] = 1.0
>>> xy = np.zeros((1, 2, 2)); xy[0, 1] = [3, 3]          # part 0 at (0, 0), part 1 at (3, 3)
>>> out = concept_location(maps, xy, np.ones((1, 2), bool), top_concepts=[[0, 1]],
...                        concept_parts=[(0,), (0,)], alphas=(1,), top_l=(1, 2))
>>> out["location@1_alpha1"], out["location@2_alpha1"]   # concept 1 looks at (3, 3), not at part 0
(1.0, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..vocabulary import Vocabulary, load_vocabulary
from ._validation import as_array, as_labels, as_mask, check_positive_ints, check_same_length
from .concept_existence import check_ranking_inputs, local_importance, rank_concepts

__all__ = [
    "concept_location",
    "concept_part_table",
    "region_size",
    "centre_pixels",
    "centre_ranks",
    "top_region",
    "check_map_and_centres",
]


def region_size(alpha: float, image_size: tuple[int, int]) -> int:
    """``|Omega| = floor(alpha * M1 * M2 / 12)``, at least 1 and at most ``M1 * M2``.

    >>> region_size(1, (224, 224)), region_size(6, (224, 224))
    (4181, 25088)
    """
    m = image_size[0] * image_size[1]
    return int(min(max(np.floor(alpha * m / 12.0), 1), m))


def concept_part_table(
    num_concepts: int,
    *,
    concept_names: Sequence[str] | None = None,
    concept_parts: Sequence[Sequence[int | str]] | None = None,
    vocabulary: Vocabulary | None = None,
) -> np.ndarray:
    """``(L, Pmax)`` part indices of each concept, ``-1`` padded (no part: all ``-1``).

    Exactly one of ``concept_names`` (CUB attribute names, mapped with
    ``vocabulary.parts_of``) or ``concept_parts`` (per concept, part indices or names).

    >>> concept_part_table(2, concept_names=["has_eye_color::blue", "has_size::small_(5_-_9_in)"]).tolist()
    [[6, 10], [-1, -1]]
    """
    if (concept_names is None) == (concept_parts is None):
        raise ValueError("give exactly one of concept_names or concept_parts")
    vocab = vocabulary or load_vocabulary()
    if concept_names is not None:
        if len(concept_names) != num_concepts:
            raise ValueError(
                f"concept_names must have {num_concepts} entries (one per concept), got {len(concept_names)}"
            )
        known = set(vocab.attributes)
        unknown = [n for n in concept_names if n not in known]
        if unknown:
            raise ValueError(f"concept_names has unknown attribute name(s): {unknown[:5]}")
        concept_parts = [vocab.parts_of(n) for n in concept_names]
    assert concept_parts is not None
    if len(concept_parts) != num_concepts:
        raise ValueError(f"concept_parts must have {num_concepts} entries (one per concept), got {len(concept_parts)}")
    width = max([len(p) for p in concept_parts] + [1])
    table = np.full((num_concepts, width), -1, dtype=np.int64)
    for j, parts in enumerate(concept_parts):
        for s, part in enumerate(parts):
            idx = vocab.part_index(part) if isinstance(part, str) else int(part)
            if not 0 <= idx < vocab.num_parts:
                raise ValueError(f"concept_parts[{j}] has part {part!r} outside [0, {vocab.num_parts})")
            table[j, s] = idx
    return table


def centre_pixels(part_xy: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """``(..., 2)`` (x, y) coordinates (pixel centres at integers) -> flat index ``row * M2 + col``
    of the pixel whose centre is nearest, ``(row, col) = (floor(y + 1/2), floor(x + 1/2))``,
    clipped to the ``image_size = (M1, M2)`` grid (docs/concept_metrics.md).

    >>> centre_pixels(np.array([[2.0, 1.0], [2.49, 0.5], [-3.0, 9.0]]), (3, 4)).tolist()   # (x, y)
    [6, 6, 8]
    """
    rows = np.clip(np.floor(part_xy[..., 1] + 0.5).astype(np.int64), 0, image_size[0] - 1)
    cols = np.clip(np.floor(part_xy[..., 0] + 0.5).astype(np.int64), 0, image_size[1] - 1)
    return rows * image_size[1] + cols


def check_map_and_centres(concept_map: ArrayLike, part_xy: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """One concept map ``(H, W)`` and its part centres as ``(P, 2)`` (x, y) float64 arrays,
    checked (finite, numeric, a 2-D map); raises ``ValueError`` naming the argument.

    >>> fmap, xy = check_map_and_centres([[0.0, 1.0]], [3, 4])
    >>> fmap.shape, xy.tolist()
    ((1, 2), [[3.0, 4.0]])
    """
    return as_array(concept_map, "concept_map", ndim=2), as_array(part_xy, "part_xy").reshape(-1, 2)


def top_region(
    concept_map: ArrayLike, image_size: tuple[int, int], alpha: float, *, rtol: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    """The upsampled map ``(M1, M2)`` and its region ``Omega`` as a boolean mask, with the
    metric's tie rule (pixels within ``rtol * max|F|`` of the ``|Omega|``-th largest value
    are inside). Materialises the map: for plots, not for the metric's hot path.

    >>> up, omega = top_region(np.array([[0.0, 1.0], [0.0, 1.0]]), (4, 4), 3)
    >>> up[0].tolist(), int(omega.sum())   # |Omega| = 4: the right column
    ([0.0, 0.25, 0.75, 1.0], 4)
    """
    import torch

    fmap = np.asarray(concept_map, dtype=np.float64)
    up = torch.nn.functional.interpolate(
        torch.from_numpy(fmap)[None, None], size=tuple(image_size), mode="bilinear", align_corners=False
    )[0, 0].numpy()
    n = region_size(alpha, image_size)
    kth = np.partition(up.ravel(), up.size - n)[up.size - n]
    return up, up + rtol * np.abs(fmap).max() >= kth


def _source_index(out_size: int, in_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bilinear (``align_corners=False``) source taps of each output pixel, as
    ``torch.nn.functional.interpolate`` computes them: ``(i0, i1, lambda)`` with
    ``value = (1 - lambda) * F[i0] + lambda * F[i1]``."""
    src = np.maximum((np.arange(out_size) + 0.5) * (in_size / out_size) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return i0, i1, np.where(i0 == i1, 0.0, src - i0)


def centre_ranks(
    maps: np.ndarray,
    centres: np.ndarray,
    image_size: tuple[int, int],
    *,
    rtol: float = 1e-9,
    thresholds: Sequence[int] | np.ndarray | None = None,
    batch_size: int = 1024,
    progress: bool = False,
) -> np.ndarray:
    """Number of pixels of each bilinearly upsampled map that exceed the value at its centre.

    Args:
        maps: ``(Q, H, W)`` maps, one per query. centres: ``(Q,)`` flat pixel index
            ``row * M2 + col`` in the ``image_size`` = ``(M1, M2)`` grid.
        rtol: a pixel counts only if it exceeds the centre value by more than
            ``rtol * max|map|`` (so floating-point noise of the interpolation never
            breaks a tie).
        thresholds: region sizes ``|Omega|`` the caller will compare against. When
            given, a count is only resolved as far as needed: the returned ``r`` satisfies
            ``(r < n) == (rank < n)`` for every ``n`` in ``thresholds`` (it is a lower
            bound of the exact rank where that bound already decides every comparison).

    Returns:
        ``(Q,)`` int64 counts.

    The upsampled map is never materialised. The output grid splits into cells: the
    pixels whose bilinear taps are input rows ``a, a + 1`` and columns ``b, b + 1``; the
    map is edge-padded so that the clamped borders (constant along the clamped axis) are
    cells too. A pixel's value is bounded by its cell's four corners, so a cell whose
    corners all exceed the threshold counts whole and one whose corners all do not
    counts nothing. Only cells the threshold cuts are visited, one pixel row at a time:
    along a row the value is linear in the source coordinate
    ``src(x) = (x + 0.5) * W / M2 - 0.5``, itself linear in the pixel column ``x``, so the
    run of pixels above the threshold has a closed-form length.
    """
    from tqdm.auto import tqdm

    M1, M2 = image_size
    Q, H, W = maps.shape
    inv_scale = M2 / W
    r0, _, mu = _source_index(M1, H)
    c0, _, _ = _source_index(M2, W)
    raw_src = (np.arange(M2) + 0.5) * (W / M2) - 0.5
    col_seg = np.where(raw_src < 0, 0, c0 + 1)  # 0: left border, b + 1: between b and b + 1, W: right border
    seg_ids = np.arange(W + 1)
    col_start, col_end = np.searchsorted(col_seg, seg_ids, "left"), np.searchsorted(col_seg, seg_ids, "right")
    row_start, row_end = np.searchsorted(r0, np.arange(H), "left"), np.searchsorted(r0, np.arange(H), "right")
    cell_pixels = np.outer(row_end - row_start, col_end - col_start)  # (H, W + 1)
    # pixel k = floor(off * inv_scale + shift[j]) is the first column right of a crossing at
    # source offset ``off`` into segment j (from x = (j - 1 + off + 0.5) * inv_scale - 0.5)
    shift = (seg_ids - 0.5) * inv_scale + 0.5
    sizes = None if thresholds is None else np.asarray(thresholds, dtype=np.float64)[None, :]
    out = np.empty(Q, dtype=np.int64)
    for start in tqdm(range(0, Q, batch_size), desc="concept_location", disable=not progress):
        raw = maps[start : start + batch_size].astype(np.float64)
        block = np.pad(raw, ((0, 0), (0, 1), (1, 1)), mode="edge")  # (q, H + 1, W + 2)
        q = len(block)
        # 1. threshold: the centre's value (+ tolerance), by the same arithmetic as the rows below
        cy, cx = np.divmod(centres[start : start + batch_size], M2)
        qi, a, j = np.arange(q), r0[cy], col_seg[cx]
        m = mu[cy]
        left = block[qi, a, j] + m * (block[qi, a + 1, j] - block[qi, a, j])
        right = block[qi, a, j + 1] + m * (block[qi, a + 1, j + 1] - block[qi, a, j + 1])
        off = np.clip(raw_src[cx] - (j - 1), 0.0, 1.0)
        t = left + off * (right - left) + rtol * np.abs(raw).max(axis=(1, 2))
        # 2. whole cells from their corners
        corners = np.stack([block[:, :-1, :-1], block[:, 1:, :-1], block[:, :-1, 1:], block[:, 1:, 1:]])
        lo, hi = corners.min(axis=0), corners.max(axis=0)  # (q, H, W + 1)
        above = lo > t[:, None, None]
        count = (above * cell_pixels).sum(axis=(1, 2)).astype(np.float64)
        cut = ~above & (hi > t[:, None, None])
        if thresholds is not None:  # the exact rank lies in [count, count + cut pixels]
            upper = count + (cut * cell_pixels).sum(axis=(1, 2))
            open_ = ((count[:, None] < sizes) & (sizes <= upper[:, None])).any(axis=1)
            cut &= open_[:, None, None]
        # 3. cut cells, one row of pixels at a time
        cut_q, cut_a, cut_j = np.nonzero(cut)
        for row_seg in range(H):
            sel = cut_a == row_seg
            if not sel.any():
                continue
            cq, cj = cut_q[sel], cut_j[sel]
            m = mu[row_start[row_seg] : row_end[row_seg]][None, :]
            tl, bl = block[cq, row_seg, cj][:, None], block[cq, row_seg + 1, cj][:, None]
            tr, br = block[cq, row_seg, cj + 1][:, None], block[cq, row_seg + 1, cj + 1][:, None]
            rb = tl + m * (bl - tl)
            d = (tr - tl) + m * ((br - bl) - (tr - tl)) + 0.0  # + 0.0 turns -0.0 into +0.0 for the division
            s0, s1 = col_start[cj][:, None], col_end[cj][:, None]
            with np.errstate(divide="ignore", invalid="ignore"):
                # crossing; a flat row (d == 0) gives -inf (all above) or +inf (none above)
                k = np.floor((t[cq][:, None] - rb) / d * inv_scale + shift[cj][:, None])
            k = np.minimum(np.maximum(k, s0), s1)
            runs = np.where(d >= 0, s1 - k, k - s0)  # rising: right of the crossing; falling: left
            count += np.bincount(cq, weights=runs.sum(axis=1), minlength=q)
        out[start : start + q] = np.rint(count).astype(np.int64)
    return out


def concept_location(
    concept_maps: ArrayLike,
    part_xy: ArrayLike,
    part_visible: ArrayLike,
    *,
    theta: ArrayLike | None = None,
    concept_scores: ArrayLike | None = None,
    predictions: ArrayLike | None = None,
    top_concepts: ArrayLike | None = None,
    references: ArrayLike | None = None,
    concept_names: Sequence[str] | None = None,
    concept_parts: Sequence[Sequence[int | str]] | None = None,
    vocabulary: Vocabulary | None = None,
    image_size: tuple[int, int] | None = None,
    alphas: Sequence[float] = (1, 3, 6),
    top_l: tuple[int, ...] = (1, 3, 5),
    ranking: str = "theta_u",
    by_magnitude: bool = False,
    rank_within_part_concepts: bool = False,
    rtol: float = 1e-9,
    return_ranks: bool = False,
    batch_size: int = 1024,
    progress: bool = False,
) -> dict[str, Any]:
    """CLM ``rho_l`` (Eq. 11) for every ``alpha`` in ``alphas`` and ``l`` in ``top_l``.

    Args:
        concept_maps: ``(N, L, H, W)`` concept activation maps (CoAM, Eq. 2) at feature
            resolution (or already at ``image_size``).
        part_xy: ``(N, P, 2)`` part centres ``(x, y)`` in image pixels.
        part_visible: ``(N, P)`` part visibility.
        theta, concept_scores, predictions: ``(L, K)``, ``(N, L)``, ``(N,)``; rank the
            concepts as in concept existence. Or give ``top_concepts`` ``(N, l_max)``.
        references: ``(N,)`` true classes, to also score the correctly classified subset.
        concept_names / concept_parts: concept -> part mapping (see :func:`concept_part_table`).
        image_size: ``(M1, M2)`` = (height, width) the maps are upsampled to; default
            the map size.
        alphas: region scales (paper: 1, 3, 6). top_l: ``l`` values (paper: 1, 3, 5).
        ranking, by_magnitude: see :func:`.concept_existence.concept_existence`.
        rank_within_part_concepts: drop concepts without a part before ranking.
        rtol: tie tolerance relative to ``max|F_ij|`` (docs/concept_metrics.md).
        return_ranks: also return ``centre_rank``, the exact number of pixels strictly
            above the best visible centre (slower: otherwise a rank is only resolved as
            far as the requested region sizes need).

    Returns:
        dict with ``location@{l}_alpha{alpha}`` (mean over images with at least one
        evaluated concept; NaN if none), the same with ``_correct`` when ``references``
        is given, ``top_concepts`` ``(N, l_max)``, ``evaluated`` ``(N, l_max)`` bool,
        ``hits`` ``(N, l_max, len(alphas))`` bool, with ``return_ranks`` ``centre_rank``
        ``(N, l_max)`` (pixels strictly above the best visible centre; -1 when not
        evaluated),
        ``region_sizes``, and the counts ``skipped_no_part``, ``skipped_invisible``
        (over the top ``l_max`` slots) and ``images_without_evaluated`` (at ``l_max``).
    """
    maps = as_array(concept_maps, "concept_maps", ndim=4, dtype=None)
    N, L, H, W = maps.shape
    xy = as_array(part_xy, "part_xy", ndim=3)
    if xy.shape[2] != 2:
        raise ValueError(f"part_xy must have shape (N, P, 2), got {xy.shape}")
    vis = as_mask(part_visible, "part_visible", ndim=2)
    if vis.shape != xy.shape[:2]:
        raise ValueError(f"part_visible must have shape {xy.shape[:2]} (N, P of part_xy), got {vis.shape}")
    check_same_length(concept_maps=maps, part_xy=xy, part_visible=vis)
    size = (H, W) if image_size is None else tuple(int(s) for s in image_size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"image_size must be (height, width) with positive entries, got {image_size}")
    ls = check_positive_ints(top_l, "top_l", maximum=L)
    alpha_arr = as_array(list(alphas) if not np.isscalar(alphas) else [alphas], "alphas", ndim=1)
    if (alpha_arr <= 0).any():
        raise ValueError(f"alphas must be positive, got {alpha_arr.tolist()}")
    table = concept_part_table(L, concept_names=concept_names, concept_parts=concept_parts, vocabulary=vocabulary)
    if table.max() >= xy.shape[1]:
        raise ValueError(f"part_xy has {xy.shape[1]} parts but the concept -> part mapping uses part {table.max()}")
    has_part = np.any(table >= 0, axis=1)
    top = _top_concepts(
        top_concepts,
        theta,
        concept_scores,
        predictions,
        N,
        L,
        max(ls),
        ranking,
        by_magnitude,
        has_part if rank_within_part_concepts else None,
    )

    # 1. which (image, slot, part) centres count
    parts = table[top]  # (N, l, Pmax)
    rows = np.arange(N)[:, None, None]
    safe = np.maximum(parts, 0)
    visible = (parts >= 0) & vis[rows, safe]
    evaluated = visible.any(axis=2)
    # 2. rank of each visible centre's value within its upsampled map
    qn, qs, qp = np.nonzero(visible)
    q_maps = maps[qn, top[qn, qs]]
    q_centres = centre_pixels(xy[qn, parts[qn, qs, qp]], size)
    sizes = np.array([region_size(a, size) for a in alpha_arr])
    ranks = centre_ranks(
        q_maps,
        q_centres,
        size,
        rtol=rtol,
        thresholds=None if return_ranks else sizes,
        batch_size=batch_size,
        progress=progress,
    )
    best_all = np.full(parts.shape, np.iinfo(np.int64).max)
    best_all[qn, qs, qp] = ranks
    best = np.where(evaluated, best_all.min(axis=2), -1)
    # 3. hits and per-image scores
    hits = evaluated[..., None] & (best[..., None] < sizes)
    n_eval = np.cumsum(evaluated, axis=1)
    n_hit = np.cumsum(hits, axis=1)
    correct = None
    out: dict[str, Any] = {}
    if references is not None:
        if theta is None:
            raise ValueError("references needs predictions (give theta, concept_scores, predictions)")
        pred = as_labels(predictions, "predictions")
        ref = as_labels(references, "references")
        check_same_length(predictions=pred, references=ref)
        correct = pred == ref
    for l in ls:
        with np.errstate(invalid="ignore", divide="ignore"):
            per_image = n_hit[:, l - 1, :] / n_eval[:, l - 1, None]
        valid = n_eval[:, l - 1] > 0
        for a, alpha in enumerate(alpha_arr):
            key = f"location@{l}_alpha{alpha:g}"
            out[key] = float(per_image[valid, a].mean()) if valid.any() else float("nan")
            if correct is not None:
                both = valid & correct
                out[key + "_correct"] = float(per_image[both, a].mean()) if both.any() else float("nan")
    out.update(
        top_concepts=top,
        evaluated=evaluated,
        hits=hits,
        region_sizes=sizes,
        skipped_no_part=int((~has_part[top]).sum()),
        skipped_invisible=int((has_part[top] & ~evaluated).sum()),
        images_without_evaluated=int((n_eval[:, -1] == 0).sum()),
    )
    if return_ranks:
        out["centre_rank"] = best
    return out


def _top_concepts(
    top_concepts: ArrayLike | None,
    theta: ArrayLike | None,
    concept_scores: ArrayLike | None,
    predictions: ArrayLike | None,
    N: int,
    L: int,
    top: int,
    ranking: str,
    by_magnitude: bool,
    has_part: np.ndarray | None,
) -> np.ndarray:
    """``(N, top)`` concepts to locate per image: ``top_concepts`` as given, or ranked by :func:`.local_importance`."""
    if top_concepts is not None:
        if theta is not None or concept_scores is not None:
            raise ValueError("give either top_concepts or theta/concept_scores/predictions, not both")
        t = as_labels(top_concepts, "top_concepts", num_classes=L, ndim=2)
        if t.shape[0] != N or t.shape[1] < top:
            raise ValueError(f"top_concepts must have shape ({N}, >= {top}), got {t.shape}")
        return t[:, :top]
    if theta is None or concept_scores is None or predictions is None:
        raise ValueError("give theta, concept_scores and predictions (or top_concepts) to rank the concepts")
    th, u, pred = check_ranking_inputs(theta, concept_scores, predictions)
    if u.shape != (N, L):
        raise ValueError(f"concept_scores must have shape ({N}, {L}) to match concept_maps, got {u.shape}")
    key = local_importance(th, u, pred, ranking)
    if by_magnitude:
        key = np.abs(key)
    if has_part is not None:
        if not has_part.any():
            raise ValueError("rank_within_part_concepts=True but no concept has a part")
        key = np.where(has_part[None, :], key, -np.inf)
    return rank_concepts(key, top)
