"""The Gradio layout of the Space: five tabs (:mod:`.layout`) wired to the plain handler functions
of ``tab_*``, behind the error boundary and request plumbing of :mod:`.guard`, serving images
through :mod:`.served`.

Everything Gradio-specific lives in these modules; :func:`build_demo` assembles the page and
:func:`warm_up` builds the tabs' default models at launch (the status line follows them).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..web.limits import Gate, WebLimits
from .builds import SpaceBuild
from .env import artifacts_dir, configure_environment
from .guard import ALIVE_CHECK_SECONDS, guarded, space_blocks
from .inputs import redact_paths
from .layout import tab_concepts_ui, tab_explain_ui, tab_metrics_ui, tab_sub_ui, tab_tdg_ui
from .policy import ModelPolicy
from .resources import ResourceStore
from .served import delete_served, served_png

__all__ = [
    "build_demo",
    "guarded",
    "warm_up",
    "CONCURRENCY_LIMIT",
    "DELETE_CACHE",
    "ALIVE_CHECK_SECONDS",
    "STATUS_POLL_SECONDS",
    "served_png",
    "delete_served",
]

logger = logging.getLogger(__name__)

#: Requests of one event run at once (in parallel threads); the rest wait in the queue.
#: Parallel is safe: handlers only read their models and the TDG pipeline gives each call
#: its own scheduler, so a request gets the same result as alone (no per-model lock needed,
#: and a slow TDG request does not hold up a SUB explorer one).
CONCURRENCY_LIMIT = 4
#: The cache sweep's ``(every, age)`` (seconds) of the default :class:`~concept_grounding.web.limits.WebLimits`: every 5
#: minutes, files the Space stored (uploads, the images it served) that are more than 15 minutes
#: old are deleted; all of them at shutdown (a SIGTERM too): :mod:`.sweep`, installed by
#: :func:`concept_grounding.space.launch` in place of Gradio's ``delete_cache``.
DELETE_CACHE = WebLimits().delete_cache
#: While the tabs' models are being prepared (:func:`warm_up`), an open page asks for the
#: status line this often (seconds); it stops asking once the warm-up is over.
STATUS_POLL_SECONDS = 2.0

INTRO = """# concept-grounding: do interpretable vision models see the concepts they claim?

Make a counterfactual (**Tied Diffusion**), watch a concept model meet it (**SUB explorer**),
see where a CLIP model looked (**Explain**), check a post-hoc CBM's concepts against the
truth (**Concepts**), and score your own predictions (**Metrics**). Everything runs on CPU,
offline, on the procedurally drawn *bird world* whose every concept is known. The tabs' models
are prepared when the Space starts (shipped with the package: they load in a second or two),
and the status line says what is loaded.
"""


def build_demo(
    artifacts: str | Path | None = None,
    store: ResourceStore | None = None,
    policy: ModelPolicy | None = None,
    build: SpaceBuild | None = None,
    limits: WebLimits | None = None,
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
            :meth:`WebLimits.from_env`. The demo's :class:`~concept_grounding.web.limits.Gate` is ``demo.space_gate``
            (:func:`concept_grounding.space.launch` puts its upload checks in front of Gradio's).
    """
    configure_environment()
    import gradio as gr

    from . import tab_concepts, tab_explain, tab_metrics, tab_sub, tab_tdg

    store = store or ResourceStore(
        artifacts_dir(artifacts), policy=policy or ModelPolicy.from_env(), build=build or SpaceBuild.from_env()
    )
    gate = Gate(limits or WebLimits.from_env())
    blocks = space_blocks(gr, gate)
    with blocks(title="concept-grounding", analytics_enabled=False) as demo:  # the cache sweep: launch()
        gr.Markdown(INTRO + "\n" + gate.limits.markdown())
        status = gr.Markdown(store.status_markdown(), elem_id="status")
        poll = gr.Timer(STATUS_POLL_SECONDS)
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

        def refresh() -> tuple[str, Any]:
            return store.status_markdown(), gr.Timer(active=store.warming)

        quiet = dict(queue=False, show_progress="hidden")
        demo.load(refresh, None, [status, poll], api_name="status", **quiet)  # the page opens on the current status
        poll.tick(refresh, None, [status, poll], api_name=False, **quiet)
    demo.space_gate = gate
    demo.space_store = store
    return demo


def warm_up(store: ResourceStore) -> None:
    """Build every tab's default model now, one after the other (the SUB explorer's first,
    the slowest), so that a visitor's first click finds it ready or being built. A build
    that fails is logged and left to the first request to try again. ``store.warming`` is true
    until it is done (open pages follow the status line until then)."""
    from . import tab_concepts, tab_explain, tab_sub, tab_tdg

    store.warming = True

    jobs = [
        ("concept_model", tab_sub.build_concept_model),
        ("world_clip", tab_explain.build_clip),
        ("posthoc_cbm", tab_concepts.build_posthoc),
        (tab_tdg.pipeline_key(tab_tdg.DEFAULT_MODEL), tab_tdg.build_world_pipeline),
    ]
    try:
        for name, builder in jobs:
            try:
                store.get(name, builder)
            except Exception as err:  # noqa: BLE001 - warming up is best effort; the request will say
                logger.warning("space: warming up %s failed: %s", name, " ".join(redact_paths(str(err)).split())[:200])
    finally:
        store.warming = False
