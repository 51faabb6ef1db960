"""The repos that carry code: the five metric Spaces, the custom pipeline and the Space.

Each is the project's own folder (see :mod:`.sources`) as uploaded: local paths in the
text (``evaluate.load("metrics/sub_accuracy")``, ``custom_pipeline="pipelines/tied_diffusion"``)
become Hub ids, the card's YAML is re-written through ``SpaceCard`` / ``ModelCard``, and
``requirements.txt`` pins the package at the version being released.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .cards import make_card, rewrite_local_paths, save_card
from .wheel import PackageWheel, check_space_requirements, place_wheel, space_requirement

__all__ = ["METRIC_SPACE_GRADIO"]

#: The Gradio version a metric Space runs (its card's ``sdk_version``): the one its widget
#: (:mod:`concept_grounding.space.metric_widget`) is tested with; a test keeps the two equal.
METRIC_SPACE_GRADIO = "6.31.0"

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


def requirement(version: str, extra: str | None = None) -> str:
    """The pinned requirement line of the package.

    >>> requirement("0.1.0", "space")
    'concept-grounding[space]==0.1.0'
    """
    return f"concept-grounding{f'[{extra}]' if extra else ''}=={version}"


def _copy_tree(source: Path, folder: Path, skip: tuple[str, ...] = ()) -> None:
    if not source.is_dir():
        raise FileNotFoundError(f"{source}: the Hub repo source folder is missing")
    shutil.copytree(
        source, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*", *skip), dirs_exist_ok=True
    )


def _requirements(folder: Path, lines: list[str]) -> None:
    (folder / "requirements.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _space_requirements(folder: Path, repo_id: str, wheel: PackageWheel, extra: str | None, why: str) -> list[str]:
    """The Space's requirement lines, checked to resolve (:func:`~.wheel.check_space_requirements`)."""
    lines = [
        f"# {why}",
        "# concept-grounding is on no package index: the Space carries its wheel (wheels/)",
        space_requirement(repo_id, wheel, extra),
    ]
    check_space_requirements(lines, repo_id, wheel)
    return lines


def build_metric_space(source: Path, folder: Path, namespace: str, wheel: PackageWheel) -> None:
    """``metrics/<name>/`` as an ``evaluate`` metric Space: module, ``app.py``, card, wheel, requirements.

    ``evaluate.load("<namespace>/<name>")`` then loads it from the Hub (the examples'
    ``evaluate.load("<name>")`` are rewritten so), and ``evaluate.load(<folder>)`` from disk;
    its Gradio is the card's ``sdk_version`` (:data:`METRIC_SPACE_GRADIO`); the module needs the package's base install
    (no extra: the metrics are numpy formulas): ``requirements.txt`` requires the wheel in ``wheels/``.
    """
    from huggingface_hub import SpaceCard

    name = source.name
    requirements = _space_requirements(
        folder,
        f"{namespace}/{name}",
        wheel,
        None,
        "the metric needs the package's base install; Gradio: the card's sdk_version",
    )
    _copy_tree(source, folder, skip=("requirements.txt", "README.md"))
    paths = {
        f'"metrics/{name}"': f'"{namespace}/{name}"',
        f"'metrics/{name}'": f"'{namespace}/{name}'",
        f'evaluate.load("{name}"': f'evaluate.load("{namespace}/{name}"',
    }
    for py in folder.glob("*.py"):
        py.write_text(rewrite_local_paths(py.read_text(encoding="utf-8"), paths), encoding="utf-8")
    card = SpaceCard.load(source / "README.md")
    data = card.data
    data.sdk, data.app_file = data.sdk or "gradio", data.app_file or "app.py"
    data.sdk_version = data.sdk_version or METRIC_SPACE_GRADIO
    data.tags = sorted(set(data.tags or []) | {"evaluate", "metric"})
    data.license = data.license or "apache-2.0"
    save_card(make_card(SpaceCard, data, rewrite_local_paths(card.text, paths)), folder)
    place_wheel(wheel, folder)
    _requirements(folder, requirements)


def _tdg_card_text(source: Path, hub: str, version: str) -> str:
    """A TDG folder's README with its local path (``"pipelines/<folder>"``) as the Hub id and the
    install line pinned at ``version``."""
    text = (source / "README.md").read_text(encoding="utf-8")
    text = re.sub(rf'custom_pipeline="pipelines/{source.name}",?\s*(#[^\n]*)?', f'custom_pipeline="{hub}",', text)
    text = text.replace(f'"pipelines/{source.name}"', f'"{hub}"')
    return text.replace(
        "(install this repository: `pip install -e .`)",
        f'(install the package first: `pip install "{requirement(version, "tdg")}"`)',
    )


def build_pipeline_repo(source: Path, folder: Path, namespace: str, name: str, version: str) -> None:
    """A ``pipelines/<name>/`` folder (``tied_diffusion``, ``tied_flux2``, ``tied_flux2_klein``) as a
    diffusers custom-pipeline repo.

    ``DiffusionPipeline.from_pretrained(<flux>, custom_pipeline="<namespace>/<name>")``
    downloads its ``pipeline.py``; that file imports the package, so the card says to
    install it first.
    """
    from huggingface_hub import ModelCard, ModelCardData

    _copy_tree(source, folder, skip=("README.md",))
    data = ModelCardData(
        library_name="diffusers",
        license="apache-2.0",
        pipeline_tag="text-to-image",
        tags=["diffusers", "custom-pipeline", "flux", "tied-diffusion-guidance", "counterfactual"],
    )
    save_card(make_card(ModelCard, data, _tdg_card_text(source, f"{namespace}/{name}", version)), folder)
    _requirements(folder, [requirement(version, "tdg")])


def build_block_repo(source: Path, folder: Path, namespace: str, name: str, version: str) -> None:
    """``pipelines/tied_diffusion_block/`` as a Modular Diffusers block repo (``block.py`` and
    ``modular_config.json``): ``ModularPipelineBlocks.from_pretrained("<namespace>/<name>",
    trust_remote_code=True)`` loads it; ``block.py`` imports the package, so the card says to install it."""
    from huggingface_hub import ModelCard, ModelCardData

    _copy_tree(source, folder, skip=("README.md",))
    data = ModelCardData(
        library_name="diffusers",
        license="apache-2.0",
        pipeline_tag="text-to-image",
        tags=["diffusers", "modular-diffusers", "flux", "tied-diffusion-guidance", "counterfactual"],
    )
    save_card(make_card(ModelCard, data, _tdg_card_text(source, f"{namespace}/{name}", version)), folder)
    _requirements(folder, [requirement(version, "tdg")])


def _space_links(text: str) -> str:
    """The Space README's checkout links (``../../docs/screenshots/x.png``) as repo-relative ones."""
    return text.replace("../../docs/screenshots/", "screenshots/")


def build_space(
    source: Path,
    screenshots: Path | None,
    folder: Path,
    repo_id: str,
    wheel: PackageWheel,
    models: list[str],
    datasets: list[str],
) -> None:
    """``spaces/concept-grounding/`` as the Space repo ``repo_id``: it carries ``wheel`` and requires it
    with the Space extra.

    ``models`` / ``datasets``: Hub ids the Space card links (the published bench models and world).
    """
    from huggingface_hub import SpaceCard

    requirements = _space_requirements(
        folder,
        repo_id,
        wheel,
        "space",
        "the Space runs the released package (its Gradio extra); nothing else is needed",
    )
    _copy_tree(source, folder, skip=("requirements.txt", "README.md", "screenshots"))
    if screenshots is not None:
        _copy_tree(screenshots, folder / "screenshots")
    card = SpaceCard.load(source / "README.md")
    data = card.data
    data.models = sorted(set(data.models or []) | set(models)) or None
    data.datasets = sorted(set(data.datasets or []) | set(datasets)) or None
    text = _space_links(card.text)
    if screenshots is None:
        text = re.sub(r"(?s)## Screenshots.*?(?=\n## |\Z)", "", text)
    save_card(make_card(SpaceCard, data, text), folder)
    place_wheel(wheel, folder)
    _requirements(folder, requirements)
