"""ConceptBed on concept folders (real concepts): our layout and ConceptBed's published one, with
oracles trained on the folder and validated on its held-out real images."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from concept_grounding.cli import main
from concept_grounding.conceptbed import (
    ConceptBedConfig,
    ConceptWorld,
    export_world_concepts,
    run_conceptbed,
    task_species,
)
from concept_grounding.vocabulary import load_vocabulary

CLASSES = task_species(load_vocabulary(), "object")[:3]
SMALL = dict(concepts=3, m=4, images=5, capacity="medium", oracle_epochs=20, learners=("Original",))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Three held-out species of the world written as a concept folder (4 train, 10 real each)."""
    root = tmp_path_factory.mktemp("concepts")
    cw = ConceptWorld(m=4, real=10, classes=CLASSES)
    export_world_concepts(root, cw.concepts("object", 3))
    return root


def test_a_concept_folder_runs_with_its_own_validated_oracle(folder):
    result = run_conceptbed(ConceptBedConfig(concept_folder=str(folder), tasks=("object",), **SMALL))
    r = result.results
    assert r["oracles"]["object"]["accuracy"] >= 0.95
    assert r["table1"]["Original"]["object"] == pytest.approx(0.0, abs=1e-12)
    assert r["concepts"]["object"] == sorted(r["concepts"]["object"], key=CLASSES.index)


def test_conceptbeds_published_layout(tmp_path):
    """``pacs/<domain>/<class>/*``: two domains drawn as flat colours with noise (an oracle tells them apart)."""
    rng = np.random.default_rng(0)
    for domain, colour in (("cartoon", (220, 40, 40)), ("sketch", (40, 40, 220))):
        folder = tmp_path / "pacs" / domain / "dog"
        folder.mkdir(parents=True)
        for i in range(14):  # 4 to learn from, 10 real (5 train the oracle, 5 held out)
            pixels = np.clip(np.array(colour) + rng.normal(0, 20, (40, 48, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(folder / f"{i:02d}.png")
    result = run_conceptbed(ConceptBedConfig(concept_folder=str(tmp_path), tasks=("domain",), **SMALL))
    assert result.results["oracles"]["domain"]["accuracy"] == 1.0
    assert result.results["table1"]["Original"]["domain"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        (["--tasks", "fine_grained_attribute"], "--tasks"),
        (["--tasks", "object", "composition"], "--tasks"),
        (["--learners", "exact"], "--learners"),
    ],
)
def test_what_a_folder_cannot_give_is_one_line(folder, tmp_path, capsys, args, argument):
    out = tmp_path / "o"
    assert main(["conceptbed", "--concept-folder", str(folder), "--out", str(out), "--m", "4", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argument in err[0] and not out.exists()
