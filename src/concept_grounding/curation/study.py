"""An annotation study, shaped like Argilla's datasets: fields shown, typed questions asked, a distribution policy;
records to annotate and annotators' responses (docs/human_validation.md, "One study model").

SUB's studies 1-2 (Bader et al., App. E, Figs. 7-8) and ConceptBed's rating study (Patel et al., App. G) are
declarations (:data:`SUB_STUDY_1`, :data:`SUB_STUDY_2`, :data:`CONCEPTBED_RATING`); the store, the app, the simulator,
the export and the agreement read any :class:`Study`.

>>> record = Record("img-0", "sub-2", {"image": "img-0.png"}, options={"present": ("a", "b")})
>>> SUB_STUDY_2.check(record, {"present": "b"})
{'present': 'b'}
>>> SUB_STUDY_2.check(record, {"present": "c"})
Traceback (most recent call last):
...
concept_grounding.curation.annotation_items.AnnotationError: present: 'c' is not one of a, b
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from .annotation_items import DEFAULT_K, LIKERT, AnnotationError, quote

__all__ = [
    "FieldKind",
    "QuestionKind",
    "Field",
    "Question",
    "Distribution",
    "Study",
    "Record",
    "Response",
    "StudyBackend",
    "RATING_OPTIONS",
    "SUB_STUDY_1",
    "SUB_STUDY_2",
    "CONCEPTBED_RATING",
    "STUDIES",
    "study_named",
]

#: what a field shows: one image (a path or URL), several images, or text.
FieldKind = Literal["image", "images", "text"]
#: label: one of the question's fixed options; choice: one of the record's own options (``Record.options``);
#: rating: one of 1-5.
QuestionKind = Literal["label", "choice", "rating"]
#: Krippendorff's level of measurement of a question's answers (the agreement's distance).
Level = Literal["nominal", "ordinal", "interval"]
#: a rating question's answers (App. G: 1 least similar, 5 an exact match).
RATING_OPTIONS: tuple[str, ...] = ("1", "2", "3", "4", "5")


@dataclass(frozen=True)
class Field:
    """What the page shows of each record: ``record.fields[name]`` rendered as ``kind``; an ``optional`` field may be
    missing from a record (e.g. a rating item's references or its caption)."""

    name: str
    kind: FieldKind
    title: str = ""
    optional: bool = False


@dataclass(frozen=True)
class Question:
    """One typed question.

    Args:
        name: the answer's key (``"q1"``, ``"present"``, ``"rating"``).
        kind: :data:`QuestionKind`.
        title: the wording; ``{key}`` is filled from the record's ``metadata`` (e.g. SUB's S+ phrase).
        options: a label question's answers, in the order shown (its keys 1, 2, 3, ...); a rating's are
            :data:`RATING_OPTIONS`; a choice question has none (each record brings its own).
        level: Krippendorff's level of its answers (nominal, ordinal or interval).
    """

    name: str
    kind: QuestionKind
    title: str
    options: tuple[str, ...] = ()
    level: Level = "nominal"

    def text(self, record: Record | None) -> str:
        """The wording shown for ``record`` (``title`` with the record's metadata filled in)."""
        return self.title.format_map(dict(record.metadata)) if record is not None else self.title

    def allowed(self, record: Record) -> tuple[str, ...]:
        """The answers accepted for ``record``."""
        if self.kind == "choice":
            return tuple(record.options.get(self.name, ()))
        return RATING_OPTIONS if self.kind == "rating" else self.options

    def check(self, record: Record, value: object) -> str:
        """``value`` as the stored answer (a string), or a one-line :class:`AnnotationError` naming the question."""
        allowed = self.allowed(record)
        answer = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if answer is None or answer not in allowed:
            raise AnnotationError(f"{self.name}: {quote(value)} is not one of {', '.join(allowed)}")
        return answer


@dataclass(frozen=True)
class Distribution:
    """Who sees which record: ``k`` responses per record (then it leaves the queue); ``order``: ``finish-first`` hands
    every annotator the records closest to ``k`` responses first (in insertion order), ``shuffled`` hands each
    annotator the open records in their own fixed pseudo-random order (no two annotators alike)."""

    k: int = DEFAULT_K
    order: Literal["finish-first", "shuffled"] = "finish-first"


@dataclass(frozen=True)
class Study:
    """A study: its ``name`` (the store's key), ``title`` and ``guidelines`` (shown above the questions), the fields
    shown, the questions asked and the distribution."""

    name: str
    title: str
    guidelines: str
    fields: tuple[Field, ...]
    questions: tuple[Question, ...]
    distribution: Distribution = Distribution()

    def question(self, name: str) -> Question:
        """The question called ``name``."""
        for q in self.questions:
            if q.name == name:
                return q
        raise AnnotationError(f"study {self.name!r} asks no question {quote(name)}")

    def check(self, record: Record, answers: Mapping[str, object]) -> dict[str, str]:
        """Every question answered, each answer allowed, nothing else: the answers to store, or a one-line
        :class:`AnnotationError` (nothing is written)."""
        extra = sorted(set(answers) - {q.name for q in self.questions})
        if extra:
            raise AnnotationError(f"study {self.name!r} asks no question {quote(extra[0])}")
        missing = [q.name for q in self.questions if answers.get(q.name) in (None, "")]
        if missing:
            raise AnnotationError(f"answer {', '.join(missing)} before submitting")
        return {q.name: q.check(record, answers[q.name]) for q in self.questions}


@dataclass(frozen=True)
class Record:
    """One record of a study: its ``id`` (stable: what responses refer to), the ``fields`` shown (field name ->
    path, paths or text), per-record ``options`` of its choice questions and ``metadata`` kept with it (filled into
    question titles, carried into the export)."""

    id: str
    study: str
    fields: Mapping[str, object]
    options: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    metadata: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Response:
    """One annotator's submitted answers to one record (question name -> answer)."""

    annotator: str
    study: str
    record: str
    answers: Mapping[str, str]


class StudyBackend(Protocol):
    """What an app and a simulator need of a store; every failure a one-line :class:`AnnotationError`."""

    def next_record(self, annotator: str, study: str) -> Record | None:
        """The record ``annotator`` should answer next (leased to them), ``None`` when they are done."""
        ...

    def open_record(self, annotator: str, study: str) -> str | None:
        """The id of the record leased to ``annotator`` and not yet answered, if any."""
        ...

    def submit(self, annotator: str, study: str, record: str, answers: Mapping[str, object]) -> None:
        """Store ``answers`` in one transaction after :meth:`Study.check`; a repeated or stale submit is refused."""
        ...

    def progress(self, annotator: str, study: str) -> tuple[int, int]:
        """(records ``annotator`` answered, records they can answer in all)."""
        ...

    def annotator_for_token(self, token: object) -> str | None:
        """The annotator whose personal link carries ``token`` (compared by hash), else ``None``."""
        ...


SUB_STUDY_1 = Study(
    name="sub-1",
    title="Study 1 (SUB App. E, Fig. 7)",
    guidelines="The image was made from a reference bird with one attribute substituted. "
    "Answer both questions: yes, somewhat or no.",
    fields=(Field("image", "image"),),
    questions=(
        Question("q1", "label", "Is “{plus}” faithfully applied?", LIKERT, "ordinal"),
        Question(
            "q2",
            "label",
            "Does the bird deviate significantly from the reference bird ({reference})?",
            LIKERT,
            "ordinal",
        ),
    ),
)

SUB_STUDY_2 = Study(
    name="sub-2",
    title="Study 2 (SUB App. E, Fig. 8)",
    guidelines="Pick the attribute of this group that is present in the bird.",
    fields=(Field("image", "image"),),
    questions=(Question("present", "choice", "Which of these attributes is present in the image?"),),
)

CONCEPTBED_RATING = Study(
    name="conceptbed-rating",
    title="ConceptBed's rating study (Patel et al., App. G, Figs. 8-10)",
    guidelines="Rate each image on its own: 1 not at all, 5 exactly.",
    fields=(
        Field("image", "image"),
        Field("references", "images", "Reference images of the concept", optional=True),
        Field("caption", "text", "Caption", optional=True),
    ),
    questions=(Question("rating", "rating", "{question}", level="interval"),),
    distribution=Distribution(order="shuffled"),
)

#: every declared study, by name.
STUDIES: dict[str, Study] = {s.name: s for s in (SUB_STUDY_1, SUB_STUDY_2, CONCEPTBED_RATING)}


def study_named(name: str) -> Study:
    """The declared study called ``name``, or a one-line :class:`AnnotationError` listing them."""
    if name not in STUDIES:
        raise AnnotationError(f"no study {quote(name)}; declared: {', '.join(STUDIES)}")
    return STUDIES[name]
