"""The ``--models`` entries of ``concept-grounding cci-bench`` and ``diagnose``: presets expanded,
each checked through the one resolver and loaded as a CLIP or ImageNet classifier. Manual:
docs/guide/cci.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from ..models.clip import ClipHandle

__all__ = [
    "PRESETS",
    "expand_model_names",
    "resolve_table_model",
    "resolve_table_models",
    "load_table_model",
    "load_table_models",
]

#: named model lists for ``--models``. ``paper``: the CLIP variants the CCI / COVAR summary in
#: ``shared/seeds`` names (open_clip ``arch:pretrained``); the paper compares 18, the summary
#: names these, so the preset is partial.
PRESETS: dict[str, tuple[str, ...]] = {
    "paper": (
        "ViT-B-32:openai",
        "ViT-B-16:openai",
        "ViT-L-14:openai",
        "ViT-B-32:datacomp_xl_s13b_b90k",
        "ViT-B-16:datacomp_xl_s13b_b90k",
        "ViT-L-14:datacomp_xl_s13b_b90k",
        "ViT-H-14-quickgelu:dfn5b",
        "ViT-bigG-14:laion2b_s39b_b160k",
    ),
}


def expand_model_names(names: Sequence[str]) -> list[str]:
    """``--models`` with presets expanded (a preset name stands for its list)."""
    out: list[str] = []
    for name in names:
        out += list(PRESETS.get(name, (name,)))
    return out


def resolve_table_model(name: str, argument: str = "--models") -> None:
    """Check that one ``--models`` entry (module docstring) can load, through the one resolver
    (:func:`~concept_grounding.hub.resolve_model_spec`) and without loading it: one line naming
    ``argument`` otherwise."""
    from ..hub import IMAGENET_CLASSIFIERS, resolve_model_spec
    from .loading import RANDOM_CLIP, builtin_clip, random_clip_seed

    if name == "tiny" or name.startswith("tiny:"):
        raise UsageError(
            f"{name!r} is now spelled {RANDOM_CLIP}{name[4:]} (random weights: mechanics only)", argument=argument
        )
    if builtin_clip(name):
        if name.startswith(RANDOM_CLIP):
            random_clip_seed(name, argument)
        return
    if name in IMAGENET_CLASSIFIERS:
        resolve_model_spec(name, argument)
        return
    arch, _, pretrained = name.partition(":")
    if pretrained and not Path(name).exists() and not arch.endswith(".py"):  # arch:tag, not file.py:factory
        resolve_model_spec(arch, argument, pretrained=pretrained, accept=("folder", "name"), shipped=("clip",))
        return
    resolve_model_spec(name, argument, accept=("folder", "name"), shipped=("clip",))


def resolve_table_models(names: Sequence[str], argument: str = "--models") -> None:
    """:func:`resolve_table_model` of every entry, presets expanded (none: ``UsageError``)."""
    names = expand_model_names(names)
    if not names:
        raise UsageError("name at least one model", argument=argument)
    for name in names:
        resolve_table_model(name, argument)


def load_table_model(name: str, image_size: int = 64, device: str = "cpu") -> ClipHandle:
    """One ``--models`` entry as a :class:`~concept_grounding.models.clip.ClipHandle` (module
    docstring); ``UsageError`` naming ``--models`` when it cannot load offline."""
    from ..hub import IMAGENET_CLASSIFIERS
    from .loading import builtin_clip, load_explainable_clip

    resolve_table_model(name)
    if name in IMAGENET_CLASSIFIERS:  # a CNN classifier: Table 1's Grad-CAM and random rows (.classifier)
        from ..models.imagenet import load_imagenet_classifier

        return load_imagenet_classifier(name, device)
    if builtin_clip(name):
        return load_explainable_clip(name, image_size, device, argument="--models")
    try:
        from ..models.clip.loading import load_named_clip

        arch, _, pretrained = name.partition(":")
        if pretrained and not Path(name).exists() and not arch.endswith(".py"):  # arch:tag, not file.py:factory
            return load_named_clip(arch, "--models", pretrained=pretrained, device=device)
        return load_named_clip(name, "--models", device=device)
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - every loader failure becomes one line naming the flag
        raise UsageError(
            f"{name!r} cannot be loaded offline: {str(err).splitlines()[0] if str(err) else type(err).__name__}",
            argument="--models",
        ) from None


def load_table_models(names: Sequence[str], image_size: int = 64, device: str = "cpu") -> list[tuple[str, ClipHandle]]:
    """Every ``--models`` entry loaded before any work starts (presets expanded)."""
    names = expand_model_names(names)
    if not names:
        raise UsageError("name at least one model", argument="--models")
    return [(name, load_table_model(name, image_size, device)) for name in names]
