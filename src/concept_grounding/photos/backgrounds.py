"""Real background photographs shipped inside scikit-image and scikit-learn, with their licences.

Each :class:`Background` is read as a file from its package's folder (found with
``importlib.util.find_spec``: neither package is imported). Its ``habitat`` gives the
CounterAnimals-style split (Wang et al. 2024 split by a CLIP's accuracy; here the split is
defined by the scene): ``"usual"`` scenes are outdoors on vegetation or ground, where a land
animal or bird is commonly photographed (the easy subset); ``"unusual"`` scenes are indoors,
man-made, in space, or the close-up of another object (the hard subset). The grey textures are
used as grey RGB. ``flower`` (a close-up of one flower) first counted as usual; it moved to
unusual after a first measurement on EfficientNet-Lite0 (README, "Real photos"), where with it
the subsets' top-1 differed by 0.07 and their changes against a grey background not at all.

>>> [b.name for b in BACKGROUNDS if b.habitat == "usual"]
['china', 'grass', 'gravel']
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

__all__ = ["Background", "BACKGROUNDS", "background_path", "load_background"]


@dataclass(frozen=True)
class Background:
    """A photograph: ``name``, the ``package`` and ``path`` inside it, its ``licence`` (with the
    author where the package names one) and ``habitat`` (``"usual"`` or ``"unusual"``)."""

    name: str
    package: str
    path: str
    licence: str
    habitat: str


BACKGROUNDS: tuple[Background, ...] = (
    Background("china", "sklearn", "datasets/images/china.jpg", "CC BY 2.0, danielbuechele (Flickr)", "usual"),
    Background("flower", "sklearn", "datasets/images/flower.jpg", "CC BY 2.0, vultilion (Flickr)", "unusual"),
    Background("grass", "skimage", "data/grass.png", "CC0 (CC0Textures)", "usual"),
    Background("gravel", "skimage", "data/gravel.png", "CC0 (CC0Textures)", "usual"),
    Background("coffee", "skimage", "data/coffee.png", "CC0, Rachel Michetti", "unusual"),
    Background("astronaut", "skimage", "data/astronaut.png", "public domain (NASA)", "unusual"),
    Background("rocket", "skimage", "data/rocket.jpg", "public domain (SpaceX)", "unusual"),
    Background("hubble_deep_field", "skimage", "data/hubble_deep_field.jpg", "public domain (NASA)", "unusual"),
    Background("brick", "skimage", "data/brick.png", "CC0 (CC0Textures)", "unusual"),
)


def background_path(background: Background) -> Path:
    """The photograph's file; ``UsageError`` naming the package to install when it is missing."""
    spec = importlib.util.find_spec(background.package)
    if spec is None or not spec.submodule_search_locations:
        extra = "scikit-image" if background.package == "skimage" else "scikit-learn"
        raise UsageError(
            f"the background {background.name!r} ships with {extra}, which is not installed",
            hint='pip install "concept-grounding[photos]"',
        )
    path = Path(next(iter(spec.submodule_search_locations))) / background.path
    if not path.is_file():
        raise UsageError(f"{path} is missing from the installed {background.package}")
    return path


def load_background(background: Background):
    """The photograph as an RGB ``PIL.Image``."""
    from PIL import Image

    return Image.open(background_path(background)).convert("RGB")
