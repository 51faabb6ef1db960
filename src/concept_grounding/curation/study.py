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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from .annotation_items import DEFAULT_K, LIKERT, AnnotationError, ImageItem, quote

if TYPE_CHECKING:
    from ..loaders.ratings import RatingItem

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
    "SUB_KEYS",
    "sub_record",
    "sub_records",
    "image_item",
    "rating_record",
    "rating_item",
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
    """Who sees which record: ``k`` responses per record (then it leaves the queue; a store file keeps the k a study
    was first served with, or the one it was made with: :class:`~.study_store.StudyStore`); ``order``:
    ``finish-first`` hands every annotator the records closest to ``k`` responses first (in insertion order),
    ``shuffled`` hands each annotator the open records in their own fixed pseudo-random order (no two alike)."""

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


#: the metadata keys a SUB record derives from its :class:`~.annotation_items.ImageItem` (the rest is its ``meta``)
SUB_KEYS: tuple[str, ...] = ("reference_class", "target_attribute", "plus", "reference")


def sub_record(item: ImageItem) -> Record:
    """SUB's study-1 or study-2 image as a record of :data:`SUB_STUDY_1` / :data:`SUB_STUDY_2`: the field ``image``
    is its candidate's id (``meta["candidate"]``, else the image id), study 2's choices its ``present`` options, and
    the metadata the reference class, S+ and their wording (App. E, Figs. 7-8) besides the item's ``meta``."""
    from ..vocabulary import attribute_phrase, class_display_name

    if item.study not in (1, 2):
        raise AnnotationError(f"image {quote(item.image)}: study must be 1 or 2, got {item.study!r}")
    if item.study == 2 and len(item.choices) < 2:
        raise AnnotationError(f"image {quote(item.image)}: study 2 needs at least 2 choices")
    metadata = {
        **dict(item.meta),
        "reference_class": item.reference_class,
        "target_attribute": item.target_attribute,
        "plus": attribute_phrase(item.target_attribute),
        "reference": class_display_name(item.reference_class),
    }
    options = {"present": tuple(item.choices)} if item.study == 2 else {}
    field_image = str(item.meta.get("candidate", item.image))
    return Record(item.image, f"sub-{item.study}", {"image": field_image}, options, metadata)


def sub_records(items: Iterable[ImageItem]) -> dict[str, list[Record]]:
    """SUB's images as records (:func:`sub_record`) by study name, in order (what ``add_records`` takes per study)."""
    out: dict[str, list[Record]] = {SUB_STUDY_1.name: [], SUB_STUDY_2.name: []}
    for item in items:
        record = sub_record(item)
        out[record.study].append(record)
    return out


def image_item(record: Record) -> ImageItem:
    """The :class:`~.annotation_items.ImageItem` a SUB record was made from (:func:`sub_record`'s inverse)."""
    meta = {k: v for k, v in record.metadata.items() if k not in SUB_KEYS}
    study = 1 if record.study == SUB_STUDY_1.name else 2
    return ImageItem(
        record.id,
        study,
        str(record.metadata["reference_class"]),
        str(record.metadata["target_attribute"]),
        tuple(record.options.get("present", ())),
        meta,
    )


def rating_record(item: RatingItem) -> Record:
    """ConceptBed's rating item as a record of :data:`CONCEPTBED_RATING`: the image, its reference images and its
    caption as fields (those it has), its kind, learner, task, concept and question wording (App. G) as metadata."""
    from ..loaders.ratings import RATING_KINDS
    from .rating_study import rating_question

    if item.kind not in RATING_KINDS:
        raise AnnotationError(f"item {quote(item.id)}: kind must be one of {list(RATING_KINDS)}")
    fields: dict[str, object] = {"image": item.file_name}
    if item.references:
        fields["references"] = list(item.references)
    if item.caption is not None:
        fields["caption"] = item.caption
    metadata = {
        "kind": item.kind,
        "learner": item.learner,
        "task": item.task,
        "concept": item.concept,
        "question": rating_question(item.kind),
    }
    return Record(item.id, CONCEPTBED_RATING.name, fields, {}, metadata)


def rating_item(record: Record) -> RatingItem:
    """The rating item a record of :data:`CONCEPTBED_RATING` was made from (:func:`rating_record`'s inverse)."""
    from ..loaders.ratings import RatingItem

    meta, fields = record.metadata, record.fields
    refs = fields.get("references") or ()
    caption = fields.get("caption")
    return RatingItem(
        record.id,
        str(meta["kind"]),
        str(meta["learner"]),
        str(meta["task"]),
        str(meta["concept"]),
        str(fields["image"]),
        tuple(str(r) for r in refs),  # type: ignore[union-attr]
        None if caption is None else str(caption),
    )
