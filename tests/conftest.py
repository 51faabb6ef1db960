"""Fixtures several test files share, built once per test session (per xdist worker).

* ``tiny_space_store``: a Space :class:`ResourceStore` whose own model builds are
  :meth:`SpaceBuild.tiny` (a second each instead of ~50 s); the tab handlers' checks
  recompute their answers from whatever model the store holds, so size does not matter.
* ``bench_run``: one small seeded bench job (``run_bench_job``, then ``save``) on five world
  classes (CBM ind. / joint, a CEM, the post-hoc CBM and the world CLIP): ``.config``,
  ``.files`` (its :class:`BenchArtifacts`), ``.results`` and the job's ``.result``; read-only.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

# ---- one thread per process, subprocesses included

# The processes the tests start (the wheel's fresh venv running the README's demo and publish,
# the Space server, CLI runs) get one torch / BLAS thread, like the xdist workers themselves
# (root conftest.py). With 2 workers on 2 cores their default, a thread per core, oversubscribes
# the CPU and OpenMP's spin-waiting burns the difference: test_wheel took 117-122 s of CPU with
# the default and 44-50 s with one thread (same machine, serial). A value set by the caller wins.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

# ---- run order: the longest modules first, so that both xdist workers finish together

#: Test modules taking 2 s or more, longest first (seconds inside a ``make test`` run with
#: 2 workers on the 2-core dev machine, Nov 2026). pyproject's ``--dist loadfile
#: --no-loadscope-reorder`` hands whole modules (module fixtures built once) to whichever
#: worker is free, in collection order; with the long ones first, a late 48 s module cannot
#: leave the other worker idle. Every other module keeps its place after these. Only the
#: order changes, never the set.
LONGEST_FIRST = (
    "test_tdg_acceleration.py",  # 58 s, ~130 s with a cold inductor cache: torch.compile (slow), every diffusers cache
    "test_wheel.py",           # 48 s: build, install, demo --quick and publish in a fresh venv
    "test_space_app.py",       # 29 s: the Space in a subprocess, gradio_client and Chromium
    "test_bench.py",           # 12 s
    "test_byom_distributed.py",  # 9 s: torch.distributed.run with 2 processes
    "test_byom_backbones.py",  # 8 s
    "test_byom_sub.py",        # 7 s
    "test_demo.py",            # 7 s
    "test_cli_hub.py",         # 6 s: one test waits out the 4 s Hub deadline
    "test_cli_fuzz.py",        # 5 s: 129 rows, four in real processes
    "test_cci_commands.py",    # 5 s
    "test_byom_analyse.py",    # 4 s
    "test_space_tabs.py",      # 3 s
    "test_models_cbm.py",      # 3 s
    "test_world_flux.py",      # 3 s
    "test_publish.py",         # 2 s
    "test_loaders_cub.py",     # 2 s
)


def pytest_collection_modifyitems(config, items):
    """Moves the modules of :data:`LONGEST_FIRST` to the front, in that order (a stable sort:
    tests keep their order inside a module and every other module its place after them)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    tests = Path(__file__).parent
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)) if tests in item.path.parents else len(rank))


@pytest.fixture(scope="session")
def tiny_space_store():
    from concept_grounding.space.builds import SpaceBuild
    from concept_grounding.space.resources import ResourceStore

    return ResourceStore(artifacts=None, image_size=64, seed=0, build=SpaceBuild.tiny())


@pytest.fixture(scope="session")
def bench_run(tmp_path_factory):
    from dataclasses import replace

    from concept_grounding.bench import BenchConfig, run_bench_job
    from concept_grounding.bench.artifacts import BenchArtifacts
    from concept_grounding.world import WorldConfig

    out = tmp_path_factory.mktemp("bench")
    config = BenchConfig(
        WorldConfig(image_size=32, class_names=("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird", "129.Song_Sparrow",
                                                "186.Cedar_Waxwing")),
        models=("CBM (ind.)", "CBM (joint)", "CEM"), train_per_class=2, test_per_class=1, epochs=1, clip_epochs=1,
    )
    result = run_bench_job(replace(config, out=out))  # the job's run, then its save: what run_bench does
    result.save(out)
    return SimpleNamespace(config=config, files=BenchArtifacts(out), results=result.results, result=result)


# ---- shared by the model, TDG and CCI tests (read-only; each checks or documents why sharing is safe)

#: Concepts of the toy concept dataset that the CBM and post-hoc CBM tests train on.
TOY_CONCEPTS = ("has_primary_color::red", "has_primary_color::blue", "has_primary_color::yellow",
                "has_primary_color::green")


@pytest.fixture(scope="session")
def toy_concepts():
    """:class:`ConceptTensors` of the toy concept dataset (8 birds per class, 32 px, seed 0) over
    :data:`TOY_CONCEPTS`: 32 images ``(32, 3, 32, 32)``, concepts ``(32, 4)``, labels ``(32,)``.

    Shared by every test that trains on it; teardown fails if a test wrote into the tensors.
    """
    from concept_grounding.models import to_tensors, toy_concept_dataset

    toy = to_tensors(toy_concept_dataset(n_per_class=8, image_size=32, seed=0), list(TOY_CONCEPTS), image_size=32)
    before = [t.clone() for t in toy]
    yield toy
    assert all(a.equal(b) for a, b in zip(before, toy)), "a test modified the shared toy_concepts tensors"


@pytest.fixture(scope="session")
def tiny_flux():
    """The tiny random-weight :class:`TiedDiffusionPipeline` (``tiny_flux_pipeline(seed=0)``), progress bars off.

    Calls do not change it (``test_tdg_pipeline`` checks that the scheduler keeps no per-call
    state); tests that need to modify a pipeline build their own.
    """
    from concept_grounding.testing import tiny_flux_pipeline

    return tiny_flux_pipeline(seed=0)


@pytest.fixture(scope="session")
def tiny_inpaint_dir(tmp_path_factory):
    """A folder holding the tiny diffusers inpainting pipeline (``save_tiny_inpainting_pipeline``, seed 0)."""
    from concept_grounding.testing import save_tiny_inpainting_pipeline

    return save_tiny_inpainting_pipeline(tmp_path_factory.mktemp("tiny_inpaint"))
