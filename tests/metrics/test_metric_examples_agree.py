"""A metric's examples are one copy: the first ``compute`` call of its module's docstring (``_KWARGS_DESCRIPTION``)
and of its card (``metrics/<name>/README.md``) pass the arguments of
:data:`concept_grounding.metrics.examples.EXAMPLES`, which the metric Space and the Space's Metrics tab open with.
The calls are read, not run (``ast``): names they use (``names = [...]``) are the literal assignments before them."""

from __future__ import annotations

import ast
import contextlib
import doctest
import importlib.util
import re
from pathlib import Path

import pytest

from concept_grounding.metrics.examples import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
METRICS = sorted(p.name for p in (ROOT / "metrics").iterdir() if (p / "README.md").is_file())


def _first_compute(code: str) -> dict:
    """The keyword arguments of the first ``<x>.compute(...)`` call in ``code``, literal values resolved."""
    names: dict = {}
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            # not a literal (evaluate.load(...), a compute call): not an input
            with contextlib.suppress(Exception):
                names[node.targets[0].id] = eval(
                    compile(ast.Expression(node.value), "<example>", "eval"),
                    {"__builtins__": {}},
                    dict(names),
                )
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "compute":
                return {
                    k.arg: eval(
                        compile(ast.Expression(k.value), "<example>", "eval"),
                        {"__builtins__": {}},
                        dict(names),
                    )
                    for k in call.keywords
                }
    raise AssertionError("no compute(...) call in the example")


def _docstring_code(name: str) -> str:
    spec = importlib.util.spec_from_file_location(f"_example_{name}", ROOT / "metrics" / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    examples = doctest.DocTestParser().get_examples(module._KWARGS_DESCRIPTION)
    return "".join(e.source for e in examples)


def _card_code(name: str) -> str:
    text = (ROOT / "metrics" / name / "README.md").read_text()
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))


def _plain(value):
    """Tuples as lists, as JSON has them."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@pytest.mark.parametrize("name", METRICS)
def test_docstring_card_and_space_examples_are_one_copy(name):
    assert name in EXAMPLES, f"{name}: no example in concept_grounding.metrics.examples.EXAMPLES"
    want = {k: _plain(v) for k, v in EXAMPLES[name].items()}
    assert {k: _plain(v) for k, v in _first_compute(_docstring_code(name)).items()} == want, "docstring"
    assert {k: _plain(v) for k, v in _first_compute(_card_code(name)).items()} == want, "card"


def test_the_reader_sees_a_differing_example():
    assert _first_compute("names = ['a']\nm.compute(predictions=[1], concept_names=names)") == {
        "predictions": [1],
        "concept_names": ["a"],
    }
    assert _first_compute("out = m.compute(predictions=[2])") != {"predictions": [1]}
