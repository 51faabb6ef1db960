"""Fixtures several test files share, built once per test session (per xdist worker)."""

from __future__ import annotations

import pytest


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
    from concept_grounding.tdg import tiny_flux_pipeline

    return tiny_flux_pipeline(seed=0)


@pytest.fixture(scope="session")
def tiny_inpaint_dir(tmp_path_factory):
    """A folder holding the tiny diffusers inpainting pipeline (``save_tiny_inpainting_pipeline``, seed 0)."""
    from concept_grounding.cci.tiny_inpaint import save_tiny_inpainting_pipeline

    return save_tiny_inpainting_pipeline(tmp_path_factory.mktemp("tiny_inpaint"))
