"""The annotation app: one Gradio page that renders any :class:`~.study.Study` over a :class:`~.study.StudyBackend`.

:class:`StudyHandlers` is what the app does, as plain functions (identify, current, submit: testable without a
browser); :func:`build_app` gives each study a tab (its fields by kind, its questions by kind with keyboard keys
generated from them, progress and guidelines; their HTML and keys: :mod:`.annotate_page`).
docs/human_validation.md, "The studies" and "Who annotates".
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .annotate_page import (
    KEYS,
    KEYS_CLASS,
    SHORTCUTS_JS,
    SUBMIT_CLASS,
    FilePath,
    field_html,
    guidelines_text,
    image_html,
    option_choices,
    option_label,
    question_wording,
    shortcut_keys,
)
from .annotation_items import AnnotationError, annotator_id, quote
from .study import Record, Study, StudyBackend

__all__ = [
    "View",
    "StudyHandlers",
    "FilePath",
    "identify_annotator",
    "build_app",
    "image_html",
    "shortcut_keys",
    "option_label",
    "SHORTCUTS_JS",
    "KEYS",
    "on_spaces",
    "LOG",
]

#: where refusals are logged, one line each, without the refused value
LOG = logging.getLogger("concept_grounding.annotate")

#: submits served at once (Gradio's default is 1 per event, which queues every annotator behind one
#: another; the store is safe with many writers).
CONCURRENCY = 16

#: Gradio's queue settings read from the environment when the queue is made (defaults kept if set):
#: after every event Gradio recomputes its monitoring summary with pandas over the last
#: ``GRADIO_ANALYTICS_MAX_EVENTS`` events (default 10,000, every ``..._CACHE_FREQUENCY`` = 1
#: event), a cost per submit that grows with the submits served; here over the last 1,000 events, once per 1,000.
GRADIO_ENV = {"GRADIO_ANALYTICS_MAX_EVENTS": "1000", "GRADIO_ANALYTICS_CACHE_FREQUENCY": "1000"}

#: the page's own link's token, read into the hidden token field when the page loads
TOKEN_JS = "() => new URLSearchParams(window.location.search).get('token') || ''"

#: what a stale or repeated submit is told (its answers were not stored)
STALE = (
    "not stored: that answer was for an image that is no longer open for you (answered already, or open too "
    "long); your open image is shown"
)


def on_spaces() -> bool:
    """Running on a Hugging Face Space (annotators sign in with OAuth there)."""
    return bool(os.environ.get("SPACE_ID"))


def identify_annotator(store: StudyBackend, token: object, oauth_username: str | None, spaces: bool) -> str:
    """Who is asking, decided by the server: on a Space (``spaces``) the verified OAuth username (``token``
    ignored), locally the holder of ``token`` in ``store`` (``oauth_username`` ignored); else a one-line
    :class:`AnnotationError`."""
    if spaces:
        if not oauth_username:
            raise AnnotationError("sign in with Hugging Face first (the button above)", brief="not signed in")
        return annotator_id(oauth_username)
    who = store.annotator_for_token(token)
    if who is None:
        raise AnnotationError(
            "open your personal link (the one `concept-grounding annotate --annotators ...` "
            "printed for you): this page has no valid token",
            brief="missing token" if not token else "unknown token",
        )
    return who


def checked_answers(study: Study, record: Record, answers: Mapping[str, object]) -> dict[str, str]:
    """:meth:`.study.Study.check` whose refusal's ``brief`` names the question refused, never the value."""
    extra = sorted(str(name) for name in set(answers) - {q.name for q in study.questions})
    if extra:
        raise AnnotationError(f"study {study.name!r} asks no question {quote(extra[0])}", brief="unknown question")
    checked = {}
    for q in study.questions:
        try:
            checked[q.name] = q.check(record, answers.get(q.name))
        except AnnotationError as err:
            raise AnnotationError(str(err), brief=f"answer to {q.name} outside its choices") from None
    return checked


@dataclass(frozen=True)
class View:
    """What a study's tab shows: the ``record`` open for the annotator (``None`` when done or refused),
    ``progress`` ("12 / 40 images") and ``message`` (one line: a refusal, or "all done")."""

    record: Record | None
    progress: str
    message: str = ""

    @property
    def record_id(self) -> str:
        """The open record's id (the page sends it back with the answers), ``""`` when none."""
        return self.record.id if self.record is not None else ""


class StudyHandlers:
    """The app's behaviour over ``store`` for any study; ``spaces``: annotators are Hugging Face users (OAuth),
    else holders of a personal link's token."""

    def __init__(self, store: StudyBackend, spaces: bool = False):
        self.store, self.spaces = store, spaces

    def identify(self, token: object, oauth_username: str | None = None) -> str:
        """The annotator asking (:func:`identify_annotator`)."""
        return identify_annotator(self.store, token, oauth_username, self.spaces)

    def progress(self, annotator: str, study: Study) -> str:
        """``"ann: 3 / 40 images"``."""
        done, total = self.store.progress(annotator, study.name)
        return f"{annotator}: {done} / {total} {_unit(study)}"

    def current(self, annotator: str, study: Study, message: str = "") -> View:
        """The annotator's open record of ``study`` (the same one until it is answered: resumable)."""
        record = self.store.next_record(annotator, study.name)
        if record is None:
            message = message or f"All done: no {_unit(study)[:-1]} is left for you."
        return View(record, self.progress(annotator, study), message)

    def refuse(self, annotator: str, study: Study, err: AnnotationError) -> View:
        """``err`` logged in one line (its ``brief``: no value the client sent) and shown on the open record."""
        LOG.warning("annotate: refused a %s submit by %r: %s", study.name, annotator, err.brief)
        return self.current(annotator, study, str(err))

    def submit(self, annotator: str, study: Study, record_id: object, answers: Mapping[str, object]) -> View:
        """Store ``answers`` to ``record_id`` (the record the page showed) and return the next view; a refusal
        keeps the open record and says why in ``message``. Refused: a record that is not the one open for
        ``annotator`` (a repeated or stale submit), an answer outside the question's options; a missing answer
        is asked for."""
        if not record_id:
            return self.current(annotator, study)
        record = self.store.next_record(annotator, study.name)
        if record is None or record.id != record_id:
            return self.refuse(annotator, study, AnnotationError(STALE, brief="stale or repeated"))
        missing = [q.name for q in study.questions if answers.get(q.name) in (None, "")]
        if missing:
            return View(record, self.progress(annotator, study), f"answer {', '.join(missing)} first")
        try:
            self.store.submit(annotator, study.name, record.id, checked_answers(study, record, answers))
        except AnnotationError as err:
            return self.refuse(annotator, study, err)
        return self.current(annotator, study)


def _unit(study: Study) -> str:
    """What the progress counts: images where the study shows one, else records."""
    return "images" if study.fields and study.fields[0].kind == "image" else "records"


@dataclass(frozen=True)
class StudyTab:
    """One study's tab: how a :class:`View` becomes its outputs (plain values, as each component's
    ``postprocess`` would give them: the events skip Gradio's per-component processing)."""

    study: Study
    keys: Mapping[str, str]
    file_path: FilePath

    def outputs(self, view: View) -> list[Any]:
        """Fields, the record id, progress, message, each question's wording and its radio (cleared)."""
        import gradio as gr

        record = view.record
        radios = [
            gr.update(choices=option_choices(q, self.keys[q.name], record), value=None) if q.kind == "choice" else None
            for q in self.study.questions
        ]
        return [
            *(field_html(f, record, self.file_path) for f in self.study.fields),
            view.record_id,
            inspect.cleandoc(view.progress),
            inspect.cleandoc(view.message),
            *(question_wording(self.study, q, record) for q in self.study.questions),
            *radios,
        ]

    def refused(self, err: AnnotationError) -> list[Any]:
        """The outputs of a refused identity: the message only, the radios left as they are."""
        import gradio as gr

        questions = self.study.questions
        blank = ["" for _ in self.study.fields]
        return [*blank, "", "", inspect.cleandoc(str(err)), *("" for _ in questions), *(gr.update() for _ in questions)]


def _text(payload: object) -> str | None:
    """A textbox's value as its ``preprocess`` gives it (``None`` or ``str``)."""
    return None if payload is None else str(payload)


def _elem_ids(studies: Sequence[Study]) -> dict[tuple[str, str], str]:
    """Each question's element id: its name, or ``study-name`` where two studies ask a question of that name."""
    names = [q.name for s in studies for q in s.questions]
    return {
        (s.name, q.name): q.name if names.count(q.name) == 1 else f"{s.name}-{q.name}"
        for s in studies
        for q in s.questions
    }


def build_app(
    store: StudyBackend,
    studies: Sequence[Study],
    file_path: FilePath,
    *,
    title: str = "Annotation",
    spaces: bool | None = None,
):
    """The Gradio Blocks: a tab per study (its guidelines with its keys, progress, its fields by kind, its
    questions as radios with keys, a submit button); one "Start / resume" button starts every tab. ``spaces``
    (default :func:`on_spaces`): sign in with Hugging Face, else the personal link's token. The keyboard shortcuts
    (:data:`SHORTCUTS_JS`) go into the page head where this Gradio takes them (:func:`.annotate_serve.launch_app`).

    Element ids: tab ``n`` (from 1) shows field ``f`` as ``#{f}{n}`` (``#image1``), the record id in ``#shown{n}``,
    a question's radio as ``#{name}`` and its wording as ``#{name}-text``, the submit as ``#submit`` (tab 1) or
    ``#submit{n}``. API names: ``/{study}_start`` and ``/{study}_submit`` (the study's name, ``-`` as ``_``); a
    submit takes the token, the record id and one answer per question, in the study's order."""
    import gradio as gr

    names = [s.name for s in studies]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"build_app needs one or more studies, each once; got {names}")
    spaces = on_spaces() if spaces is None else spaces
    handlers = StudyHandlers(store, spaces=spaces)
    ids = _elem_ids(studies)
    head = {} if gradio_major() >= 6 else {"head": SHORTCUTS_JS}  # Gradio 6 takes head= in launch()
    with gr.Blocks(title=title, **head) as app:
        gr.Markdown(f"# {title}")
        if spaces:
            gr.LoginButton()
        token = gr.Textbox(visible="hidden", elem_id="token")  # the link's token, filled by TOKEN_JS
        app.load(None, None, [token], js=TOKEN_JS, show_progress="hidden", concurrency_limit=CONCURRENCY)
        start = gr.Button("Start / resume")
        for n, study in enumerate(studies, start=1):
            tab = StudyTab(study, shortcut_keys(study), file_path)
            with gr.Tab(study.title.split(" (")[0]):
                _render(tab, n, ids, handlers, token, start)
    for key, value in GRADIO_ENV.items():
        os.environ.setdefault(key, value)
    return app.queue(default_concurrency_limit=CONCURRENCY)  # the queue made again, with GRADIO_ENV


def _render(tab: StudyTab, n: int, ids: Mapping[tuple[str, str], str], handlers: StudyHandlers, token, start) -> None:
    """One study's components and its start and submit events (inside its ``gr.Tab``)."""
    import gradio as gr

    study = tab.study
    gr.Markdown(guidelines_text(study, tab.keys))
    progress, message = gr.Markdown(), gr.Markdown()
    fields = [gr.HTML(elem_id=f"{f.name}{n}") for f in study.fields]  # image_html: the bytes inline
    shown = gr.Textbox(visible="hidden", elem_id=f"shown{n}")  # the record the answers are for
    texts, radios = [], []
    for q in study.questions:
        qid = ids[(study.name, q.name)]
        texts.append(gr.Markdown(elem_id=f"{qid}-text"))
        keys = tab.keys[q.name]
        radios.append(
            gr.Radio(
                option_choices(q, keys, None),
                label=q.name.capitalize(),
                elem_id=qid,
                elem_classes=[f"{KEYS_CLASS}{keys}"] if keys else None,
            )
        )
    button = gr.Button(
        "Submit", variant="primary", elem_id="submit" if n == 1 else f"submit{n}", elem_classes=[SUBMIT_CLASS]
    )
    outputs = [*fields, shown, progress, message, *texts, *radios]
    names = [q.name for q in study.questions]

    def on_start(profile, key):
        try:
            annotator = handlers.identify(_text(key), getattr(profile, "username", None))
        except AnnotationError as err:
            LOG.warning("annotate: refused a %s start: %s", study.name, err.brief)
            return tab.refused(err)
        return tab.outputs(handlers.current(annotator, study))

    def on_submit(profile, key, record_id, *answers):
        try:
            annotator = handlers.identify(_text(key), getattr(profile, "username", None))
        except AnnotationError as err:
            LOG.warning("annotate: refused a %s submit: %s", study.name, err.brief)
            return tab.refused(err)
        return tab.outputs(handlers.submit(annotator, study, _text(record_id), dict(zip(names, answers))))

    for fn in (on_start, on_submit):  # the type Gradio injects the login by (a real type, not a string)
        fn.__annotations__["profile"] = gr.OAuthProfile | None
    api = study.name.replace("-", "_")
    raw = {"preprocess": False, "postprocess": False, "concurrency_limit": CONCURRENCY, "show_progress": "hidden"}
    start.click(on_start, inputs=[token], outputs=outputs, api_name=f"{api}_start", **raw)
    button.click(on_submit, inputs=[token, shown, *radios], outputs=outputs, api_name=f"{api}_submit", **raw)


def gradio_major() -> int:
    """Gradio's major version (6 takes the page head in ``launch``)."""
    import gradio as gr

    return int(gr.__version__.split(".")[0])
