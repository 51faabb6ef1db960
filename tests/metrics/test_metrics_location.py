"""Concept location (Aysel et al. Eq. 11): region size, ties, parts, visibility, pairs, upsampling."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from concept_grounding import load_vocabulary
from concept_grounding.metrics import concept_location
from concept_grounding.metrics.concept_location import (
    centre_pixels,
    centre_ranks,
    concept_part_table,
    region_size,
    top_region,
)

RAMP = np.arange(12.0).reshape(3, 4)  # a 3x4 "image": |Omega| = 1, 3, 6 pixels for alpha = 1, 3, 6


def _one(map_, xy, visible=(True,), parts=((0,),), **kw):
    """One image, one concept on the given parts, the map already at image size."""
    maps = np.asarray(map_, float)[None, None]
    part_xy = np.asarray(xy, float).reshape(1, -1, 2)
    return concept_location(
        maps, part_xy, np.array([visible]), top_concepts=[[0]], concept_parts=parts, top_l=(1,), return_ranks=True, **kw
    )


def test_region_size_floor():
    assert region_size(1, (3, 4)) == 1 and region_size(3, (3, 4)) == 3 and region_size(6, (3, 4)) == 6
    assert region_size(1, (224, 224)) == 4181 and region_size(0.01, (3, 4)) == 1 and region_size(20, (3, 4)) == 12


def test_region_exactly_on_part_centre():
    # value 11 at (row 2, col 3) = (x 3, y 2): the single top pixel is the centre
    out = _one(RAMP, [3, 2])
    assert out["location@1_alpha1"] == 1.0 and out["centre_rank"].tolist() == [[0]]


def test_region_boundary_by_alpha():
    # value 9 at (x 1, y 2): 10 and 11 are above, rank 2 -> outside 1 pixel, inside 3 and 6
    out = _one(RAMP, [1, 2])
    assert (out["location@1_alpha1"], out["location@1_alpha3"], out["location@1_alpha6"]) == (0.0, 1.0, 1.0)
    # value 5 at (x 1, y 1): rank 6 -> outside even the 6-pixel region
    out = _one(RAMP, [0.6, 1.4])  # fractional coordinates go to the nearest pixel centre, (x 1, y 1)
    assert out["centre_rank"][0, 0] == 6 and out["location@1_alpha6"] == 0.0


def test_heatmap_wholly_outside():
    out = _one(RAMP, [0, 0])  # the lowest pixel: 11 above
    assert out["centre_rank"].tolist() == [[11]]
    assert (out["location@1_alpha1"], out["location@1_alpha3"], out["location@1_alpha6"]) == (0.0, 0.0, 0.0)


def test_ties_with_the_centre_are_inside():
    map_ = np.zeros((3, 4))
    map_[0, 0] = 1.0  # one pixel strictly above; the 11 zeros tie with the centre
    out = _one(map_, [3, 2])
    assert out["centre_rank"].tolist() == [[1]]
    assert (out["location@1_alpha1"], out["location@1_alpha3"]) == (0.0, 1.0)
    assert _one(np.full((3, 4), 0.7), [2, 1])["location@1_alpha1"] == 1.0  # a constant map contains every centre


def test_invisible_part_is_skipped_and_counted():
    out = _one(RAMP, [3, 2], visible=(False,))
    assert np.isnan(out["location@1_alpha1"])
    assert out["skipped_invisible"] == 1 and out["images_without_evaluated"] == 1 and out["skipped_no_part"] == 0
    assert out["evaluated"].tolist() == [[False]] and out["centre_rank"].tolist() == [[-1]]


def test_concept_without_part_is_skipped_and_counted():
    maps = np.stack([RAMP, RAMP])[None]
    xy = np.array([[[3.0, 2.0]]])
    out = concept_location(maps, xy, [[True]], top_concepts=[[0, 1]], concept_parts=[(), (0,)], top_l=(1, 2))
    assert np.isnan(out["location@1_alpha1"])  # the top concept has no part
    assert out["location@2_alpha1"] == 1.0  # only concept 1 is evaluated among the top 2
    assert out["skipped_no_part"] == 1 and out["images_without_evaluated"] == 0


def test_paired_parts_either_visible_one_counts():
    # concept on parts (0, 1); part 0 at the low corner, part 1 on the peak
    xy = [[0, 0], [3, 2]]
    assert _one(RAMP, xy, visible=(True, True), parts=((0, 1),))["location@1_alpha1"] == 1.0
    assert _one(RAMP, xy, visible=(True, False), parts=((0, 1),))["location@1_alpha1"] == 0.0  # hit one hidden
    assert _one(RAMP, xy, visible=(False, True), parts=((0, 1),))["location@1_alpha1"] == 1.0


def test_bilinear_upsampling_known_answer():
    # 2x2 map [[0, 1], [0, 1]] -> 4x4: every row is (0, .25, .75, 1) (align_corners=False)
    maps = np.array([[[[0.0, 1.0], [0.0, 1.0]]]])
    kw = dict(top_concepts=[[0]], concept_parts=[(0,)], top_l=(1,), image_size=(4, 4), alphas=(3, 6), return_ranks=True)
    out = concept_location(maps, [[[2.0, 1.0]]], [[True]], **kw)  # value .75: 4 pixels (column 3) above
    assert out["centre_rank"].tolist() == [[4]]
    assert (out["location@1_alpha3"], out["location@1_alpha6"]) == (0.0, 1.0)  # |Omega| = 4, 8


def test_ranking_from_theta_and_correct_subset():
    maps = np.stack([RAMP, RAMP[::-1, ::-1]])[None].repeat(2, axis=0)  # concept 1 peaks at (0, 0)
    xy = np.array([[[3.0, 2.0]], [[3.0, 2.0]]])
    theta = np.array([[1.0, 0.0], [0.0, 1.0]])
    u = np.ones((2, 2))
    out = concept_location(
        maps,
        xy,
        np.ones((2, 1), bool),
        theta=theta,
        concept_scores=u,
        predictions=[0, 1],
        references=[0, 0],
        concept_parts=[(0,), (0,)],
        top_l=(1,),
        alphas=(1,),
    )
    assert out["top_concepts"][:, 0].tolist() == [0, 1]
    assert out["location@1_alpha1"] == 0.5 and out["location@1_alpha1_correct"] == 1.0


def test_rank_within_part_concepts():
    maps = np.stack([RAMP, RAMP])[None]
    kw = dict(
        theta=np.array([[2.0], [1.0]]),
        concept_scores=[[1.0, 1.0]],
        predictions=[0],
        concept_parts=[(), (0,)],
        top_l=(1,),
        alphas=(1,),
    )
    assert np.isnan(concept_location(maps, [[[3.0, 2.0]]], [[True]], **kw)["location@1_alpha1"])
    out = concept_location(maps, [[[3.0, 2.0]]], [[True]], rank_within_part_concepts=True, **kw)
    assert out["top_concepts"].tolist() == [[1]] and out["location@1_alpha1"] == 1.0


def test_concept_names_map_through_the_vocabulary():
    vocab = load_vocabulary()
    table = concept_part_table(
        3, concept_names=["has_eye_color::blue", "has_head_pattern::plain", "has_size::very_small_(3_-_5_in)"]
    )
    eyes, head = (
        [vocab.part_index("left eye"), vocab.part_index("right eye")],
        [vocab.part_index("forehead"), vocab.part_index("crown")],
    )
    assert table.tolist() == [eyes, head, [-1, -1]]
    with pytest.raises(ValueError, match="concept_names has unknown attribute"):
        concept_part_table(1, concept_names=["has_eye_color::plaid"])
    assert concept_part_table(1, concept_parts=[("beak",)]).tolist() == [[1]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(concept_maps=np.zeros((1, 1, 3))), "concept_maps must have 4 dimension"),
        (dict(part_xy=np.zeros((1, 1, 3))), r"part_xy must have shape \(N, P, 2\)"),
        (dict(part_visible=[[True, False]]), "part_visible must have shape"),
        (
            dict(part_xy=np.zeros((2, 1, 2)), part_visible=np.ones((2, 1), bool)),
            "concept_maps and part_xy must have the same length",
        ),
        (dict(concept_parts=[(0,), (0,)]), "concept_parts must have 1 entries"),
        (dict(concept_parts=[(3,)]), "part_xy has 1 parts"),
        (dict(concept_parts=None), "give exactly one of concept_names or concept_parts"),
        (dict(alphas=(0,)), "alphas must be positive"),
        (dict(top_concepts=[[1]]), "top_concepts must be < 1"),
        (dict(concept_maps=np.full((1, 1, 3, 4), np.nan)), "concept_maps contains NaN"),
        (dict(image_size=(0, 4)), "image_size must be"),
    ],
)
def test_bad_input(kwargs, match):
    args = dict(
        concept_maps=RAMP[None, None],
        part_xy=[[[3.0, 2.0]]],
        part_visible=[[True]],
        top_concepts=[[0]],
        concept_parts=[(0,)],
        top_l=(1,),
    )
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        concept_location(**args)


@settings(max_examples=25, deadline=None)
@given(
    arrays(np.float64, (3, 3, 4), elements=st.floats(-2, 2).map(lambda v: round(v, 1))),
    st.integers(3, 17),
    st.integers(3, 19),
)
def test_centre_ranks_match_full_upsampling(maps, M1, M2):
    import torch

    centres = np.arange(3) * 7 % (M1 * M2)
    up = (
        torch.nn.functional.interpolate(
            torch.from_numpy(maps)[:, None], size=(M1, M2), mode="bilinear", align_corners=False
        )[:, 0]
        .reshape(3, -1)
        .numpy()
    )
    v = np.take_along_axis(up, centres[:, None], 1)
    expected = (up > v + 1e-9 * np.abs(maps).max(axis=(1, 2))[:, None]).sum(axis=1)
    np.testing.assert_array_equal(centre_ranks(maps, centres, (M1, M2)), expected)


def test_top_region_for_plots_agrees_with_the_metric():
    rng = np.random.default_rng(3)
    maps = np.round(rng.normal(size=(6, 1, 3, 3)))
    xy = rng.uniform(0, 16, size=(6, 1, 2))
    out = concept_location(
        maps,
        xy,
        np.ones((6, 1), bool),
        top_concepts=np.zeros((6, 1), int),
        concept_parts=[(0,)],
        image_size=(16, 16),
        alphas=(1, 3, 6),
        top_l=(1,),
    )
    for i in range(6):
        for a, alpha in enumerate((1, 3, 6)):
            _, omega = top_region(maps[i, 0], (16, 16), alpha)
            assert omega.sum() >= region_size(alpha, (16, 16))
            assert omega.ravel()[centre_pixels(xy[i, 0], (16, 16))] == out["hits"][i, 0, a]


@settings(max_examples=25, deadline=None)
@given(
    arrays(np.float64, (8, 3, 3), elements=st.floats(-2, 2).map(lambda v: round(v, 1))),
    st.lists(st.integers(1, 24 * 20), min_size=1, max_size=3),
)
def test_ranks_resolved_to_thresholds_decide_like_exact_ranks(maps, sizes):
    centres = np.arange(8) * 53 % (24 * 20)
    exact = centre_ranks(maps, centres, (24, 20))
    bracket = centre_ranks(maps, centres, (24, 20), thresholds=sizes)
    assert (bracket <= exact).all()
    for n in sizes:
        np.testing.assert_array_equal(bracket < n, exact < n)


def test_negative_zero_in_a_flat_row_is_handled():
    # found by hypothesis: a -0.0 slope made the flat-row shortcut count nothing
    maps = np.zeros((1, 3, 4))
    maps[0, 1, 2], maps[0, 2, 2] = -0.0, -1.0
    assert centre_ranks(maps, np.array([14]), (3, 6)).tolist() == [15]


def test_centres_go_to_the_pixel_whose_centre_is_nearest():
    """Pixel centres sit at integer coordinates: (x, y) -> (floor(y + 1/2), floor(x + 1/2))."""
    assert centre_pixels(np.array([3.0, 2.0]), (3, 4)) == 11  # integer coordinates: that pixel
    assert centre_pixels(np.array([2.51, 1.49]), (3, 4)) == 7  # (row 1, col 3), not the truncated (1, 2)
    assert centre_pixels(np.array([2.5, 0.5]), (3, 4)) == 7  # halves go up
    assert centre_pixels(np.array([-0.7, 5.0]), (3, 4)) == 8  # clipped to the grid


def test_a_map_that_is_the_part_itself_locates_the_world_centres_on_their_part():
    """Known answer on world birds (64 px): with each part's own mask as its concept map and
    |Omega| = 1 (ties keep the whole part inside), a centre is a hit exactly when its nearest
    pixel lies on the part; that holds for almost every visible centre, where truncating the
    coordinates lands off the part far more often."""
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=64, seed=0))
    samples = [world.sample(i) for i in range(20)]
    part_map = np.stack([s.part_map for s in samples])
    xy = np.stack([s.part_xy for s in samples]).astype(float)
    visible = np.stack([s.part_visible for s in samples])
    hits, truncated = [], []
    for p in range(xy.shape[1]):
        maps = (part_map == p + 1)[:, None].astype(float)
        out = concept_location(
            maps,
            xy,
            visible,
            top_concepts=np.zeros((len(samples), 1), int),
            concept_parts=[(p,)],
            alphas=(1e-3,),
            top_l=(1,),
        )
        rows, cols = np.floor(xy[:, p, 1] + 0.5).astype(int), np.floor(xy[:, p, 0] + 0.5).astype(int)
        on_part = part_map[np.arange(len(samples)), rows.clip(0, 63), cols.clip(0, 63)] == p + 1
        assert np.array_equal(out["hits"][:, 0, 0], visible[:, p] & on_part), p
        hits += out["hits"][visible[:, p], 0, 0].tolist()
        floor_rows, floor_cols = np.floor(xy[:, p, 1]).astype(int), np.floor(xy[:, p, 0]).astype(int)
        truncated += (part_map[np.arange(len(samples)), floor_rows.clip(0, 63), floor_cols.clip(0, 63)] == p + 1)[
            visible[:, p]
        ].tolist()
    assert np.mean(hits) >= 0.95 > np.mean(truncated) + 0.04, (np.mean(hits), np.mean(truncated))
