"""Concept Cluster Importance (CCI): similarity drops, weights and maps.

CVPR 2026 "Concept Regions Matter", Sec. 3 (docs/cci.md):

* ``s = cos(z_CLS, t)``; ``s_k = cos(hat z_CLS,k, t)`` with cluster ``k`` cut out of every
  layer's and head's attention; ``Δs_k = s - s_k``;
* ``w_k = Δs_k / Σ_j Δs_j``;
* ``S = Σ_k w_k m_k`` on the patch grid (``m_k`` the cluster's indicator), upsampled to
  the image size.

*Normalisation of negative drops* (docs/cci.md, decision "report negative drops as they are"):
``drops`` are returned unchanged, signs included. When ``Σ_j Δs_j > eps`` the weights are
the paper's ``Δs_k / Σ_j Δs_j`` (a cluster whose removal *raises* the similarity gets a
negative weight). When the sum is ``<= eps`` (all removals help, or they cancel) the
paper's formula would flip or explode the map, so the denominator becomes
``Σ_j |Δs_j|`` (signs kept, ``Σ|w| = 1``); when that is also ``<= eps`` every weight is 0
and the map is all zeros. ``CCIOutput.normalizer`` records which rule was used per image
(1 = paper, 2 = absolute, 0 = zero map).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .backends import VisionBackend, get_backend
from .explanation import Explanation

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = [
    "CCIOutput",
    "ClusterEmbeddings",
    "ConceptClusterImportance",
    "cluster_weights",
    "importance_map",
    "similarity_drops",
]


@dataclass
class ClusterEmbeddings:
    """Text-independent part of CCI for a batch of images.

    Attributes:
        image_embeds: ``(B, E)`` unmasked embeddings ``z``.
        masked_embeds: ``(B, K, E)`` embeddings with cluster ``k`` cut out.
        labels: ``(B, N)`` cluster of each patch (row-major patch grid).
        grid_size: ``(gh, gw)``.
        image_size: ``(H, W)``.
    """

    image_embeds: torch.Tensor
    masked_embeds: torch.Tensor
    labels: torch.Tensor
    grid_size: tuple[int, int]
    image_size: tuple[int, int]


@dataclass
class CCIOutput(Explanation):
    """CCI result for a batch of ``B`` image-text pairs: an :class:`~.explainers.Explanation`
    (``maps``) with CCI's own numbers beside it.

    Attributes:
        maps: ``(B, H, W)`` importance map ``S`` upsampled to the image.
        patch_maps: ``(B, gh, gw)`` importance on the patch grid.
        weights: ``(B, K)`` cluster weights ``w_k``.
        drops: ``(B, K)`` similarity drops ``Δs_k`` (signs kept).
        similarity: ``(B,)`` unmasked cosine ``s``.
        masked_similarity: ``(B, K)`` cosines ``s_k``.
        labels: ``(B, N)`` patch cluster labels.
        normalizer: ``(B,)`` long, 1 paper rule, 2 absolute-sum rule, 0 zero map.
    """

    patch_maps: torch.Tensor
    weights: torch.Tensor
    drops: torch.Tensor
    similarity: torch.Tensor
    masked_similarity: torch.Tensor
    labels: torch.Tensor
    normalizer: torch.Tensor


def similarity_drops(
    image_embeds: torch.Tensor, masked_embeds: torch.Tensor, text_embeds: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``s``, ``s_k`` and ``Δs_k = s - s_k`` (cosine similarities).

    Args:
        image_embeds: ``(B, E)``.
        masked_embeds: ``(B, K, E)``.
        text_embeds: ``(B, E)``, or ``(E,)`` / ``(1, E)`` shared by all images.

    Returns:
        ``(s, s_k, drops)`` of shapes ``(B,)``, ``(B, K)``, ``(B, K)``.

    >>> import torch
    >>> z = torch.tensor([[1.0, 0.0]]); zk = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])
    >>> s, sk, d = similarity_drops(z, zk, torch.tensor([1.0, 0.0]))
    >>> d.tolist()
    [[1.0, 0.0]]
    """
    import torch.nn.functional as F

    b = image_embeds.shape[0]
    t = text_embeds
    if t.ndim == 1:
        t = t[None]
    if t.ndim != 2 or t.shape[-1] != image_embeds.shape[-1]:
        raise ValueError(
            f"text_embeds: expected (B, {image_embeds.shape[-1]}) or ({image_embeds.shape[-1]},), got {tuple(t.shape)}"
        )
    if t.shape[0] not in (1, b):
        raise ValueError(f"text_embeds: {t.shape[0]} texts for {b} images; give one text per image or one shared")
    t = F.normalize(t.float(), dim=-1).expand(b, -1)
    s = (F.normalize(image_embeds.float(), dim=-1) * t).sum(-1)
    sk = (F.normalize(masked_embeds.float(), dim=-1) * t[:, None, :]).sum(-1)
    return s, sk, s[:, None] - sk


def cluster_weights(drops: torch.Tensor, eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor]:
    """Cluster weights ``w_k = Δs_k / Σ_j Δs_j`` with the guarded denominator (module doc).

    Args:
        drops: ``(B, K)`` similarity drops.
        eps: threshold under which a denominator counts as zero.

    Returns:
        ``(weights, normalizer)``: ``(B, K)`` and ``(B,)`` long (1 paper, 2 absolute, 0 zero).

    >>> import torch
    >>> w, r = cluster_weights(torch.tensor([[0.3, 0.1, 0.0], [-0.2, 0.1, 0.0], [0.0, 0.0, 0.0]]))
    >>> [[round(x, 3) for x in row] for row in w.tolist()], r.tolist()
    ([[0.75, 0.25, 0.0], [-0.667, 0.333, 0.0], [0.0, 0.0, 0.0]], [1, 2, 0])
    """
    import torch

    total = drops.sum(-1, keepdim=True)
    absolute = drops.abs().sum(-1, keepdim=True)
    paper = total > eps
    fallback = ~paper & (absolute > eps)
    denom = torch.where(paper, total, torch.where(fallback, absolute, torch.ones_like(total)))
    w = torch.where(paper | fallback, drops / denom, torch.zeros_like(drops))
    normalizer = torch.where(paper, 1, torch.where(fallback, 2, 0)).squeeze(-1).long()
    return w, normalizer


def importance_map(
    weights: torch.Tensor,
    labels: torch.Tensor,
    grid_size: tuple[int, int],
    image_size: tuple[int, int] | None = None,
    mode: Literal["bilinear", "nearest"] = "bilinear",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``S = Σ_k w_k m_k`` on the patch grid, and upsampled.

    Args:
        weights: ``(B, K)``.
        labels: ``(B, N)`` with ``N = gh * gw`` (row-major).
        grid_size: ``(gh, gw)``.
        image_size: ``(H, W)`` of the upsampled map; ``None`` skips upsampling.
        mode: interpolation of the upsampling.

    Returns:
        ``(patch_maps (B, gh, gw), maps (B, H, W))``.

    >>> import torch
    >>> p, m = importance_map(torch.tensor([[1.0, 0.0]]), torch.tensor([[0, 1, 1, 0]]), (2, 2), (4, 4), "nearest")
    >>> p[0].tolist(), m[0, :, 0].tolist()
    ([[1.0, 0.0], [0.0, 1.0]], [1.0, 1.0, 0.0, 0.0])
    """
    import torch.nn.functional as F

    b, n = labels.shape
    if n != grid_size[0] * grid_size[1]:
        raise ValueError(f"labels: {n} patches do not fill a {grid_size} grid")
    patch = weights.gather(1, labels).view(b, *grid_size)
    if image_size is None:
        return patch, patch
    kwargs = {"align_corners": False} if mode == "bilinear" else {}
    up = F.interpolate(patch[:, None].float(), size=tuple(image_size), mode=mode, **kwargs)[:, 0]
    return patch, up


class ConceptClusterImportance:
    """Concept Cluster Importance for a CLIP ViT (transformers or open_clip); an
    :class:`~.explainers.Explainer` (``cci(pixel_values, texts) -> CCIOutput``).

    Args:
        model: transformers ``CLIPModel``/``CLIPVisionModel[WithProjection]``, open_clip
            ``CLIP`` (or its ``VisionTransformer``), or a :class:`VisionBackend`. Must be in
            eval mode.
        num_clusters: ``K`` (paper default 7).
        seed: k-means++ seed.
        method: ``"fast"`` (exact deletion path, default) or ``"hook"`` (the model's own
            forward under :class:`~.masking.ClusterMask`; the reference).
        kmeans_iters: Lloyd iterations at most.
        batch_size: images per chunk (the chunk runs ``batch_size * K`` variants at once).
        upsample: interpolation of the map to the image size.
        tokenizer: optional text tokenizer for string texts.

    Clustering uses the final-layer patch tokens after the final LayerNorm (open_clip's
    ``output_tokens``; transformers' ``post_layernorm`` applied token-wise).
    """

    name = "cci"
    title = "CCI"

    def __init__(
        self,
        model: Any,
        num_clusters: int = 7,
        seed: int = 0,
        method: Literal["fast", "hook"] = "fast",
        kmeans_iters: int = 50,
        batch_size: int = 8,
        upsample: Literal["bilinear", "nearest"] = "bilinear",
        tokenizer: Any = None,
    ) -> None:
        self.backend: VisionBackend = get_backend(model, tokenizer)
        if method not in ("fast", "hook"):
            raise ValueError(f"method: expected 'fast' or 'hook', got {method!r}")
        if num_clusters < 1 or num_clusters > self.backend.num_patches:
            raise ValueError(
                f"num_clusters: K={num_clusters} must be between 1 and the number of patches "
                f"N={self.backend.num_patches}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
        self.num_clusters = int(num_clusters)
        self.seed = int(seed)
        self.method = method
        self.kmeans_iters = int(kmeans_iters)
        self.batch_size = int(batch_size)
        self.upsample = upsample

    # 1. inputs
    def check_inputs(self, pixel_values: torch.Tensor) -> None:
        """Raise ``ValueError`` on a wrong pixel tensor or a model in train mode."""
        self.backend.check_eval()
        h, w = self.backend.image_size
        if pixel_values.ndim != 4 or pixel_values.shape[1] != 3 or tuple(pixel_values.shape[2:]) != (h, w):
            raise ValueError(f"pixel_values: expected (B, 3, {h}, {w}), got {tuple(pixel_values.shape)}")

    # 2. clustering + masked embeddings
    def embed(self, pixel_values: torch.Tensor) -> ClusterEmbeddings:
        """Unmasked and cluster-masked embeddings (text-independent; reuse for many texts).

        Args:
            pixel_values: ``(B, 3, H, W)`` preprocessed images.
        """
        import torch

        from .clusters import kmeans
        from .fast import masked_embeddings_fast, unmasked_trace
        from .masking import masked_embeddings_reference

        self.check_inputs(pixel_values)
        zs, zks, labs = [], [], []
        with torch.inference_mode():
            for start in range(0, pixel_values.shape[0], self.batch_size):
                px = pixel_values[start : start + self.batch_size]
                if self.method == "fast":
                    trace = unmasked_trace(self.backend, px)
                    tokens, z = trace.tokens, trace.image_embeds
                else:  # the model's own modules only
                    tokens = self.backend.run_encoder(self.backend.embed(px))
                    z = self.backend.encode_image(px)
                patches = self.backend.final_norm(tokens[:, 1:])
                labels, _ = kmeans(patches, self.num_clusters, seed=self.seed, max_iter=self.kmeans_iters)
                if self.method == "fast":
                    zk = masked_embeddings_fast(self.backend, trace, labels, self.num_clusters)
                else:
                    zk = masked_embeddings_reference(self.backend, px, labels, self.num_clusters)
                zs.append(z)
                zks.append(zk)
                labs.append(labels)
        return ClusterEmbeddings(
            image_embeds=torch.cat(zs),
            masked_embeds=torch.cat(zks),
            labels=torch.cat(labs),
            grid_size=self.backend.grid_size,
            image_size=self.backend.image_size,
        )

    # 3. scores and maps
    def explain_embeddings(self, emb: ClusterEmbeddings, text_embeds: torch.Tensor) -> CCIOutput:
        """Drops, weights and maps for precomputed :class:`ClusterEmbeddings`."""
        s, sk, drops = similarity_drops(emb.image_embeds, emb.masked_embeds, text_embeds)
        w, normalizer = cluster_weights(drops)
        patch, maps = importance_map(w, emb.labels, emb.grid_size, emb.image_size, self.upsample)
        return CCIOutput(
            maps=maps,
            patch_maps=patch,
            weights=w,
            drops=drops,
            similarity=s,
            masked_similarity=sk,
            labels=emb.labels,
            normalizer=normalizer,
        )

    def __call__(self, pixel_values: torch.Tensor, texts: Any) -> CCIOutput:
        """Explain ``B`` image-text pairs.

        Args:
            pixel_values: ``(B, 3, H, W)``.
            texts: ``(B, E)`` or ``(E,)`` text embeddings, or a list of ``B`` strings (or one)
                encoded by the model's text tower.
        """
        import torch

        if not isinstance(texts, torch.Tensor):
            texts = list(texts)
            if len(texts) not in (1, pixel_values.shape[0]):
                raise ValueError(
                    f"texts: {len(texts)} texts for {pixel_values.shape[0]} images; give one per image or one shared"
                )
            with torch.inference_mode():
                texts = self.backend.encode_text(texts)
        elif texts.ndim == 2 and texts.shape[0] not in (1, pixel_values.shape[0]):
            raise ValueError(
                f"texts: {texts.shape[0]} text embeddings for {pixel_values.shape[0]} images; "
                "give one per image or one shared"
            )
        return self.explain_embeddings(self.embed(pixel_values), texts)
