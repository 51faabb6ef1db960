"""The top-level surface: the names a user starts from, one import away, loaded on first use.

Every lazy package (``lazy_loader.attach_stub`` over its ``__init__.pyi``) imports no heavy
library until a name is reached, and every name it lists resolves.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import concept_grounding

#: the names a user starts from (README); everything else lives in its sub-package
SURFACE = {
    "Vocabulary",
    "load_vocabulary",
    "BirdWorld",
    "WorldConfig",
    "load_cub",
    "load_sub",
    "sub_accuracy",
    "concept_existence",
    "concept_location",
    "concept_global_importance",
    "concept_confidence_deviation",
    "tdg_prompts",
    "schedule_for_attribute",
    "TiedDiffusionPipeline",
    "evaluate_sub",
    "load_sub_source",
    "load_clip",
    "ClipHandle",
    "ConceptClusterImportance",
    "__version__",
}
LAZY_PACKAGES = [
    "concept_grounding",
    "concept_grounding.tdg",
    "concept_grounding.models",
    "concept_grounding.cci",
    "concept_grounding.testing",
    "concept_grounding.bench",
    "concept_grounding.judge",
    "concept_grounding.metrics",
    "concept_grounding.loaders",
    "concept_grounding.world",
    "concept_grounding.evaluation",
    "concept_grounding.publish",
    "concept_grounding.worldflux",
    "concept_grounding.learners",
    "concept_grounding.photos",
]
LIGHT = ["concept_grounding.extras", "concept_grounding.space"]
HEAVY = ("torch", "diffusers", "transformers", "open_clip", "gradio", "sklearn", "matplotlib")

_PROBE = """
import importlib, json, sys
packages = [importlib.import_module(name) for name in sys.argv[1:]]
heavy_after_import = [m for m in %r if m in sys.modules]
unresolved = {p.__name__: [n for n in p.__all__ if n != "__version__" and getattr(p, n, None) is None]
              for p in packages}
print(json.dumps({"heavy": heavy_after_import, "unresolved": unresolved,
                  "dir": {p.__name__: sorted(set(p.__all__) - set(dir(p)) - {"__version__"}) for p in packages[:%d]}}))
""" % (HEAVY, len(LAZY_PACKAGES))  # noqa: UP031 - the probe's own braces rule out format()


def test_top_level_exposes_the_starting_names():
    assert set(concept_grounding.__all__) == SURFACE
    assert concept_grounding.sub_accuracy is __import__("concept_grounding.metrics", fromlist=["x"]).sub_accuracy
    assert concept_grounding.BirdWorld.__module__ == "concept_grounding.world.world"


@pytest.mark.slow
def test_lazy_packages_import_nothing_heavy_and_every_name_resolves():
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *LAZY_PACKAGES, *LIGHT], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    assert all(not names for names in result["unresolved"].values()), result["unresolved"]
    assert all(not names for names in result["dir"].values()), result["dir"]


def test_a_name_whose_extra_is_missing_says_which_to_install(monkeypatch):
    from concept_grounding import extras

    monkeypatch.setattr(extras, "missing_modules", lambda extra: ["diffusers"] if extra == "tdg" else [])
    with pytest.raises(extras.MissingExtraError) as err:
        concept_grounding.__getattr__("TiedDiffusionPipeline")
    message = str(err.value)
    assert "\n" not in message and message.endswith('pip install "concept-grounding[tdg]"'), message
    assert concept_grounding.__getattr__("load_vocabulary") is concept_grounding.load_vocabulary


def test_the_space_says_which_extra_to_install(monkeypatch):
    from concept_grounding import extras, space

    monkeypatch.setattr(extras, "missing_modules", lambda extra: ["gradio"])
    with pytest.raises(
        extras.MissingExtraError, match=r"the Space needs the \[space\] extra .*concept-grounding\[space\]"
    ):
        space.build_demo()
