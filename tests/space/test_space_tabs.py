"""The Space's tab handlers called directly (no server): each returns what the package
computes, checked against known answers."""

import numpy as np
import pytest
from PIL import Image

from concept_grounding.space import tab_concepts, tab_explain, tab_sub, tab_tdg
from concept_grounding.space.common import to_batch
from concept_grounding.space.inputs import MAX_IMAGE_SIDE, UserInputError
from concept_grounding.space.resources import ResourceStore


@pytest.fixture(scope="module")
def store(tiny_space_store):
    """The session's Space store with tiny quick builds (tests/conftest.py)."""
    return tiny_space_store


def test_tdg_prompts_follow_sub_templates():
    c_r, c_g, category = tab_tdg.prompts("073.Blue_Jay", "has_bill_shape::needle")
    assert (c_r, c_g, category) == (
        "A photo of a Blue Jay with the body of a Blue Jay and a beak like a Hummingbird",
        "A photo of a Hummingbird",
        "shape",
    )
    with pytest.raises(UserInputError, match="no TDG prompt template"):
        tab_tdg.prompts("073.Blue_Jay", "has_size::small_(5_-_9_in)")
    with pytest.raises(UserInputError, match="Pick a reference class"):
        tab_tdg.prompts("", "has_bill_shape::needle")


def test_tdg_eta_plot_and_pair(store):
    assert tab_tdg.eta_figure("has_tail_pattern::solid", steps=4).ndim == 3
    kwargs = dict(steps=2, seed=3)
    ref, guide, base = tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", **kwargs)
    ref2, _, base2 = tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", **kwargs)
    assert ref.shape == (tab_tdg.TINY_SIZE, tab_tdg.TINY_SIZE, 3) and ref.dtype == np.uint8
    assert np.array_equal(ref, ref2) and np.array_equal(base, base2)  # seeded
    # eta(t=1) = 1 for colour attributes, so the tied reference moves away from the
    # untied prompting-only image that starts from the same latents.
    assert not np.array_equal(ref, base) and not np.array_equal(ref, guide)
    with pytest.raises(UserInputError, match="Steps"):
        tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", steps=0)


def test_a_cancelled_tdg_run_stops_between_steps_and_leaves_the_pipeline_as_it_was(store):
    """``cancelled`` is asked after every denoising step; once true the run
    stops (here after 2 of 2 x 4 steps) and the shared pipeline serves the next call as before."""
    kwargs = dict(steps=4, seed=3)
    alone = tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", **kwargs)
    asked = []

    def cancelled() -> bool:
        asked.append(True)
        return len(asked) >= 2

    with pytest.raises(tab_tdg.Cancelled, match="stopped after 2 of 8 denoising steps"):
        tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", cancelled=cancelled, **kwargs)
    again = tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", cancelled=lambda: False, **kwargs)
    assert len(asked) == 2 and all(np.array_equal(a, b) for a, b in zip(alone, again))


def test_closing_a_running_handler_cancels_its_work():
    """Gradio closes a generator handler whose visitor left; the work thread
    then sees ``cancelled()`` and stops, and the closing does not wait for it."""
    import threading
    import time

    from concept_grounding.space.guard import run_while_wanted

    stopped = threading.Event()

    def work(cancelled):
        while not cancelled():
            time.sleep(0.01)
        stopped.set()
        raise tab_tdg.Cancelled("stopped")

    updates = run_while_wanted(work, "idle")
    assert next(updates) == "idle" and not stopped.is_set()
    start = time.perf_counter()
    updates.close()
    assert time.perf_counter() - start < 0.1 and stopped.wait(5)
    assert list(run_while_wanted(lambda cancelled: 42, "idle")) == [42]


@pytest.mark.parametrize("on_disk", ["float16", "float32"])
def test_a_listed_pipeline_folder_runs_whatever_its_precision_on_disk(tmp_path, on_disk):
    """``space --tdg-model <the shipped world Flux folder>`` (float16 on disk)
    failed every request with "mat1 and mat2 must have the same dtype, but got Half and
    Float"; the Space loads a listed folder the way ``load_world_flux`` does, in float32."""
    import torch
    from diffusers import FluxPipeline
    from safetensors import safe_open

    from concept_grounding.space.policy import ModelPolicy
    from concept_grounding.worldflux import WORLD_FLUX_DIR, load_world_flux

    folder = WORLD_FLUX_DIR
    if on_disk == "float32":
        folder = tmp_path / "world-flux-fp32"
        load_world_flux(pipeline_cls=FluxPipeline).save_pretrained(folder)
    with safe_open(str(folder / "text_encoder" / "model.safetensors"), "pt") as f:
        assert f.get_tensor(next(iter(f.keys()))).dtype == getattr(torch, on_disk)
    store = ResourceStore(policy=ModelPolicy(tdg_models=(str(folder),)))
    images = tab_tdg.generate(store, "017.Cardinal", "has_crown_color::black", model=str(folder), steps=1)
    assert [im.shape for im in images] == [(32, 32, 3)] * 3  # the folder's trained side


def test_sub_explorer_tallies_match_the_probabilities(store):
    out = tab_sub.explore(store, "017.Cardinal|has_crown_color::black", 2)
    s_plus_row = out["table"][0]
    assert s_plus_row[:2] == ["has_crown_color::black", "S+"]
    assert out["original"].shape == out["edited"].shape and not np.array_equal(out["original"], out["edited"])
    # recompute s+ by hand from the model's probabilities on the pairing's counterfactuals
    world = store.get("world", None)
    model, size = store.get("concept_model", None)
    label = list(world.class_names).index("017.Cardinal")
    pairs = [
        world.counterfactual(world.sample(i), "has_crown_color::black")
        for i in world.class_indices(label, tab_sub.PER_PAIRING, start=tab_sub.HELD_OUT_START)
    ]
    import torch

    with torch.no_grad():
        probs = model(to_batch([p.edited.image for p in pairs], size)).concept_probs.numpy()
    j = list(model.concept_names).index("has_crown_color::black")
    assert out["result"]["s_plus"] == pytest.approx(float((probs[:, j] > 0.5).mean()))
    assert s_plus_row[3] == pytest.approx(float(probs[2, j]), abs=1e-3)
    with pytest.raises(UserInputError, match="Pick a pairing"):
        tab_sub.explore(store, "", 0)


def test_explain_on_an_uploaded_rgba_image(store, tmp_path):
    path = tmp_path / "big.png"
    rgba = np.zeros((900, 700, 4), np.uint8)
    rgba[..., 2] = 255
    rgba[100:400, 100:400, 3] = 255
    Image.fromarray(rgba, mode="RGBA").save(path)
    out = tab_explain.explain(
        store,
        str(path),
        0,
        "a bird\na photo of a bird with a red breast",
        clusters=4,
        baselines=["random", "gradcam", "rollout"],
    )
    assert max(out["image"].shape[:2]) == MAX_IMAGE_SIDE and out["image"].shape[2] == 3
    assert len(out["gallery"]) == 2 + 3 and out["notes"] == [tab_explain.WORLD_ONLY]  # a cat photo too
    assert "knows only the procedurally drawn bird world" in tab_explain.WORLD_ONLY
    assert len(out["table"]) == 2 * 4
    # weights w_k = drop_k / sum_j drop_j (paper rule) sum to 1 per text, when the drops do not cancel
    for t in range(2):
        rows = [r for r in out["table"] if r[0] == out["table"][t * 4][0]]
        drops = np.array([r[3] for r in rows])
        if drops.sum() > 1e-4:
            assert sum(r[2] for r in rows) == pytest.approx(1.0, abs=1e-2)
    with pytest.raises(UserInputError, match=r"^Baselines: unknown \[.lime.\]"):
        tab_explain.explain(store, None, 0, "a bird", baselines=["lime"])


def test_concepts_on_a_world_bird_are_checked_against_the_truth(store, tmp_path):
    out = tab_concepts.concepts(store, None, 7, top=4)
    world = store.get("world", None)
    sample = world.sample(7)
    from concept_grounding.vocabulary import load_vocabulary

    vocab = load_vocabulary()
    assert [r[0] for r in out["table"]] == [1, 2, 3, 4]
    importances = [r[2] for r in out["table"]]
    assert importances == sorted(importances, reverse=True)
    for row in out["table"]:
        assert row[4] == ("yes" if sample.attributes[vocab.attribute_index(row[1])] else "no")
    assert len(out["gallery"]) == 4 and "True class" in out["summary"]
    path = tmp_path / "bird.png"
    Image.fromarray(sample.image).convert("L").save(path)  # grayscale upload: no ground truth
    uploaded = tab_concepts.concepts(store, str(path), 0, top=1)
    assert len(uploaded["table"]) == 1 and uploaded["table"][0][4:] == [None, None]
    assert "no ground truth" in uploaded["summary"]


def test_models_are_loaded_from_an_artifacts_folder(store, tmp_path):
    """A bench-style folder (``models/<slug>``) is used instead of a quick build."""
    model, size = store.get("concept_model", tab_sub.build_concept_model)
    model.save_pretrained(tmp_path / "models" / "cbm-joint")
    other = ResourceStore(artifacts=tmp_path, image_size=store.build.concept_size)
    _, loaded_size = other.get("concept_model", tab_sub.build_concept_model)
    assert loaded_size == size == store.build.concept_size
    assert other.status()["concept_model"][0].startswith("loaded from")
    out_a = tab_sub.explore(store, "017.Cardinal|has_crown_color::black", 0)
    other.get("world", lambda _: store.get("world", None))  # the same world, the model fed the same px
    out_b = tab_sub.explore(other, "017.Cardinal|has_crown_color::black", 0)
    assert out_a["table"] == out_b["table"]


def test_explain_on_a_named_local_clip_and_a_bad_name(store, tmp_path):
    from concept_grounding.errors import ModelUnavailableError
    from concept_grounding.models.clip import WordTokenizer, WorldCLIP
    from concept_grounding.space.policy import ModelPolicy

    folder = tmp_path / "my-clip"
    WorldCLIP(
        WordTokenizer.from_vocabulary().words,
        image_size=32,
        patch_size=8,
        vision_width=32,
        text_width=32,
        vision_layers=1,
        text_layers=1,
        head_width=16,
    ).save_pretrained(folder)
    missing = str(tmp_path / "nothing-here")
    # the store's default policy offers no named model: the folder is refused before any load
    with pytest.raises(UserInputError, match="does not load the CLIP model"):
        tab_explain.explain(store, None, 3, "a photo of a bird", clusters=3, model_name=str(folder))
    assert not store.is_ready(f"clip:{folder}")
    listed = ResourceStore(
        artifacts=None, image_size=64, seed=0, policy=ModelPolicy(clip_models=(str(folder), missing))
    )
    listed.get("world", lambda _: store.get("world", None))
    out = tab_explain.explain(listed, None, 3, "a photo of a bird", clusters=3, model_name=str(folder))
    assert len(out["gallery"]) == 1 and len(out["table"]) == 3 and out["notes"] == []  # a world bird: nothing to say
    assert listed.is_ready(f"clip:{folder}") and -1.0 <= out["similarity"][0] <= 1.0
    assert listed.cached_models() == [f"clip:{folder}"]
    # the command line's own error (the page shows the line `explain --model` prints)
    with pytest.raises(ModelUnavailableError, match="^--model: no such folder or file .*nothing-here"):
        tab_explain.explain(listed, None, 0, "a bird", model_name=missing)


def test_explain_and_concepts_handlers_are_safe_from_concurrent_threads(store):
    """The Space runs up to 4 requests of a tab at once in threads over one store: four
    Explain (CCI + gradient baselines on the shared CLIP) and four Concepts (CoAM on the
    shared post-hoc CBM) requests started together give exactly their sequential results."""
    import pickle
    import threading
    from concurrent.futures import ThreadPoolExecutor

    jobs = [
        lambda i=i: tab_explain.explain(
            store,
            None,
            i,
            "a bird\na photo of a bird with a black crown",
            clusters=3 + i % 2,
            baselines=["gradcam", "grad-eclip", "rollout"],
        )
        for i in range(4)
    ]
    jobs += [lambda i=i: tab_concepts.concepts(store, None, 10 + i, top=3) for i in range(4)]
    alone = [pickle.dumps(job()) for job in jobs]
    barrier = threading.Barrier(len(jobs))

    def together(job):
        barrier.wait(timeout=60)
        return pickle.dumps(job())

    with ThreadPoolExecutor(len(jobs)) as pool:
        assert list(pool.map(together, jobs)) == alone


def test_the_quick_build_trains_the_bench_variant():
    """Without artifacts the SUB tab trains bench.models.train_variant's QUICK_VARIANT at the
    store's build sizes: the same weights as calling the bench function directly."""
    import torch

    from concept_grounding.bench.models import train_variant
    from concept_grounding.space.builds import SpaceBuild
    from concept_grounding.space.common import get_world, world_concept_tensors
    from concept_grounding.vocabulary import load_vocabulary

    store = ResourceStore(artifacts=None, image_size=32, seed=3, build=SpaceBuild.tiny())
    model, size = store.get("concept_model", tab_sub.build_concept_model)
    vocab = load_vocabulary()
    tensors = world_concept_tensors(
        get_world(store), 2, [vocab.attribute_index(n) for n in tab_sub.concept_names()], 32
    )
    direct = train_variant(tab_sub.QUICK_VARIANT, tensors, store.build.concept_training())
    assert size == 32 and store.build.concept_training().seed == 3
    for (name, a), b in zip(model.state_dict().items(), direct.state_dict().values()):
        assert torch.equal(a, b), name


def test_tdg_verdicts_are_the_shipped_judge_s(store):
    """Under the TDG images, the world judge's verdicts. Fed the world's own exact
    edit (as the 'reference' and 'guide') and the unedited bird (as 'prompting only'), the
    shipped judge finds S+ on the edit only and keeps the species on both."""
    from concept_grounding.judge import load_world_judge
    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.loader import trained_world_config

    world = BirdWorld(trained_world_config())
    attribute = "has_breast_color::red"
    label = world.class_names.index("073.Blue_Jay")
    index = next(
        label + k * world.num_classes
        for k in range(200_000, 200_100)
        if world.edited(label + k * world.num_classes, attribute)[0] is not None
    )
    edited, original = world.edited(index, attribute)[0].image, world.sample(index).image
    text = tab_tdg.verdicts(store, "073.Blue_Jay", attribute, [edited, edited, original], model=tab_tdg.WORLD_MODEL)
    rows = [line for line in text.splitlines() if line.startswith(("| TDG", "| Prompting"))]
    assert rows[0].startswith("| TDG reference | yes") and rows[0].endswith("| yes |")
    assert rows[1].startswith("| TDG guide | yes") and rows[1].endswith("| - |")
    assert rows[2].startswith("| Prompting only | no") and rows[2].endswith("| yes |")
    assert "world Flux's 32 px birds only" in tab_tdg.verdicts(
        store, "073.Blue_Jay", attribute, [], model=tab_tdg.TINY_MODEL
    )
    assert load_world_judge().image_size == world.config.image_size == 32


def test_tdg_tab_opens_on_a_pairing_whose_guide_shows_s_plus(store):
    """The default pairing and seed, generated by the world Flux as the tab does,
    give a guide in which the shipped judge finds S+; the same seed gives the same images."""
    c, attribute = tab_tdg.DEFAULT_PAIRING
    kwargs = dict(model=tab_tdg.WORLD_MODEL, steps=tab_tdg.DEFAULT_STEPS, seed=tab_tdg.DEFAULT_SEED)
    images = tab_tdg.generate(store, c, attribute, **kwargs)
    again = tab_tdg.generate(store, c, attribute, **kwargs)
    assert all(np.array_equal(a, b) for a, b in zip(images, again))
    other = tab_tdg.generate(store, c, attribute, **{**kwargs, "seed": tab_tdg.DEFAULT_SEED + 1})
    assert not np.array_equal(images[1], other[1])
    text = tab_tdg.verdicts(store, c, attribute, images, model=tab_tdg.WORLD_MODEL)
    guide = next(line for line in text.splitlines() if line.startswith("| TDG guide"))
    assert guide.startswith("| TDG guide | yes"), text
    assert "Not validated" not in text
    assert "What to expect" in tab_tdg.EXPECTATION


def test_tdg_verdicts_say_when_the_judge_is_not_validated_on_the_group(tiny_space_store, monkeypatch):
    """The store loads the judge with the groups its validation passed (here patched to one)."""
    import concept_grounding.judge as judge_pkg
    from concept_grounding.space.resources import ResourceStore
    from concept_grounding.world import BirdWorld
    from concept_grounding.worldflux.loader import trained_world_config

    monkeypatch.setattr(judge_pkg, "judge_validated_groups", lambda path=None: frozenset({"breast_color"}))
    store = ResourceStore(artifacts=None, image_size=64, seed=0, build=tiny_space_store.build)
    birds = [BirdWorld(trained_world_config()).sample(i).image for i in range(3)]
    validated = tab_tdg.verdicts(store, "073.Blue_Jay", "has_breast_color::red", birds, model=tab_tdg.WORLD_MODEL)
    other = tab_tdg.verdicts(store, "073.Blue_Jay", "has_crown_color::yellow", birds, model=tab_tdg.WORLD_MODEL)
    assert "Not validated" not in validated and "| TDG reference |" in validated
    assert "*Not validated on crown color:" in other and "| TDG reference |" in other


def test_the_sub_explorer_s_first_use_loads_the_shipped_model_in_seconds():
    """The first SUB explorer click trained its model (78-84 s; 256 s on this
    machine under load) behind a spinner. The default build's model is shipped: the first
    request on a fresh store answers in under 10 s, with the model the record says."""
    import time
    from dataclasses import asdict

    from concept_grounding.space.builds import SpaceBuild

    assert tab_sub.shipped_build() == asdict(SpaceBuild().seeded(0))
    store = ResourceStore(None)
    start = time.perf_counter()
    out = tab_sub.explore(store, tab_sub.DEFAULT_PAIRING, 0)
    seconds = time.perf_counter() - start
    assert seconds < 10, seconds
    assert "shipped with the package" in store.status()["concept_model"][0]
    assert "s+ =" in out["summary"] and len(out["table"]) >= 2


def test_other_builds_train_their_own_model(tiny_space_store):
    """The shipped model is only the default build's: a tiny build (another size) trains."""
    assert tab_sub.shipped_build() != __import__("dataclasses").asdict(tiny_space_store.build)
    tab_sub.explore(tiny_space_store, tab_sub.DEFAULT_PAIRING, 0)
    assert "shipped" not in tiny_space_store.status()["concept_model"][0]


def test_the_explain_and_concepts_tabs_first_use_load_their_shipped_models_in_seconds():
    """The Explain tab's world CLIP (10.8 s to train here, 27 s under load) and the
    Concepts tab's post-hoc CBM (13.7 s) were trained on first use. Both ship for the default
    Space (their recipes in ``space_build.json``): a fresh store's first request of each tab
    answers in under 10 s with the shipped model."""
    import time

    from concept_grounding.space import tab_concepts, tab_explain
    from concept_grounding.space.shipped import shipped_record

    store = ResourceStore(None)
    assert shipped_record(tab_explain.SHIPPED_CLIP) == tab_explain.clip_recipe(store)
    assert shipped_record(tab_concepts.SHIPPED_POSTHOC) == tab_concepts.posthoc_recipe(store)
    for run, key in (
        (lambda: tab_explain.explain(store, None, 0, "a bird", clusters=3), "world_clip"),
        (lambda: tab_concepts.concepts(store, None, 0, top=3), "posthoc_cbm"),
    ):
        start = time.perf_counter()
        out = run()
        seconds = time.perf_counter() - start
        assert seconds < 10, (key, seconds)
        assert "shipped with the package" in store.status()[key][0] and out["gallery"]


def test_another_recipe_trains_its_own_explain_and_concepts_models(tiny_space_store):
    """The shipped post-hoc CBM is only the default build's (a tiny build trains its own); the
    shipped world CLIP only its recipe's (another image size or seed trains)."""
    from concept_grounding.space import tab_concepts, tab_explain
    from concept_grounding.space.shipped import shipped_folder

    assert shipped_folder(tab_concepts.SHIPPED_POSTHOC, tab_concepts.posthoc_recipe(tiny_space_store)) is None
    assert shipped_folder(tab_explain.SHIPPED_CLIP, tab_explain.clip_recipe(ResourceStore(None, seed=1))) is None
    tab_concepts.concepts(tiny_space_store, None, 0, top=2)
    assert "quick build" in tiny_space_store.status()["posthoc_cbm"][0]


def test_the_metrics_tab_opens_on_sub_accuracy_and_its_help_is_markdown():
    """The tab opened on CCD, its help a block of raw reStructuredText (````(N, K)````)."""
    from concept_grounding.space import tab_metrics

    assert tab_metrics.DEFAULT_METRIC == "sub_accuracy" and tab_metrics.DEFAULT_METRIC in tab_metrics.METRICS
    for name in tab_metrics.METRICS:
        text = tab_metrics.metric_help(name)
        arguments = text.split("**Arguments:**\n\n", 1)[1]
        assert arguments.startswith("- `") and "``" not in arguments and ":func:" not in text, name
        assert "```text" not in text, name
    assert "- `generated_probabilities`: `(N_gen, K)` oracle softmax" in tab_metrics.metric_help(
        "concept_confidence_deviation"
    )
