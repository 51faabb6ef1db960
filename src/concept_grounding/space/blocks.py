"""The Gradio layout: five tabs wired to the plain handler functions of ``tab_*``.

Everything Gradio-specific lives here. :func:`guarded` is the Space's error boundary, the
command line's own (:func:`page_message` over :func:`concept_grounding.errors.user_message`):
a user error (a bad value, a file that is not what it should be, a model that cannot be
loaded) reaches the page as the one line the CLI prints after ``error:``, server paths
redacted; any other exception is a bug: one line in the log, a generic line in the page,
never a traceback.

An abandoned request stops, on every tab: its handler is a generator that runs the tab's
work in a thread (:func:`run_while_wanted`) and yields a no-op update every
:data:`ALIVE_CHECK_SECONDS`; Gradio stops iterating a generator whose visitor disconnected
or cancelled and closes it, which turns the work's ``cancelled()`` true: Tied Diffusion
stops at its next denoising step, the other tabs before their next stage or batch
(:func:`~.common.stopper`), and the log says where in one line.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .env import artifacts_dir, configure_environment
from .inputs import redact_paths
from .limits import Gate, SpaceLimits, visitor_of
from .policy import ModelPolicy
from .builds import SpaceBuild
from .resources import FeatureUnavailable, ResourceStore

__all__ = ["build_demo", "guarded", "CONCURRENCY_LIMIT", "DELETE_CACHE", "space_blocks"]

logger = logging.getLogger(__name__)

#: Requests of one event run at once (in parallel threads); the rest wait in the queue.
#: Parallel is safe: handlers only read their models and the TDG pipeline gives each call
#: its own scheduler, so a request gets the same result as alone (no per-model lock needed,
#: and a slow TDG request does not hold up a SUB explorer one).
CONCURRENCY_LIMIT = 4
#: How often (seconds) a running Tied Diffusion request yields to Gradio, which then checks
#: that its visitor is still there.
ALIVE_CHECK_SECONDS = 0.5
#: Gradio's ``delete_cache`` (seconds) of the default :class:`~.limits.SpaceLimits`: every 5
#: minutes, files the Space stored (uploads, the images it served) that are more than 15 minutes
#: old are deleted; all of them at shutdown (a SIGTERM too: :func:`concept_grounding.space.launch`).
DELETE_CACHE = SpaceLimits().delete_cache

INTRO = """# concept-grounding: do interpretable vision models see the concepts they claim?

Make a counterfactual (**Tied Diffusion**), watch a concept model meet it (**SUB explorer**),
see where a CLIP model looked (**Explain**), check a post-hoc CBM's concepts against the
truth (**Concepts**), and score your own predictions (**Metrics**). Everything runs on CPU,
offline, on the procedurally drawn *bird world* whose every concept is known. The tabs' models
are prepared when the Space starts (shipped with the package: they load in a second or two),
and the status line says what is loaded.
"""


def guarded(fn: Callable[..., Any], gate: Gate | None = None) -> Callable[..., Any]:
    """Wrap a handler (a function or a generator) so that errors reach the page as one line
    of ``gr.Error`` text, with server paths redacted (:func:`~.inputs.redact_paths`).

    With a ``gate``, the handler also takes Gradio's ``gr.Request`` (last argument) and runs
    inside one of its visitor's slots (:meth:`~.limits.Gate.slot`): a visitor with
    ``visitor_requests`` requests running is refused in one line."""
    import gradio as gr

    def page_error(err: Exception) -> Exception:
        if isinstance(err, gr.Error):
            return err
        return gr.Error(page_message(err, getattr(fn, "__name__", "handler")), print_exception=False)

    def split(args: tuple) -> tuple[tuple, str]:
        if gate is None:
            return args, ""
        request = next((a for a in args if isinstance(a, gr.Request)), None)
        rest = tuple(a for a in args if not isinstance(a, gr.Request))
        return rest, request_visitor(request)

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            args, visitor = split(args)
            try:
                with _slot(gate, visitor):
                    yield from fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - GeneratorExit (a closed run) is not an Exception
                raise page_error(err) from None

        return _with_request(generator, fn, gate)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args, visitor = split(args)
        try:
            with _slot(gate, visitor):
                return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - the page gets one line, the log the stack
            raise page_error(err) from None

    return _with_request(wrapper, fn, gate)


#: What a visitor reads when a request failed on a bug (the log has the one-line summary).
INTERNAL_ERROR = "Something went wrong on the server (an internal error, logged); try again or another input."


def page_message(err: BaseException, handler: str = "handler") -> str:
    """The one line a visitor reads for ``err``: the CLI's own classification
    (:func:`concept_grounding.errors.user_message`, so a user error reads as the command line
    prints it after ``error:``), with server paths redacted (:func:`~.inputs.redact_paths`);
    a bug gets :data:`INTERNAL_ERROR` and one log line (:func:`~concept_grounding.errors.internal_summary`).
    :class:`~.resources.FeatureUnavailable` (a feature this install lacks) is said as is.

    >>> page_message(ValueError("num_clusters must be >= 2, got 1"))
    'num_clusters must be >= 2, got 1'
    >>> page_message(FileNotFoundError(2, "No such file or directory", "/srv/data/notes.csv"))
    'notes.csv: no such file or folder'
    >>> page_message(KeyError("x")) == INTERNAL_ERROR
    True
    """
    from ..errors import internal_summary, user_message

    message = str(err) if isinstance(err, FeatureUnavailable) else user_message(err)
    if message is not None:
        return redact_paths(" ".join(message.split()))
    logger.error("space: %s failed: %s", handler, redact_paths(internal_summary(err)))
    return INTERNAL_ERROR


def request_visitor(request: Any) -> str:
    """The visitor (:func:`~.limits.visitor_of`) of a ``gr.Request`` (``"unknown"`` for ``None``)."""
    if request is None:
        return "unknown"
    client = getattr(request, "client", None)
    headers = getattr(request, "headers", None) or {}
    return visitor_of(getattr(client, "host", None), headers.get("x-forwarded-for"))


def _slot(gate: Gate | None, visitor: str) -> Any:
    import contextlib

    return gate.slot(visitor) if gate is not None else contextlib.nullcontext()


def _with_request(wrapper: Callable[..., Any], fn: Callable[..., Any], gate: Gate | None) -> Callable[..., Any]:
    """Give ``wrapper`` the signature of ``fn`` plus a last ``request: gr.Request`` parameter
    (Gradio fills parameters annotated so), when there is a ``gate``."""
    if gate is None:
        return wrapper
    import gradio as gr

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    params.append(inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                    annotation=gr.Request))
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {"request": gr.Request}
    del wrapper.__wrapped__  # type: ignore[attr-defined]  # Gradio reads the signature above
    return wrapper


def space_blocks(gr: Any, gate: Gate) -> type:
    """A ``gr.Blocks`` subclass whose input checks fail in one line: a value Gradio refuses
    (a choice not offered, a file outside its cache) gives the visitor one line naming the
    field, without the value or a server path, and the log one line, not a traceback."""

    class SpaceBlocks(gr.Blocks):
        async def preprocess_data(self, block_fn: Any, inputs: list[Any], state: Any, explicit_call: bool = False):
            try:
                return await super().preprocess_data(block_fn, inputs, state, explicit_call)
            except Exception as err:  # noqa: BLE001 - one line for the page and the log
                if isinstance(err, gr.Error) and not err.print_exception:
                    raise
                field = _refused_field(block_fn, inputs)
                refusal = gate.refuse(field, _short(err).rstrip(".") + ".")
                raise gr.Error(str(refusal), print_exception=False) from None

    return SpaceBlocks


def _short(err: Exception, limit: int = 120) -> str:
    """The first line of an error, paths redacted, values shortened to ``limit`` characters."""
    text = " ".join(redact_paths(str(err)).split())
    if "Value:" in text and "not in the list of choices" in text:
        return "not one of the choices offered"
    if "not in the upload folder" in text or "cannot be accessed" in text or "Cannot move" in text:
        return "only files uploaded through this page can be used"
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"this value is not accepted ({text})"


def _refused_field(block_fn: Any, inputs: list[Any]) -> str:
    """The label of the first input whose value its component refuses (else "an input")."""
    for block, value in zip(getattr(block_fn, "inputs", ()), inputs):
        try:
            block.preprocess(value)
        except Exception:  # noqa: BLE001 - looking for the culprit
            return str(getattr(block, "label", None) or type(block).__name__)
    return "Input"


def run_while_wanted(work: Callable[[Callable[[], bool]], Any], idle: Any) -> Any:
    """A generator over ``work(cancelled)`` run in a thread: it yields ``idle`` every
    :data:`ALIVE_CHECK_SECONDS` until the work is done, then its result. When Gradio closes
    the generator (the visitor disconnected or cancelled), ``cancelled()`` turns true and
    the work is expected to stop soon; the generator does not wait for it."""
    from concurrent.futures import ThreadPoolExecutor

    left = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="space-work")
    future = pool.submit(work, left.is_set)
    pool.shutdown(wait=False)  # the thread ends with the work

    def log_abandoned(done: Any) -> None:
        if left.is_set() and not done.cancelled() and done.exception() is not None:
            logger.info("space: an abandoned request ended: %s", done.exception())

    future.add_done_callback(log_abandoned)
    try:
        while True:
            try:
                result = future.result(timeout=ALIVE_CHECK_SECONDS)
                break
            except TimeoutError:
                yield idle
    finally:
        left.set()
    yield result


def build_demo(
    artifacts: str | Path | None = None, store: ResourceStore | None = None, policy: ModelPolicy | None = None,
    build: SpaceBuild | None = None, limits: SpaceLimits | None = None,
) -> Any:
    """The Space as a ``gr.Blocks`` (not launched, no queue set).

    Args:
        artifacts: folder with trained models (``make demo``); default
            ``$CONCEPT_GROUNDING_ARTIFACTS`` or ``./artifacts`` when it exists.
        store: a prepared :class:`ResourceStore` (tests pass one to share models).
        policy: the models visitors may choose and how many stay loaded; default
            :meth:`ModelPolicy.from_env` (ignored when ``store`` is given: the store's own).
        build: sizes of the models the Space trains when the artifacts have none; default
            :meth:`SpaceBuild.from_env` (``CONCEPT_GROUNDING_SPACE_BUILD=tiny`` for tests).
        limits: what a request, a visitor and the Space may use; default
            :meth:`SpaceLimits.from_env`. The demo's :class:`~.limits.Gate` is ``demo.space_gate``
            (:func:`concept_grounding.space.launch` puts its upload checks in front of Gradio's).
    """
    configure_environment()
    import gradio as gr

    from . import tab_concepts, tab_explain, tab_metrics, tab_sub, tab_tdg

    store = store or ResourceStore(artifacts_dir(artifacts), policy=policy or ModelPolicy.from_env(),
                                   build=build or SpaceBuild.from_env())
    gate = Gate(limits or SpaceLimits.from_env())
    blocks = space_blocks(gr, gate)
    with blocks(title="concept-grounding", analytics_enabled=False, delete_cache=gate.limits.delete_cache) as demo:
        gr.Markdown(INTRO + "\n" + gate.limits.markdown())
        status = gr.Markdown(store.status_markdown(), elem_id="status")
        with gr.Tabs():
            with gr.Tab("Tied Diffusion", id="tdg"):
                tab_tdg_ui(gr, store, tab_tdg, status, gate)
            with gr.Tab("SUB explorer", id="sub"):
                tab_sub_ui(gr, store, tab_sub, status, gate)
            with gr.Tab("Explain", id="explain"):
                tab_explain_ui(gr, store, tab_explain, status, gate)
            with gr.Tab("Concepts", id="concepts"):
                tab_concepts_ui(gr, store, tab_concepts, status, gate)
            with gr.Tab("Metrics", id="metrics"):
                tab_metrics_ui(gr, tab_metrics, gate)
    demo.space_gate = gate
    demo.space_store = store
    return demo


def warm_up(store: ResourceStore) -> None:
    """Build every tab's default model now, one after the other (the SUB explorer's first,
    the slowest), so that a visitor's first click finds it ready or being built. A build
    that fails is logged and left to the first request to try again."""
    from . import tab_concepts, tab_explain, tab_sub, tab_tdg

    jobs = [("concept_model", tab_sub.build_concept_model), ("world_clip", tab_explain.build_clip),
            ("posthoc_cbm", tab_concepts.build_posthoc),
            (tab_tdg.pipeline_key(tab_tdg.DEFAULT_MODEL), tab_tdg.build_world_pipeline)]
    for name, builder in jobs:
        try:
            store.get(name, builder)
        except Exception as err:  # noqa: BLE001 - warming up is best effort; the request will say
            logger.warning("space: warming up %s failed: %s", name, " ".join(redact_paths(str(err)).split())[:200])


def _big(image: Any, min_side: int = 256) -> str | None:
    """A small ``(H, W, 3)`` uint8 image, nearest-neighbour upscaled so the page shows its
    pixels, as a PNG file in Gradio's cache (:func:`served_png`)."""
    import numpy as np

    if image is None:
        return None
    factor = max(1, -(-min_side // max(1, min(image.shape[:2]))))
    return served_png(np.repeat(np.repeat(image, factor, axis=0), factor, axis=1) if factor > 1 else image)


def served_png(image: Any) -> str | None:
    """Write an ``(H, W, 3)`` uint8 image as a PNG into Gradio's file cache; return its path
    (``None`` for ``None``).

    Handlers return images as these paths, not arrays. For an array, Gradio 6 rewrites
    ``<cache>/<content hash>/image.webp`` in place on every request, so when two
    concurrent requests produce the same image, one visitor can be served a half-written
    file (``benchmarks/bench_space.py`` got an empty one). Here the file is written under a
    temporary name and renamed into place, so it is always whole; Gradio's own copy-to-cache
    step then finds it under the same content hash and serves it as is. PNG is lossless,
    so the page shows the exact pixels.
    """
    import io
    import os

    from gradio.processing_utils import hash_bytes
    from gradio.utils import get_upload_folder
    from PIL import Image

    from ..fileio import atomic_write_bytes

    if image is None or _CLOSING.is_set():  # the Space is shutting down: write nothing more
        return None
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="png")
    data = buffer.getvalue()
    path = Path(get_upload_folder()) / hash_bytes(data) / "image.png"
    try:
        os.utime(path)  # served again: young again for the cache sweep (DELETE_CACHE)
    except FileNotFoundError:
        atomic_write_bytes(path, data)
    _SERVED.add(path)
    return str(path)


#: The PNGs :func:`served_png` wrote (Gradio's cache deletion at shutdown knows only its own files).
_SERVED: set[Path] = set()
#: Set by :func:`delete_served`: requests still running at shutdown write no more images.
_CLOSING = threading.Event()


def delete_served() -> int:
    """Delete every PNG :func:`served_png` wrote, and its folder when empty (the Space's
    shutdown: nothing a visitor caused stays on disk); return how many files went. Images a
    request still running would serve afterwards are not written."""
    _CLOSING.set()
    gone = 0
    for path in list(_SERVED):
        try:
            path.unlink()
            gone += 1
        except FileNotFoundError:
            pass
        try:
            path.parent.rmdir()
        except OSError:
            pass
        _SERVED.discard(path)
    return gone


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
        model = gr.Dropdown(tab.model_choices(store.policy), value=tab.DEFAULT_MODEL, label="Model", elem_id="tdg-model",
                            allow_custom_value=store.policy.allow_any)
    with gr.Row():
        steps = gr.Slider(1, tab.MAX_STEPS, value=tab.DEFAULT_STEPS, step=1, label="Steps",
                          info=f"{tab.DEFAULT_STEPS}: how the world Flux was measured (model card)")
        seed = gr.Number(tab.DEFAULT_SEED, label="Seed")  # no precision: the handler refuses 2.5 and NaN, naming the field
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
            images = tab.generate(store, reference_class, target_attribute, model=model_name, steps=n_steps,
                                  seed=_or_zero(seed_value), cancelled=cancelled)
            judged = tab.verdicts(store, reference_class, target_attribute, images, model=model_name)
            return (*(_big(im) for im in images), judged)

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
    table = gr.Dataframe(headers=["attribute", "role", "p(original)", "p(counterfactual)", "counted as correct"],
                         label="Concept model predictions", elem_id="sub-table", interactive=False)
    tallies = gr.Markdown(elem_id="sub-tallies")

    @functools.partial(guarded, gate=gate)
    def show(pairing_value: str, i: float):
        if not store.is_ready("concept_model"):
            gr.Info(f"The concept model is still being prepared ({tab.FIRST_USE}); this answer waits for it.",
                    duration=8)

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.explore(store, pairing_value, i, cancelled=cancelled)
            return _big(out["original"]), _big(out["edited"]), out["table"], out["summary"]

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
        "bird. The default model is a small CLIP trained on the bird world; the operator can offer "
        "other CLIPs at launch (`--clip-model`: an open_clip name, a transformers id or a local folder)."
    )
    with gr.Row():
        upload = gr.File(label="Image (optional)", file_count="single", elem_id="explain-upload")
        world_index = gr.Number(0, label="...or world bird #", elem_id="explain-index")
    texts = gr.Textbox("a photo of a bird with a black crown\na photo of a bird", lines=3, label="Texts (one per line)", elem_id="explain-texts")
    with gr.Row():
        clusters = gr.Slider(*tab.CLUSTERS, value=tab.DEFAULT_CLUSTERS, step=1, label="Clusters K")
        baselines = gr.CheckboxGroup(tab.BASELINES, value=list(tab.BASELINES), label="Baselines")
    model_name = gr.Dropdown(tab.model_choices(store), value="", label="CLIP model", elem_id="explain-model",
                             allow_custom_value=store.policy.allow_any)
    button = gr.Button("Explain", variant="primary", elem_id="explain-run")
    with gr.Row():
        shown = gr.Image(label="Input (as used)", type="numpy", elem_id="explain-input", interactive=False)
        cluster_map = gr.Image(label="Cluster map", type="numpy", elem_id="explain-clusters", interactive=False)
    overlays = gr.Gallery(label="CCI importance overlays (one per text) and baselines", elem_id="explain-gallery", columns=5)
    scores = gr.Dataframe(headers=["text", "cluster k", "weight w_k", "drop Δs_k"],
                          label="Per-cluster similarity drops", elem_id="explain-table", interactive=False)

    @functools.partial(guarded, gate=gate)
    def explain(file: Any, idx: float, text: str, k: float, chosen: list[str], name: str = ""):
        key = f"clip:{name.strip()}" if (name or "").strip() else "world_clip"
        if not store.is_ready(key):
            gr.Info("Loading the CLIP model (first use)...", duration=4)
        path = _path(file, "Image")

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.explain(store, path, _or_zero(idx), text, clusters=k, baselines=chosen,
                              model_name=name or "", gate=gate, cancelled=cancelled)
            gallery = [(_big(im), caption) for im, caption in out["gallery"]]
            return (_big(out["image"]), _big(out["cluster_map"]), gallery, out["table"]), out["notes"]

        for done in run_while_wanted(work, None):
            if done is None:
                yield (gr.skip(),) * 4
        outputs, notes = done
        for note in notes:
            gr.Warning(note, duration=6)
        yield outputs

    button.click(explain, [upload, world_index, texts, clusters, baselines, model_name],
                 [shown, cluster_map, overlays, scores],
                 api_name="explain").then(_status(store), None, status, api_name=False)


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
    table = gr.Dataframe(headers=["rank", "concept", "importance θ·u", "u", "exists", "located"],
                         label="Top concepts", elem_id="concepts-table", interactive=False)
    summary = gr.Markdown(elem_id="concepts-summary")

    @functools.partial(guarded, gate=gate)
    def run(file: Any, idx: float, k: float):
        if not store.is_ready("posthoc_cbm"):
            gr.Info("Preparing the post-hoc CBM (first use)...", duration=4)
        path = _path(file, "Image")

        def work(cancelled: Callable[[], bool]) -> tuple:
            out = tab.concepts(store, path, _or_zero(idx), top=k, gate=gate, cancelled=cancelled)
            gallery = [(_big(im), caption) for im, caption in out["gallery"]]
            return _big(out["image"]), gallery, out["table"], out["summary"]

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
    metric = gr.Dropdown([(tab.METRICS[n].title, n) for n in names], value=names[0], label="Metric", elem_id="metrics-name")
    help_md = gr.Markdown(tab.metric_help(names[0]), elem_id="metrics-help")
    upload = gr.File(label="Predictions (.csv or .json)", file_count="single", elem_id="metrics-upload")
    with gr.Row():
        button = gr.Button("Compute", variant="primary", elem_id="metrics-run")
        example_button = gr.Button("Compute the example", elem_id="metrics-example")
    result = gr.JSON(label="Result", elem_id="metrics-result")
    plot = gr.Image(label="Plot", type="numpy", elem_id="metrics-plot", interactive=False)

    @functools.partial(guarded, gate=gate)
    def compute(name: str, file: Any):
        path = _path(file, "Predictions")

        def work(cancelled: Callable[[], bool]) -> tuple:
            scalars, image = tab.compute_metric(name, path, cancelled=cancelled)
            return scalars, served_png(image)

        yield from run_while_wanted(work, (gr.skip(),) * 2)

    @functools.partial(guarded, gate=gate)
    def example(name: str):
        scalars, image = tab.compute_example(name)
        return scalars, served_png(image)

    example_button.click(example, metric, [result, plot], api_name="metrics_example")
    metric.change(lambda n: tab.metric_help(n), metric, help_md, api_name=False)
    button.click(compute, [metric, upload], [result, plot], api_name="metrics")


def _or_zero(value: Any) -> Any:
    """An emptied number field (``None``) reads as 0; anything else is checked by the handler."""
    return 0 if value is None else value


def _path(file: Any, field: str) -> str | None:
    """The local path of the ``gr.File`` value of ``field``, checked to be a file in Gradio's upload folder."""
    from .inputs import check_upload_path

    if file is None:
        return None
    path = getattr(file, "name", None) or getattr(file, "path", None) or (file.get("path") if isinstance(file, dict) else file)
    if not path:
        return None
    return str(check_upload_path(path, _upload_roots(), field=field))


def _upload_roots() -> tuple[str, ...]:
    from gradio.utils import get_upload_folder

    return (get_upload_folder(),)
