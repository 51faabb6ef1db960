"""The annotation app of SUB's human studies (App. E, Figs. 7-8): a thin Gradio shell over
:class:`~.annotations.AnnotationStore`.

:class:`AnnotationHandlers` holds everything the app does, as plain functions of strings (testable
without a browser: :meth:`~AnnotationHandlers.identify`, :meth:`~AnnotationHandlers.current`,
:meth:`~AnnotationHandlers.submit`); :func:`build_app` wires them to Gradio components with keyboard
shortcuts (:data:`SHORTCUTS_JS`; the keys: docs/human_validation.md, "The studies").
Who annotates is decided by the server on every event (a personal link's token locally, the
Hugging Face sign-in on a Space), and a stale or repeated submit is refused: docs/human_validation.md,
"Who annotates".
"""

from __future__ import annotations

import base64
import html
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .annotations import LIKERT, STUDIES, AnnotationError, AnnotationStore, ImageItem, annotator_id, question_text

__all__ = [
    "View",
    "AnnotationHandlers",
    "identify_annotator",
    "answer_radio",
    "build_app",
    "image_html",
    "SHORTCUTS_JS",
    "KEYS",
    "on_spaces",
    "LOG",
]

#: where refusals are logged, one line each, without the refused value
LOG = logging.getLogger("concept_grounding.annotate")

#: which study each tab shows, with the paper's instruction (App. E).
INSTRUCTIONS = {
    1: "Study 1 (SUB App. E, Fig. 7). The image was made from a reference bird with one attribute substituted. "
    "Answer both questions: yes, somewhat or no.",
    2: "Study 2 (SUB App. E, Fig. 8). Pick the attribute of this group that is present in the bird.",
}

#: study 2's option keys, in option order (a group has up to 15 attributes; each option shows its key)
KEYS = "123456789abcdefghijklmnopqrstuvwxyz"

#: submits served at once (Gradio's default is 1 per event, which queues every annotator behind one
#: another; the store is safe with many writers: one SQLite connection per worker thread, writes
#: taking turns on a lock per file).
CONCURRENCY = 16

#: Gradio's queue settings read from the environment when the queue is made (defaults kept if set):
#: after every event Gradio recomputes its monitoring summary with pandas over the last
#: ``GRADIO_ANALYTICS_MAX_EVENTS`` events (default 10,000, every ``..._CACHE_FREQUENCY`` = 1
#: event), a cost per submit that grew with the submits served (benchmarks/bench_annotation.py);
#: here over the last 1,000 events, once per 1,000.
GRADIO_ENV = {"GRADIO_ANALYTICS_MAX_EVENTS": "1000", "GRADIO_ANALYTICS_CACHE_FREQUENCY": "1000"}

SHORTCUTS_JS = (
    """
<script>
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t && ((t.tagName === 'INPUT' && t.type === 'text') || t.tagName === 'TEXTAREA')) return;
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const shown = (sel) => Array.from(document.querySelectorAll(sel)).find((el) => el.offsetParent !== null);
  const pick = (id, i) => { const box = shown('#' + id); if (!box) return false;
    const r = box.querySelectorAll('input[type=radio]'); if (r[i]) r[i].click(); return true; };
  const n = parseInt(e.key, 10);
  if (n >= 1 && n <= 3) pick('q1', n - 1);
  if (n >= 4 && n <= 6) pick('q2', n - 4);
  if (n >= 1 && n <= 5) pick('rating', n - 1);
  const k = '%s'.indexOf((e.key || '').toLowerCase());
  if (e.key && e.key.length === 1 && k >= 0) pick('present', k);
  if (e.key === 'Enter') { const b = shown('#submit, #submit2, #submit3'); if (b) b.click(); }
});
</script>
"""  # noqa: UP031 - the script's own braces rule out format()
    % KEYS
)

#: the page's own link's token, read into the hidden token field when the page loads
TOKEN_JS = "() => new URLSearchParams(window.location.search).get('token') || ''"


#: image types the page embeds (by file suffix)
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}


@lru_cache(maxsize=512)
def image_html(path: str, height: int = 384) -> str:
    """The image at ``path`` as an ``<img>`` with its bytes inline (a base64 data URI), encoded
    once per file (LRU cache of 512): the page gets the image in the submit's own reply, with
    no second request for the file and no copy into Gradio's cache per submit (what a
    ``gr.Image`` output does). ``data-file`` names the file (tests and screenshots read it).

    >>> image_html.__wrapped__("/no/such.png").startswith("<p")
    True
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as err:
        return f"<p>cannot read the image {html.escape(file.name)} ({html.escape(err.strerror or 'error')})</p>"
    mime = MIME.get(file.suffix.lower(), "application/octet-stream")
    return (
        f'<img src="data:{mime};base64,{base64.b64encode(data).decode()}" data-file="{html.escape(file.name)}" '
        f'alt="the image to annotate" style="height:{height}px;width:auto;image-rendering:auto">'
    )


def on_spaces() -> bool:
    """Running on a Hugging Face Space (annotators sign in with OAuth there)."""
    return bool(os.environ.get("SPACE_ID"))


def option_label(index: int, attribute: str) -> str:
    """Study 2's option ``index`` as the page shows it: its key, then the attribute in words.

    >>> option_label(9, "has_crown_color::pink")
    'a · pink crown color'
    """
    from ..vocabulary import attribute_phrase

    return f"{KEYS[index]} · {attribute_phrase(attribute)}" if index < len(KEYS) else attribute_phrase(attribute)


@dataclass(frozen=True)
class View:
    """What the page shows: ``image`` (a file path or ``None`` when done), the store's
    ``image_id`` (the page sends it back with the answers), the ``questions`` (id -> wording),
    study 2's ``choices``, ``progress`` ("12 / 40 images") and ``message`` (one line: a refusal,
    or "all done")."""

    image: str | None
    image_id: str | None
    questions: dict[str, str]
    choices: tuple[str, ...]
    progress: str
    message: str = ""


def identify_annotator(store: AnnotationStore, token: str | None, oauth_username: str | None, spaces: bool) -> str:
    """Who is asking, decided by the server: on a Space (``spaces``) the verified OAuth username
    (``token`` ignored), locally the holder of ``token`` in ``store`` (``oauth_username``
    ignored); else :class:`AnnotationError` in one line. Every study's handlers use this rule."""
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


#: what a stale or repeated submit is told (its answers were not stored)
STALE = (
    "not stored: that answer was for an image that is no longer open for you (answered already, or "
    "open for more than {minutes:g} min); your open image is shown"
)


class AnnotationHandlers:
    """The app's behaviour over ``store`` for ``study``; ``image_path(item)`` locates an image's
    file; ``spaces``: annotators are Hugging Face users (OAuth), else holders of a token."""

    def __init__(
        self, store: AnnotationStore, study: int, image_path: Callable[[ImageItem], str | Path], spaces: bool = False
    ):
        if study not in (1, 2):
            raise ValueError(f"study must be 1 or 2, got {study!r}")
        self.store, self.study, self.image_path, self.spaces = store, study, image_path, spaces

    def identify(self, token: str | None, oauth_username: str | None = None) -> str:
        """The annotator asking: on a Space the verified OAuth username (``token`` ignored),
        locally the holder of ``token`` (``oauth_username`` ignored); else :class:`AnnotationError`."""
        return identify_annotator(self.store, token, oauth_username, self.spaces)

    def _progress(self, annotator: str) -> str:
        done, total = self.store.progress(annotator, self.study)
        return f"{annotator}: {done} / {total} images"

    def current(self, annotator: str, message: str = "") -> View:
        """The annotator's next image (the same one until it is answered: resumable)."""
        item = self.store.next_image(annotator, self.study)
        if item is None:
            return View(None, None, {}, (), self._progress(annotator), message or "All done: no image is left for you.")
        return View(
            str(self.image_path(item)),
            item.image,
            {q: question_text(item, q) for q in STUDIES[self.study]},
            item.choices,
            self._progress(annotator),
            message,
        )

    def refuse(self, annotator: str, err: AnnotationError) -> View:
        """``err`` logged in one line (its ``brief``: no value the client sent) and shown on the open image."""
        LOG.warning("annotate: refused a study-%d submit by %r: %s", self.study, annotator, err.brief)
        return self.current(annotator, str(err))

    def submit(self, annotator: str, image_id: str | None, answers: dict[str, str | None]) -> View:
        """Store ``answers`` to ``image_id`` (the image the page showed) and return the next
        view; a refusal keeps the open image and says why in ``message``. Refused: an image
        that is not the one open for ``annotator`` (a repeated or stale submit), a missing
        answer, an answer outside the image's choices."""
        if not image_id:
            return self.current(annotator)
        if self.store.open_image(annotator, self.study) != image_id:
            minutes = self.store.lease_seconds / 60
            return self.refuse(annotator, AnnotationError(STALE.format(minutes=minutes), brief="stale or repeated"))
        missing = [q for q, a in answers.items() if not a]
        if missing:
            return self.current(annotator, f"answer {', '.join(missing)} first")
        try:
            self.store.submit(annotator, image_id, {q: a if isinstance(a, str) else str(a) for q, a in answers.items()})
        except AnnotationError as err:
            return self.refuse(annotator, err)
        return self.current(annotator)


@lru_cache(maxsize=1)
def answer_radio():
    """``gr.Radio`` whose server side passes any text through to the handler (which refuses an
    answer outside the image's choices in one line): Gradio's own check raises with the value
    in its message and logs a traceback per refusal. The page is Gradio's radio (a template)."""
    from unittest import mock

    import gradio as gr
    import gradio.component_meta

    # Gradio's component metaclass writes a ``.pyi`` stub beside the module that defines a
    # component class (for its own custom-component tooling): not into an installed package.
    with mock.patch.object(gradio.component_meta, "create_or_modify_pyi", return_value=None):

        class AnswerRadio(gr.Radio):
            is_template = True

            def preprocess(self, payload):
                return payload if isinstance(payload, str) else None

    return AnswerRadio


def build_app(
    store: AnnotationStore,
    image_path: Callable[[ImageItem], str | Path],
    *,
    title: str = "SUB annotation",
    spaces: bool | None = None,
    studies: Sequence[int] = (1, 2),
    tabs: Sequence[Callable] = (),
):
    """The Gradio Blocks: one tab per study, each showing the image, the questions
    (:data:`~.annotations.LIKERT` answers or the group's attributes, each with its key),
    progress and a submit button (keyboard shortcuts in :data:`SHORTCUTS_JS`). ``spaces``
    (default :func:`on_spaces`): sign in with Hugging Face, else the personal link's token.
    ``studies``: SUB's studies shown; ``tabs``: more tabs, each ``tab(token, start, spaces)``
    called inside the Blocks with the token field and the start button (e.g.
    :func:`.rating_app.rating_tab`, ConceptBed's rating study)."""
    import gradio as gr

    spaces = on_spaces() if spaces is None else spaces
    radio = answer_radio()
    head = {} if gradio_major() >= 6 else {"head": SHORTCUTS_JS}  # Gradio 6 takes head= in launch()
    with gr.Blocks(title=title, **head) as app:
        gr.Markdown(f"# {title}")
        if spaces:
            gr.LoginButton()
        token = gr.Textbox(visible="hidden", elem_id="token")  # the link's token, filled by TOKEN_JS
        app.load(None, None, [token], js=TOKEN_JS, show_progress="hidden", concurrency_limit=CONCURRENCY)
        start = gr.Button("Start / resume")
        for study in studies:
            handlers = AnnotationHandlers(store, study, image_path, spaces=spaces)
            with gr.Tab(f"Study {study}"):
                gr.Markdown(
                    INSTRUCTIONS[study]
                    + " Keys: "
                    + ("1-3 Q1, 4-6 Q2" if study == 1 else "the one shown on each option")
                    + ", Enter submits."
                )
                progress = gr.Markdown()
                message = gr.Markdown()
                image = gr.HTML(elem_id=f"image{study}")  # image_html: the bytes inline, one round trip
                shown = gr.Textbox(visible="hidden", elem_id=f"shown{study}")  # the image the answers are for
                if study == 1:  # each question's wording (it names S+ and R) in a Markdown above its radio
                    texts, radios = [], []
                    for q in ("q1", "q2"):
                        texts.append(gr.Markdown(elem_id=f"{q}-text"))
                        radios.append(radio(list(LIKERT), label=q.upper(), elem_id=q))
                    qids = ("q1", "q2")
                else:
                    texts = []
                    radios = [radio([], label=question_text(None, "present"), elem_id="present")]
                    qids = ("present",)
                button = gr.Button("Submit", variant="primary", elem_id="submit" if study == 1 else "submit2")

                def show(view: View, qids=qids, study=study):
                    """The outputs of a view. Study 1 returns plain values (the radios cleared, the
                    wording as Markdown): a ``gr.update`` makes Gradio rebuild the component's
                    config on every submit (13 ms of a 50 ms server turn, measured by
                    benchmarks/bench_annotation.py); study 2's choices change per image, so it updates them."""
                    if study == 2:
                        options = gr.update(
                            choices=[(option_label(i, c), c) for i, c in enumerate(view.choices)], value=None
                        )
                        return [_html(view.image), view.image_id or "", view.progress, view.message, options]
                    wording = [f"**{q.upper()}.** {view.questions[q]}" if q in view.questions else "" for q in qids]
                    return [
                        _html(view.image),
                        view.image_id or "",
                        view.progress,
                        view.message,
                        *wording,
                        *(None for _ in qids),
                    ]

                outputs = [image, shown, progress, message, *texts, *radios]

                on_start, on_submit = _events(handlers, show, [gr.update() for _ in texts + radios], qids)
                start.click(
                    on_start, inputs=[token], outputs=outputs, concurrency_limit=CONCURRENCY, show_progress="hidden"
                )
                button.click(
                    on_submit,
                    inputs=[token, shown, *radios],
                    outputs=outputs,
                    concurrency_limit=CONCURRENCY,
                    show_progress="hidden",
                )
        for tab in tabs:
            tab(token, start, spaces)
    for key, value in GRADIO_ENV.items():
        os.environ.setdefault(key, value)
    return app.queue(default_concurrency_limit=CONCURRENCY)  # the queue made again, with GRADIO_ENV


def _events(h: AnnotationHandlers, show: Callable[[View], list], keep: list, qids: tuple[str, ...]):
    """A study's ``on_start(token, profile)`` and ``on_submit(token, image_id, *answers, profile)``:
    each decides who asks (:meth:`AnnotationHandlers.identify`) from the login Gradio injects
    (a parameter typed ``gr.OAuthProfile | None``) or the token, on every event. ``on_submit``
    names each answer (Gradio puts the login at the ``profile`` parameter's position)."""
    import gradio as gr

    def refused(err: AnnotationError, what: str) -> list:
        LOG.warning("annotate: refused a %s: %s", what, err.brief)
        return ["", "", "", str(err), *keep]

    def on_start(key, profile=None):
        try:
            annotator = h.identify(key, getattr(profile, "username", None))
        except AnnotationError as err:
            return refused(err, "sign-in")
        return show(h.current(annotator))

    def answer(key, current, values, profile) -> list:
        try:
            annotator = h.identify(key, getattr(profile, "username", None))
        except AnnotationError as err:
            return refused(err, "submit")
        return show(h.submit(annotator, current, dict(zip(qids, values))))

    if len(qids) == 2:

        def on_submit(key, current, first, second, profile=None):
            return answer(key, current, (first, second), profile)
    else:

        def on_submit(key, current, first, profile=None):
            return answer(key, current, (first,), profile)

    for fn in (on_start, on_submit):  # the type Gradio injects the login by (a real type, not a string)
        fn.__annotations__["profile"] = gr.OAuthProfile | None
    return on_start, on_submit


def _html(path: str | None) -> str:
    return image_html(str(path)) if path else ""


def gradio_major() -> int:
    import gradio as gr

    return int(gr.__version__.split(".")[0])
