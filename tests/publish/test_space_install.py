"""A published Space installs from what travels with it: its ``requirements.txt`` resolves offline,
in a fresh virtual environment, from the Space folder alone.

What this proves, exactly: the fresh environment has no ``concept_grounding``; the Space's
requirements are installed with ``pip install --no-index --find-links <space>/wheels -r
requirements.txt``, the one substitution being the Hub address of the Space's own wheel
(``https://huggingface.co/spaces/<id>/resolve/main/wheels/<file>``, what the Hub's builder
downloads) by the same file in the published folder. No index is reachable, so the package comes
from the folder's wheel, and pip resolves every one of its dependencies (with the requested
extra: ``[space]`` pulls ``tdg``, ``cci``, ``models``, Gradio) against the installed distributions of
the project's environment, which a ``.pth`` file puts on the path without its ``concept_grounding``
(a view of its ``site-packages`` minus the editable install). What it does not prove: that PyPI
serves every dependency at a version that resolves for Python of the Hub's image (the project's
environment stands in for PyPI). Then the Space starts from that environment: the metric Space's
page is built from its module, the demo Space imports its entry points.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from concept_grounding import __version__
from concept_grounding.publish import PublishConfig, WorldSpec, build_repos, plan_repos
from concept_grounding.publish.wheel import package_wheel
from concept_grounding.world import WorldConfig

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
#: the environment of every subprocess: without PYTHONPATH (which may name the checkout's src/)
CLEAN = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The sub_accuracy metric Space and the demo Space, as ``publish`` writes them (wheel built from the checkout)."""
    root = tmp_path_factory.mktemp("spaces")
    wheel = package_wheel(__version__, None, ROOT, root / "wheel")
    config = PublishConfig(
        "cg-test",
        root / "hub",
        WorldSpec(WorldConfig(image_size=32, class_names=("017.Cardinal",)), train_per_class=1, test_per_class=1),
        wheel=wheel.path,
    )
    build_repos(config, [p for p in plan_repos(config) if p.repo.name in ("sub_accuracy", "concept-grounding")])
    return root / "hub" / "spaces"


def _environment_without_the_package(root: Path) -> Path:
    """A folder of links to every entry of this environment's ``site-packages`` except concept_grounding's."""
    site, view = Path(sysconfig.get_paths()["purelib"]), root / "deps"
    view.mkdir()
    for entry in site.iterdir():
        if not re.match(r"(__editable__\.)?concept_grounding", entry.name):
            (view / entry.name).symlink_to(entry)
    return view


def _fresh_venv(root: Path) -> Path:
    """A new virtual environment (no pip of its own: this environment's pip installs into it)."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=CLEAN)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        env=CLEAN,
    ).stdout.strip()
    (Path(purelib) / "_project_deps.pth").write_text(str(_environment_without_the_package(root)) + "\n")
    return python


def _install_offline(python: Path, space: Path, repo_id: str, root: Path) -> str:
    """``pip install --no-index --find-links <space>/wheels -r <the Space's requirements>``, the Space's
    wheel address read as its file in ``space``; returns pip's output."""
    text = (space / "requirements.txt").read_text()
    prefix = f"https://huggingface.co/spaces/{repo_id}/resolve/main/"
    addresses = re.findall(re.escape(prefix) + r"(\S+)", text)
    assert addresses and all((space / a).is_file() for a in addresses), text  # every address is a file it carries
    local = root / "requirements.txt"
    local.write_text(text.replace(prefix, (space.resolve().as_uri() + "/")))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-index",
            "--disable-pip-version-check",
            "--find-links",
            str(space / "wheels"),
            "-r",
            str(local),
        ],
        capture_output=True,
        text=True,
        env=CLEAN,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _run(python: Path, code: str, cwd: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**CLEAN, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("name", "start"),
    [
        (
            "sub_accuracy",
            "from concept_grounding.space.metric_widget import card_title, load_metric, metric_space, "
            "widget_examples\nex = widget_examples(load_metric('.'))\n"
            "metric_space({c: load_metric('.', c) for c in ex}, ex, card_title('.')); print(list(ex))",
        ),
        (
            "concept-grounding",
            "import gradio, diffusers, torch; from concept_grounding.space import build_demo, launch\n"
            "print('demo entry points')",
        ),
    ],
)
def test_a_published_space_installs_offline_from_its_folder_and_starts(published, tmp_path, name, start):
    space = published / name
    python = _fresh_venv(tmp_path)
    assert subprocess.run([str(python), "-c", "import concept_grounding"], capture_output=True, env=CLEAN).returncode
    log = _install_offline(python, space, f"cg-test/{name}", tmp_path)
    installed = re.search(r"Successfully installed (.*)", log).group(1).split()
    assert installed == [f"concept-grounding-{__version__}"], log[-2000:]  # every dependency resolved as present
    where = _run(python, "import concept_grounding; print(concept_grounding.__file__)", tmp_path)
    assert where.startswith(str(tmp_path / "venv")), where  # the Space's wheel, not the checkout
    assert _run(python, start, space)
