"""The annotation page's rendering: a record's fields as HTML (images inline), each question's options with the
keyboard keys generated from the questions, the study's guidelines, and the one shortcut script of the page
(:mod:`.annotate_app` builds the tabs from these). docs/human_validation.md, "The studies".
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path

from .study import Field, Question, Record, Study

__all__ = [
    "KEYS",
    "KEYS_CLASS",
    "SUBMIT_CLASS",
    "SHORTCUTS_JS",
    "MIME",
    "FilePath",
    "image_html",
    "shortcut_keys",
    "option_label",
    "option_choices",
    "field_html",
    "question_wording",
    "guidelines_text",
]

#: the keys a study's options take, in order: each question takes the next ones (a label question as many as it
#: has options, a rating 1-5, a choice question -- whose options come with each record -- all that are left).
KEYS = "123456789abcdefghijklmnopqrstuvwxyz"

#: the CSS class prefix that carries a radio's keys (``cg-keys-123``) and the class of every submit button
KEYS_CLASS, SUBMIT_CLASS = "cg-keys-", "cg-submit"

#: the page's keyboard shortcuts, the same script for every study: a key picks the option of the visible radio whose
#: ``cg-keys-...`` class lists it (:func:`shortcut_keys` writes those classes), Enter clicks the visible submit.
SHORTCUTS_JS = """
<script>
document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t && ((t.tagName === 'INPUT' && t.type === 'text') || t.tagName === 'TEXTAREA')) return;
  if (e.ctrlKey || e.metaKey || e.altKey || !e.key) return;
  const visible = (el) => el.offsetParent !== null;
  if (e.key === 'Enter') {
    const b = Array.from(document.querySelectorAll('.%(submit)s')).find(visible);
    if (b) b.click();
    return;
  }
  const key = e.key.toLowerCase();
  if (key.length !== 1) return;
  for (const box of document.querySelectorAll('[class*="%(keys)s"]')) {
    if (!visible(box)) continue;
    const keys = Array.from(box.classList).find((c) => c.startsWith('%(keys)s')).slice(%(n)d);
    const radios = box.querySelectorAll('input[type=radio]');
    const i = keys.indexOf(key);
    if (i >= 0 && radios[i]) radios[i].click();
  }
});
</script>
""" % {"submit": SUBMIT_CLASS, "keys": KEYS_CLASS, "n": len(KEYS_CLASS)}  # noqa: UP031 - the script's braces

#: image types the page embeds (by file suffix)
MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif"}

#: where the file a record's field names lives: ``file_path(record, value)`` (e.g. the candidates folder / value)
FilePath = Callable[[Record, str], "str | Path"]


@lru_cache(maxsize=512)
def image_html(path: str, height: int = 384) -> str:
    """The image at ``path`` as an ``<img>`` with its bytes inline (a base64 data URI), encoded once per file (LRU
    cache of 512): the page gets the image in the submit's own reply, with no second request and no file route.
    ``data-file`` names the file (tests and screenshots read it).

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


#: a record with no options (a label or rating question's options do not depend on the record)
_NO_RECORD = Record("", "", {})


def shortcut_keys(study: Study) -> dict[str, str]:
    """Each question's keys, in option order (see :data:`KEYS`); a choice question must come last.

    >>> from concept_grounding.curation.study import SUB_STUDY_1, CONCEPTBED_RATING
    >>> shortcut_keys(SUB_STUDY_1), shortcut_keys(CONCEPTBED_RATING)
    ({'q1': '123', 'q2': '456'}, {'rating': '12345'})
    """
    keys, start = {}, 0
    for i, q in enumerate(study.questions):
        if q.kind == "choice" and i != len(study.questions) - 1:
            raise ValueError(f"study {study.name!r}: a choice question ({q.name}) must be the last, its keys the rest")
        end = len(KEYS) if q.kind == "choice" else start + len(q.allowed(_NO_RECORD))
        keys[q.name], start = KEYS[start:end], end
    return keys


def option_label(key: str, option: str) -> str:
    """An option as its radio shows it: its key, then the option (an attribute in words).

    >>> option_label("a", "has_crown_color::pink"), option_label("3", "3"), option_label("", "no")
    ('a · pink crown color', '3', 'no')
    """
    text = option
    if "::" in option:
        from ..vocabulary import attribute_phrase

        text = attribute_phrase(option)
    return text if key in ("", text) else f"{key} · {text}"


def option_choices(question: Question, keys: str, record: Record | None) -> list[tuple[str, str]]:
    options = question.allowed(record if record is not None else _NO_RECORD)
    return [(option_label(keys[i] if i < len(keys) else "", o), o) for i, o in enumerate(options)]


def field_html(field: Field, record: Record | None, file_path: FilePath) -> str:
    """``record``'s ``field`` as the page shows it: an image inline, a row of images, or text (``""`` when the
    record has none)."""
    value = record.fields.get(field.name) if record is not None else None
    if record is None or value in (None, "", (), []):
        return ""
    title = f"<p><b>{html.escape(field.title)}</b></p>" if field.title else ""
    if field.kind == "image":
        return title + image_html(str(file_path(record, str(value))))
    if field.kind == "images":
        paths = [value] if isinstance(value, str) else list(value)
        row = "".join(
            f'<div style="display:inline-block;margin:4px">{image_html(str(file_path(record, str(p))), 160)}</div>'
            for p in paths
        )
        return f'{title}<div class="{html.escape(field.name)}">{row}</div>'
    return f'{title}<p class="{html.escape(field.name)}">{html.escape(str(value))}</p>'


def question_wording(study: Study, q: Question, record: Record | None) -> str:
    if record is None:
        return ""
    text = q.text(record)
    return f"**{q.name.upper()}.** {text}" if len(study.questions) > 1 else f"**{text}**"


def guidelines_text(study: Study, keys: Mapping[str, str]) -> str:
    """The study's title and guidelines, then its keys ("Keys: 1-3 q1, 4-6 q2, Enter submits.")."""
    choice = {q.name for q in study.questions if q.kind == "choice"}
    spans = [
        f"the one shown on each option of {q}" if q in choice else f"{k[0]}-{k[-1]} {q}" if len(k) > 1 else f"{k} {q}"
        for q, k in keys.items()
        if k
    ]
    return f"**{study.title}.** {study.guidelines} Keys: {', '.join(spans)}, Enter submits."
