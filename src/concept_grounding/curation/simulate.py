"""Simulated annotators on the bird world: SUB's human validation with a known answer.

The world (docs/world.md) knows every image's exact labels, so it can play both sides of
Sec. 4.3's validation:

* :func:`world_candidates` -- TDG-like candidates for the world's pairings, with failures put
  in on purpose: for the ``failed_attributes`` the substitution is not applied (the image is
  the reference bird unchanged), for the ``deviating_pairings`` the image is a bird of another
  class with S+ (excessive modification), and ``same_pairings`` pairings whose S+ the reference
  class already has (S+ = S-). Every :class:`Candidate` carries its truth, read from the
  world's labels of the bird actually drawn, never from the failure flags:
  ``applied`` (S+ present), ``deviates`` (another class than R) and ``present`` (the
  attribute of S+'s group present).
* :func:`asked_truth` -- the truth of what was *asked* of any other candidates (a ``generate`` or
  ``filter`` folder: its rows name the reference class, S+ and S-): S+ applied, the reference bird
  kept, S+ the group's present attribute. Annotators simulated on it answer as if generation did
  what it was asked.
* :func:`truth_answers` -- those truths as study answers (Q1 yes/no, Q2 yes/no, the group's
  present attribute): what a perfect annotator says.
* :class:`SimulatedAnnotator` -- says the truth with probability ``accuracy``, otherwise
  one of the other allowed answers uniformly (any study); :func:`run_annotators` drives the
  same :class:`~.study.StudyBackend` calls as the app for any study, from an answer function
  (SUB's: :func:`sub_answers`; the rating study's: ConceptBed's simulated raters).

>>> cands = world_candidates(WorldTask(classes=2, attributes=("has_crown_color::pink",), images_per_pairing=2))
>>> len(cands), cands[0].applied, cands[0].deviates
(4, True, False)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..fileio import atomic_write_lines
from ..world import BirdWorld, WorldConfig
from .study import SUB_STUDY_1, SUB_STUDY_2, Record, Study, StudyBackend

__all__ = [
    "WorldTask",
    "Candidate",
    "broken_task",
    "default_attributes",
    "world_candidates",
    "write_candidates",
    "read_truth",
    "asked_truth",
    "truth_answers",
    "SimulatedAnnotator",
    "AnswerFn",
    "run_annotators",
    "sub_answers",
    "simulate_sub",
]


@dataclass(frozen=True)
class WorldTask:
    """Which world candidates to make, and which to break.

    Args:
        classes: the first ``classes`` world classes are the reference classes.
        attributes: the S+ attributes (CUB names); default the first 6 SUB substitutions the world renders.
        images_per_pairing: candidates per (class, S+) pairing (the filter's kept images).
        failed_attributes: S+ that TDG "fails" to apply: every image is the reference bird unchanged.
        deviating_pairings: (class, S+) whose images are another class's bird with S+.
        same_pairings: how many pairings per class to add whose S+ the class already has (S+ = S-).
        image_size: rendered size in pixels.
        seed: the world's seed.
        world_config: the whole world instead (e.g. the shipped world Flux's, which the shipped
            judge is validated on: canonical pose, plain scene, 32 px).
    """

    classes: int = 4
    attributes: tuple[str, ...] | None = None
    images_per_pairing: int = 12
    failed_attributes: tuple[str, ...] = ()
    deviating_pairings: tuple[tuple[str, str], ...] = ()
    same_pairings: int = 0
    image_size: int = 64
    seed: int = 0
    world_config: WorldConfig | None = None

    def world(self) -> BirdWorld:
        """The world drawn from: ``world_config`` when given (``image_size`` and ``seed`` then unused)."""
        return BirdWorld(self.world_config or WorldConfig(image_size=self.image_size, seed=self.seed))


@dataclass(frozen=True)
class Candidate:
    """One candidate image and its truth (from the world's labels of the drawn bird)."""

    id: str
    reference_class: str
    target_attribute: str
    removed_attributes: tuple[str, ...]
    group: str
    world_index: int
    drawn_class: str
    drawn_target: str | None
    applied: bool
    deviates: bool
    present: str


def default_attributes(world: BirdWorld, n: int = 6) -> tuple[str, ...]:
    """The first ``n`` of SUB's substitutions (vocabulary order) that the world renders."""
    rendered = set(world.rendered_attributes)
    subs = [a for a in world.vocab.sub_substitutions.values() if world.vocab.attribute_index(a) in rendered]
    return tuple(subs[:n])


def _present(labels: np.ndarray, world: BirdWorld, target: str) -> str:
    vocab = world.vocab
    idx = vocab.attribute_index(target)
    if labels[idx]:
        return target
    group = vocab.groups[vocab.group_of(target)]
    on = [vocab.attributes[i] for i in group if labels[i]]
    return on[0] if on else vocab.attributes[group[0]]


def broken_task(task: WorldTask, world: BirdWorld | None = None) -> WorldTask:
    """``task`` with one failure of each kind put in: its last S+ (alphabetically) fails, its
    first pairing deviates, and one S+ = S- pairing per class (the world's truth of what
    curation must drop).

    >>> t = broken_task(WorldTask(classes=2, images_per_pairing=1))
    >>> len(t.failed_attributes), len(t.deviating_pairings), t.same_pairings
    (1, 1, 1)
    """
    world = world or task.world()
    first = world_candidates(replace(task, images_per_pairing=1), world)
    attrs = sorted({c.target_attribute for c in first})
    return replace(
        task,
        failed_attributes=(attrs[-1],),
        same_pairings=1,
        deviating_pairings=((first[0].reference_class, first[0].target_attribute),),
    )


def world_candidates(task: WorldTask, world: BirdWorld | None = None) -> list[Candidate]:
    """The task's candidates in plan order (class, then S+, then image); ids ``"c<row>"``."""
    world = world or task.world()
    vocab = world.vocab
    attributes = task.attributes or default_attributes(world)
    failed, deviating = set(task.failed_attributes), set(map(tuple, task.deviating_pairings))
    out: list[Candidate] = []
    for c in range(min(task.classes, world.num_classes)):
        name = world.class_names[c]
        targets = [a for a in attributes if not world.class_attributes[c, vocab.attribute_index(a)]]
        own = [
            vocab.attributes[i]
            for i in np.flatnonzero(world.class_attributes[c])
            if i in set(world.rendered_attributes)
        ]
        targets += [a for a in own if a not in targets][: task.same_pairings]
        for target in targets:
            group = vocab.group_of(target)
            removed = tuple(
                vocab.attributes[i]
                for i in vocab.groups[group]
                if world.class_attributes[c, i] and vocab.attributes[i] != target
            )
            for k in range(task.images_per_pairing):
                index, drawn, sub = c + k * world.num_classes, c, target
                if target in failed:
                    sub = None
                elif (name, target) in deviating:
                    drawn = (c + 1) % world.num_classes
                    index = drawn + k * world.num_classes
                labels = world.labels(index, sub)
                out.append(
                    Candidate(
                        f"c{len(out):06d}",
                        name,
                        target,
                        removed,
                        group,
                        int(index),
                        world.class_names[drawn],
                        sub,
                        bool(labels[vocab.attribute_index(target)]),
                        drawn != c,
                        _present(labels, world, target),
                    )
                )
    return out


def write_candidates(
    candidates: Sequence[Candidate], folder: str | Path, world: BirdWorld, render: bool = True
) -> Path:
    """Write the candidates as a ``generate``/``filter``-style folder: ``images/<id>.png`` (when
    ``render``), ``metadata.jsonl`` (``id, file_name, reference_class, target_attribute,
    removed_attributes, group, source_id, seed``) and ``truth.jsonl`` (the oracle)."""
    from PIL import Image

    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    meta, truth = [], []
    for cand in candidates:
        rel = f"images/{cand.id}.png"
        if render:
            sample = world.sample(cand.world_index)
            if cand.drawn_target is not None:
                edited = world.counterfactual(sample, cand.drawn_target).edited
                sample = edited if edited is not None else sample
            Image.fromarray(sample.image).save(folder / rel)
        meta.append(
            json.dumps(
                {
                    "id": cand.id,
                    "file_name": rel,
                    "reference_class": cand.reference_class,
                    "target_attribute": cand.target_attribute,
                    "removed_attributes": list(cand.removed_attributes),
                    "group": cand.group,
                    "source_id": cand.world_index,
                    "seed": world.config.seed,
                },
                sort_keys=True,
            )
        )
        truth.append(json.dumps(dict(asdict(cand).items()), sort_keys=True))
    atomic_write_lines(folder / "metadata.jsonl", meta)
    atomic_write_lines(folder / "truth.jsonl", truth)
    return folder


def read_truth(path: str | Path) -> dict[str, Candidate]:
    """``truth.jsonl`` (:func:`write_candidates`) -> candidate id -> :class:`Candidate`."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            t = json.loads(line)
            out[t["id"]] = Candidate(**{**t, "removed_attributes": tuple(t["removed_attributes"])})
    return out


def asked_truth(rows: Iterable[dict]) -> dict[str, Candidate]:
    """Candidate id (:func:`~.sampling.candidate_id`) -> the :class:`Candidate` a ``generate`` / ``filter`` row asked
    for: S+ applied (``applied``), the reference class kept (``deviates`` False), S+ present in its group.

    >>> t = asked_truth([{"file_name": "a.png", "reference_class": "017.Cardinal",
    ...                   "target_attribute": "has_crown_color::black",
    ...                   "removed_attributes": ["has_crown_color::red"]}])
    >>> t["a.png"].applied, t["a.png"].deviates, t["a.png"].present, t["a.png"].group
    (True, False, 'has_crown_color::black', 'crown_color')
    """
    from ..vocabulary import load_vocabulary
    from .sampling import candidate_id

    vocab = load_vocabulary()
    out = {}
    for row in rows:
        target = str(row["target_attribute"])
        out[candidate_id(row)] = Candidate(
            candidate_id(row),
            str(row["reference_class"]),
            target,
            tuple(row.get("removed_attributes") or ()),
            vocab.group_of(target),
            int(row.get("source_id", -1)),
            str(row["reference_class"]),
            target,
            applied=True,
            deviates=False,
            present=target,
        )
    return out


def truth_answers(record: Record, truth: Candidate) -> dict[str, str]:
    """A perfect annotator's answers to SUB's ``record`` (App. E's questions) from the world's truth."""
    if record.study == SUB_STUDY_1.name:
        return {"q1": "yes" if truth.applied else "no", "q2": "yes" if truth.deviates else "no"}
    return {"present": truth.present}


@dataclass
class SimulatedAnnotator:
    """An annotator who gives the true answer with probability ``accuracy`` per question, else one of the other
    answers the question allows for the record uniformly (seeded by ``seed``); for any study."""

    name: str
    accuracy: float
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"accuracy must be in [0, 1], got {self.accuracy}")
        self._rng = np.random.default_rng([self.seed, sum(map(ord, self.name))])

    def answer(self, study: Study, record: Record, true: Mapping[str, str]) -> dict[str, str]:
        """This annotator's answers to ``record`` of ``study`` whose true answers are ``true``."""
        out = {}
        for q in study.questions:
            if self._rng.random() < self.accuracy:
                out[q.name] = true[q.name]
            else:
                wrong = [o for o in q.allowed(record) if o != true[q.name]]
                out[q.name] = wrong[int(self._rng.integers(len(wrong)))]
        return out


#: ``(annotator, record) -> answers``: how one simulated annotator answers a record of one study
AnswerFn = Callable[[str, Record], Mapping[str, object]]


def run_annotators(
    store: StudyBackend, study: str, annotators: Iterable[str], answer: AnswerFn, limit: int | None = None
) -> int:
    """Each annotator in turn takes :meth:`~.study.StudyBackend.next_record` of ``study`` and submits ``answer(name,
    record)`` until none is left (or ``limit`` records each): the app's calls, for any study. Returns the submits."""
    n = 0
    for name in annotators:
        done = 0
        while limit is None or done < limit:
            record = store.next_record(name, study)
            if record is None:
                break
            store.submit(name, study, record.id, answer(name, record))
            done += 1
            n += 1
    return n


def sub_answers(annotators: Iterable[SimulatedAnnotator], truth: Mapping[str, Candidate]) -> AnswerFn:
    """SUB's simulated answers: each annotator's :meth:`SimulatedAnnotator.answer` to the truth of the record's
    candidate (``truth``: candidate id -> :class:`Candidate`, the record's ``metadata["candidate"]``)."""
    by_name = {a.name: a for a in annotators}

    def answer(name: str, record: Record) -> Mapping[str, str]:
        study = SUB_STUDY_1 if record.study == SUB_STUDY_1.name else SUB_STUDY_2
        return by_name[name].answer(study, record, truth_answers(record, truth[str(record.metadata["candidate"])]))

    return answer


def simulate_sub(
    store: StudyBackend,
    annotators: Sequence[SimulatedAnnotator],
    truth: Mapping[str, Candidate],
    studies: Sequence[str] = (SUB_STUDY_1.name, SUB_STUDY_2.name),
    limit: int | None = None,
) -> int:
    """SUB's simulated annotators answer each study in turn (:func:`run_annotators` with :func:`sub_answers`);
    returns the submits."""
    answer = sub_answers(annotators, truth)
    names = [a.name for a in annotators]
    return sum(run_annotators(store, study, names, answer, limit) for study in studies)
