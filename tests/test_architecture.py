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
* **No private reach across modules** (read with ``ast``; import-linter has no such
  contract): a module neither imports a private name (``from x import _y``,
  ``import x._y``) from another project module nor reads one through a module it
  imported (``x._y`` where ``x`` is bound by an import to a project module). Dunder names
  are not private. A private *module* (``pkg/_helpers.py``) may be imported by the modules
  of its own package ``pkg`` (that is what the underscore says), not from outside it.
  Reaches into third-party libraries are out of scope here.
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


def module_files(root: Path = SRC / PACKAGE) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """Absolute name of a (possibly relative) import target seen from ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_parts(module: str, target: str) -> set[tuple[str, str]]:
    """Private components of the dotted ``target`` that ``module`` may not reach: a private
    ``pkg._x`` is open to the modules inside ``pkg`` only."""
    parts = target.split(".")
    out = set()
    for i, part in enumerate(parts[1:], start=1):
        owner = ".".join(parts[:i])
        if _is_private(part) and not module.startswith(owner + "."):
            out.add((module, f"{owner}:{part}"))
    return out


def private_reaches(files: dict[str, Path]) -> set[tuple[str, str]]:
    """``(module, "target:name")`` for every private name a module takes from another."""
    names = set(files)
    found = set()
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        bound: dict[str, str] = {}  # local name -> project module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] != PACKAGE:
                        continue
                    found |= _private_parts(module, alias.name)
                    if alias.asname:
                        bound[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module)
                if base.split(".")[0] != PACKAGE:
                    continue
                found |= _private_parts(module, base)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    if _is_private(alias.name) and sub != module:
                        found.add((module, f"{base}:{alias.name}"))
                    if sub in names:
                        bound[alias.asname or alias.name] = sub
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _is_private(node.attr):
                target = bound.get(node.value.id)
                if target is not None and target != module:
                    found.add((module, f"{target}:{node.attr}"))
    return found


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with this checkout's contracts over the package found in ``src``."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()",
                           "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def broken_contracts(output: str) -> set[str]:
    """The names of the contracts ``lint-imports`` reports broken."""
    names = {c["name"] for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]}
    flat = " ".join(output.split())
    return {name for name in names if f"{name} BROKEN" in flat}


def module_cycles(package: str) -> list[tuple[str, str]]:
    """Direct imports ``a -> b`` between the package's modules that close a cycle (``b`` reaches ``a``)."""
    graph = grimp.build_graph(package, cache_dir=None)
    return sorted((a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                  if graph.find_shortest_chain(importer=b, imported=a) is not None)


# ----------------------------------------------------------------------------- the rules
def test_import_contracts_are_kept():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert all("ignore_imports" not in c for c in contracts)
    out = lint_imports(SRC)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in out.stdout


def test_no_import_cycle():
    assert module_cycles(PACKAGE) == [], f"import cycles in src/{PACKAGE}"


def test_no_private_name_crosses_modules():
    found = private_reaches(module_files())
    assert sorted(found) == [], f"private names reached across modules (promote them to public names): {sorted(found)}"


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
    assert {"Each package imports only the layers below it; packages on one line are independent",
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
    assert module_cycles("cycle_probe") == [("cycle_probe.a.x", "cycle_probe.a.y"), ("cycle_probe.a.y", "cycle_probe.a.z"),
                                            ("cycle_probe.a.z", "cycle_probe.a.x")]
    (root / "a/z.py").write_text("")
    assert module_cycles("cycle_probe") == []


def _tmp_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_sees_private_imports_and_attribute_reaches(tmp_path):
    root = _tmp_package(tmp_path, {
        "__init__.py": "",
        "m.py": "_hidden = 1\nclass K:\n    _slot = 2\ndef __getattr__(n):\n    return n\n",
        "a.py": "from .m import _hidden\n",
        "b.py": "def f():\n    from . import m\n    return m._hidden\n",
        "c.py": "import concept_grounding.m as mm\nx = mm.K()._slot\ny = mm.__getattr__\n",
        "d.py": "from .m import K\nclass L:\n    _own = 1\n    def g(self):\n        return self._own, K._slot\n",
        "e.py": "import numpy as np\nx = np._NoValue\n",
        "pkg/__init__.py": "",
        "pkg/_util.py": "def helper():\n    pass\n",
        "pkg/user.py": "from ._util import helper\n",
        "outsider.py": "from .pkg._util import helper\n",
    })
    found = private_reaches(module_files(root))
    p = PACKAGE
    assert found == {(f"{p}.a", f"{p}.m:_hidden"), (f"{p}.b", f"{p}.m:_hidden"), (f"{p}.outsider", f"{p}.pkg:_util")}


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
    assert len(SUBPACKAGES) == 18 and {"evaluation", "models", "world", "commands"} <= set(SUBPACKAGES)


@pytest.mark.parametrize("package", SUBPACKAGES)
def test_importing_a_subpackage_imports_no_heavy_library(package):
    """The newcomer's map's claim (docs/guide/development.md): every package loads its names on
    first use, so importing one (in a fresh interpreter) imports neither torch nor any other heavy library."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, f"{PACKAGE}.{package}"], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(SRC)})
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
    from concept_grounding.curation.annotate_app import answer_radio

    answer_radio.cache_clear()
    answer_radio()
    stubs = [p for p in (ROOT / "src" / "concept_grounding").rglob("*.pyi") if p.name != "__init__.pyi"]
    assert stubs == []
