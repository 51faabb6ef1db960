"""TDG as a Modular Diffusers block: composes with the Flux family's blocks, loads offline from its
folder through ``ModularPipelineBlocks.from_pretrained(..., trust_remote_code=True)``, and gives the
TDG pipelines' images (tiny models from configs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from diffusers.modular_pipelines import (
    Flux2AutoBlocks,
    Flux2KleinAutoBlocks,
    FluxAutoBlocks,
    ModularPipeline,
    ModularPipelineBlocks,
)
from diffusers.modular_pipelines.flux.encoders import FluxTextEncoderStep

from concept_grounding.tdg import ConstantEta, EtaSchedule
from concept_grounding.tdg.block import (
    BLOCK_SHELL,
    TiedDiffusionLoopStep,
    TiedFlux2AutoBlocks,
    TiedFlux2KleinAutoBlocks,
    TiedFluxAutoBlocks,
    TiedLatentsStep,
)
from concept_grounding.tdg.pipeline_flux2 import TiedFlux2KleinPipeline, TiedFlux2Pipeline
from concept_grounding.testing import (
    tiny_flux2_components,
    tiny_flux2_pipeline,
    tiny_flux_components,
    tiny_flux_pipeline,
)

FOLDER = Path(__file__).resolve().parents[2] / "pipelines" / "tied_diffusion_block"
R, G = "a photo of a blue jay with a yellow crown", "a photo of a bird with a yellow crown"
KW = dict(height=16, width=16, num_inference_steps=4, max_sequence_length=32, output_type="pt")
SCHEDULE = EtaSchedule(0.2, 0.9, 1.0)


def _flux():
    return (
        FluxAutoBlocks,
        tiny_flux_components(0),
        tiny_flux_pipeline(seed=0),
        tiny_flux_pipeline(seed=0).prepare_latents(
            1, 1, 16, 16, torch.float32, "cpu", torch.Generator().manual_seed(0)
        )[0],
        {},
        1e-6,
    )


def _flux2(klein: bool):
    cls = TiedFlux2KleinPipeline if klein else TiedFlux2Pipeline
    latents = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(0))
    # Flux2KleinAutoBlocks is the distilled [klein] (no CFG): the pipeline matches it at guidance_scale 1
    return (
        Flux2KleinAutoBlocks if klein else Flux2AutoBlocks,
        tiny_flux2_components(0, klein=klein),
        tiny_flux2_pipeline(cls, seed=0),
        latents,
        {"guidance_scale": 1.0} if klein else {},
        0.0,
    )


FAMILY = {"flux": _flux, "flux2": lambda: _flux2(False), "flux2_klein": lambda: _flux2(True)}


@pytest.fixture(scope="module")
def loaded_block():
    """The shipped block folder, loaded the way a Hub user loads it (offline: a local folder)."""
    return ModularPipelineBlocks.from_pretrained(str(FOLDER), trust_remote_code=True)


@pytest.mark.parametrize("name", list(FAMILY))
def test_composed_blocks_give_the_tdg_pipelines_images(name, loaded_block):
    auto, components, pipeline, latents, extra, atol = FAMILY[name]()
    blocks = loaded_block.compose(auto())
    modular = blocks.init_pipeline()
    modular.update_components(**{k: v for k, v in components.items() if v is not None})
    modular.set_progress_bar_config(disable=True)
    expected = pipeline(R, G, latents=latents, eta_schedule=SCHEDULE, **extra, **KW)
    # the guide half is overwritten by TiedLatentsStep: guides start from their references' latents
    state = modular(prompt=[R, G], latents=torch.cat([latents, torch.randn_like(latents)]), eta_schedule=SCHEDULE, **KW)
    images = state.get("images")
    torch.testing.assert_close(images[:1], expected.images, atol=atol, rtol=0)
    torch.testing.assert_close(images[1:], expected.guide_images, atol=atol, rtol=0)
    assert state.get("tdg_eta_per_step") == expected.eta_per_step
    assert state.get("tdg_t_per_step") == expected.t_per_step


def test_eta_one_ties_the_pair_and_paper_defaults_are_inputs(loaded_block):
    blocks = loaded_block.compose(Flux2AutoBlocks())
    modular = blocks.init_pipeline()
    modular.update_components(**tiny_flux2_components(0))
    modular.set_progress_bar_config(disable=True)
    images = modular(
        prompt=[R, G], eta_schedule=ConstantEta(1.0), generator=torch.Generator().manual_seed(1), output="images", **KW
    )
    assert torch.equal(images[0], images[1])
    defaults = {p.name: p.default for p in TiedDiffusionLoopStep().inputs}
    assert (defaults["t_min"], defaults["t_max"], defaults["k"], defaults["granularity"]) == (0.2, 0.9, 10.0, "element")


def test_compose_inserts_the_steps_where_the_loop_needs_them():
    plain = FluxAutoBlocks()
    blocks = TiedDiffusionLoopStep().compose(plain)
    assert "tdg_tie" not in plain.sub_blocks["denoise"].sub_blocks["denoise"].sub_blocks  # a copy: diffusers' untouched
    assert "tdg_tie" not in FluxAutoBlocks().sub_blocks["denoise"].sub_blocks["denoise"].sub_blocks
    loop = blocks.sub_blocks["denoise"].sub_blocks["denoise"]
    assert list(loop.sub_blocks) == ["denoiser", "tdg_tie", "after_denoiser"]
    text2image = blocks.sub_blocks["denoise"].sub_blocks["before_denoise"].sub_blocks["text2image"]
    assert list(text2image.sub_blocks)[:2] == ["prepare_latents", "tdg_tied_latents"]
    assert isinstance(text2image.sub_blocks["tdg_tied_latents"], TiedLatentsStep)
    assert list(TiedDiffusionLoopStep().compose(blocks).sub_blocks["denoise"].sub_blocks["denoise"].sub_blocks) == [
        "denoiser",
        "tdg_tie",
        "after_denoiser",
    ]  # composing twice changes nothing


def test_compose_refuses_blocks_without_a_flux_loop_in_one_line():
    with pytest.raises(ValueError, match="FluxTextEncoderStep has no denoising loop") as caught:
        TiedDiffusionLoopStep().compose(FluxTextEncoderStep())
    assert "\n" not in str(caught.value)


def test_shipped_folder_is_what_save_pretrained_writes(tmp_path):
    """``modular_config.json`` is diffusers' own ``save_pretrained`` output; with ``block.py`` beside it
    the folder loads offline (what ``publish`` uploads and a Hub user loads)."""
    TiedDiffusionLoopStep().save_pretrained(tmp_path)
    written = json.loads((tmp_path / "modular_config.json").read_text())
    shipped = json.loads((FOLDER / "modular_config.json").read_text())
    assert written["auto_map"] == shipped["auto_map"] == {"ModularPipelineBlocks": "block.TiedDiffusionLoopStep"}
    shutil.copy(FOLDER / "block.py", tmp_path / "block.py")
    assert (
        type(ModularPipelineBlocks.from_pretrained(str(tmp_path), trust_remote_code=True)).__name__
        == "TiedDiffusionLoopStep"
    )


def test_odd_batch_and_bad_eta_fail_in_one_line(loaded_block):
    blocks = loaded_block.compose(Flux2AutoBlocks())
    modular = blocks.init_pipeline()
    modular.update_components(**tiny_flux2_components(0))
    modular.set_progress_bar_config(disable=True)
    for prompt, schedule, message in ([R], SCHEDULE, "even batch"), ([R, G], lambda t: 2.0, r"eta in \[0, 1\]"):
        with pytest.raises(ValueError, match=message) as caught:
            modular(prompt=prompt, eta_schedule=schedule, **KW)
        assert "\n" not in str(caught.value)


def _run(modular, latents, **extra):
    return modular(prompt=[R, G], latents=latents, eta_schedule=SCHEDULE, output="images", **extra, **KW)


@pytest.mark.parametrize("name", list(FAMILY))
def test_saved_pipeline_reloads_tied(name, loaded_block, tmp_path):
    """``pipe.save_pretrained`` writes the TDG blocks as code (modular_config.json + block.py) beside the
    components; ``ModularPipeline.from_pretrained(..., trust_remote_code=True)`` rebuilds them and makes
    the same images, whole tensors bit for bit (before: diffusers' plain blocks, untied, off by ~0.7)."""
    auto, components, _, latents, extra, _ = FAMILY[name]()
    blocks = loaded_block.compose(auto())
    assert (
        type(blocks)
        is {"flux": TiedFluxAutoBlocks, "flux2": TiedFlux2AutoBlocks, "flux2_klein": TiedFlux2KleinAutoBlocks}[name]
    )
    pipe = blocks.init_pipeline()
    pipe.update_components(**{k: v for k, v in components.items() if v is not None})
    pipe.set_progress_bar_config(disable=True)
    latents = torch.cat([latents, torch.randn_like(latents)])
    expected = _run(pipe, latents, **extra)
    pipe.save_pretrained(str(tmp_path), overwrite_modular_index=True)
    assert (tmp_path / "block.py").read_text() == BLOCK_SHELL
    assert json.loads((tmp_path / "modular_config.json").read_text())["auto_map"] == {
        "ModularPipelineBlocks": f"block.{type(blocks).__name__}"
    }
    assert (
        json.loads((tmp_path / "modular_model_index.json").read_text())["_class_name"] == type(pipe).__mro__[1].__name__
    )  # diffusers' own class name: the reload resolves it in diffusers
    with pytest.raises(ValueError, match="trust_remote_code=True") as caught:  # never silently untied
        ModularPipeline.from_pretrained(str(tmp_path))
    assert "\n" not in str(caught.value)
    reloaded = ModularPipeline.from_pretrained(str(tmp_path), trust_remote_code=True)
    assert type(reloaded.blocks) is type(blocks)
    reloaded.load_components()
    reloaded.set_progress_bar_config(disable=True)
    got = _run(reloaded, latents, **extra)
    torch.testing.assert_close(got, expected, atol=0, rtol=0)
    untied = auto().init_pipeline()
    untied.update_components(**{k: v for k, v in components.items() if v is not None})
    untied.set_progress_bar_config(disable=True)
    assert (_run(untied, latents, **extra)[1] - expected[1]).abs().max() > 1e-2  # the comparison can tell them apart


def test_composed_blocks_are_their_class_rebuilt():
    for auto, tied in (
        (FluxAutoBlocks, TiedFluxAutoBlocks),
        (Flux2AutoBlocks, TiedFlux2AutoBlocks),
        (Flux2KleinAutoBlocks, TiedFlux2KleinAutoBlocks),
    ):
        composed = TiedDiffusionLoopStep().compose(auto())
        rebuilt = tied()
        assert _tree(composed) == _tree(rebuilt) != _tree(auto())  # and building it left diffusers' blocks untied
        assert "tdg_tie" not in str(_tree(auto()))


def test_saving_blocks_changed_after_compose_fails_in_one_line(tmp_path):
    blocks = TiedDiffusionLoopStep().compose(Flux2AutoBlocks())
    blocks.sub_blocks.pop("text_encoder")
    with pytest.raises(ValueError, match="changed after compose") as caught:
        blocks.save_pretrained(str(tmp_path))
    assert "\n" not in str(caught.value) and not (tmp_path / "modular_config.json").exists()


def test_shipped_block_file_is_the_shell():
    assert (FOLDER / "block.py").read_text() == BLOCK_SHELL


def _tree(blocks):
    return tuple(
        (name, type(child).__name__, _tree(child))
        for name, child in (getattr(blocks, "sub_blocks", None) or {}).items()
    )
