"""The annotation app of SUB's human studies (App. E, Figs. 7-8): a thin Gradio shell over
:class:`~.annotations.AnnotationStore`.

:class:`AnnotationHandlers` holds everything the app does, as plain functions of strings
(testable without a browser): :meth:`~AnnotationHandlers.sign_in` (a name locally; the Hugging
Face username from OAuth when running on Spaces), :meth:`~AnnotationHandlers.current` (the
annotator's next image, its questions and progress) and :meth:`~AnnotationHandlers.submit`
(store the answers and show the next image; a refused answer comes back as one line and the
same image stays). :func:`build_app` wires them to Gradio components, with keyboard
shortcuts (:data:`SHORTCUTS_JS`): study 1, keys 1-3 answer Q1 (yes / somewhat / no) and
4-6 answer Q2; study 2, keys 1-9 pick the n-th attribute; Enter submits.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .annotations import LIKERT, AnnotationError, AnnotationStore, ImageItem, question_text

__all__ = ["View", "AnnotationHandlers", "build_app", "launch_app", "image_html", "SHORTCUTS_JS", "on_spaces"]

#: which study each tab shows, with the paper's instruction (App. E).
INSTRUCTIONS = {
    1: "Study 1 (SUB App. E, Fig. 7). The image was made from a reference bird with one attribute substituted. "
       "Answer both questions: yes, somewhat or no.",
    2: "Study 2 (SUB App. E, Fig. 8). Pick the attribute of this group that is present in the bird.",
}

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

SHORTCUTS_JS = """
<script>
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t && ((t.tagName === 'INPUT' && t.type === 'text') || t.tagName === 'TEXTAREA')) return;
  const shown = (sel) => Array.from(document.querySelectorAll(sel)).find((el) => el.offsetParent !== null);
  const pick = (id, i) => { const box = shown('#' + id); if (!box) return false;
    const r = box.querySelectorAll('input[type=radio]'); if (r[i]) r[i].click(); return true; };
  const n = parseInt(e.key, 10);
  if (n >= 1 && n <= 3) pick('q1', n - 1);
  if (n >= 4 && n <= 6) pick('q2', n - 4);
  if (n >= 1 && n <= 9) pick('present', n - 1);
  if (e.key === 'Enter') { const b = shown('#submit, #submit2'); if (b) b.click(); }
});
</script>
"""


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
    return (f'<img src="data:{mime};base64,{base64.b64encode(data).decode()}" data-file="{html.escape(file.name)}" '
            f'alt="the image to annotate" style="height:{height}px;width:auto;image-rendering:auto">')


def on_spaces() -> bool:
    """Running on a Hugging Face Space (annotators sign in with OAuth there)."""
    return bool(os.environ.get("SPACE_ID"))


@dataclass(frozen=True)
class View:
    """What the page shows: ``image`` (a file path or ``None`` when done), the store's
    ``image_id``, the ``questions`` (id -> wording), study 2's ``choices``, ``progress``
    ("12 / 40 images") and ``message`` (one line: a refusal, or "all done")."""

    image: str | None
    image_id: str | None
    questions: dict[str, str]
    choices: tuple[str, ...]
    progress: str
    message: str = ""


class AnnotationHandlers:
    """The app's behaviour over ``store`` for ``study``; ``image_path(item)`` locates an image's file."""

    def __init__(self, store: AnnotationStore, study: int, image_path: Callable[[ImageItem], str | Path]):
        if study not in (1, 2):
            raise ValueError(f"study must be 1 or 2, got {study!r}")
        self.store, self.study, self.image_path = store, study, image_path

    def sign_in(self, name: str | None, oauth_username: str | None = None) -> str:
        """The annotator's id: the OAuth username when given (Spaces), else the typed name."""
        who = (oauth_username or name or "").strip()
        if not who:
            raise AnnotationError("sign in first: type your name (or log in with Hugging Face on a Space)")
        return who

    def _progress(self, annotator: str) -> str:
        done, total = self.store.progress(annotator, self.study)
        return f"{annotator}: {done} / {total} images"

    def current(self, annotator: str, message: str = "") -> View:
        """The annotator's next image (the same one until it is answered: resumable)."""
        item = self.store.next_image(annotator, self.study)
        if item is None:
            return View(None, None, {}, (), self._progress(annotator), message or "All done: no image is left for you.")
        from .annotations import STUDIES

        return View(str(self.image_path(item)), item.image, {q: question_text(item, q) for q in STUDIES[self.study]},
                    item.choices, self._progress(annotator), message)

    def submit(self, annotator: str, image_id: str | None, answers: dict[str, str | None]) -> View:
        """Store ``answers`` to ``image_id`` and return the next view; a refusal keeps the
        current image and says why in ``message``."""
        if image_id is None:
            return self.current(annotator)
        missing = [q for q, a in answers.items() if not a]
        if missing:
            return self.current(annotator, f"answer {', '.join(missing)} first")
        try:
            self.store.submit(annotator, image_id, {q: str(a) for q, a in answers.items()})
        except AnnotationError as err:
            return self.current(annotator, str(err))
        return self.current(annotator)


def build_app(store: AnnotationStore, image_path: Callable[[ImageItem], str | Path], *, title: str = "SUB annotation"):
    """The Gradio Blocks: one tab per study, each showing the image, the questions
    (:data:`~.annotations.LIKERT` answers or the group's attributes), progress and a submit
    button (keyboard shortcuts in :data:`SHORTCUTS_JS`)."""
    import gradio as gr

    from ..vocabulary import attribute_phrase

    spaces = on_spaces()
    head = {} if _gradio_major() >= 6 else {"head": SHORTCUTS_JS}  # Gradio 6 takes head= in launch()
    with gr.Blocks(title=title, **head) as app:
        gr.Markdown(f"# {title}")
        who = gr.State("")
        if spaces:
            gr.LoginButton()
            name = gr.Textbox(visible=False)
        else:
            name = gr.Textbox(label="Your name (identifies your answers; use the same one to resume)")
        start = gr.Button("Start / resume")
        for study in (1, 2):
            handlers = AnnotationHandlers(store, study, image_path)
            with gr.Tab(f"Study {study}"):
                gr.Markdown(INSTRUCTIONS[study] + " Keys: " + ("1-3 Q1, 4-6 Q2" if study == 1 else "1-9 pick")
                            + ", Enter submits.")
                progress = gr.Markdown()
                message = gr.Markdown()
                image = gr.HTML(elem_id=f"image{study}")  # image_html: the bytes inline, one round trip
                image_id = gr.State(None)
                if study == 1:  # each question's wording (it names S+ and R) in a Markdown above its radio
                    texts, radios = [], []
                    for q in ("q1", "q2"):
                        texts.append(gr.Markdown(elem_id=f"{q}-text"))
                        radios.append(gr.Radio(list(LIKERT), label=q.upper(), elem_id=q))
                    qids = ("q1", "q2")
                else:
                    texts = []
                    radios = [gr.Radio([], label=question_text(None, "present"), elem_id="present")]
                    qids = ("present",)
                button = gr.Button("Submit", variant="primary", elem_id="submit" if study == 1 else "submit2")

                def show(view: View, qids=qids, study=study):
                    """The outputs of a view. Study 1 returns plain values (the radios cleared, the
                    wording as Markdown): a ``gr.update`` makes Gradio rebuild the component's
                    config on every submit (13 ms of a 50 ms server turn, measured by
                    benchmarks/bench_annotation.py); study 2's choices change per image, so it updates them."""
                    if study == 2:
                        radio = gr.update(choices=[(attribute_phrase(c), c) for c in view.choices], value=None)
                        return [_html(view.image), view.image_id, view.progress, view.message, radio]
                    wording = [f"**{q.upper()}.** {view.questions[q]}" if q in view.questions else "" for q in qids]
                    return [_html(view.image), view.image_id, view.progress, view.message, *wording,
                            *(None for _ in qids)]

                outputs = [image, image_id, progress, message, *texts, *radios]
                keep = [gr.update() for _ in texts + radios]

                def on_start(typed, profile: gr.OAuthProfile | None = None, h=handlers, show=show, keep=keep):
                    try:
                        annotator = h.sign_in(typed, getattr(profile, "username", None))
                    except AnnotationError as err:
                        return ["", None, None, "", str(err), *keep]
                    return [annotator, *show(h.current(annotator))]

                def on_submit(annotator, current, *values, h=handlers, show=show, qids=qids, keep=keep):
                    if not annotator:
                        return [None, None, "", "sign in first", *keep]
                    return show(h.submit(annotator, current, dict(zip(qids, values))))

                start.click(on_start, inputs=[name], outputs=[who, *outputs], concurrency_limit=CONCURRENCY,
                            show_progress="hidden")
                button.click(on_submit, inputs=[who, image_id, *radios], outputs=outputs, concurrency_limit=CONCURRENCY,
                             show_progress="hidden")
    for key, value in GRADIO_ENV.items():
        os.environ.setdefault(key, value)
    return app.queue(default_concurrency_limit=CONCURRENCY)  # the queue made again, with GRADIO_ENV


def _html(path: str | None) -> str:
    return image_html(str(path)) if path else ""


def _gradio_major() -> int:
    import gradio as gr

    return int(gr.__version__.split(".")[0])


def launch_app(app, **kwargs) -> None:
    """``app.launch(**kwargs)`` with the keyboard shortcuts in the page head (where this Gradio takes them)."""
    if _gradio_major() >= 6:
        kwargs.setdefault("head", SHORTCUTS_JS)
    app.launch(**kwargs)
