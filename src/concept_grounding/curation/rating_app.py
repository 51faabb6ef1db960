"""ConceptBed's rating study (Patel et al., App. G, Figs. 8-10) as a tab of the annotation app.

:class:`RatingHandlers` is what the tab does, as plain functions (testable without a browser):
:meth:`~RatingHandlers.current` (the rater's next item: one generated image, with three
reference images of the concept or with its caption, the question and progress) and
:meth:`~RatingHandlers.submit` (store a 1-5 rating of the item the page names, show the next).
Each image is rated on its own screen, so learners are never side by side, and each rater
meets the items in their own fixed shuffle (:meth:`.rating_store.RatingStore.next_rating`).

Who rates follows the SUB studies' rule (:func:`.annotate_app.identify_annotator`: a personal
link's token locally, the verified Hugging Face login on a Space); a rating outside 1-5, a
missing one, a repeated or stale submit: one line on the page and in the log (without the
value), the same item stays, nothing is written. :func:`rating_tab` adds the tab to
:func:`.annotate_app.build_app`; keys 1-5 pick a rating, Enter submits.
"""

from __future__ import annotations

import html
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .annotate_app import CONCURRENCY, LOG, STALE, answer_radio, identify_annotator, image_html
from .annotation_items import AnnotationError
from .rating_store import RatingItem, RatingStore
from .rating_study import rating_question

__all__ = ["RatingView", "RatingHandlers", "rating_tab", "INSTRUCTION", "RATING_CHOICES"]

INSTRUCTION = (
    "Rating study (ConceptBed App. G). Rate each image on its own, 1 to 5: against the three reference "
    "images of the concept (1: not the same concept at all, 5: exactly the same concept), or against its "
    "caption (1: not at all, 5: an exact match). Keys 1-5 rate, Enter submits."
)

#: the radio's options: (label, value)
RATING_CHOICES = [("1 · not at all", "1"), ("2", "2"), ("3", "3"), ("4", "4"), ("5 · an exact match", "5")]


@dataclass(frozen=True)
class RatingView:
    """What the tab shows: ``image`` (a file path, ``None`` when done), the item id the page sends
    back, the ``references`` (file paths; concept similarity) or the ``caption``, the
    ``question``, ``progress`` ("3 / 20 images") and a one-line ``message``."""

    image: str | None
    item_id: str | None
    references: tuple[str, ...]
    caption: str | None
    question: str
    progress: str
    message: str = ""


class RatingHandlers:
    """The rating tab's behaviour over ``store``; ``file_path(name)`` locates an items-folder
    file; ``spaces``: raters are Hugging Face users (OAuth), else holders of a token."""

    def __init__(self, store: RatingStore, file_path: Callable[[str], str | Path], spaces: bool = False):
        self.store, self.file_path, self.spaces = store, file_path, spaces

    def identify(self, token: str | None, oauth_username: str | None = None) -> str:
        """The rater asking (:func:`.annotate_app.identify_annotator`)."""
        return identify_annotator(self.store, token, oauth_username, self.spaces)

    def _progress(self, rater: str) -> str:
        done, total = self.store.rating_progress(rater)
        return f"{rater}: {done} / {total} images"

    def view(self, item: RatingItem | None, rater: str, message: str = "") -> RatingView:
        if item is None:
            return RatingView(
                None, None, (), None, "", self._progress(rater), message or "All done: no image is left for you."
            )
        refs = tuple(str(self.file_path(r)) for r in item.references)
        return RatingView(
            str(self.file_path(item.file_name)),
            item.id,
            refs,
            item.caption,
            rating_question(item.kind),
            self._progress(rater),
            message,
        )

    def current(self, rater: str, message: str = "") -> RatingView:
        """The rater's next item (the same one until it is rated: resumable)."""
        return self.view(self.store.next_rating(rater), rater, message)

    def refuse(self, rater: str, err: AnnotationError) -> RatingView:
        """``err`` logged in one line (its ``brief``: no value the client sent) and shown on the open item."""
        LOG.warning("annotate: refused a rating submit by %r: %s", rater, err.brief)
        return self.current(rater, str(err))

    def submit(self, rater: str, item_id: str | None, rating: object) -> RatingView:
        """Store ``rating`` of ``item_id`` (the item the page showed) and return the next view; a
        refusal keeps the open item and says why in ``message``."""
        if not item_id:
            return self.current(rater)
        if self.store.open_rating(rater) != item_id:
            minutes = self.store.lease_seconds / 60
            return self.refuse(rater, AnnotationError(STALE.format(minutes=minutes), brief="stale or repeated"))
        if rating is None or rating == "":
            return self.current(rater, "choose a rating (1-5) first")
        try:
            self.store.submit_rating(rater, item_id, rating)
        except AnnotationError as err:
            return self.refuse(rater, err)
        return self.current(rater)


def _references_html(view: RatingView) -> str:
    """The three reference images in a row, or the caption, as the page shows them."""
    if view.references:
        images = "".join(
            f'<div style="display:inline-block;margin:4px">{image_html(p, 160)}</div>' for p in view.references
        )
        return f'<p><b>Reference images of the concept</b></p><div class="references">{images}</div>'
    if view.caption:
        return f'<p><b>Caption:</b> <span class="caption">{html.escape(view.caption)}</span></p>'
    return ""


def _outputs(view: RatingView) -> list:
    """The tab's outputs of ``view``: plain values (the radio cleared), no ``gr.update``, each as
    its component's ``postprocess`` would give it (the events skip Gradio's; :func:`rating_tab`):
    HTML and the hidden textbox as they are, Markdown through ``inspect.cleandoc``."""
    image = image_html(view.image) if view.image else ""
    question = f"**{view.question}**" if view.question else ""
    markdown = [inspect.cleandoc(text) for text in (question, view.progress, view.message)]
    return [image, view.item_id or "", _references_html(view), *markdown, None]


def _text(payload: object) -> str | None:
    """A textbox's value as its ``preprocess`` gives it (``None`` or ``str``)."""
    return None if payload is None else str(payload)


def _choice(payload: object) -> str | None:
    """The rating radio's value as :func:`.annotate_app.answer_radio`'s ``preprocess`` gives it:
    text passes through (the store refuses anything outside 1-5 in one line), else ``None``."""
    return payload if isinstance(payload, str) else None


def rating_tab(store: RatingStore, file_path: Callable[[str], str | Path]) -> Callable:
    """A ``tab(token, start, spaces)`` for :func:`.annotate_app.build_app`'s ``tabs``: the rating
    study's tab, its start (on the shared start button) and submit events, served
    ``CONCURRENCY`` at once, API names ``rate_start`` and ``rate_submit``.

    The events skip Gradio's per-component ``preprocess`` / ``postprocess`` (each one a hop to
    a worker thread: 40 per submit, a third of Gradio's time on the submit -> next item path,
    benchmarks/bench_annotation.py): the handlers read the raw inputs as those would
    (:func:`_text`, :func:`_choice`) and return what those would return (:func:`_outputs`)."""

    def tab(token, start, spaces: bool) -> None:
        import gradio as gr

        handlers = RatingHandlers(store, file_path, spaces=spaces)
        with gr.Tab("Rating"):
            gr.Markdown(INSTRUCTION)
            progress, message = gr.Markdown(), gr.Markdown()
            image = gr.HTML(elem_id="image3")
            shown = gr.Textbox(visible="hidden", elem_id="shown3")
            references = gr.HTML(elem_id="references3")
            question = gr.Markdown(elem_id="rating-question")
            radio = answer_radio()(RATING_CHOICES, label="Rating", elem_id="rating")
            button = gr.Button("Submit", variant="primary", elem_id="submit3")
        outputs = [image, shown, references, question, progress, message, radio]
        keep = [gr.update()]

        def refused(err: AnnotationError, what: str) -> list:
            LOG.warning("annotate: refused a rating %s: %s", what, err.brief)
            return ["", "", "", "", "", inspect.cleandoc(str(err)), *keep]

        def rate_start(key, profile=None):
            try:
                rater = handlers.identify(_text(key), getattr(profile, "username", None))
            except AnnotationError as err:
                return refused(err, "sign-in")
            return _outputs(handlers.current(rater))

        def rate_submit(key, current, rating, profile=None):
            try:
                rater = handlers.identify(_text(key), getattr(profile, "username", None))
            except AnnotationError as err:
                return refused(err, "submit")
            return _outputs(handlers.submit(rater, _text(current), _choice(rating)))

        for fn in (rate_start, rate_submit):  # the type Gradio injects the login by
            fn.__annotations__["profile"] = gr.OAuthProfile | None
        raw = {"preprocess": False, "postprocess": False}
        start.click(
            rate_start,
            inputs=[token],
            outputs=outputs,
            concurrency_limit=CONCURRENCY,
            show_progress="hidden",
            api_name="rate_start",
            **raw,
        )
        button.click(
            rate_submit,
            inputs=[token, shown, radio],
            outputs=outputs,
            concurrency_limit=CONCURRENCY,
            show_progress="hidden",
            api_name="rate_submit",
            **raw,
        )

    return tab
