"""Every folder in metrics/ is an evaluate module that loads offline, runs its own examples,
and agrees with the package function it wraps (evaluate tests/test_metric_common.py in spirit)."""

import os

os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import doctest
import re
from pathlib import Path

import evaluate as evaluate
import numpy as np
import pytest

from concept_grounding import load_vocabulary
from concept_grounding.metrics import (
    concept_confidence_deviation,
    concept_existence,
    concept_global_importance,
    concept_location,
    sub_accuracy,
)

ROOT = Path(__file__).resolve().parents[2]
METRICS = sorted(p.name for p in (ROOT / "metrics").iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


@pytest.fixture(autouse=True)
def _offline_at_repo_root(monkeypatch):
    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True, raising=False)
    monkeypatch.setattr(evaluate.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.chdir(ROOT)


def load(name: str, config: str | None = None):
    return evaluate.load(str(ROOT / "metrics" / name), config, keep_in_memory=True)


_EVALUATE_LOAD = evaluate.load


@pytest.fixture
def local_metrics(monkeypatch):
    """``evaluate.load("<name>")`` loads ``metrics/<name>`` (evaluate's own test does the same
    with its ``use_local_metrics``): the examples name a metric as a user on the Hub would."""

    def local(path, config_name=None, **kwargs):
        folder = ROOT / "metrics" / path
        return _EVALUATE_LOAD(str(folder) if folder.is_dir() else path, config_name, **kwargs)

    monkeypatch.setattr(evaluate, "load", local)


def test_the_five_metrics_are_there():
    assert METRICS == [
        "concept_confidence_deviation",
        "concept_existence",
        "concept_global_importance",
        "concept_location",
        "sub_accuracy",
    ]


@pytest.mark.parametrize("name", METRICS)
def test_folder_layout_and_metadata(name):
    folder = ROOT / "metrics" / name
    for file in (f"{name}.py", "README.md", "app.py", "requirements.txt"):
        assert (folder / file).is_file(), file
    assert "launch_metric_space(__file__)" in (folder / "app.py").read_text()
    compile((folder / "app.py").read_text(), str(folder / "app.py"), "exec")
    card = (folder / "README.md").read_text()
    for section in (
        "### Inputs",
        "### Output values",
        "#### Values from Popular Papers",
        "### Examples",
        "## Limitations",
        "## Citation",
        "## Further References",
    ):  # evaluate's card template
        assert section in card, section
    metric = load(name)
    assert isinstance(metric, evaluate.Metric)
    assert type(metric).score_direction in ("higher", "lower")
    assert isinstance(type(metric).category, str) and len(type(metric).score_range) == 2
    assert metric.citation.strip().startswith("@") and metric.description.strip()
    assert "Examples:" in metric.inputs_description


@pytest.mark.parametrize("name", METRICS)
def test_docstring_examples_run(name, local_metrics):
    metric = load(name)
    test = doctest.DocTestParser().get_doctest(metric.inputs_description, {}, name, None, 0)
    assert test.examples, "no >>> examples in _KWARGS_DESCRIPTION"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0


@pytest.mark.parametrize("name", METRICS)
def test_card_code_blocks_run(name, local_metrics):
    card = (ROOT / "metrics" / name / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert blocks, "no python code block in the card"
    for block in blocks:
        exec(compile(block, f"{name}/README.md", "exec"), {})


# ----------------------------------------------------------------- module == package function
def _assert_same(a: dict, b: dict):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            _assert_same(a[key], b[key])
        elif np.asarray(a[key]).dtype.kind in "US":
            assert np.asarray(a[key]).tolist() == np.asarray(b[key]).tolist(), key
        else:
            np.testing.assert_allclose(
                np.asarray(a[key], float), np.asarray(b[key], float), equal_nan=True, err_msg=key
            )


def _batched(metric, n: int, batch: int = 4, **columns):
    for s in range(0, n, batch):
        metric.add_batch(**{k: list(v[s : s + batch]) for k, v in columns.items()})


RNG = np.random.default_rng(0)
N, L, K = 10, 6, 3
THETA, U = RNG.normal(size=(L, K)), RNG.normal(size=(N, L))
REF = RNG.integers(0, K, N)
PRED = np.where(RNG.random(N) < 0.6, REF, RNG.integers(0, K, N))


def test_existence_module_agrees_with_function():
    labels = (RNG.random((N, L)) < 0.5).astype(int)
    metric = load("concept_existence")
    _batched(metric, N, predictions=PRED, references=REF, concept_scores=U, concept_labels=labels)
    got = metric.compute(theta=THETA, top_l=(1, 3), ranking="theta")
    _assert_same(got, concept_existence(THETA, U, PRED, labels, REF, top_l=(1, 3), ranking="theta"))


def test_cgim_module_agrees_with_function():
    V = (RNG.random((L, K)) < 0.5).astype(float)
    metric = load("concept_global_importance")
    _batched(metric, N, predictions=PRED, references=REF, concept_scores=U)
    _assert_same(metric.compute(theta=THETA, class_attributes=V), concept_global_importance(THETA, V, U, PRED, REF))


@pytest.mark.parametrize("config", ["classifier", "vqa"])
def test_ccd_module_agrees_with_function(config):
    if config == "vqa":
        gen, real = RNG.random(N), RNG.random(8)
    else:
        gen, real = RNG.dirichlet(np.ones(K), N), RNG.dirichlet(np.ones(K), 8)
    gy, ry = RNG.integers(0, K, N), np.r_[np.arange(K), RNG.integers(0, K, 8 - K)]
    metric = load("concept_confidence_deviation", config)
    _batched(metric, N, predictions=gen, references=gy)
    got = metric.compute(real_probabilities=real, real_labels=ry, reduction="pooled")
    _assert_same(got, concept_confidence_deviation(gen, gy, real, ry, mode=config, reduction="pooled"))


def test_location_module_agrees_with_function():
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.cbm_112[:L]]
    maps = RNG.normal(size=(N, L, 3, 3)).astype(np.float32)
    xy = RNG.uniform(0, 12, size=(N, vocab.num_parts, 2)).astype(np.float32)
    visible = RNG.random((N, vocab.num_parts)) < 0.7
    metric = load("concept_location")
    _batched(
        metric,
        N,
        predictions=PRED,
        references=REF,
        concept_scores=U,
        concept_maps=maps,
        part_xy=xy,
        part_visible=visible,
    )
    kw = dict(concept_names=names, image_size=(12, 12), alphas=(1, 3), top_l=(1, 2))
    got = metric.compute(theta=THETA, **kw)
    want = concept_location(maps, xy, visible, theta=THETA, concept_scores=U, predictions=PRED, references=REF, **kw)
    _assert_same(got, want)


@pytest.mark.parametrize("config", ["binary", "group_with_none"])
def test_sub_module_agrees_with_function(config):
    vocab = load_vocabulary()
    names = [vocab.attributes[i] for i in vocab.groups["bill_shape"] + vocab.groups["crown_color"]]
    targets = list(RNG.choice(names, N))
    removed = [
        [n for n in names if vocab.group_of(n) == vocab.group_of(t) and n != t][: RNG.integers(0, 3)] for t in targets
    ]
    classes = list(RNG.choice(["017.Cardinal", "073.Blue_Jay", "036.Northern_Flicker"], N))
    scores, none = RNG.random((N, len(names))), RNG.random(N)
    metric = load("sub_accuracy", config)
    columns = dict(predictions=scores, target_attributes=targets, removed_attributes=removed, reference_classes=classes)
    if config == "group_with_none":
        columns["none_scores"] = none
    _batched(metric, N, **columns)
    got = metric.compute(concept_names=names)
    want = sub_accuracy(
        scores,
        targets,
        removed,
        concept_names=names,
        reference_classes=classes,
        mode="binary" if config == "binary" else "group",
        none_scores=none if config == "group_with_none" else None,
    )
    _assert_same(got, want)


@pytest.mark.parametrize("config", ["binary", "group"])
def test_sub_module_refuses_none_scores_outside_group_with_none(config):
    """``none_scores`` was silently ignored outside "group_with_none"."""
    names = ["has_bill_shape::dagger", "has_bill_shape::cone"]
    with pytest.raises(ValueError, match="only used by the 'group_with_none' config") as err:
        load("sub_accuracy", config).compute(
            predictions=[[0.9, 0.1]],
            target_attributes=[names[0]],
            removed_attributes=[[names[1]]],
            reference_classes=["017.Cardinal"],
            none_scores=[0.5],
            concept_names=names,
        )
    assert "\n" not in str(err.value)


def test_module_bad_input_raises_value_error():
    metric = load("concept_existence")
    with pytest.raises(ValueError, match="theta"):
        metric.compute(predictions=[0], references=[0], concept_scores=[[1.0]], concept_labels=[[1]])
    with pytest.raises(ValueError, match="must have the same length"):
        load("concept_existence").add_batch(
            predictions=[0, 1], references=[0], concept_scores=[[1.0]], concept_labels=[[1]]
        )
    with pytest.raises(ValueError, match="probabilities"):
        load("concept_confidence_deviation", "vqa").compute(
            predictions=[1.5], references=[0], real_probabilities=[0.5], real_labels=[0]
        )
    with pytest.raises(ValueError, match="config_name"):
        load("sub_accuracy", "multiclass")


# ----------------------------------------------------------------- Spaces, save, examples
@pytest.mark.parametrize("name", METRICS)
def test_examples_name_the_metric_as_evaluate_does(name):
    """Examples once loaded ``evaluate.load("metrics/<name>")``, which works only
    from the repository root; evaluate's convention is ``evaluate.load("<name>")``."""
    folder = ROOT / "metrics" / name
    for text in ((folder / f"{name}.py").read_text(), (folder / "README.md").read_text()):
        assert 'evaluate.load("metrics/' not in text and f'evaluate.load("{name}"' in text


@pytest.mark.parametrize("name", METRICS)
def test_the_card_example_goes_through_evaluate_save(name, tmp_path):
    """``evaluate.save(**result)`` failed on every module (numpy arrays in the
    result); results are plain Python now, and the saved file holds them."""
    import json

    from concept_grounding.space.metric_widget import widget_example

    metric = load(name)
    result = metric.compute(**widget_example(metric))
    saved = evaluate.save(str(tmp_path / "result.json"), **result)
    assert (
        json.loads(Path(saved).read_text())["per_image" if "per_image" in result else next(iter(result))]
        == result["per_image" if "per_image" in result else next(iter(result))]
    )


@pytest.mark.parametrize("name", ["concept_existence", "concept_global_importance", "concept_location"])
def test_the_aysel_modules_name_their_paper(name):
    """The three Aysel et al. modules had empty ``reference_urls``."""
    assert load(name).reference_urls == ["https://arxiv.org/abs/2501.19271"]


def test_the_metric_space_gradio_pin_is_the_tested_gradio():
    """The card pins the Gradio its widget is tested with (this environment's)."""
    import gradio

    from concept_grounding.publish.code_repos import METRIC_SPACE_GRADIO

    assert gradio.__version__ == METRIC_SPACE_GRADIO


@pytest.mark.slow  # a Gradio server in a subprocess per metric
@pytest.mark.parametrize("name", METRICS)
def test_the_published_metric_space_starts_from_a_folder_named_app_and_computes_its_example(name, tmp_path):
    """On a Space the app runs from a folder named ``app``, where
    ``evaluate.load(<its folder>)`` imported ``app/app.py`` itself, and evaluate's widget sent
    no compute-time argument. The folder ``publish`` builds, copied to ``app/``, starts, pins
    its Gradio in the card and computes the card's example as ``compute`` does."""
    import json
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from gradio_client import Client
    from huggingface_hub import SpaceCard

    from concept_grounding.publish.code_repos import METRIC_SPACE_GRADIO, build_metric_space
    from concept_grounding.publish.wheel import PackageWheel
    from concept_grounding.space.metric_widget import json_safe, widget_examples

    app = tmp_path / "app"
    fake = tmp_path / "concept_grounding-0.0.0-py3-none-any.whl"  # the Space starts from PYTHONPATH here
    fake.write_bytes(b"")
    build_metric_space(ROOT / "metrics" / name, app, "someone", PackageWheel(fake, "0.0.0", frozenset()))
    card = SpaceCard.load(app / "README.md")
    assert card.data.sdk_version == METRIC_SPACE_GRADIO and "gradio" not in (app / "requirements.txt").read_text()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "GRADIO_SERVER_PORT": str(port),
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "PYTHONPATH": str(ROOT / "src"),
        "GRADIO_TEMP_DIR": str(tmp_path / "cache"),
    }
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "app.py"], cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.perf_counter() + 90
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.perf_counter() < deadline, log.read_text()[-2000:]
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                time.sleep(0.3)
        page = json.loads(urllib.request.urlopen(url + "config", timeout=10).read())
        assert page["title"] == card.data.title != type(load(name)).__name__  # the card's title
        client = Client(url, verbose=False, analytics_enabled=False)
        examples = widget_examples(load(name))
        for index, (config, example) in enumerate(examples.items()):  # every config, from its own tab
            got = client.predict(json.dumps(example), api_name="/compute" if index == 0 else f"/compute_{config}")
            got = got if isinstance(got, dict) else json.loads(got)
            assert got == json_safe(load(name, config).compute(**example)), config
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _card_configs(name: str) -> set[str]:
    """Every config the card and the module's docs name: ``evaluate.load("<name>", "<config>")`` calls and
    quoted words on lines that speak of configs, kept when ``evaluate.load`` accepts them."""
    import re

    folder = ROOT / "metrics" / name
    text = (folder / "README.md").read_text() + (folder / f"{name}.py").read_text()
    words = set(re.findall(rf'evaluate\.load\("{name}",\s*"(\w+)"\)', text))
    for line in text.splitlines():
        if re.search(r"[Cc]onfig", line):
            words |= set(re.findall(r'"(\w+)"', line))
    found = set()
    for word in words - {name, "default"}:
        try:
            load(name, word)
        except ValueError:
            continue
        found.add(word)
    return found


@pytest.mark.parametrize("name", METRICS)
def test_the_metric_space_reaches_every_config_the_card_describes(name):
    """Each config of the card has a tab (an example) on the Space, every example
    computes under its config, and every argument of an example has help from the module."""
    from concept_grounding.space.metric_widget import argument_help, widget_examples

    examples = widget_examples(load(name))
    assert _card_configs(name) <= set(examples), (name, _card_configs(name), set(examples))
    for config, example in examples.items():
        metric = load(name, config)
        metric.compute(**example)
        helps = argument_help(metric.inputs_description, tuple(example))
        assert all(helps.get(arg) for arg in example), (config, set(example) - set(helps))


def test_the_card_configs_are_found():
    """The scan above finds what the cards describe (it can fail)."""
    assert _card_configs("sub_accuracy") >= {"binary", "group", "group_with_none"}
    assert _card_configs("concept_confidence_deviation") >= {"classifier", "vqa"}


def test_nan_is_shown_as_nan():
    from concept_grounding.space.metric_widget import json_safe

    assert json_safe({"ccd": float("nan"), "x": [float("inf")]}) == {"ccd": "NaN", "x": ["Infinity"]}
