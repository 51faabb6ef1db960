"""ZeroGPU helpers: GPU models only on a GPU Space, ``spaces.GPU`` only where ``spaces`` is installed."""

import sys
import types

import pytest

from concept_grounding.tdg.loading import tied_pipeline_class
from concept_grounding.tdg.zerogpu import GPU_TDG_MODELS, gpu_tdg_models, on_gpu, on_spaces_gpu


@pytest.mark.parametrize(
    ("environ", "cuda", "expected"),
    [
        ({}, False, ()),
        ({"SPACES_ZERO_GPU": "false"}, False, ()),
        ({"SPACES_ZERO_GPU": "true"}, False, GPU_TDG_MODELS),
        ({}, True, GPU_TDG_MODELS),
    ],
)
def test_gpu_models_only_on_a_gpu(environ, cuda, expected):
    assert gpu_tdg_models(environ, cuda) == expected
    assert on_spaces_gpu(environ, cuda) is bool(expected)


def test_the_gpu_models_are_tdg_families():
    """FLUX.1-dev's model_index names FluxPipeline, FLUX.2 [klein]'s Flux2KleinPipeline."""
    assert [tied_pipeline_class(c).__name__ for c in ("FluxPipeline", "Flux2KleinPipeline")] == [
        "TiedDiffusionPipeline",
        "TiedFlux2KleinPipeline",
    ]
    assert len(GPU_TDG_MODELS) == 2


def test_on_gpu_uses_spaces_gpu_when_installed(monkeypatch):
    def run(x):
        return x + 1

    monkeypatch.setitem(sys.modules, "spaces", None)  # not installed: the function itself
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None if name == "spaces" else object())
    assert on_gpu(run) is run and on_gpu(duration=5)(run) is run
    calls = []
    fake = types.ModuleType("spaces")

    def gpu(duration):
        def wrap(function):
            calls.append(duration)
            return lambda *a: ("on gpu", function(*a))

        return wrap

    fake.GPU = gpu
    monkeypatch.setitem(sys.modules, "spaces", fake)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    assert on_gpu(duration=60)(run)(1) == ("on gpu", 2) and on_gpu(run)(2) == ("on gpu", 3)
    assert calls == [60, 120]
