"""What ConceptBed's rating study asks (Patel et al., App. G; docs/human_validation.md): the question's wording per
kind. The study itself is declared in :mod:`.study` (:data:`~.study.CONCEPTBED_RATING`: a rating 1-5, checked by
:meth:`.Study.check`); its agreement is :mod:`.agreement`'s.

>>> rating_question("caption")
'How well does this image match its caption? 1: not at all, 5: an exact match.'
"""

from __future__ import annotations

from ..loaders.ratings import RATING_KINDS, REFERENCES

__all__ = ["QUESTIONS", "rating_question"]

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
