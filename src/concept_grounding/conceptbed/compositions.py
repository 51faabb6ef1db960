"""ConceptBed's compositional reasoning on the world (Sec. 4.2, Table 2; App. E.3 questions).

A learnt concept ``V*`` (a held-out species) is composed with the four categories the world
can draw (:mod:`concept_grounding.world.composition`), in the captions' own forms:

=========== ============================================ =======================================
category    prompts per concept                          existence questions (answer: yes)
=========== ============================================ =======================================
relation    ``a photo of a V* in the sky`` (5 scenes)    ``is the bird in the sky?``
action      ``a photo of a V* facing left`` (and right)  ``is the bird facing left?``
attribute   ``a photo of a V* with a blue colored crown`` ``is there a blue colored crown?``
            (2 attributes the species lacks)
counting    ``a photo of two V*`` (and three)            ``are there two birds?``
composite   ``a photo of two V* in the sky``,            one question per category
            ``a photo of a V* on a branch facing left``
=========== ============================================ =======================================

Every prompt also asks ``is there a V*?`` (the concept under the composition: the paper's drop
in concept alignment under composite prompts).

The **VQA judge** (:class:`VQAJudge`) answers a question by the probability of the
asked value: the composition judge's count, scene and facing heads, and the shipped world judge's
attribute probability (it reads canonical birds: attribute prompts are single-category, so the
world Flux draws them canonical). It is validated on world renders with known answers before any
verdict is used (>= :data:`VQA_BAR` per category). Per learner and category (Table 2): VQA
accuracy (questions answered yes, P(yes) > 0.5), CCD (Sec. 3.2 with P(yes) as ``f``: the real
compositions' mean P(yes) minus the generated ones'), and CLIPScore (Hessel et al.:
``100 * max(cos, 0)`` of the image and the prompt with ``V*`` replaced by ``bird``, the paper's
label substitution) with the composition CLIP (:mod:`.composition_clip`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..world.composition import ACTIONS, COUNT_WORDS, RELATIONS, CompositionPrompt, composition_config
from ..world.composition import CATEGORIES as WORLD_CATEGORIES

__all__ = [
    "CATEGORIES",
    "VQA_BAR",
    "ExistenceQuestion",
    "questions",
    "questions_of",
    "concept_prompts",
    "real_images",
    "VQAJudge",
]

#: Table 2's categories: the world's (:data:`~concept_grounding.world.composition.CATEGORIES`) and the composite
#: prompts of two of them.
CATEGORIES: tuple[str, ...] = (*WORLD_CATEGORIES, "composite")
#: Held-out accuracy per question kind the VQA judge must reach.
VQA_BAR = 0.90


@dataclass(frozen=True)
class ExistenceQuestion:
    """One boolean existence question of a prompt (its answer is always yes).

    Attributes:
        text: the question, e.g. ``"is the bird in the sky?"``.
        kind: ``"concept"``, ``"count"``, ``"scene"``, ``"facing"`` or ``"attribute"``.
        value: what it asks (a count 1-3, a scene, a facing, an attribute phrase, the noun).
    """

    text: str
    kind: str
    value: Any


def questions(prompt: str) -> list[ExistenceQuestion]:
    """ConceptBed App. E.3: the prompt's salient words (noun, count, attribute, relation, action; read by
    :meth:`~concept_grounding.world.composition.CompositionPrompt.parse`) turned into existence questions.

    >>> [q.text for q in questions("a photo of two V* in the sky")]
    ['is there a V*?', 'are there two birds?', 'is the bird in the sky?']
    >>> [(q.kind, q.value) for q in questions("a photo of a V* with a blue colored crown")]
    [('concept', 'V*'), ('attribute', 'a blue colored crown')]
    >>> questions("a painting of a V* eating")
    Traceback (most recent call last):
    ValueError: prompt: cannot make questions of 'a painting of a V* eating': the world's prompts read
    'a photo of {a|two|three} V*[ with ...][ in the sky|on a branch|...][ facing left|right]'
    """
    asked = CompositionPrompt.parse(prompt.strip().lower().replace("v*", "V*"))
    if asked is None:
        raise ValueError(
            f"prompt: cannot make questions of {prompt!r}: the world's prompts read "
            "'a photo of {a|two|three} V*[ with ...][ in the sky|on a branch|...][ facing left|right]'"
        )
    out = [ExistenceQuestion(f"is there a {asked.noun}?", "concept", asked.noun)]
    if asked.count > 1:
        out.append(ExistenceQuestion(f"are there {COUNT_WORDS[asked.count]} birds?", "count", asked.count))
    if asked.attribute:
        out.append(ExistenceQuestion(f"is there {asked.attribute}?", "attribute", asked.attribute))
    if asked.scene is not None:
        out.append(ExistenceQuestion(f"is the bird {RELATIONS[asked.scene]}?", "scene", asked.scene))
    if asked.facing is not None:
        out.append(ExistenceQuestion(f"is the bird {ACTIONS[asked.facing]}?", "facing", asked.facing))
    return out


def questions_of(prompts: Sequence[str]) -> list[list[ExistenceQuestion]]:
    """:func:`questions` of every prompt, each unique prompt parsed once (a scoring run asks the
    same few prompts of many images); the lists are fresh, the :class:`ExistenceQuestion` s shared.

    >>> a, b, c = questions_of(["a photo of two V*", "a photo of a V* facing left", "a photo of two V*"])
    >>> [q.text for q in c] == [q.text for q in a] and a is not c, [q.kind for q in b]
    (True, ['concept', 'facing'])
    """
    parsed = {p: questions(p) for p in dict.fromkeys(prompts)}
    return [list(parsed[p]) for p in prompts]


def _category(qs: list[ExistenceQuestion]) -> str:
    kinds = [q.kind for q in qs if q.kind != "concept"]
    names = {"count": "counting", "scene": "relation", "facing": "action", "attribute": "attribute"}
    return names[kinds[0]] if len(kinds) == 1 else "composite"


def concept_prompts(world: Any, label: int) -> list[tuple[str, str, str | None]]:
    """``(category, prompt, attribute)`` of every composition of concept ``label`` (module table);
    ``attribute`` is the CUB attribute an attribute prompt asks for (two SUB substitutions the
    species lacks at class level and the world draws), else ``None``.

    >>> from concept_grounding.world import BirdWorld
    >>> rows = concept_prompts(BirdWorld(), 0)
    >>> len(rows), sorted({c for c, _, _ in rows}), rows[0][1]
    (13, ['action', 'attribute', 'composite', 'counting', 'relation'], 'a photo of a V* in the sky')
    """
    from ..worldflux.captions import caption_phrase

    rows: list[tuple[str, str, str | None]] = [
        ("relation", CompositionPrompt("V*", scene=s).text, None) for s in RELATIONS
    ]
    rows += [("action", CompositionPrompt("V*", facing=f).text, None) for f in ACTIONS]
    lacking = [a for c, a in world.default_pairings() if c == world.class_names[label]]
    if not lacking:  # a class of another world: the SUB substitutions it lacks
        row = world.class_attributes[label]
        lacking = [
            a
            for a in world.vocab.sub_substitutions.values()
            if world.vocab.attribute_index(a) in world.rendered_attributes and not row[world.vocab.attribute_index(a)]
        ]
    colour = [a for a in lacking if a.endswith("_color::" + a.split("::")[1]) and "pattern" not in a]
    for a in (colour or lacking)[:: max(1, len(colour or lacking) // 2)][:2]:
        rows.append(("attribute", CompositionPrompt("V*", attribute=caption_phrase(a)).text, a))
    rows += [("counting", CompositionPrompt("V*", k).text, None) for k in (2, 3)]
    rows += [
        ("composite", CompositionPrompt("V*", 2, scene="sky").text, None),
        ("composite", CompositionPrompt("V*", scene="foliage", facing="left").text, None),
    ]
    return rows


def real_images(world: Any, label: int, prompt: str, attribute: str | None, n: int, offset: int = 0) -> np.ndarray:
    """``(n, S, S, 3)`` uint8 world drawings of exactly what ``prompt`` asks of class ``label``
    (the Original row): compositions of the varied world with the asked count, scene and facing,
    or canonical renders with ``attribute`` substituted (exact edits)."""
    from ..world import BirdWorld

    qs = questions(prompt)
    asked = {q.kind: q.value for q in qs}
    if attribute is not None:
        out, k = [], offset
        while len(out) < n:
            edited, _ = world.edited(label + k * world.num_classes, attribute)
            if edited is not None:
                out.append(edited.image)
            k += 1
        return np.stack(out)
    varied = BirdWorld(composition_config(world.config), world.vocab)
    out, k = [], offset
    while len(out) < n:
        i = label + k * varied.num_classes
        pose = varied.pose(i)
        if (
            asked.get("scene", pose.background_name) == pose.background_name
            and asked.get("facing", pose.facing) == pose.facing
        ):
            out.append(varied.composition(i, int(asked.get("count", 1))).image)
        k += 1
    return np.stack(out)


@dataclass
class VQAJudge:
    """ConceptBed's VQA judge on the world: P(yes) of each existence question, from image judges
    (:func:`~concept_grounding.judge.create_judge`).

    Attributes:
        judge: the ``composition`` judge (count, scene, facing).
        attributes: the ``world`` judge (attribute probabilities of canonical birds).
        species: the ``conceptbed-species`` judge (``is there a V*?``), or ``None``.
        validation: the :class:`~concept_grounding.judge.JudgeReport` of :meth:`validate`
            (question kind -> held-out accuracy).
    """

    judge: Any
    attributes: Any
    species: Any = None
    validation: Any = None

    def p_yes(self, images: np.ndarray, qs: list[ExistenceQuestion], label: int, world: Any) -> np.ndarray:
        """``(N, Q)`` probability of yes to each of ``qs`` on uint8 ``(N, S, S, 3)`` ``images``
        of concept ``label`` (a class of ``world``). Each judge runs once over all ``images`` (only
        the ones ``qs`` ask), its output shared by every question of its kind."""
        from ..judge.composition import HEADS

        out = np.full((len(images), len(qs)), np.nan)
        answers = self._answers(images, {q.kind for q in qs}, label)
        for j, q in enumerate(qs):
            if q.kind == "count":
                out[:, j] = answers["count"][:, int(q.value) - 1]
            elif q.kind in ("scene", "facing"):
                out[:, j] = answers[q.kind][:, list(HEADS[q.kind]).index(q.value)]
            elif q.kind == "attribute":
                out[:, j] = answers["attribute"][:, world.vocab.attribute_index(_attribute_of(world, q.value))]
            elif "concept" in answers:
                out[:, j] = answers["concept"]
        return out

    def _answers(self, images: np.ndarray, kinds: set[str], label: int) -> dict[str, np.ndarray]:
        """Per asked judge, its output on all ``images`` (one pass each): the composition heads'
        ``(N, values)`` probabilities, ``"attribute"`` ``(N, 312)``, ``"concept"`` ``(N,)`` P(label)."""
        answers: dict[str, np.ndarray] = {}
        if kinds & {"count", "scene", "facing"}:
            answers.update(self.judge.probabilities(images))
        if "attribute" in kinds:
            answers["attribute"] = self.attributes.probabilities(images)["attributes"]
        if "concept" in kinds and self.species is not None:
            answers["concept"] = self.species.scores(images)[:, label]
        return answers

    def validate(self, world: Any, labels: list[int], per_prompt: int = 2) -> Any:
        """A :class:`~concept_grounding.judge.JudgeReport`: accuracy (P(yes) > 0.5) per question
        kind on exact world drawings of every composition prompt of ``labels`` (:func:`real_images`:
        the answer is always yes), bar :data:`VQA_BAR`."""
        from ..judge.base import JudgeReport

        hits: dict[str, list[bool]] = {}
        for label in labels:
            for _, prompt, attribute in concept_prompts(world, label):
                qs = questions(prompt)
                p = self.p_yes(real_images(world, label, prompt, attribute, per_prompt, offset=5_000), qs, label, world)
                for j, q in enumerate(qs):
                    if not np.isnan(p[:, j]).any():
                        hits.setdefault(q.kind, []).extend((p[:, j] > 0.5).tolist())
        accuracy = {k: float(np.mean(v)) for k, v in hits.items()}
        self.validation = JudgeReport("vqa", accuracy, VQA_BAR, sum(len(v) for v in hits.values()))
        return self.validation

    def valid_kinds(self) -> set[str]:
        """The question kinds at or above :data:`VQA_BAR` (none before :meth:`validate`)."""
        return {k for k, v in (self.validation.accuracy if self.validation else {}).items() if v >= VQA_BAR}


def _attribute_of(world: Any, phrase: str) -> str:
    """The CUB attribute a caption phrase names (``"a blue colored crown"``)."""
    from ..worldflux.captions import caption_phrase

    for a in world.vocab.sub_substitutions.values():
        if caption_phrase(a) == phrase:
            return a
    raise ValueError(f"prompt: no world attribute reads {phrase!r}")


def clip_scores(handle: Any, images: np.ndarray, prompts: list[str]) -> np.ndarray:
    """CLIPScore (Hessel et al. 2021, w = 100 here): ``100 * max(cos(image, text), 0)`` per image,
    the text being its prompt with ``V*`` replaced by ``bird`` (the paper's label substitution)."""
    from PIL import Image

    from ..models.clip.scoring import clip_score

    pixels = handle.preprocess([Image.fromarray(im) for im in images])
    im = handle.encode_images(pixels).numpy()
    tx = handle.encode_texts([p.replace("V*", "bird") for p in prompts]).detach().numpy()
    return clip_score((im * tx).sum(1))


@dataclass
class CompositionScores:
    """Per category, every scored image's P(yes) rows, answers and CLIPScores (one learner)."""

    rows: dict[str, list[np.ndarray]]
    clip: dict[str, list[float]]

    @classmethod
    def empty(cls) -> CompositionScores:
        return cls({c: [] for c in CATEGORIES}, {c: [] for c in CATEGORIES})

    def add(self, category: str, p_yes: np.ndarray, clip: np.ndarray) -> None:
        self.rows[category].append(p_yes)
        self.clip[category].extend(float(c) for c in clip)


def table2(scores: dict[str, CompositionScores], reference: str = "Original") -> dict[str, dict[str, dict]]:
    """``table2[learner][category]`` = ``{"clip", "accuracy", "ccd", "concept"}``: mean CLIPScore,
    mean over images of the fraction of composition questions answered yes, CCD (the
    ``reference`` learner's mean P(yes) minus this learner's; Sec. 3.2 with P(yes) as ``f``), and
    the concept question's mean P(yes) (``None`` where unanswered)."""

    def stats(rows: list[np.ndarray]) -> tuple[float | None, float | None, float | None]:
        """(mean P(yes), accuracy, concept P(yes)) over the answered (non-NaN) questions."""
        if not rows:
            return None, None, None
        r = np.concatenate(rows)
        q, concept = r[:, 1:], r[:, 0]
        answered = ~np.isnan(q)
        if not answered.any():
            p = acc = None
        else:
            p = float(np.nanmean(np.where(answered, q, np.nan)))
            acc = float(np.nanmean(np.where(answered, q > 0.5, np.nan)))
        return p, acc, None if np.isnan(concept).all() else float(np.nanmean(concept))

    ref = {c: stats(scores[reference].rows[c])[0] for c in CATEGORIES} if reference in scores else {}
    out: dict[str, dict[str, dict]] = {}
    for learner, s in scores.items():
        out[learner] = {}
        for c in CATEGORIES:
            p, acc, concept = stats(s.rows[c])
            ccd = ref[c] - p if ref.get(c) is not None and p is not None else None
            out[learner][c] = {
                "clip": float(np.mean(s.clip[c])) if s.clip[c] else None,
                "accuracy": acc,
                "ccd": ccd,
                "concept": concept,
            }
    return out
