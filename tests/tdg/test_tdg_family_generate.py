"""``generate --model`` with any TDG family member: a saved tiny FLUX.2 [dev] / [klein] folder loads as its
TDG pipeline; a folder of an unsupported pipeline class stops in one line before torch loads a model."""

from __future__ import annotations

import json

import pytest
import torch
from diffusers import Flux2KleinPipeline, Flux2Pipeline

from concept_grounding.cli import main
from concept_grounding.tdg.loading import load_flux_pipeline, tied_pipeline_class
from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline
from concept_grounding.testing import tiny_flux2_pipeline

ARGS = [
    "--classes",
    "Cardinal",
    "--attributes",
    "has_breast_pattern::spotted",
    "--images-per-pairing",
    "1",
    "--steps",
    "2",
    "--size",
    "16",
    "--dtype",
    "float32",
]


@pytest.mark.parametrize(
    ("base", "tied"), [(Flux2Pipeline, TiedFlux2Pipeline), (Flux2KleinPipeline, TiedFlux2KleinPipeline)]
)
def test_generate_model_takes_a_flux2_folder(base, tied, tmp_path):
    folder = tmp_path / "model"
    tiny_flux2_pipeline(base).save_pretrained(folder)  # saved as the base class, as on the Hub
    assert isinstance(load_flux_pipeline(folder), tied)
    out = tmp_path / "out"
    assert main(["generate", "--out", str(out), "--model", str(folder), *ARGS]) == 0
    manifest = json.loads((out / ".tdg_manifest.json").read_text())
    assert manifest["model"] == str(folder.resolve())
    assert len(list(out.rglob("*.png"))) == 2 and (out / ".contact_sheet.png").is_file()  # one image and its sheet


def test_generate_model_refuses_an_unsupported_pipeline_in_one_line(tmp_path, capsys):
    folder = tmp_path / "sd"
    folder.mkdir()
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    assert main(["generate", "--out", str(tmp_path / "out"), "--model", str(folder), *ARGS]) == 2
    err = capsys.readouterr().err.strip()
    assert "--model" in err and "StableDiffusionPipeline, which TDG does not support" in err
    assert "Traceback" not in err
    with pytest.raises(ValueError, match="TDG does not support StableDiffusionPipeline") as caught:
        tied_pipeline_class("StableDiffusionPipeline")
    assert "\n" not in str(caught.value)


def test_the_prompting_baseline_runs_the_base_pipeline(tmp_path):
    """``base_call`` is the base ``__call__`` untied: FLUX.2 [klein]'s own images from the same weights."""
    tied, base = tiny_flux2_pipeline(TiedFlux2KleinPipeline), tiny_flux2_pipeline(Flux2KleinPipeline)
    kw = dict(prompt="a red bird", height=16, width=16, num_inference_steps=2, max_sequence_length=32, output_type="pt")
    ours = tied.base_call(generator=torch.Generator().manual_seed(0), **kw).images
    theirs = base(generator=torch.Generator().manual_seed(0), **kw).images
    assert torch.equal(ours, theirs)
