"""SUB's studies 1-2 through the calls the annotation app made before the study store: a thin compatibility layer
over :class:`~.study_store.StudyStore` (images are records of ``sub-1`` / ``sub-2``, :func:`~.study.sub_record`), kept
only until the app reads the study store itself. New code uses :class:`~.study_store.StudyStore`.

>>> import tempfile, os
>>> store = AnnotationStore(os.path.join(tempfile.mkdtemp(), "a.db"), k=2)
>>> store.add_images([study1_item("img-0", "017.Cardinal", "has_crown_color::pink")])
1
>>> store.next_image("ann", 1).image
'img-0'
>>> store.submit("ann", "img-0", {"q1": "yes", "q2": "no"})
>>> store.next_image("ann", 1) is None, store.progress("ann", 1)
(True, (1, 1))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from .annotation_items import (
    DEFAULT_K,
    LIKERT,
    STUDIES,
    AnnotationError,
    ImageItem,
    annotator_id,
    question_text,
    quote,
    study1_item,
    study2_item,
)
from .study import SUB_STUDY_1, SUB_STUDY_2, image_item, sub_record
from .study_store import LEASE_SECONDS, SCHEMA_VERSION, StudyStore

__all__ = [
    "SCHEMA_VERSION",
    "DEFAULT_K",
    "STUDIES",
    "LIKERT",
    "AnnotationError",
    "ImageItem",
    "AnnotationStore",
    "study1_item",
    "study2_item",
    "question_text",
    "annotator_id",
    "LEASE_SECONDS",
]

_SUB = (SUB_STUDY_1.name, SUB_STUDY_2.name)


def sub_study(study: int | str) -> str:
    """The study store's name of SUB's study ``study`` (1 or 2; a name is kept as it is)."""
    return study if isinstance(study, str) else f"sub-{study}"


class AnnotationStore(StudyStore):
    """A :class:`~.study_store.StudyStore` answering the annotation app's SUB calls (module docstring)."""

    #: the study store's ``submit`` (``submit`` here is the app's SUB call: an image and its answers)
    submit_response = StudyStore.submit

    def add_images(self, items: Iterable[ImageItem]) -> int:
        """Add SUB images (ids already present are kept as they are); returns how many were new."""
        records = [sub_record(it) for it in items]
        return sum(self.add_records(s, [r for r in records if r.study == s]) for s in _SUB)

    def image(self, image: object) -> ImageItem:
        """The stored image ``image``; an unknown id raises :class:`AnnotationError`."""
        if isinstance(image, str) and len(image) <= 1000:
            for study in _SUB:
                if self.read("SELECT 1 FROM records WHERE study = ? AND id = ?", (study, image)):
                    return image_item(self.record(study, image))
        raise AnnotationError(f"image {quote(image)}: not in {self.path} (a forged or stale id)", brief="unknown image")

    def images(self, study: int | None = None) -> list[ImageItem]:
        """Every stored image (of ``study``), in insertion order."""
        names = _SUB if study is None else (sub_study(study),)
        return [image_item(r) for s in names for r in self.records(s)]

    def next_image(self, annotator: str, study: int) -> ImageItem | None:
        """:meth:`~.study_store.StudyStore.next_record` of SUB's study ``study``."""
        record = self.next_record(annotator, sub_study(study))
        return None if record is None else image_item(record)

    def open_image(self, annotator: str, study: int) -> str | None:
        """:meth:`~.study_store.StudyStore.open_record` of SUB's study ``study``."""
        return self.open_record(annotator, sub_study(study))

    def submit(self, annotator: str, image: str, answers: Mapping[str, str]) -> None:  # type: ignore[override]
        """Store ``annotator``'s answers to ``image`` (:meth:`~.study_store.StudyStore.submit`)."""
        item = self.image(image)
        questions = STUDIES[item.study]
        if not isinstance(answers, Mapping) or set(answers) != set(questions):
            got = [quote(a) for a in sorted(map(str, answers))][:5] if isinstance(answers, Mapping) else type(answers)
            raise AnnotationError(
                f"image {image!r}: study {item.study} needs answers to {list(questions)}, got {got}",
                brief="wrong questions",
            )
        for q in questions:
            if answers[q] not in item.allowed(q):
                raise AnnotationError(
                    f"image {image!r}: answer {quote(answers[q])} to {q} is not one of {list(item.allowed(q))}",
                    brief=f"answer to {q} outside its choices",
                )
        self.submit_response(annotator, sub_study(item.study), item.image, answers)

    def progress(self, annotator: str, study: int | str) -> tuple[int, int]:
        """:meth:`~.study_store.StudyStore.progress` of SUB's study ``study`` (1, 2 or a study's name)."""
        return super().progress(annotator, sub_study(study))

    def complete(self, study: int | str) -> tuple[int, int]:  # type: ignore[override]
        """:meth:`~.study_store.StudyStore.complete` of SUB's study ``study`` (1, 2 or a study's name)."""
        return super().complete(sub_study(study))

    def rows(self) -> list[tuple[str, str, int, str, str]]:
        """Every SUB answer as ``(annotator, image, study, question, answer)``, in submit order."""
        out = []
        for annotator, study, record, answers in self.read(
            "SELECT annotator, study, record, answers FROM responses WHERE study IN (?, ?) ORDER BY rowid", _SUB
        ):
            given = json.loads(answers)
            number = int(study[-1])
            out += [(annotator, record, number, q, given[q]) for q in STUDIES[number]]
        return out

    def _read(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.read(sql, params)
