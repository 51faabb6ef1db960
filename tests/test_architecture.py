"""Architecture rules over ``src/concept_grounding``.

* **Layers, independence, forbidden imports and no cycle between sibling packages**: the
  import-linter contracts of ``pyproject.toml`` (``[tool.importlinter]``, the newcomer's
  map of docs/guide/development.md), checked on every import statement (top level, inside functions, under
  ``TYPE_CHECKING``) with no ignored import; :func:`test_import_contracts_are_kept` runs
  ``lint-imports``, and :func:`test_contracts_catch_forbidden_imports` shows that it fails
  on a copy of the package with forbidden imports added.
* **No import cycle between modules**: no direct import ``a -> b`` for which ``b`` reaches
  ``a`` back (grimp's import graph, as import-linter builds it; the implicit import of a
  parent package is not an edge).
* **No private reach across modules**: ruff's ``SLF001`` (a private member read through another
  object or module) and ``PLC2701`` (a private name imported from another package), configured
  in ``pyproject.toml`` (``[tool.ruff.lint]``) and run by ``make lint``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "concept_grounding"


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with this checkout's contracts over the package found in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command; lint_imports_command()",
            "--config",
            str(ROOT / "pyproject.toml"),
            "--no-cache",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def broken_contracts(output: str) -> set[str]:
    """The names of the contracts ``lint-imports`` reports broken."""
    names = {
        c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    }
    flat = " ".join(output.split())
    return {name for name in names if f"{name} BROKEN" in flat}


def module_cycles(package: str) -> list[tuple[str, str]]:
    """Direct imports ``a -> b`` between the package's modules that close a cycle (``b`` reaches ``a``)."""
    graph = grimp.build_graph(package, cache_dir=None)
    return sorted(
        (a, b)
        for a in graph.modules
        for b in graph.find_modules_directly_imported_by(a)
        if graph.find_shortest_chain(importer=b, imported=a) is not None
    )


# ----------------------------------------------------------------------------- the rules
def test_import_contracts_are_kept():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert all("ignore_imports" not in c for c in contracts)
    out = lint_imports(SRC)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in out.stdout


def test_no_import_cycle():
    assert module_cycles(PACKAGE) == [], f"import cycles in src/{PACKAGE}"


# ----------------------------------------------------------------------------- the checkers themselves
@pytest.mark.slow
def test_contracts_catch_forbidden_imports(tmp_path):
    """A copy of the package with forbidden imports of each form (relative under
    ``TYPE_CHECKING``, absolute ``from pkg import module`` inside a function, a heavy
    library inside a function) breaks the contracts that forbid them."""
    shutil.copytree(SRC / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    with open(tmp_path / PACKAGE / "world" / "config.py", "a") as f:
        f.write("\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..tdg import pipeline\n")
    with open(tmp_path / PACKAGE / "metrics" / "sub_accuracy.py", "a") as f:
        f.write("\n\ndef _probe():\n    from concept_grounding import loaders\n")
    with open(tmp_path / PACKAGE / "vocabulary.py", "a") as f:
        f.write("\n\ndef _probe():\n    import torch\n")
    with open(tmp_path / PACKAGE / "demo.py", "a") as f:
        f.write("\n\ndef _probe():\n    from .testing import tiny_flux_pipeline\n")
    out = lint_imports(tmp_path)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    broken = broken_contracts(out.stdout)
    assert {
        "Each package imports only the layers below it; packages on one line are independent",
        "metrics import the vocabulary only; plotting draws them",
        "The base install's modules import no extra's library",
        "Only tests import the test helpers (the tiny models production uses live in tdg.tiny, models.clip.tiny)",
    } <= broken, out.stdout[-6000:]
    assert "concept_grounding.world.config -> concept_grounding.tdg.pipeline" in out.stdout


def test_cycle_checker_sees_function_level_and_type_checking_cycles(tmp_path, monkeypatch):
    root = tmp_path / "cycle_probe"
    files = {
        "__init__.py": "",
        "a/__init__.py": "from .x import X\n",
        "a/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .y import Y\nX = 1\n",
        "a/y.py": "def f():\n    from . import z\n",
        "a/z.py": "from cycle_probe.a import x\n",
        "b.py": "from .a import X\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_cycles("cycle_probe") == [
        ("cycle_probe.a.x", "cycle_probe.a.y"),
        ("cycle_probe.a.y", "cycle_probe.a.z"),
        ("cycle_probe.a.z", "cycle_probe.a.x"),
    ]
    (root / "a/z.py").write_text("")
    assert module_cycles("cycle_probe") == []


# ---------------------------------------------------------------------------- lazy loading
#: every sub-package of the package (a folder with an ``__init__.py``)
SUBPACKAGES = sorted(p.parent.name for p in (SRC / PACKAGE).glob("*/__init__.py"))
_IMPORT_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps([m for m in ("torch", "torchvision", "diffusers", "transformers", "open_clip", "gradio", "sklearn",
                              "matplotlib", "datasets", "huggingface_hub") if m in sys.modules]))
"""


def test_the_subpackages_are_all_found():
    assert len(SUBPACKAGES) == 19 and {"evaluation", "models", "world", "commands"} <= set(SUBPACKAGES)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_importing_a_subpackage_imports_no_heavy_library(package):
    """The newcomer's map's claim (docs/guide/development.md): every package loads its names on
    first use, so importing one (in a fresh interpreter) imports neither torch nor any other heavy library."""
    out = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, f"{PACKAGE}.{package}"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], package


def test_a_package_with_names_lists_them_in_its_stub():
    """A sub-package either exports nothing from its ``__init__`` or lists its names in an
    ``__init__.pyi`` that ``lazy_loader.attach_stub`` reads (no eager ``from .x import``)."""
    eager = {}
    for init in (SRC / PACKAGE).glob("*/__init__.py"):
        tree = ast.parse(init.read_text())
        relative = [n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level > 0]
        if relative:
            eager[init.parent.name] = len(relative)
        elif "attach_stub" in init.read_text():
            assert init.with_suffix(".pyi").is_file(), init
    assert eager == {}, eager


def test_only_lazy_packages_have_stub_files():
    """Every ``.pyi`` in the package is a lazy package's ``__init__.pyi`` (Gradio's component
    metaclass writes a stub beside a module that subclasses a component, unless told not to)."""
    stubs = [p for p in (ROOT / "src" / "concept_grounding").rglob("*.pyi") if p.name != "__init__.pyi"]
    assert stubs == []
