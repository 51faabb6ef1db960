"""One call protocol for CCI and every baseline (pytorch-grad-cam style).

An :class:`Explainer` is built once for a model by name (:func:`build_explainer`, :data:`EXPLAINERS`)
and called on a batch, ``explainer(pixel_values, text_embeds) -> Explanation`` with ``maps``
``(B, H, W)`` at the model's input resolution (CCI's :class:`~.importance.CCIOutput` also carries its
drops, weights and clusters). Every consumer (``explain``, ``cci-bench``, ``covar``, the Space) calls
them the same way; a tower that cannot be explained raises ``ValueError`` at construction. Manual:
docs/guide/cci.md, "One call for CCI and every baseline".

>>> EXPLAINERS
('cci', 'random', 'gradcam', 'grad-eclip', 'maskclip', 'rollout')
>>> TITLES["cci"], TITLES["maskclip"]
('CCI', 'MaskCLIP')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .baselines import BASELINE_TITLES, BASELINES
from .explanation import Explanation

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["EXPLAINERS", "TITLES", "Explanation", "Explainer", "BaselineExplainer", "build_explainer", "shared_texts"]

#: every explanation method, in table order: CCI, then the baselines.
EXPLAINERS: tuple[str, ...] = ("cci", *BASELINES)
#: method name -> title for figures and reports.
TITLES: dict[str, str] = {"cci": "CCI", **BASELINE_TITLES}


class Explainer(Protocol):
    """``explainer(pixel_values (B, 3, H, W), text_embeds (B, E) | (E,)) -> Explanation``;
    ``name`` its key in :data:`EXPLAINERS`, ``title`` its name in figures and reports."""

    name: str
    title: str

    def __call__(self, pixel_values: torch.Tensor, text_embeds: torch.Tensor) -> Explanation: ...


def shared_texts(text_embeds: torch.Tensor, batch: int) -> torch.Tensor:
    """``(B, E)`` text embeddings from one per image, or one for all (``(E,)`` / ``(1, E)``).

    >>> import torch
    >>> shared_texts(torch.ones(3), 2).shape, shared_texts(torch.ones(2, 3), 2).shape
    (torch.Size([2, 3]), torch.Size([2, 3]))
    """
    t = text_embeds if text_embeds.ndim == 2 else text_embeds[None]
    if t.shape[0] not in (1, batch):
        raise ValueError(f"text_embeds: {t.shape[0]} texts for {batch} images; give one per image or one shared")
    return t.expand(batch, -1)


class BaselineExplainer:
    """A baseline of :data:`~.baselines.BASELINES` behind the :class:`Explainer` protocol.

    Args:
        name: a key of :data:`~.baselines.BASELINES`.
        model: the CLIP (or its backend); its tower is checked here (``ValueError`` when it
            cannot be explained).
        **options: passed to the map function (``seed`` of ``random``, ``key_similarity`` of
            ``grad-eclip``).
    """

    def __init__(self, name: str, model: Any, **options: Any) -> None:
        from .backends import get_backend

        if name not in BASELINES:
            raise ValueError(f"method: unknown baseline {name!r}; choose from {list(BASELINES)}")
        self.name = name
        self.title = BASELINE_TITLES[name]
        self.backend = get_backend(model)
        self.options = options
        self._maps: Callable[..., torch.Tensor] = BASELINES[name]

    def __call__(self, pixel_values: torch.Tensor, text_embeds: torch.Tensor) -> Explanation:
        t = shared_texts(text_embeds, pixel_values.shape[0]).to(pixel_values.device)
        return Explanation(self._maps(self.backend, pixel_values, t, **self.options))


def build_explainer(
    name: str,
    model: Any,
    *,
    clusters: int = 7,
    seed: int = 0,
    batch_size: int = 8,
    method: str = "fast",
    tokenizer: Any = None,
) -> Explainer:
    """The explainer ``name`` of :data:`EXPLAINERS` for ``model``.

    Args:
        name: ``"cci"`` or a baseline name.
        model: a CLIP model, a :class:`~concept_grounding.models.clip.ClipHandle`'s ``model``, or a backend.
        clusters, seed, batch_size, method, tokenizer: CCI's ``K``, k-means seed, images per
            chunk, ``"fast"`` / ``"hook"`` and text tokenizer (baselines ignore them; the
            ``random`` floor keeps its own seed 0).

    Raises:
        ValueError: an unknown name, or a tower the method cannot explain.
    """
    if name == "cci":
        from .importance import ConceptClusterImportance

        return ConceptClusterImportance(
            model, num_clusters=clusters, seed=seed, batch_size=batch_size, method=method, tokenizer=tokenizer
        )
    if name not in EXPLAINERS:
        raise ValueError(f"method: unknown method {name!r}; choose from {list(EXPLAINERS)}")
    return BaselineExplainer(name, model)
