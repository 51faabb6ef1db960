"""The learners' loop on the tiny Flux: hooks that remove themselves, the global random state left as
it was, gradient accumulation and the schedule, instance and class images in one forward, float32
master weights under bf16, and the user's own class images."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from concept_grounding.errors import UsageError
from concept_grounding.learners import LearnConfig
from concept_grounding.learners.train import Latents, chunk_losses, prepare_trainer, training_step

ROOT = Path(__file__).resolve().parents[2]


def _tiny():
    from diffusers import FluxPipeline

    from concept_grounding.tdg.tiny import tiny_flux_pipeline

    pipe = tiny_flux_pipeline(FluxPipeline, seed=1)
    pipe.tokenizer_2.model_max_length = 32
    return pipe


def _latents(seed: int = 0) -> Latents:
    g = torch.Generator().manual_seed(seed)
    return Latents(torch.randn(4, 1, 16, 16, generator=g), 0.1 * torch.rand(4, 1, 16, 16, generator=g))


def _config(method: str, **kw) -> LearnConfig:
    return LearnConfig(**{"method": method, "images": "unused", "batch": 2, "rank": 2, "lr": 1e-2, **kw})


def _hooks(pipe) -> int:
    return sum(len(getattr(pipe, e).get_input_embeddings()._forward_hooks) for e in ("text_encoder", "text_encoder_2"))


def test_the_placeholder_hooks_are_removed_on_close_and_the_rows_kept():
    pipe = _tiny()
    with prepare_trainer(pipe, _config("textual_inversion", init_word="bird")) as trainer:
        assert _hooks(pipe) == 2
        training_step(trainer, 0, _latents())
        with torch.no_grad():
            hooked = pipe.encode_prompt("a photo of <v*>", max_sequence_length=32)[:2]
        rows = {k: v.detach().clone() for k, v in trainer.rows.items()}
    assert _hooks(pipe) == 0
    for enc, row in rows.items():
        assert torch.equal(getattr(pipe, enc).get_input_embeddings().weight[-1], row)
    with torch.no_grad():
        plain = pipe.encode_prompt("a photo of <v*>", max_sequence_length=32)[:2]
    for a, b in zip(hooked, plain):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("method", ["lora", "textual_inversion"])
def test_setting_up_and_training_leave_the_global_random_state_alone(method):
    pipe = _tiny()
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    trainer = prepare_trainer(pipe, _config(method))
    training_step(trainer, 0, _latents())
    assert torch.equal(torch.get_rng_state(), before)


def test_the_lora_init_follows_the_seed_not_the_global_generator():
    torch.manual_seed(1)
    a = prepare_trainer(_tiny(), _config("lora", seed=5)).params
    torch.manual_seed(2)
    b = prepare_trainer(_tiny(), _config("lora", seed=5)).params
    c = prepare_trainer(_tiny(), _config("lora", seed=6)).params
    name = next(n for n in a if "lora_A" in n)
    assert torch.equal(a[name], b[name]) and not torch.equal(a[name], c[name])


def test_gradient_accumulation_steps_the_optimizer_and_the_schedule_once_per_step():
    config = _config("lora", steps=2, gradient_accumulation=3, lr_scheduler="linear")
    trainer = prepare_trainer(_tiny(), config)
    lrs = []
    for step in range(2):
        training_step(trainer, step, _latents())
        lrs.append(trainer.optimizer.param_groups[0]["lr"])
    state = next(iter(trainer.optimizer.state_dict()["state"].values()))
    assert int(state["step"]) == 2 and trainer.accelerator.step == 6
    assert lrs == pytest.approx([5e-3, 0.0])  # linear decay over 2 steps, stepped after each optimisation step


def test_instance_and_class_images_go_through_one_forward_and_the_loss_splits_by_chunk():
    trainer = prepare_trainer(_tiny(), _config("dreambooth", prior_weight=0.5))
    calls = []
    handle = trainer.pipe.transformer.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        instance, prior = _latents(0), _latents(1)
        with torch.no_grad():
            joint = chunk_losses(
                trainer, [(instance, trainer.config.prompt()), (prior, "a photo of a bird")], torch.Generator()
            )
        assert len(calls) == 1 and len(joint) == 2
        g = torch.Generator()
        with torch.no_grad():  # the same draws, one chunk per forward
            alone = [
                chunk_losses(trainer, [(lat, p)], g)[0]
                for lat, p in ((instance, "a photo of <v*>"), (prior, "a photo of a bird"))
            ]
        for a, b in zip(joint, alone):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
        calls.clear()
        loss = training_step(trainer, 0, instance, prior)
        assert len(calls) == 1 and torch.isfinite(loss)
    finally:
        handle.remove()


def test_bf16_dreambooth_trains_float32_master_weights():
    """In a fresh process (accelerate's precision is per process): a bfloat16 pipeline's trained
    weights are float32, the frozen text encoders stay bfloat16, and a step runs under bf16 autocast."""
    code = textwrap.dedent(
        """
        import torch
        from diffusers import FluxPipeline
        from concept_grounding.tdg.tiny import tiny_flux_pipeline
        from concept_grounding.learners import LearnConfig
        from concept_grounding.learners.train import Latents, prepare_trainer, training_step

        pipe = tiny_flux_pipeline(FluxPipeline, seed=1).to(torch.bfloat16)
        pipe.tokenizer_2.model_max_length = 32
        config = LearnConfig(method="dreambooth", images="unused", batch=2, lr=1e-3, dtype="bfloat16")
        trainer = prepare_trainer(pipe, config)
        before = {k: v.detach().clone() for k, v in trainer.params.items()}
        lat = Latents(torch.randn(2, 1, 16, 16).bfloat16(), torch.zeros(2, 1, 16, 16).bfloat16())
        loss = training_step(trainer, 0, lat, lat)
        assert {p.dtype for p in trainer.params.values()} == {torch.float32}
        assert pipe.text_encoder.dtype == pipe.text_encoder_2.dtype == torch.bfloat16
        assert trainer.accelerator.mixed_precision == "bf16" and torch.isfinite(loss)
        moved = [k for k, v in trainer.params.items() if not torch.equal(v, before[k])]
        # an update of lr 1e-3 is below bf16's resolution for most weights: float32 keeps it
        assert len(moved) > len(before) // 2, (len(moved), len(before))
        print("ok")
        """
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_the_users_class_images_are_used_and_only_the_missing_ones_drawn(concept_dir, tmp_path, monkeypatch):
    from concept_grounding.learners import data

    drawn = []

    def draw(pipe, cfg, side, count):
        drawn.append(count)
        return np.zeros((count, *side, 3), np.uint8)

    monkeypatch.setattr(data, "_draw_class_images", draw)
    own = data.load_images(concept_dir)
    full = data.class_images(
        None, _config("dreambooth", class_data_dir=str(concept_dir), num_prior=8), (32, 32), tmp_path
    )
    assert drawn == [] and np.array_equal(full, own)
    more = data.class_images(
        None, _config("dreambooth", class_data_dir=str(concept_dir), num_prior=11), (32, 32), tmp_path
    )
    assert drawn == [3] and len(more) == 11 and np.array_equal(more[:8], own)


def test_class_images_of_another_size_are_refused_naming_the_flag(concept_dir, tmp_path):
    from PIL import Image

    other = tmp_path / "class"
    other.mkdir()
    Image.new("RGB", (64, 64)).save(other / "0.png")
    config = LearnConfig(method="dreambooth", images=concept_dir, class_data_dir=str(other))
    with pytest.raises(UsageError) as err:
        config.check()
    assert str(err.value).startswith("class_data_dir: ") and "\n" not in str(err.value)


def test_a_lora_method_takes_peft_s_lora_config_as_is():
    from peft import LoraConfig

    from concept_grounding.learners import LoRA

    lora = LoraConfig(r=3, lora_alpha=6, init_lora_weights="gaussian", target_modules=["to_q", "to_v"])
    trainer = prepare_trainer(_tiny(), _config("lora"), method=LoRA(lora=lora))
    shapes = {n.split(".lora_A")[0].rsplit(".", 1)[-1]: p.shape for n, p in trainer.params.items() if "lora_A" in n}
    assert set(shapes) == {"to_q", "to_v"} and all(s[0] == 3 for s in shapes.values())
    assert _config("lora", rank=5).learner_method().lora.r == 5  # --rank builds the same object
