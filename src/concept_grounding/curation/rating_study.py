"""What ConceptBed's rating study asks (Patel et al., App. G; docs/human_validation.md): the question's wording per
kind and the 1-5 check of a rating as the rating tab sends it. The study itself is declared in :mod:`.study`
(:data:`~.study.CONCEPTBED_RATING`); its agreement is :mod:`.agreement`'s.

>>> check_rating("4"), check_rating(5)
(4, 5)
>>> check_rating("6")
Traceback (most recent call last):
...
concept_grounding.curation.annotation_items.AnnotationError: rating '6' is not one of 1-5
"""

from __future__ import annotations

import numpy as np

from ..loaders.ratings import RATING_KINDS, RATING_SCALE, REFERENCES
from .annotation_items import AnnotationError, quote

__all__ = [
    "QUESTIONS",
    "check_rating",
    "rating_question",
]

#: the question per kind (App. G: 1 least similar, 5 an exact match)
QUESTIONS = {
    "concept": f"How likely is it that this image shows the same concept as the {REFERENCES} reference images? "
    "1: not at all, 5: exactly the same concept.",
    "caption": "How well does this image match its caption? 1: not at all, 5: an exact match.",
}
assert set(QUESTIONS) == set(RATING_KINDS)


def rating_question(kind: str) -> str:
    """The wording shown for an item of ``kind``."""
    return QUESTIONS[kind]


def check_rating(value: object) -> int:
    """``value`` (an int or its text, as the page sends it) as a rating in 1-5; anything else
    :class:`AnnotationError` in one line (quoting at most 40 characters of it)."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) == 1:
        text = int(text)
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool) and int(text) in RATING_SCALE:
        return int(text)
    raise AnnotationError(
        f"rating {quote(value)} is not one of {RATING_SCALE[0]}-{RATING_SCALE[-1]}", brief="rating outside 1-5"
    )
