"""The released package, as a new user gets it: build the wheel, install it into a fresh
virtual environment without the checkout, and use every published form from a temporary
folder.

The fresh environment reuses the project environment's dependencies through a ``.pth``
file that names its ``site-packages`` (a plain path entry: the ``.pth`` files there,
such as the editable install's pointer to ``src/``, are not processed), and the wheel is
installed with ``--no-deps``. The manual's "Install" (docs/guide/install.md) and "Publish to
the Hub" (docs/hub.md) commands run as written, with two offline substitutions: ``python -m build`` gets
``--no-isolation`` (no index to fetch setuptools from) and ``pip install <wheel>`` gets
``--no-deps`` (dependencies reused). ``pip install concept-grounding`` / ``pip install .``
and ``--push`` are not run (network; the push is tested with a fake ``HfApi`` in
``tests/publish/test_publish.py``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


#: the pages whose commands this test runs: the guide's Install section, the Hub page's Publish section
INSTALL_PAGE = ROOT / "docs" / "guide" / "install.md"
PUBLISH_PAGE = ROOT / "docs" / "hub.md"


def page_commands(page: Path, section: str) -> list[str]:
    """The command lines of the ```bash blocks under ``## <section>`` of ``page`` (comments stripped)."""
    text = page.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M)
    assert match, f"{page.relative_to(ROOT)} has no '## {section}' section"
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", match.group(1), flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def _copy_checkout(dest: Path) -> Path:
    """The files git would ship (tracked + untracked, not ignored): a clean clone's tree."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _run(cmd: list[str] | str, cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, shell=isinstance(cmd, str), capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def make_release(base: Path):
    """(dist folder, fresh venv bin folder, env, work folder) after the guide's Install block."""
    source = _copy_checkout(base / "clone")
    work = base / "work"
    work.mkdir(parents=True)
    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, dict(os.environ))
    purelib = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (purelib / "_project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        VIRTUAL_ENV=str(venv),
        HF_HOME=str(base / "hf_home"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_EVALUATE_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MPLBACKEND="Agg",
        GRADIO_ANALYTICS_ENABLED="False",
    )
    for line in page_commands(INSTALL_PAGE, "Install"):
        argv = shlex.split(line)
        if argv[:3] == ["python", "-m", "build"]:
            _run(
                [
                    sys.executable,
                    "-m",
                    "build",
                    "--no-isolation",
                    "--outdir",
                    str(work / "dist"),
                    *argv[3:],
                    str(source),
                ],
                work,
                env,
            )
        elif argv[:2] == ["twine", "check"]:
            dists = sorted(str(p) for p in (work / "dist").iterdir())
            _run([sys.executable, "-m", "twine", "check", "--strict", *dists], work, env)
        elif argv[:2] == ["pip", "install"] and argv[-1].endswith(".whl"):
            wheel = next((work / "dist").glob("*.whl"))
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "--python",
                    str(venv / "bin" / "python"),
                    "install",
                    "--no-deps",
                    "--no-index",
                    "--quiet",
                    str(wheel),
                ],
                work,
                env,
            )
        elif argv[:2] == ["pip", "install"]:
            continue  # the index or the clone itself: not offline-testable here
        else:
            _run(line, work, env, timeout=900)
    return work / "dist", venv / "bin", env, work


def check_wheel_and_sdist_are_complete_and_versioned(release):
    from concept_grounding import __version__

    dist, _, _, _ = release
    wheel = next(dist.glob("*.whl"))
    sdist = next(dist.glob("*.tar.gz"))
    assert wheel.name == f"concept_grounding-{__version__}-py3-none-any.whl"
    assert sdist.name == f"concept_grounding-{__version__}.tar.gz"
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "concept_grounding/data/cub_vocabulary.json",
        "concept_grounding/cli.py",
        "concept_grounding/_hub_sources/metrics/sub_accuracy/sub_accuracy.py",
        "concept_grounding/_hub_sources/pipelines/tied_diffusion/pipeline.py",
        "concept_grounding/_hub_sources/pipelines/tied_flux2/pipeline.py",
        "concept_grounding/_hub_sources/pipelines/tied_flux2_klein/pipeline.py",
        "concept_grounding/_hub_sources/pipelines/tied_diffusion_block/block.py",
        "concept_grounding/_hub_sources/pipelines/tied_diffusion_block/modular_config.json",
        "concept_grounding/_hub_sources/spaces/concept-grounding/app.py",
        "concept_grounding/_hub_sources/spaces/concept-grounding/screenshots/metrics.png",
    ):
        assert needed in names, needed
    shipped = (
        [n for n in (ROOT / "src" / "concept_grounding" / "assets").rglob("*") if n.is_file()]
        if (ROOT / "src" / "concept_grounding" / "assets").is_dir()
        else []
    )
    for path in shipped:
        rel = path.relative_to(ROOT / "src").as_posix()
        if "__pycache__" not in rel:
            assert rel in names, f"shipped asset {rel} is missing from the wheel"
    assert not [n for n in names if n.startswith(("tests/", "conftest")) or "/tests/" in n or "test_" in n]
    assert not [n for n in names if "experiments/" in n]  # research code stays beside the benchmark scripts
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "concept-grounding = concept_grounding.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def check_installed_package_is_the_wheel_not_the_checkout(release):
    from concept_grounding import __version__

    _, bin_dir, env, work = release
    code = (
        "import concept_grounding, importlib.metadata as m, json, sys; print(json.dumps("
        "[concept_grounding.__file__, concept_grounding.__version__, m.version('concept-grounding'), sys.path]))"
    )
    where, version, meta, path = json.loads(_run([str(bin_dir / "python"), "-c", code], work, env).stdout)
    assert str(ROOT) not in where and str(bin_dir.parent) in where
    assert version == meta == __version__
    assert not [p for p in path if p.startswith(str(ROOT / "src")) or p == str(ROOT)]


def check_every_command_help(release):
    """``concept-grounding --help`` through the installed script, then each command's ``--help``
    through the installed ``cli.main`` (one process: the parser is the same)."""
    _, bin_dir, env, work = release
    top = _run([str(bin_dir / "concept-grounding"), "--help"], work, env).stdout
    code = """
import contextlib, io, json
from concept_grounding.cli import COMMANDS, main
helps = {}
for name in COMMANDS:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            main([name, "--help"])
        except SystemExit as stop:
            assert stop.code == 0, (name, stop.code)
    helps[name] = buf.getvalue()
print(json.dumps(helps))
"""
    helps = json.loads(_run([str(bin_dir / "python"), "-c", code], work, env).stdout)
    assert "publish" in helps and "demo" in helps
    for name, text in helps.items():
        assert name in top and f"concept-grounding {name}" in text and "--help" in text, name


def check_quick_demo_ran_from_the_wheel(release):
    _, _, _, work = release
    report = work / "reports" / "demo"
    assert (report / "README.md").is_file()
    assert (report / "bench" / "results.json").is_file() and any(
        (report / "bench" / "models").glob("*/model.safetensors")
    )


def check_published_forms_load_the_way_users_load_them(release, tmp_path):
    """The Hub page's publish commands, then evaluate.load, custom_pipeline and load_dataset on the folders."""
    _, bin_dir, env, work = release
    for line in page_commands(PUBLISH_PAGE, "Publish to the Hub"):
        if "--push" not in line:
            _run(line, work, env, timeout=900)
    hub = work / "hub"
    script = tmp_path / "use.py"
    script.write_text(f"""
import json, sys
import datasets, evaluate
from diffusers import DiffusionPipeline
from huggingface_hub import DatasetCard
import concept_grounding
from concept_grounding.testing import tiny_flux_pipeline

hub = {str(hub)!r}
assert {str(ROOT)!r} not in concept_grounding.__file__
metric = evaluate.load(hub + "/spaces/sub_accuracy")
names = ["has_bill_shape::dagger", "has_bill_shape::needle"]
out = metric.compute(predictions=[[0.2, 0.9], [0.7, 0.4]], reference_classes=["017.Cardinal", "073.Blue_Jay"],
                     target_attributes=["has_bill_shape::needle"] * 2,
                     removed_attributes=[["has_bill_shape::dagger"]] * 2, concept_names=names)
assert (out["s_plus"], out["s_minus"]) == (0.5, 0.5), out

tiny_flux_pipeline().save_pretrained({str(tmp_path / "tiny_flux")!r})
pipe = DiffusionPipeline.from_pretrained({str(tmp_path / "tiny_flux")!r},
                                         custom_pipeline=hub + "/models/tied_diffusion", trust_remote_code=True)
assert type(pipe).__name__ == "TiedDiffusionPipeline", type(pipe)

for name, split in (("bird-world", None), ("bird-world-sub", "test")):
    folder = hub + "/datasets/" + name
    ds = datasets.load_dataset(folder, split=split)
    card = DatasetCard.load(folder + "/README.md")
    declared = datasets.Features._from_yaml_list(card.data.dataset_info["features"])
    for part in (ds.values() if split is None else [ds]):
        assert part.features == declared, (name, part.features, declared)

import runpy  # the published Space's app.py builds its page from the installed package alone
space = runpy.run_path(hub + "/spaces/concept-grounding/app.py", run_name="published_space")
import gradio
assert isinstance(space["demo"], gradio.Blocks)
print("ok")
""")
    assert _run([str(bin_dir / "python"), str(script)], tmp_path, env).stdout.strip().endswith("ok")
    marker = json.loads((hub / ".concept-grounding-publish.json").read_text())
    assert any(r["name"].startswith("world-cbm") for r in marker["repos"])  # the demo's bench models


def test_release_as_a_new_user_gets_it(tmp_path):
    """One build for every check (a module fixture would be built once per xdist worker)."""
    release = make_release(tmp_path / "release")
    check_wheel_and_sdist_are_complete_and_versioned(release)
    check_installed_package_is_the_wheel_not_the_checkout(release)
    check_every_command_help(release)
    check_quick_demo_ran_from_the_wheel(release)
    uses = tmp_path / "uses"
    uses.mkdir()
    check_published_forms_load_the_way_users_load_them(release, uses)
