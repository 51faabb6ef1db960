"""COVAR's generative backgrounds, run for real on the tiny random inpainting pipeline."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from concept_grounding.cci.covar import TRANSFORMS, apply_transform, build_covar, inpaint_backgrounds
from concept_grounding.testing import TINY_INPAINT_WORDS, save_tiny_inpainting_pipeline

PROMPTS = ["a photo of a forest", "a sunny beach", "a zebra on the snow"]  # "zebra" is not in the vocab
STEPS = {"num_inference_steps": 2}
KEEP = {"keep_object": True, **STEPS}  # scenes drawn around the object


@pytest.fixture(scope="module")
def folder(tiny_inpaint_dir):
    """The session's saved tiny inpainting pipeline (conftest ``tiny_inpaint_dir``)."""
    return tiny_inpaint_dir


@pytest.fixture(scope="module")
def pipe(folder):
    from diffusers import AutoPipelineForInpainting

    p = AutoPipelineForInpainting.from_pretrained(folder)
    p.set_progress_bar_config(disable=True)
    return p


@pytest.fixture(scope="module")
def scene():
    """A 32x32 image: an object coloured by its coordinates on a flat (10, 20, 30) background."""
    img = np.zeros((32, 32, 3), np.uint8)
    img[...] = (10, 20, 30)
    mask = np.zeros((32, 32), bool)
    mask[10:20, 8:20] = True
    yy, xx = np.mgrid[0:32, 0:32]
    img[mask] = np.stack([xx * 8, yy * 8, np.full_like(xx, 200)], -1)[mask]
    return img, mask


@pytest.fixture(scope="module")
def outputs(folder, scene):
    return inpaint_backgrounds(*scene, PROMPTS, model=str(folder), seed=0, **KEEP)


def test_tiny_pipeline_files_and_tokenizer(folder, pipe, tmp_path):
    from diffusers import StableDiffusionInpaintPipeline

    assert (folder / "model_index.json").is_file()
    assert isinstance(pipe, StableDiffusionInpaintPipeline) and pipe.safety_checker is None
    assert pipe.unet.config.in_channels == 9 == 2 * pipe.vae.config.latent_channels + 1
    tok = pipe.tokenizer
    bos, eos = tok.bos_token_id, tok.eos_token_id
    for word in TINY_INPAINT_WORDS:
        assert tok(word).input_ids[1:-1] == [tok.convert_tokens_to_ids(word + "</w>")], word
    ids = tok("a zebra").input_ids
    assert tok.convert_ids_to_tokens(ids) == ["<|startoftext|>", "a</w>", "z", "e", "b", "r", "a</w>", "<|endoftext|>"]
    assert ids[0] == bos and eos not in ids[1:-1]  # no unknown (= end-of-text) pieces
    # same seed -> same weights; another seed -> other weights
    again, other = save_tiny_inpainting_pipeline(tmp_path / "a"), save_tiny_inpainting_pipeline(tmp_path / "b", seed=1)
    weights = "unet/diffusion_pytorch_model.safetensors"
    assert (again / weights).read_bytes() == (folder / weights).read_bytes()
    assert (other / weights).read_bytes() != (folder / weights).read_bytes()


def test_one_uint8_image_per_prompt_with_the_object_kept(outputs, scene):
    img, mask = scene
    assert len(outputs) == len(PROMPTS)
    for out in outputs:
        assert out.shape == img.shape and out.dtype == np.uint8
        assert np.array_equal(out[mask], img[mask])
        changed = (out[~mask] != img[~mask]).any(-1).mean()
        assert changed > 0.9, "the background was not repainted"
    assert len({o.tobytes() for o in outputs}) == len(PROMPTS)


def test_seeds_and_pipeline_object(outputs, scene, pipe):
    img, mask = scene
    same = inpaint_backgrounds(img, mask, PROMPTS, model=pipe, seed=0, **KEEP)  # the object, not the path
    assert all(np.array_equal(a, b) for a, b in zip(outputs, same, strict=True))
    other = inpaint_backgrounds(img, mask, PROMPTS, model=pipe, seed=5, **KEEP)
    for a, b in zip(outputs, other, strict=True):
        assert not np.array_equal(a[~mask], b[~mask]) and np.array_equal(a[mask], b[mask])
    # output i uses seed + i
    shifted = inpaint_backgrounds(img, mask, [PROMPTS[0]] * 2, model=pipe, seed=0, **KEEP)
    assert np.array_equal(shifted[0], outputs[0])
    assert np.array_equal(shifted[1], inpaint_backgrounds(img, mask, [PROMPTS[0]], model=pipe, seed=1, **KEEP)[0])


class _Spy:
    """Records each call's keyword arguments and the size of the image it returned."""

    def __init__(self, pipe: Any) -> None:
        self.pipe, self.calls, self.sizes = pipe, [], []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        res = self.pipe(**kwargs)
        self.sizes.append(res.images[0].size)
        return res


def test_call_kwargs_reach_the_pipeline(scene, pipe):
    img, mask = scene
    spy = _Spy(pipe)
    outs = inpaint_backgrounds(
        img, mask, PROMPTS[:2], model=spy, seed=3, height=16, width=24, guidance_scale=1.0, **KEEP
    )
    assert [c["prompt"] for c in spy.calls] == PROMPTS[:2]
    assert [c["generator"].initial_seed() for c in spy.calls] == [3, 4]
    for c in spy.calls:
        assert (c["num_inference_steps"], c["height"], c["width"], c["guidance_scale"]) == (2, 16, 24, 1.0)
        assert np.array_equal(np.asarray(c["image"]), img)
        assert np.array_equal(np.asarray(c["mask_image"]), np.where(mask, 0, 255))  # white = repaint
    assert spy.sizes == [(24, 16)] * 2  # PIL (width, height): generated at 16x24 ...
    assert all(o.shape == img.shape and np.array_equal(o[mask], img[mask]) for o in outs)  # ... resized back


def test_load_kwargs_and_errors(folder, scene, pipe, outputs):
    import torch

    img, mask = scene
    out = inpaint_backgrounds(img, mask, PROMPTS[:1], model=folder, load_kwargs={"local_files_only": True}, **KEEP)
    assert np.array_equal(out[0], outputs[0])  # a Path works too
    with pytest.raises(ValueError, match="load_kwargs"):
        inpaint_backgrounds(img, mask, PROMPTS[:1], model=pipe, load_kwargs={"local_files_only": True})
    with pytest.raises(ValueError, match="mask"):
        inpaint_backgrounds(img, mask[:16], PROMPTS[:1], model=pipe)
    # diffusers' __call__ swallows unknown **kwargs; inpaint_backgrounds rejects them
    with pytest.raises(TypeError, match="torch_dtype"):  # a from_pretrained argument in the call kwargs
        inpaint_backgrounds(img, mask, PROMPTS[:1], model=pipe, torch_dtype=torch.float32)
    with pytest.raises(TypeError, match="num_inference_step"):
        inpaint_backgrounds(img, mask, PROMPTS[:1], model=folder, num_inference_step=2)


def test_object_free_backgrounds_by_default(scene, pipe, outputs):
    """Default: the whole frame is repainted (all-white mask), nothing is copied back, and in
    build_covar the moved object leaves no copy behind."""
    img, mask = scene
    spy = _Spy(pipe)
    backgrounds = inpaint_backgrounds(img, mask, PROMPTS[:2], model=spy, seed=0, **STEPS)
    assert all(np.array_equal(np.asarray(c["mask_image"]), np.full(mask.shape, 255)) for c in spy.calls)
    assert all(not np.array_equal(b[mask], img[mask]) for b in backgrounds)
    assert not np.array_equal(backgrounds[0], outputs[0])
    ds = build_covar([(img, mask, 1)], backgrounds=backgrounds)
    translate = next(t for t in TRANSFORMS if t.name == "translate")
    moved, moved_mask = apply_transform(img, mask, translate)
    row = next(r for r in ds if r["transform"] == "translate" and r["background"] == 0)
    shifted = np.asarray(row["image"])
    assert np.array_equal(shifted[moved_mask], moved[moved_mask])
    assert np.array_equal(shifted[~moved_mask], backgrounds[0][~moved_mask])  # no ghost: pure background


def test_inpainted_backgrounds_plug_into_build_covar(outputs, scene):
    img, mask = scene
    ds = build_covar([(img, mask, 1)], backgrounds=outputs)
    assert len(ds) == len(PROMPTS) * len(TRANSFORMS)
    translate = next(t for t in TRANSFORMS if t.name == "translate")
    moved, moved_mask = apply_transform(img, mask, translate)
    for b, bg in enumerate(outputs):
        rows = {r["transform"]: r for r in ds.select(range(b * len(TRANSFORMS), (b + 1) * len(TRANSFORMS)))}
        assert set(rows) == {t.name for t in TRANSFORMS} and {r["background"] for r in rows.values()} == {b}
        ident = np.asarray(rows["identity"]["image"])
        assert np.array_equal(np.asarray(rows["identity"]["mask"]) > 127, mask)
        assert np.array_equal(ident[mask], img[mask])  # object pixels exactly where the mask is set
        assert np.array_equal(ident[~mask], bg[~mask])  # the inpainted background around it
        shifted = np.asarray(rows["translate"]["image"])
        assert np.array_equal(np.asarray(rows["translate"]["mask"]) > 127, moved_mask)
        assert np.array_equal(shifted[moved_mask], moved[moved_mask])
        # keep_object=True: the background still shows the object at its original place
        ghost = mask & ~moved_mask
        assert ghost.any() and np.array_equal(shifted[ghost], img[ghost])
