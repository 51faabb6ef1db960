"""COVAR: transforms move images and masks alike; dataset columns; world integration."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from concept_grounding.cci.covar import (
    TRANSFORMS,
    StructuralTransform,
    apply_transform,
    build_covar,
    composite,
    covar_rows,
    procedural_backgrounds,
)
from concept_grounding.models.clip.preprocess import to_pixel_values


def _coord_object(size=32):
    """An object whose colour encodes its source pixel: (x * 8, y * 8, 200) on a 12x8 box."""
    img = np.zeros((size, size, 3), np.uint8)
    mask = np.zeros((size, size), bool)
    mask[10:18, 6:18] = True
    yy, xx = np.mgrid[0:size, 0:size]
    img[..., 0] = xx * 8
    img[..., 1] = yy * 8
    img[..., 2] = 200
    return img * mask[..., None], mask


def test_eleven_structural_transforms():
    names = [t.name for t in TRANSFORMS]
    assert names[0] == "identity" and len(names) == 12 == len(set(names))
    fams = [t.family for t in TRANSFORMS[1:]]
    assert fams.count("scale") == 4 and fams.count("viewpoint") == 2 and fams.count("flip") == 2
    assert {"rotation", "translation", "crop"} <= set(fams)


@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: t.name)
def test_transform_moves_image_and_mask_alike(t):
    img, mask = _coord_object()
    bg = np.zeros_like(img)
    bg[...] = (1, 2, 3)  # a colour the object never has (blue channel is 200 on it)
    row = next(covar_rows(img, mask, [bg], [t]))
    out, m = row["image"], row["mask"]
    assert m.any()
    assert (out[m][:, 2] == 200).all(), "object pixels outside the moved mask"
    assert (out[~m] == (1, 2, 3)).all(), "background pixels inside the moved mask"
    assert row["transform"] == t.name and row["scale"] == t.scale


def test_transform_geometry_known_answers():
    img, mask = _coord_object()
    area = mask.sum()
    same, m = apply_transform(img, mask, TRANSFORMS[0])
    assert np.array_equal(same, img) and np.array_equal(m, mask)
    flipped, fm = apply_transform(img, mask, StructuralTransform("h", "flip", hflip=True))
    assert np.array_equal(fm, mask)  # symmetric box about its centroid
    # pixel (x, y) now shows the source pixel (2 cx - x, y): cx = 11.5 -> x = 6 shows 17
    assert flipped[12, 6, 0] == 17 * 8 and flipped[12, 17, 0] == 6 * 8
    small = apply_transform(img, mask, StructuralTransform("s", "scale", scale=0.5))[1].sum()
    assert small == pytest.approx(area * 0.25, rel=0.2)
    moved = apply_transform(img, mask, StructuralTransform("t", "translation", tx=0.25))[1]
    assert np.array_equal(moved[:, 8:], mask[:, :-8])
    crop_row = next(covar_rows(img, mask, [np.zeros_like(img)], [StructuralTransform("c", "crop", crop=0.5)]))
    assert crop_row["mask"].sum() == 4 * mask[8:24, 8:24].sum()  # central half, zoomed x2


def test_composite_and_backgrounds():
    bgs = procedural_backgrounds(20, (16, 24), seed=1)
    assert len(bgs) == 20 and all(b.shape == (16, 24, 3) and b.dtype == np.uint8 for b in bgs)
    assert len({b.tobytes() for b in bgs}) == 20
    assert all(np.array_equal(a, b) for a, b in zip(bgs, procedural_backgrounds(20, (16, 24), seed=1)))
    obj = np.full((16, 24, 3), 9, np.uint8)
    m = np.zeros((16, 24), bool)
    m[:4] = True
    out = composite(obj, m, bgs[0])
    assert (out[:4] == 9).all() and np.array_equal(out[4:], bgs[0][4:])
    with pytest.raises(ValueError, match="num_backgrounds"):
        procedural_backgrounds(0)


def test_build_covar_dataset_columns():
    img, mask = _coord_object()
    ds = build_covar([(img, mask, 1), (img, mask, 0)], num_backgrounds=3, class_names=["a", "b"])
    assert len(ds) == 2 * 3 * 12
    for col in (
        "image",
        "mask",
        "label",
        "background",
        "transform",
        "scale",
        "angle",
        "tx",
        "ty",
        "shear",
        "hflip",
        "vflip",
        "crop",
        "source_index",
    ):
        assert col in ds.column_names
    row = ds[0]
    assert row["transform"] == "identity" and np.array_equal(np.asarray(row["mask"]) > 127, mask)
    assert ds.features["label"].names == ["a", "b"]
    assert sorted(set(ds["transform"])) == sorted(t.name for t in TRANSFORMS)


def test_covar_on_the_world_and_evaluation():
    import concept_grounding.world  # noqa: F401
    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.covar import evaluate_covar
    from concept_grounding.testing import tiny_open_clip
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=32))
    samples = [world.sample(i) for i in range(2)]
    transforms = [TRANSFORMS[0], TRANSFORMS[1], TRANSFORMS[7]]
    ds = build_covar(((s.image, s.mask, s.label) for s in samples), num_backgrounds=2, transforms=transforms)
    assert len(ds) == 2 * 2 * 3
    assert (np.asarray(ds[0]["mask"]) > 127).sum() == samples[0].mask.sum()
    model = tiny_open_clip()
    cci = ConceptClusterImportance(model, num_clusters=3)
    text = torch.randn(world.num_classes, 16, generator=torch.Generator().manual_seed(0))
    res = evaluate_covar(cci, ds, text, batch_size=6)
    assert len(res.categories) == len(ds) and set(res.shares) >= {"all", "identity", "hflip"}
    assert ((res.fg_share >= 0) & (res.fg_share <= 1 + 1e-6)).all()
    assert to_pixel_values([samples[0].image], (16, 16)).shape == (1, 3, 16, 16)
