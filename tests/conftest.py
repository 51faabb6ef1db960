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
from types import SimpleNamespace

import pytest

# ---- one thread per process, subprocesses included

# The processes the tests start (the wheel's fresh venv running the README's demo and publish,
# the Space server, CLI runs) get one torch / BLAS thread, like the xdist workers themselves
# (root conftest.py): with one worker per core, a thread per core oversubscribes the CPU and
# OpenMP's spin-waiting burns the difference. A value set by the caller wins.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


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
        WorldConfig(
            image_size=32,
            class_names=("017.Cardinal", "073.Blue_Jay", "019.Gray_Catbird", "129.Song_Sparrow", "186.Cedar_Waxwing"),
        ),
        models=("CBM (ind.)", "CBM (joint)", "CEM"),
        train_per_class=2,
        test_per_class=1,
        epochs=1,
        clip_epochs=1,
    )
    result = run_bench_job(replace(config, out=out))  # the job's run, then its save: what run_bench does
    result.save(out)
    return SimpleNamespace(config=config, files=BenchArtifacts(out), results=result.results, result=result)


# ---- shared by the model, TDG and CCI tests (read-only; each checks or documents why sharing is safe)

#: Concepts of the toy concept dataset that the CBM and post-hoc CBM tests train on.
TOY_CONCEPTS = (
    "has_primary_color::red",
    "has_primary_color::blue",
    "has_primary_color::yellow",
    "has_primary_color::green",
)


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
