"""``concept_grounding.testing``: every tiny builder is deterministic in its seed and leaves the
caller's global torch RNG state as it was (it builds under ``torch.random.fork_rng``)."""

import pytest
import torch

from concept_grounding import testing


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _flux(seed):
    return testing.tiny_flux_components(seed)["transformer"]


def _vlm(seed, tmp_path):
    from safetensors.torch import load_file

    folder = testing.save_tiny_vlm(tmp_path / f"vlm{seed}", seed=seed)
    return load_file(next(folder.glob("*.safetensors")))


def _inpaint(seed, tmp_path):
    from safetensors.torch import load_file

    folder = testing.save_tiny_inpainting_pipeline(tmp_path / f"inpaint{seed}", seed=seed)
    return load_file(next((folder / "unet").glob("*.safetensors")))


def _filter_scorer(seed):
    from concept_grounding.tdg.filter_scorers import tiny_clip_scorer

    return tiny_clip_scorer(seed=seed).clip.model


BUILDERS = {
    "tiny_flux_components": _flux,
    "tiny_open_clip": lambda seed: testing.tiny_open_clip(seed=seed),
    "tiny_open_clip(with_text=False)": lambda seed: testing.tiny_open_clip(seed=seed, with_text=False),
    "tiny_transformers_clip": lambda seed: testing.tiny_transformers_clip(seed=seed),
    "tiny_transformers_clip(vision_only)": lambda seed: testing.tiny_transformers_clip(seed=seed, vision_only=True),
    "tiny_world_clip": lambda seed: testing.tiny_world_clip(image_size=16, seed=seed),
    "tiny_clip_handle": lambda seed: testing.tiny_clip_handle(image_size=16, seed=seed).model,
    "tdg.filter_scorers.tiny_clip_scorer": _filter_scorer,
}
FILE_BUILDERS = {"save_tiny_vlm": _vlm, "save_tiny_inpainting_pipeline": _inpaint}


def _check(build):
    torch.manual_seed(1234)
    before = torch.random.get_rng_state()
    first = build(0)
    assert torch.equal(torch.random.get_rng_state(), before), "the builder changed the global RNG state"
    expected = torch.rand(3)
    torch.random.set_rng_state(before)
    assert torch.equal(torch.rand(3), expected)
    again, other = build(0), build(1)
    first, again, other = (w if isinstance(w, dict) else _weights(w) for w in (first, again, other))
    assert first.keys() == again.keys()
    assert all(torch.equal(first[k], again[k]) for k in first), "same seed, different weights"
    assert any(not torch.equal(first[k], other[k]) for k in first if first[k].is_floating_point()), (
        "the seed changes nothing"
    )


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_is_seeded_and_leaves_the_global_rng_alone(name):
    _check(BUILDERS[name])


@pytest.mark.parametrize("name", sorted(FILE_BUILDERS))
def test_saving_builder_is_seeded_and_leaves_the_global_rng_alone(name, tmp_path):
    _check(lambda seed: FILE_BUILDERS[name](seed, tmp_path))


def test_same_seed_gives_the_weights_a_global_seed_gave():
    """fork_rng + manual_seed(seed) inside == manual_seed(seed) outside: the weights are those the
    builders made when they seeded the global RNG (pinned outputs stay byte-identical)."""
    from open_clip.model import CLIP, CLIPTextCfg, CLIPVisionCfg

    torch.manual_seed(5)
    old = CLIP(
        16,
        CLIPVisionCfg(layers=2, width=32, head_width=8, image_size=32, patch_size=8),
        CLIPTextCfg(context_length=77, vocab_size=49408, width=32, heads=4, layers=1),
    ).eval()
    new = testing.tiny_open_clip(seed=5)
    assert all(torch.equal(a, b) for a, b in zip(old.state_dict().values(), new.state_dict().values()))


def test_known_answer_clip_leaves_the_global_rng_alone():
    before = torch.random.get_rng_state()
    testing.known_answer_open_clip()
    assert torch.equal(torch.random.get_rng_state(), before)


def test_every_builder_is_exported():
    assert set(testing.__all__) <= set(dir(testing))
    for name in testing.__all__:
        assert getattr(testing, name) is not None
    with pytest.raises(AttributeError):
        testing.no_such_builder  # noqa: B018 - the lookup raises


def test_the_tiny_models_production_runs_have_one_home():
    """``generate --tiny``, the Space, the demo and ``random-clip`` build their tiny models from ``tdg.tiny`` and
    ``models.clip.tiny``; ``testing`` hands tests the very same builders (import-linter keeps production off it)."""
    from concept_grounding.models.clip import tiny as clip_tiny
    from concept_grounding.tdg import tiny as flux_tiny

    for name in ("tiny_flux_components", "tiny_flux_pipeline"):
        assert getattr(testing, name) is getattr(flux_tiny, name), name
    for name in ("tiny_open_clip", "tiny_world_clip", "tiny_clip_handle", "TINY_WORLD_CLIP"):
        assert getattr(testing, name) is getattr(clip_tiny, name), name
    assert not hasattr(testing, "TinyFlux")  # a production Flux source, in tdg.tiny only
