"""The world TDG experiment's stages (``experiments.world_tdg``, beside the benchmark scripts) and its
statistics; ``benchmarks/bench_tdg_world.py`` only parses arguments and calls them."""

import importlib.util
import math
from pathlib import Path

import pytest
from experiments.world_tdg import STAGES, WorldTDGSettings, check_settings, method_prompts, world_guide
from experiments.world_tdg_stats import (
    mark_guide_positive,
    power,
    summarise_rows,
    table,
    write_world_tdg_report,
)

from concept_grounding.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
BREAST, BACK = "has_breast_color::blue", "has_back_color::red"


def _record(cls, attribute, group, method, success, guide=None):
    return {
        "reference_class": cls,
        "target_attribute": attribute,
        "group": group,
        "method": method,
        "success": success,
        "s_plus_found": success,
        "species_kept": 1,
        "s_minus_removed": 1 - success,
        "p_s_plus": 0.9 if success else 0.1,
        **({"guide_s_plus": guide} if guide is not None else {}),
    }


@pytest.fixture
def records():
    """Two pairings of the validated breast_color group (one whose guide shows S+), one of back_color."""
    rows = [
        _record("c1", BREAST, "breast_color", "prompting", 1),
        _record("c1", BREAST, "breast_color", "prompting", 1),
        _record("c2", BREAST, "breast_color", "prompting", 0),
        _record("c1", BREAST, "breast_color", "tdg", 1, guide=True),
        _record("c1", BREAST, "breast_color", "tdg", 0, guide=True),
        _record("c2", BREAST, "breast_color", "tdg", 0, guide=False),
        _record("c3", BACK, "back_color", "prompting", 1),
        _record("c3", BACK, "back_color", "tdg", 1, guide=False),
        _record("c1", BREAST, "breast_color", "tdg-bird", 1),
    ]
    mark_guide_positive(rows)
    return rows


def test_a_pairing_s_guide_shows_s_plus_by_majority_of_its_tdg_guides(records):
    positive = {(r["reference_class"], r["method"]): r["pairing_guide_positive"] for r in records}
    assert positive[("c1", "prompting")] and positive[("c1", "tdg-bird")]  # c1's TDG guides: 2 of 2
    assert not positive[("c2", "tdg")] and not positive[("c3", "prompting")]


def test_the_table_keeps_validated_groups_in_the_finding(records):
    tab = table(records, ("breast_color",), bootstrap=200, seed=0)
    assert list(tab["overall"]) == ["prompting", "tdg", "tdg-bird"]  # prompting first, then tdg, then by name
    assert tab["excluded_groups"] == ["back_color"]
    overall = tab["overall"]["prompting"]["success"]
    assert overall["n"] == 3 and overall["mean"] == pytest.approx(2 / 3)  # back_color's image left out
    # clusters are pairings: c1 (1, 1) and c2 (0); resampling two clusters gives 0, 2/3 or 1
    assert overall["ci95"] == [0.0, 1.0]
    assert tab["guide_positive"]["tdg"]["success"]["mean"] == 0.5  # c1's two TDG images
    assert tab["per_group"]["back_color"]["tdg"]["success"]["mean"] == 1.0  # every group, validated or not
    assert len(tab["per_pairing"][f"c1|{BREAST}"]["tdg"]) == 2


def test_a_bootstrap_of_one_value_has_no_width():
    rows = [_record(f"c{i}", BREAST, "breast_color", "tdg", 1) for i in range(5)]
    summary = summarise_rows(rows, bootstrap=50, seed=3)
    assert summary["success"] == {"mean": 1.0, "ci95": [1.0, 1.0], "n": 5}
    assert summary["p_s_plus"]["mean"] == pytest.approx(0.9)


def test_power_against_a_hand_computation():
    """n = (z_.975 sqrt(2 pbar qbar) + z_.8 sqrt(p1 q1 + p2 q2))^2 / (p1 - p2)^2 at p1 = 0.5, p2 = 0.53."""
    z_a, z_b = 1.959964, 0.841621
    p1, p2 = 0.5, 0.53
    pbar = (p1 + p2) / 2
    by_hand = math.ceil(
        (z_a * math.sqrt(2 * pbar * (1 - pbar)) + z_b * math.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p2 - p1) ** 2
    )
    tab = {"overall": {"prompting": {"success": {"mean": 0.5, "n": 40}}}, "per_pairing": dict.fromkeys("abcd")}
    pw = power(tab)
    assert by_hand == 4356
    assert pw["images_needed_for_3_points"] == pw["images_needed_worst_case"] == by_hand
    assert pw["images_per_pairing_needed"] == math.ceil(by_hand / 4) and pw["pairings"] == 4
    assert pw["images_per_method"] == 40 and 0.03 < pw["detectable_difference"] < 0.5
    # a measured rate of 0 is clipped to 1 %, where 3 points need far fewer images
    low = power({"overall": {"prompting": {"success": {"mean": 0.0, "n": 40}}}, "per_pairing": {}})
    assert low["p_prompting"] == 0.01 and low["images_needed_for_3_points"] < by_hand


def test_the_report_prints_the_finding_and_its_power(records, tmp_path):
    tab = table(records, ("breast_color",), bootstrap=50, seed=0)
    results = {
        "command": "python benchmarks/bench_tdg_world.py --out x",
        "seconds": 2.0,
        "table": tab,
        "power": power(tab),
        "validation": {"markdown": "(validation)", "supports_finding": True, "failures": []},
    }
    write_world_tdg_report(results, tmp_path / "report.md")
    text = (tmp_path / "report.md").read_text()
    assert "| prompting | 66.7 % [0.0, 100.0] |" in text
    assert "Left out (the judge misses a bar there): back_color." in text
    assert "**Power.**" in text and "![contact sheet](contact_sheet.png)" in text


def test_colour_pairings_use_the_generic_guide_and_shapes_a_world_species():
    from concept_grounding.world import BirdWorld

    world = BirdWorld()
    colour = method_prompts(world, "017.Cardinal", BREAST)
    assert list(colour) == ["tdg"] and colour["tdg"].guide.startswith("A photo of a bird with")
    shape = next(a for a in world.vocab.sub_substitutions.values() if a.startswith("has_bill_shape"))
    cls = next(
        c for c, row in zip(world.class_names, world.class_attributes) if not row[world.vocab.attribute_index(shape)]
    )
    prompts = method_prompts(world, cls, shape)
    assert {"tdg", "tdg-bird"} <= set(prompts) and "bird" in prompts["tdg-bird"].guide
    guide = world_guide(world, cls, shape)
    assert guide is not None and guide in prompts["tdg"].guide  # a world species that has the shape


def test_settings_refuse_bad_values_naming_the_flag(tmp_path):
    check_settings(WorldTDGSettings(out=tmp_path))
    with pytest.raises(UsageError) as err:
        check_settings(WorldTDGSettings(out=tmp_path, images=0))
    assert err.value.argument == "--images"
    with pytest.raises(UsageError, match="no model_index.json"):
        check_settings(WorldTDGSettings(out=tmp_path, pipeline=tmp_path))
    with pytest.raises(UsageError, match="unknown stage"):
        check_settings(WorldTDGSettings(out=tmp_path, stages=("judging",)))


def test_the_script_only_maps_its_flags_onto_the_settings(tmp_path):
    """The script's defaults are the settings' (results.json records them in the same order), and
    it edits no ``sys.path``: it imports the installed package and ``experiments``, the package beside it."""
    path = ROOT / "benchmarks" / "bench_tdg_world.py"
    assert "sys.path" not in path.read_text()
    spec = importlib.util.spec_from_file_location("bench_tdg_world", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = script.parse_args(["--out", str(tmp_path)])
    settings = WorldTDGSettings(**vars(args))
    assert settings.as_dict() == WorldTDGSettings(out=tmp_path).as_dict()
    assert list(settings.as_dict()) == list(vars(args)) and settings.as_dict()["stages"] == list(STAGES)
    with pytest.raises(SystemExit):
        script.parse_args(["--out", str(tmp_path), "--batch", "0"])


class _FakePipe:
    """Stands in for the world Flux: an "image" is ``(kind, prompt)``, so the stage's wiring shows."""

    def __call__(self, refs, guides, eta_schedule, negative_prompt, generator, **kw):
        from types import SimpleNamespace

        assert len(generator) == len(refs) == len(guides) and negative_prompt == ""
        return SimpleNamespace(reference_images=[("tdg", r) for r in refs], guide_images=[("guide", g) for g in guides])

    def base_call(self, prompt, num_images_per_prompt, generator, negative_prompt, **kw):
        from types import SimpleNamespace

        prompts = [prompt] * num_images_per_prompt if isinstance(prompt, str) else prompt
        assert len(generator) == len(prompts)
        return SimpleNamespace(images=[("prompting", p) for p in prompts])


def test_substitution_judges_each_method_s_images_and_marks_guide_positive_pairings(tmp_path):
    """The substitution stage on two pairings with a fake pipeline and a judge that finds S+ in
    every tied image and guide and in no prompting-only one: records per image and method, in order."""
    import numpy as np
    from experiments.world_tdg import substitution

    from concept_grounding.world import BirdWorld

    world = BirdWorld()
    pairings = world.default_pairings()[:2]

    def judge_fn(images):
        probs = np.array([[1.0 if kind in ("tdg", "guide") else 0.0] * 312 for kind, _ in images])
        return np.full(len(images), -1), probs  # no species kept: success never

    sub = substitution(
        world,
        _FakePipe(),
        judge_fn,
        {"num_inference_steps": 1},
        WorldTDGSettings(out=tmp_path, images=2, batch=4),
        pairings,
    )
    by_method = {}
    for r in sub["records"]:
        by_method.setdefault(r["method"], []).append(r)
    assert len(by_method["prompting"]) == len(by_method["tdg"]) == 2 * len(pairings)
    assert all(r["s_plus_found"] and r["guide_s_plus"] and r["pairing_guide_positive"] for r in by_method["tdg"])
    assert not any(r["s_plus_found"] or r["success"] for r in by_method["prompting"])
    assert [sub["images"]["prompting"][r["image_id"]] for r in by_method["prompting"]] == [
        ("prompting", r["reference_prompt"]) for r in by_method["prompting"]
    ]
    assert [r["image_index"] for r in by_method["tdg"]][:2] == [0, 1]
