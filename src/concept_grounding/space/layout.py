"""The five tabs' Gradio layouts, each wired to the plain handler functions of its ``tab_*`` module
through :func:`~.guard.guarded` (one line per error, the visitor's slots) and
:func:`~.guard.run_while_wanted` (a request whose visitor left stops)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..web.limits import Gate
from .guard import guarded, run_while_wanted
from .resources import ResourceStore
from .served import big_png, or_zero, served_png, upload_path

__all__ = ["tab_tdg_ui", "tab_sub_ui", "tab_explain_ui", "tab_concepts_ui", "tab_metrics_ui"]


def _status(store: ResourceStore) -> Callable[[], str]:
    return lambda: store.status_markdown()


def tab_tdg_ui(gr: Any, store: ResourceStore, tab: Any, status: Any, gate: Gate | None = None) -> None:
    classes, attributes = tab.choices()
    gr.Markdown(
        "Tied Diffusion Guidance (SUB, Sec. 3) makes a reference bird carry a target attribute by "
        "tying its denoising to a *guide* image's. The default model is a small Flux trained on "
        "the bird world (32 px; blurry birds, see its model card for the measured quality); the "
        "tiny random Flux shows only the mechanics (noise-like images). The operator can offer "
        f"real Flux models at launch (`--tdg-model` or `{tab.MODEL_ENV}`).\n\n{tab.EXPECTATION}"
    )
    with gr.Row():
        ref = gr.Dropdown(classes, value=tab.DEFAULT_PAIRING[0], label="Reference class", elem_id="tdg-class")
        attr = gr.Dropdown(attributes, value=tab.DEFAULT_PAIRING[1], label="Target attribute", elem_id="tdg-attr")
        model = gr.Dropdown(
            tab.model_choices(store.policy),
            value=tab.DEFAULT_MODEL,
            label="Model",
            elem_id="tdg-model",
            allow_custom_value=store.policy.allow_any,
        )
    with gr.Row():
        steps = gr.Slider(
            1,
            tab.MAX_STEPS,
            value=tab.DEFAULT_STEPS,
            step=1,
            label="Steps",
            info=f"{tab.DEFAULT_STEPS}: how the world Flux was measured (model card)",
        )
        seed = gr.Number(
            tab.DEFAULT_SEED, label="Seed"
        )  # no precision: the handler refuses 2.5 and NaN, naming the field
    with gr.Row():
        c_r = gr.Textbox(label="Reference prompt c_R", elem_id="tdg-cr", interactive=False)
        c_g = gr.Textbox(label="Guide prompt c_G", elem_id="tdg-cg", interactive=False)
    eta = gr.Image(label="eta(t) schedule", type="numpy", elem_id="tdg-eta", interactive=False)
    button = gr.Button("Generate", variant="primary", elem_id="tdg-run")
    with gr.Row():
        out_ref = gr.Image(label="TDG reference", type="numpy", elem_id="tdg-ref", interactive=False)
        out_guide = gr.Image(label="TDG guide", type="numpy", elem_id="tdg-guide", interactive=False)
        out_base = gr.Image(label="Prompting only (no tie)", type="numpy", elem_id="tdg-base", interactive=False)
    out_verdicts = gr.Markdown(elem_id="tdg-verdicts")

    @guarded
    def describe(reference_class: str, target_attribute: str, n_steps: float = 4) -> tuple[str, str, Any]:
        r, g, _ = tab.prompts(reference_class, target_attribute)
        return r, g, served_png(tab.eta_figure(target_attribute, steps=n_steps))

    @functools.partial(guarded, gate=gate)
    def run(reference_class: str, target_attribute: str, model_name: str, n_steps: float, seed_value: float):
        if not store.is_ready(tab.pipeline_key(model_name)):
            gr.Info("Loading the diffusion model (first use)...", duration=4)

        def work(cancelled: Callable[[], bool]) -> tuple:
            images = tab.generate(
                store,
                reference_class,
                target_attribute,
                model=model_name,
                steps=n_steps,
                seed=or_zero(seed_value),
                cancelled=cancelled,
            )
            judged = tab.verdicts(store, reference_class, target_attribute, images, model=model_name)
            return (*(big_png(im) for im in images), judged)

        yield from run_while_wanted(work, (gr.skip(),) * 4)

    for dropdown in (ref, attr):
        dropdown.change(describe, [ref, attr, steps], [c_r, c_g, eta], api_name=False)
    button.click(describe, [ref, attr, steps], [c_r, c_g, eta], api_name="tdg_prompts").then(
        run, [ref, attr, model, steps, seed], [out_ref, out_guide, out_base, out_verdicts], api_name="tdg_generate"
    ).then(_status(store), None, status, api_name=False)


def tab_sub_ui(gr: Any, store: ResourceStore, tab: Any, status: Any, gate: Gate | None = None) -> None:
    gr.Markdown(
        "SUB substitutions in the bird world: the same bird before and after one attribute is "
        "substituted (S+ added, S- removed), and a concept model's probabilities for S+ and S-. "
        "s+ is the fraction of the pairing's images where p(S+) > 0.5; s- where p(S-) <= 0.5 "
        "(SUB Sec. 5.5). The model is loaded from the artifacts folder (`make demo`) or, without "
        f"one, a small joint CBM is trained on the world ({tab.FIRST_USE}; the status line says when "
        "it is ready; it gets about 96 % of concepts right on ordinary world birds)."
    )
    pairings = tab.pairing_choices()
    with gr.Row():
        values = [v for _, v in pairings]
        default = tab.DEFAULT_PAIRING if tab.DEFAULT_PAIRING in values else (values[0] if values else None)
        pairing = gr.Dropdown(pairings, value=default, label="Pairing (class | S+)", elem_id="sub-pairing")
        index = gr.Slider(0, tab.PER_PAIRING - 1, value=0, step=1, label="Image of the pairing", elem_id="sub-index")
    button = gr.Button("Show", variant="primary", elem_id="sub-run")
    with gr.Row():
        original = gr.Image(label="Original", type="numpy", elem_id="sub-original", interactive=False)
        edited = gr.Image(label="Counterfactual", type="numpy", elem_id="sub-edited", interactive=False)
    table = gr.Dataframe(
        headers=["attribute", "role", "p(original)", "p(counterfactual)", "counted as correct"],
        label="Concept model predictions",
        elem_id="sub-table",
        interactive=False,
    )
    tallies = gr.Markdown(elem_id="sub-tallies")

    @functools.partial(guarded, gate=gate)
    def show(pairing_value: str, i: float):
        if not store.is_ready("concept_model"):
            gr.Info(
                f"The concept model is still being prepared ({tab.FIRST_USE}); this answer waits for it.", duration=8
            )

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.explore(store, pairing_value, i, cancelled=cancelled)
            return big_png(out["original"]), big_png(out["edited"]), out["table"], out["summary"]

        yield from run_while_wanted(work, (gr.skip(),) * 4)

    button.click(show, [pairing, index], [original, edited, table, tallies], api_name="sub_explore").then(
        _status(store), None, status, api_name=False
    )


def tab_explain_ui(gr: Any, store: ResourceStore, tab: Any, status: Any, gate: Gate | None = None) -> None:
    gr.Markdown(
        "Concept Cluster Importance (CCI): the image's patch tokens are clustered (K-means), each "
        "cluster is cut out of every attention layer in turn, and the drop in image-text "
        "similarity is the cluster's importance. Upload an image (PNG/JPEG/WebP; large images "
        "are downscaled to 512 px, grayscale/RGBA converted) or leave it empty to use a world "
        "bird. The default model is a small CLIP trained on the bird world, and it knows nothing else: on "
        "your own photo it shows what a bird-world model makes of it. The operator can offer "
        "other CLIPs at launch (`--clip-model`: an open_clip name, a transformers id or a local folder)."
    )
    with gr.Row():
        upload = gr.File(label="Image (optional)", file_count="single", elem_id="explain-upload")
        world_index = gr.Number(0, label="...or world bird #", elem_id="explain-index")
    texts = gr.Textbox(
        "a photo of a bird with a black crown\na photo of a bird",
        lines=3,
        label="Texts (one per line)",
        elem_id="explain-texts",
    )
    with gr.Row():
        clusters = gr.Slider(*tab.CLUSTERS, value=tab.DEFAULT_CLUSTERS, step=1, label="Clusters K")
        baselines = gr.CheckboxGroup(tab.BASELINES, value=list(tab.BASELINES), label="Baselines")
    model_name = gr.Dropdown(
        tab.model_choices(store),
        value="",
        label="CLIP model",
        elem_id="explain-model",
        allow_custom_value=store.policy.allow_any,
    )
    button = gr.Button("Explain", variant="primary", elem_id="explain-run")
    with gr.Row():
        shown = gr.Image(label="Input (as used)", type="numpy", elem_id="explain-input", interactive=False)
        cluster_map = gr.Image(label="Cluster map", type="numpy", elem_id="explain-clusters", interactive=False)
    overlays = gr.Gallery(
        label="CCI importance overlays (one per text) and baselines", elem_id="explain-gallery", columns=5
    )
    scores = gr.Dataframe(
        headers=["text", "cluster k", "weight w_k", "drop Δs_k"],
        label="Per-cluster similarity drops",
        elem_id="explain-table",
        interactive=False,
    )

    @functools.partial(guarded, gate=gate)
    def explain(file: Any, idx: float, text: str, k: float, chosen: list[str], name: str = ""):
        key = f"clip:{name.strip()}" if (name or "").strip() else "world_clip"
        if not store.is_ready(key):
            gr.Info("Loading the CLIP model (first use)...", duration=4)
        path = upload_path(file, "Image")

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.explain(
                store,
                path,
                or_zero(idx),
                text,
                clusters=k,
                baselines=chosen,
                model_name=name or "",
                gate=gate,
                cancelled=cancelled,
            )
            gallery = [(big_png(im), caption) for im, caption in out["gallery"]]
            return (big_png(out["image"]), big_png(out["cluster_map"]), gallery, out["table"]), out["notes"]

        for done in run_while_wanted(work, None):
            if done is None:
                yield (gr.skip(),) * 4
        outputs, notes = done
        for note in notes:
            gr.Warning(note, duration=12)
        yield outputs

    button.click(
        explain,
        [upload, world_index, texts, clusters, baselines, model_name],
        [shown, cluster_map, overlays, scores],
        api_name="explain",
    ).then(_status(store), None, status, api_name=False)


def tab_concepts_ui(gr: Any, store: ResourceStore, tab: Any, status: Any, gate: Gate | None = None) -> None:
    gr.Markdown(
        "A post-hoc concept bottleneck model (CAVs on a backbone, Aysel et al.) names the top "
        "concepts of an image with their concept activation maps (CoAM). On a world bird the "
        "truth is known, so each concept is checked: does it **exist** in the image, and does "
        "its map's top region contain the part's centre (**located**, CLM with alpha = 3)?"
    )
    with gr.Row():
        upload = gr.File(label="Image (optional)", file_count="single", elem_id="concepts-upload")
        world_index = gr.Number(0, label="...or world bird #", elem_id="concepts-index")
        top = gr.Slider(*tab.TOP, value=5, step=1, label="Top concepts")
    button = gr.Button("Find concepts", variant="primary", elem_id="concepts-run")
    shown = gr.Image(label="Input (as used)", type="numpy", elem_id="concepts-input", interactive=False)
    maps = gr.Gallery(label="CoAM maps of the top concepts", elem_id="concepts-gallery", columns=5)
    table = gr.Dataframe(
        headers=["rank", "concept", "importance θ·u", "u", "exists", "located"],
        label="Top concepts",
        elem_id="concepts-table",
        interactive=False,
    )
    summary = gr.Markdown(elem_id="concepts-summary")

    @functools.partial(guarded, gate=gate)
    def run(file: Any, idx: float, k: float):
        if not store.is_ready("posthoc_cbm"):
            gr.Info("Preparing the post-hoc CBM (first use)...", duration=4)
        path = upload_path(file, "Image")

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.concepts(store, path, or_zero(idx), top=k, gate=gate, cancelled=cancelled)
            gallery = [(big_png(im), caption) for im, caption in out["gallery"]]
            return big_png(out["image"]), gallery, out["table"], out["summary"]

        yield from run_while_wanted(work, (gr.skip(),) * 4)

    button.click(run, [upload, world_index, top], [shown, maps, table, summary], api_name="concepts").then(
        _status(store), None, status, api_name=False
    )


def tab_metrics_ui(gr: Any, tab: Any, gate: Gate | None = None) -> None:
    gr.Markdown(
        "Upload predictions and compute a metric. **JSON** works for every metric: an object whose "
        "keys are the metric's arguments (arrays as nested lists). **CSV** (one row per image) "
        "works where the columns below say so. The expected inputs of the chosen metric:"
    )
    names = list(tab.METRICS)
    metric = gr.Dropdown(
        [(tab.METRICS[n].title, n) for n in names], value=tab.DEFAULT_METRIC, label="Metric", elem_id="metrics-name"
    )
    help_md = gr.Markdown(tab.metric_help(tab.DEFAULT_METRIC), elem_id="metrics-help")
    upload = gr.File(label="Predictions (.csv or .json)", file_count="single", elem_id="metrics-upload")
    with gr.Row():
        button = gr.Button(NO_PREDICTIONS, variant="primary", elem_id="metrics-run", interactive=False)
        example_button = gr.Button("Compute the example", elem_id="metrics-example")
    result = gr.JSON(label="Result", elem_id="metrics-result")
    plot = gr.Image(label="Plot", type="numpy", elem_id="metrics-plot", interactive=False)

    @functools.partial(guarded, gate=gate)
    def compute(name: str, file: Any):
        path = upload_path(file, "Predictions")

        def work(cancelled: Callable[[], bool]) -> tuple:
            scalars, image = tab.compute_metric(name, path, cancelled=cancelled)
            return scalars, served_png(image)

        yield from run_while_wanted(work, (gr.skip(),) * 2)

    @functools.partial(guarded, gate=gate)
    def example(name: str):
        scalars, image = tab.compute_example(name)
        return scalars, served_png(image)

    def ready(file: Any) -> Any:
        """Compute is pressed only with a file: without one, the button says what is missing
        (one message, instead of an error toast and two outputs in red); an API call without a
        file is refused by ``compute`` in one line."""
        return gr.Button("Compute" if file is not None else NO_PREDICTIONS, interactive=file is not None)

    example_button.click(example, metric, [result, plot], api_name="metrics_example")
    metric.change(lambda n: tab.metric_help(n), metric, help_md, api_name=False)
    upload.change(ready, upload, button, api_name=False, queue=False, show_progress="hidden")
    button.click(compute, [metric, upload], [result, plot], api_name="metrics")


#: The Metrics tab's Compute button while no predictions file is uploaded.
NO_PREDICTIONS = "Compute (upload a predictions file first)"
