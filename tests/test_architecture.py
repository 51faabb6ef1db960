"""Architecture rules over ``src/concept_grounding``, read with ``ast`` (nothing is imported).

* **No import cycle.** The graph has one edge per import statement anywhere in a module:
  top level, inside functions, under ``if TYPE_CHECKING:``. ``from pkg import name``
  points at ``pkg.name`` when that is a module of the package, else at ``pkg``; the
  implicit import of a parent package is not an edge (it is how Python loads any
  submodule, not a dependency of the importing module).
* **No private reach across modules.** A module neither imports a private name
  (``from x import _y``, ``import x._y``) from another project module nor reads one
  through a module it imported (``x._y`` where ``x`` is bound by an import to a project
  module). Dunder names are not private. A private *module* (``pkg/_helpers.py``) may be
  imported by the modules of its own package ``pkg`` (that is what the underscore
  says), not from outside it. Reaches into third-party libraries are out of scope here.

``KNOWN_PRIVATE_REACHES`` and ``KNOWN_CYCLES`` list what lives in files owned by other
work in progress; each entry is checked to still exist (a stale entry fails), so the
lists can only shrink.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "concept_grounding"

#: (importing module, "target module:private name") reaches still to be removed, each in
#: a file that another piece of work owns right now.
KNOWN_PRIVATE_REACHES: frozenset[tuple[str, str]] = frozenset()
#: Import cycles still to be broken, each in files that another piece of work owns.
KNOWN_CYCLES: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class ImportRef:
    """One imported thing: the module it resolves to and the name taken from it (or None)."""

    module: str
    name: str | None
    line: int


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


def imports_of(module: str, path: Path, modules: set[str]) -> list[ImportRef]:
    """Every import in ``path`` (all nesting levels) that targets a project module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    refs = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    refs.append(ImportRef(alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    refs.append(ImportRef(sub, None, node.lineno))
                else:
                    refs.append(ImportRef(base, alias.name, node.lineno))
    return refs


def import_graph(files: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> project modules it imports (explicit targets only)."""
    names = set(files)
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for ref in imports_of(module, path, names):
            target = ref.module
            while target not in names and "." in target:  # `import a.b.c` of a non-module attribute
                target = target.rsplit(".", 1)[0]
            if target in names and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


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


# ----------------------------------------------------------------------------- the rules
def test_no_import_cycle():
    found = cycles(import_graph(module_files()))
    new = [c for c in found if tuple(c) not in KNOWN_CYCLES]
    assert new == [], f"import cycles in src/{PACKAGE}: {new}"


@pytest.mark.parametrize("cycle", KNOWN_CYCLES, ids=lambda c: "<->".join(m.rsplit(".", 1)[-1] for m in c))
def test_known_cycles_are_still_there(cycle):
    """Each allowed cycle must still exist; remove the entry when it is broken."""
    assert list(cycle) in cycles(import_graph(module_files())), f"{cycle} is gone: delete it from KNOWN_CYCLES"


def test_no_private_name_crosses_modules():
    found = private_reaches(module_files())
    new = sorted(found - KNOWN_PRIVATE_REACHES)
    assert new == [], f"private names reached across modules (promote them to public names): {new}"


@pytest.mark.parametrize("entry", sorted(KNOWN_PRIVATE_REACHES), ids=lambda e: f"{e[0]}->{e[1]}")
def test_known_private_reaches_are_still_there(entry):
    """Each allowed reach must still exist; remove the entry when its file is fixed."""
    assert entry in private_reaches(module_files()), f"{entry} is gone: delete it from KNOWN_PRIVATE_REACHES"


# ----------------------------------------------------------------------------- the checker itself
def _tmp_package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / PACKAGE
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_checker_sees_function_level_and_type_checking_cycles(tmp_path):
    root = _tmp_package(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "from .x import X\n",
        "a/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .y import Y\nX = 1\n",
        "a/y.py": "def f():\n    from . import z\n",
        "a/z.py": "from concept_grounding.a import x\n",
        "b.py": "from .a import X\n",
    })
    files = module_files(root)
    p = PACKAGE
    assert set(files) == {p, f"{p}.a", f"{p}.a.x", f"{p}.a.y", f"{p}.a.z", f"{p}.b"}
    graph = import_graph(files)
    assert graph[f"{p}.b"] == {f"{p}.a"}  # X is a name, not a module
    assert graph[f"{p}.a"] == {f"{p}.a.x"}
    assert cycles(graph) == [[f"{p}.a.x", f"{p}.a.y", f"{p}.a.z"]]
    graph[f"{p}.a.z"] = set()
    assert cycles(graph) == []


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


#: Which project packages each top-level package may import (the README's "newcomer's map").
BASE = {"vocabulary", "schema", "errors", "extras", "fileio", "hub", "progress"}
ALLOWED_IMPORTS: dict[str, set[str]] = {
    **{name: BASE for name in BASE},
    "__init__": BASE,
    "world": BASE,
    "metrics": {"vocabulary"},
    "plotting": {"metrics"},
    "loaders": BASE,
    "models": BASE,
    "tdg": BASE | {"testing", "models"},
    "testing": BASE | {"models", "tdg"},
    "worldflux": BASE | {"tdg", "world"},
    "judge": BASE | {"tdg", "world"},
    "cci": BASE | {"models", "world", "testing"},
    "bench": BASE | {"world", "loaders", "metrics", "plotting", "models", "evaluation"},
    "evaluation": BASE | {"world", "loaders", "metrics", "plotting", "models"},
    "publish": BASE | {"world"},
    "space": BASE | {"bench", "models", "world", "testing"},
}


def package_imports(src: Path = SRC / PACKAGE) -> dict[str, set[str]]:
    """Top-level project package -> the other top-level packages its modules import
    (every import statement, relative or absolute, anywhere in a module)."""
    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.py"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        me = parts[0]
        package = parts[:-1]  # the package a relative import starts from
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                targets.append(base + (node.module.split(".") if node.module else []))
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE + "."):
                targets.append(node.module.split(".")[1:])
            elif isinstance(node, ast.Import):
                targets += [a.name.split(".")[1:] for a in node.names if a.name.startswith(PACKAGE + ".")]
            for target in targets:
                if target and target[0] != me:
                    graph.setdefault(me, set()).add(target[0])
    return graph


def test_package_imports_follow_the_readme_map():
    graph = package_imports()
    shells = {"commands", "cli"}
    unexpected = {pkg: sorted(deps - ALLOWED_IMPORTS.get(pkg, set()))
                  for pkg, deps in graph.items() if pkg not in shells}
    assert {pkg: deps for pkg, deps in unexpected.items() if deps} == {}


def test_package_map_checker_sees_relative_and_absolute_imports(tmp_path):
    root = tmp_path / PACKAGE
    (root / "low").mkdir(parents=True)
    (root / "high").mkdir()
    (root / "low" / "a.py").write_text("from ..high import b\n")
    (root / "high" / "b.py").write_text("import concept_grounding.vocabulary\nfrom . import c\n")
    assert package_imports(root) == {"low": {"high"}, "high": {"vocabulary"}}
