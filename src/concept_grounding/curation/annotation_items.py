"""What SUB's human studies show and who answers them (Bader et al., App. E): the images to
annotate (:class:`ImageItem`), the questions' ids and answers, and the annotator ids and their secret
tokens. :mod:`.study` makes the images records of SUB's studies; :mod:`.study_store` stores them.

Annotator ids follow one rule (:func:`annotator_id`): Unicode NFKC, surrounding whitespace
stripped, inner whitespace runs made one space, case folded; 1 to :data:`MAX_ANNOTATOR`
printable characters. So ``"Ann "`` and ``"ann"`` are one annotator, and an id that breaks the
rule is refused in one line that quotes at most :data:`QUOTE` of its characters.

>>> annotator_id("  Ann  Smith ")
'ann smith'
>>> annotator_id("x" * 500)
Traceback (most recent call last):
...
concept_grounding.curation.annotation_items.AnnotationError: annotator id
    'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (500 characters)' is too long: at most 64 characters
>>> token_hash("abc")[:12]
'ba7816bf8f01'
"""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..errors import UsageError

__all__ = [
    "STUDIES",
    "LIKERT",
    "DEFAULT_K",
    "MAX_ANNOTATOR",
    "QUOTE",
    "AnnotationError",
    "ImageItem",
    "study1_item",
    "study2_item",
    "annotator_id",
    "quote",
    "new_token",
    "token_hash",
]

#: study -> its question ids (App. E): study 1 asks two Likert questions, study 2 one choice.
STUDIES: dict[int, tuple[str, ...]] = {1: ("q1", "q2"), 2: ("present",)}
#: study 1's answers, in the order the app shows them (keys 1, 2, 3).
LIKERT: tuple[str, ...] = ("yes", "somewhat", "no")
#: annotators per image (the paper leaves k open; docs/human_validation.md).
DEFAULT_K = 3
#: the longest annotator id (characters, after :func:`annotator_id`'s rule).
MAX_ANNOTATOR = 64
#: the most characters of a refused value that a message quotes.
QUOTE = 40


class AnnotationError(UsageError):
    """A refused annotation or an unusable store; the message is one line and nothing was written.

    ``brief`` says what was refused without quoting any value the client sent (the app's log line)."""

    def __init__(self, message: str, *, brief: str | None = None, **where):
        super().__init__(message, **where)
        self.brief = brief or "refused"


def quote(value: object) -> str:
    """``repr`` of a client's value, cut to :data:`QUOTE` characters (a 1 MB answer is not echoed).

    >>> quote("yes"), quote("n" * 100)
    ("'yes'", "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn… (100 characters)'")
    """
    if isinstance(value, str) and len(value) > QUOTE:
        return repr(f"{value[:QUOTE]}… ({len(value)} characters)")
    text = repr(value)
    return text if len(text) <= QUOTE + 2 else text[:QUOTE] + "…"


def annotator_id(name: object) -> str:
    """The annotator id of ``name`` by the module docstring's rule; :class:`AnnotationError` otherwise."""
    if not isinstance(name, str):
        raise AnnotationError(f"annotator id must be text, got {type(name).__name__}", brief="annotator id not text")
    if len(name) > 4 * MAX_ANNOTATOR:  # refused before normalising a huge value
        raise AnnotationError(
            f"annotator id {quote(name)} is too long: at most {MAX_ANNOTATOR} characters", brief="annotator id too long"
        )
    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", name)).strip().casefold()
    if not norm:
        raise AnnotationError("annotator id is empty", brief="annotator id empty")
    if len(norm) > MAX_ANNOTATOR:
        raise AnnotationError(
            f"annotator id {quote(name)} is too long: at most {MAX_ANNOTATOR} characters", brief="annotator id too long"
        )
    if not norm.isprintable():
        raise AnnotationError(f"annotator id {quote(name)} has control characters", brief="annotator id unprintable")
    return norm


def new_token() -> str:
    """A fresh secret for an annotator's personal link (32 URL-safe characters, 192 bits)."""
    return secrets.token_urlsafe(24)


def token_hash(token: str) -> str:
    """What the store keeps of a token: its SHA-256 (hex); the token itself is never stored."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ImageItem:
    """One image to annotate.

    Args:
        image: a stable id (e.g. the generated file's name); what answers refer to.
        study: 1 (Fig. 7: S+ applied? deviates from the reference?) or 2 (Fig. 8: which of
            S+'s group is present?).
        reference_class: the reference bird's class R.
        target_attribute: S+ (CUB name).
        choices: study 2's options (the attributes of S+'s group, no "none"); empty for study 1.
        meta: anything else to keep with the image (file path, pairing, S-), JSON-serialisable.
    """

    image: str
    study: int
    reference_class: str
    target_attribute: str
    choices: tuple[str, ...] = ()
    meta: Mapping[str, object] = field(default_factory=dict)


def study1_item(image: str, reference_class: str, target_attribute: str, **meta: object) -> ImageItem:
    """A study-1 image (App. E, Fig. 7)."""
    return ImageItem(image, 1, reference_class, target_attribute, (), dict(meta))


def study2_item(
    image: str, reference_class: str, target_attribute: str, choices: Sequence[str], **meta: object
) -> ImageItem:
    """A study-2 image (App. E, Fig. 8); ``choices`` are the attributes of S+'s group."""
    if target_attribute not in choices:
        raise ValueError(f"choices must contain the target attribute {target_attribute!r}")
    return ImageItem(image, 2, reference_class, target_attribute, tuple(choices), dict(meta))
