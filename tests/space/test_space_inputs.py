"""The Space's input sanitising and metric handlers: fast, no Gradio server, no models."""

import json

import numpy as np
import pytest
from PIL import Image

from concept_grounding.space import tab_concepts, tab_explain, tab_sub, tab_tdg
from concept_grounding.space.env import OFFLINE_DEFAULTS, configure_environment
from concept_grounding.space.inputs import (
    MAX_IMAGE_SIDE,
    UserInputError,
    check_upload_path,
    load_image,
    parse_texts,
    read_table,
    redact_paths,
    to_rgb,
    whole_number,
)
from concept_grounding.space.resources import ResourceStore
from concept_grounding.space.tab_metrics import METRICS, compute_metric, metric_help


def test_grayscale_and_rgba_become_rgb(tmp_path):
    gray = tmp_path / "g.png"
    Image.fromarray(np.full((10, 12), 77, np.uint8), mode="L").save(gray)
    assert load_image(gray).shape == (10, 12, 3) and (load_image(gray) == 77).all()
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[0, 0, 3] = 255  # one opaque red pixel, the rest transparent -> white
    path = tmp_path / "a.png"
    Image.fromarray(rgba, mode="RGBA").save(path)
    out = load_image(path)
    assert out[0, 0].tolist() == [200, 0, 0] and out[1, 1].tolist() == [255, 255, 255]


def test_huge_image_is_downscaled_keeping_aspect(tmp_path):
    path = tmp_path / "big.jpg"
    Image.new("RGB", (3000, 1500), (10, 200, 30)).save(path)
    out = load_image(path)
    assert out.shape == (MAX_IMAGE_SIDE // 2, MAX_IMAGE_SIDE, 3)
    assert abs(int(out[100, 100, 1]) - 200) <= 3


def test_float_and_16bit_arrays():
    assert to_rgb(np.ones((3, 3), np.float32)).max() == 255
    assert to_rgb(np.arange(9, dtype=np.uint16).reshape(3, 3) * 1000).dtype == np.uint8
    with pytest.raises(UserInputError, match="NaN"):
        to_rgb(np.full((2, 2), np.nan))


@pytest.mark.parametrize("content", [b"%PDF-1.4 not an image", b"", b"\x89PNG\r\n\x1a\n truncated"])
def test_non_image_upload_is_a_friendly_error(tmp_path, content):
    path = tmp_path / "upload.png"
    path.write_bytes(content)
    with pytest.raises(UserInputError, match="not an image we can read"):
        load_image(path)


def test_missing_upload():
    with pytest.raises(UserInputError, match="upload an image"):
        load_image(None)


def test_parse_texts():
    assert parse_texts("a\n\n b ; c ") == ["a", "b", "c"]
    with pytest.raises(UserInputError, match="at least one text"):
        parse_texts("  \n ; ")
    with pytest.raises(UserInputError, match="At most"):
        parse_texts("\n".join(["x"] * 9))


def test_upload_paths_outside_the_temp_dir_are_refused(tmp_path):
    inside = tmp_path / "gradio" / "abc" / "x.png"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"x")
    assert check_upload_path(inside, (tmp_path / "gradio",)) == inside.resolve()
    for bad in ("/etc/passwd", tmp_path / "gradio" / ".." / "secret.txt"):
        with pytest.raises(UserInputError, match="Only files uploaded"):
            check_upload_path(bad, (tmp_path / "gradio",))


NAN = float("nan")


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda store: tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", steps=NAN), "Steps"),
        (lambda store: tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", steps=2.5), "Steps"),
        (lambda store: tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", steps=2, seed=1e308), "Seed"),
        (lambda store: tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", steps=2, seed=NAN), "Seed"),
        (lambda store: tab_tdg.eta_figure("has_crown_color::black", steps=NAN), "Steps"),
        (lambda store: tab_sub.explore(store, tab_sub.DEFAULT_PAIRING, NAN), "Image of the pairing"),
        (lambda store: tab_sub.explore(store, tab_sub.DEFAULT_PAIRING, 1.5), "Image of the pairing"),
        (lambda store: tab_explain.explain(store, None, NAN, "a bird"), "World bird #"),
        (lambda store: tab_explain.explain(store, None, 0, "a bird", clusters=NAN), "Clusters K"),
        (lambda store: tab_concepts.concepts(store, None, 0, top=NAN), "Top concepts"),
        (lambda store: tab_concepts.concepts(store, None, 1e308, top=3), "World bird #"),
        (lambda store: tab_concepts.concepts(store, None, [[[[[[[[0]]]]]]]], top=3), "World bird #"),
    ],
)
def test_numeric_fields_are_refused_in_one_line_naming_the_field(call, field):
    """NaN, 1e308, fractions (refused, not truncated) and odd values, before any
    model is loaded (the store is empty and stays so)."""
    store = ResourceStore()
    with pytest.raises(UserInputError) as refused:
        call(store)
    message = str(refused.value)
    assert message.startswith(f"{field} must be a whole number from ") and "\n" not in message and len(message) < 120
    assert store.status() == {}


def test_whole_numbers_pass_unchanged():
    assert whole_number(3.0, "Steps", 1, 50) == 3 and whole_number(7, "Seed", 0, 9) == 7
    assert whole_number("4", "Steps", 1, 50) == 4


def test_a_folder_and_deep_json_get_a_line_without_a_server_path(tmp_path):
    """A folder sent as an upload, and JSON nested past Python's recursion limit."""
    root = tmp_path / "gradio"
    (root / "abc").mkdir(parents=True)
    with pytest.raises(UserInputError, match=r"^Predictions: not an uploaded file") as refused:
        check_upload_path(root / "abc", (root,), field="Predictions")
    assert str(tmp_path) not in str(refused.value)
    deep = root / "abc" / "deep.json"
    deep.write_text('{"theta": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(UserInputError, match="'deep.json' nests its JSON too deeply") as refused:
        compute_metric("concept_global_importance", deep)
    assert str(tmp_path) not in str(refused.value)
    assert redact_paths(f"[Errno 21] Is a directory: '{root}/abc'") == "[Errno 21] Is a directory: 'abc'"
    assert (
        redact_paths("see https://huggingface.co/org/repo and org/repo")
        == "see https://huggingface.co/org/repo and org/repo"
    )


def test_read_table_csv_and_json(tmp_path):
    csv_path = tmp_path / "p.csv"
    csv_path.write_text("a,b\n1,2\n3,4\n")
    assert read_table(csv_path) == {"a": ["1", "3"], "b": ["2", "4"]}
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1\n")
    with pytest.raises(UserInputError, match="do not have 2 cells"):
        read_table(bad)
    records = tmp_path / "r.json"
    records.write_text(json.dumps([{"x": 1, "y": 2}, {"x": 3, "y": 4}]))
    assert read_table(records) == {"x": [1, 3], "y": [2, 4]}


def _ccd_csv(path):
    # ConceptBed Eq. 3 by hand: concept 0: gen mean 0.8 vs real 0.9; concept 1: 0.8 vs 0.9 -> CCD 0.1
    path.write_text(
        "split,label,p_0,p_1\ngenerated,0,0.9,0.1\ngenerated,0,0.7,0.3\ngenerated,1,0.2,0.8\n"
        "real,0,0.9,0.1\nreal,1,0.1,0.9\n"
    )
    return path


def test_metrics_tab_ccd_from_csv_known_answer(tmp_path):
    scalars, plot = compute_metric("concept_confidence_deviation", str(_ccd_csv(tmp_path / "ccd.csv")))
    assert scalars["ccd"] == pytest.approx(0.1) and scalars["accuracy"] == 1.0
    assert plot.ndim == 3 and plot.shape[2] == 3


def test_metrics_tab_refuses_fractional_labels_instead_of_flooring_them(tmp_path):
    """A label 1.7 used to be floored to concept 1 (and scored); the metric's own validation
    refuses it, and the tab says which column and value."""
    path = tmp_path / "ccd.csv"
    path.write_text(_ccd_csv(tmp_path / "ok.csv").read_text().replace("generated,1,", "generated,1.7,"))
    with pytest.raises(
        UserInputError, match=r"rejected the inputs: generated_labels must hold integer labels, found 1.7"
    ):
        compute_metric("concept_confidence_deviation", str(path))
    path.write_text(_ccd_csv(tmp_path / "ok.csv").read_text().replace("generated,1,", "generated,1.0,"))
    assert compute_metric("concept_confidence_deviation", str(path))[0]["ccd"] == pytest.approx(0.1)


def test_metric_list_is_the_metrics_package(tmp_path):
    """The tab calls the package's own functions (no copied names or import strings)."""
    from concept_grounding import metrics, plotting

    assert METRICS["sub_accuracy"].function is metrics.sub_accuracy
    assert METRICS["concept_global_importance"].plot is plotting.cgim_histograms
    assert set(METRICS) <= set(metrics.__all__) and all(n == s.function.__name__ for n, s in METRICS.items())


def test_metrics_tab_cgim_from_json_known_answer(tmp_path):
    path = tmp_path / "cgim.json"
    path.write_text(json.dumps({"theta": [[1.0, -1.0], [0.5, 0.5]], "class_attributes": [[1, 0], [1, 1]]}))
    scalars, _ = compute_metric("concept_global_importance", str(path))
    assert scalars["concept_type1"] == pytest.approx((2**-0.5 + 1) / 2, abs=1e-5)


def test_metrics_tab_missing_columns_and_keys_are_friendly(tmp_path):
    csv_path = tmp_path / "x.csv"
    csv_path.write_text("label,p_0\n0,0.3\n")
    with pytest.raises(UserInputError, match=r"missing column\(s\) \['split'\]"):
        compute_metric("concept_confidence_deviation", str(csv_path))
    js = tmp_path / "x.json"
    js.write_text(json.dumps({"theta": [[1.0]]}))
    with pytest.raises(UserInputError, match="missing key"):
        compute_metric("concept_global_importance", str(js))
    with pytest.raises(UserInputError, match="upload a CSV or JSON"):
        compute_metric("concept_confidence_deviation", None)


def test_every_metric_documents_its_inputs():
    for name in METRICS:
        text = metric_help(name)
        assert "JSON keys" in text or "not in this build" in text


def test_offline_defaults_do_not_override_the_user(monkeypatch):
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "True")
    for key in OFFLINE_DEFAULTS:
        if key != "GRADIO_ANALYTICS_ENABLED":
            monkeypatch.delenv(key, raising=False)
    env = configure_environment()
    assert env["GRADIO_ANALYTICS_ENABLED"] == "True" and env["HF_HUB_DISABLE_TELEMETRY"] == "1"


def test_metrics_tab_sub_accuracy_from_csv_known_answer(tmp_path):
    path = tmp_path / "sub.csv"
    # image 1: p(S+)=0.9 > 0.5 hit, p(S-)=0.2 <= 0.5 hit; image 2: p(S+)=0.3 miss, p(S-)=0.7 miss
    path.write_text(
        "target_attribute,removed_attributes,reference_class,has_crown_color::black,has_crown_color::red\n"
        "has_crown_color::black,has_crown_color::red,017.Cardinal,0.9,0.2\n"
        "has_crown_color::black,has_crown_color::red,017.Cardinal,0.3,0.7\n"
    )
    scalars, _ = compute_metric("sub_accuracy", str(path))
    assert scalars["s_plus"] == pytest.approx(0.5) and scalars["s_minus"] == pytest.approx(0.5)


def test_the_space_card_states_the_default_model_and_where_make_demo_writes_the_models():
    """The Space card said the default diffusion model was the tiny random Flux
    (it is the world Flux), and its ``--artifacts artifacts/`` example pointed where
    ``make demo`` writes nothing (it writes the bench models under ``reports/demo/bench``)."""
    import re
    from pathlib import Path

    from concept_grounding.space import tab_tdg

    root = Path(__file__).resolve().parents[2]
    card = (root / "spaces" / "concept-grounding" / "README.md").read_text()
    assert tab_tdg.DEFAULT_MODEL == tab_tdg.WORLD_MODEL and "default diffusion model is the **world Flux**" in card
    report = re.search(r"^REPORT \?= (\S+)", (root / "Makefile").read_text(), re.M).group(1)
    from argparse import Namespace

    from concept_grounding.next_step import next_line

    # make demo's last line: the Space on the models it wrote
    assert f"space --artifacts {report}/bench" in next_line(Namespace(command="demo", out=Path(report)), "cg")
    assert re.findall(r"--artifacts (\S+)", card) == [f"{report}/bench"]


@pytest.mark.parametrize(
    "name",
    [
        "concept_confidence_deviation",
        "concept_existence",
        "concept_global_importance",
        "concept_location",
        "sub_accuracy",
    ],
)
def test_metrics_tab_takes_the_evaluate_module_s_example(name, tmp_path):
    """The Metrics tab refused ``predictions`` (the ``evaluate`` name) and wanted
    ``scores``; each metric Space's example, saved as JSON, now computes here, with the
    module's own scalar values."""
    import json
    from pathlib import Path

    from concept_grounding.space.metric_widget import load_metric, widget_example
    from concept_grounding.space.tab_metrics import compute_metric

    metric = load_metric(Path(__file__).resolve().parents[2] / "metrics" / name)
    example = widget_example(metric)
    path = tmp_path / "example.json"
    path.write_text(json.dumps(example))
    scalars, _ = compute_metric(name, str(path))
    expected = metric.compute(**example)
    for key, value in scalars.items():
        if key in expected and value is not None:
            assert value == pytest.approx(expected[key], abs=1e-6), key
    assert scalars


@pytest.mark.parametrize(
    "name",
    [
        "concept_confidence_deviation",
        "concept_existence",
        "concept_global_importance",
        "concept_location",
        "sub_accuracy",
    ],
)
def test_metrics_tab_offers_an_example_for_every_metric(name):
    """The Metrics tab had no example file; each metric's help shows its example
    (the metric Space's, one copy in ``concept_grounding.metrics.examples``) and the tab
    computes it as an uploaded file."""
    import json

    from concept_grounding.metrics.examples import EXAMPLES
    from concept_grounding.space.tab_metrics import compute_example, metric_help

    assert json.dumps(EXAMPLES[name]) in metric_help(name)
    scalars, image = compute_example(name)
    assert scalars and image.ndim == 3
