"""Captions, held-out combinations and word-level tokenizers of the world-trained Flux.

Captions name the species and attributes the image really shows, in the forms SUB and TDG prompt
with; ``guide_rate`` (default :data:`GUIDE_CAPTION_RATE`) sets the share of TDG's colour guide form.
Every SUB pairing ``(species c, S+)`` is held out: no training image of ``c`` shows S+
(:func:`is_held_out_free`). The forms, their shares and the held-out rule: the world Flux's model
card (``assets/world_flux/README.md``, "Captions"), and docs/world.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..tdg.prompts import attribute_text, tdg_prompts
from ..vocabulary import class_display_name

if TYPE_CHECKING:
    from ..world import BirdWorld

__all__ = ["phrase_attributes", "caption_phrase", "compose_caption"]

#: pad, bos, unk, eos (eos != 2 so CLIPTextModel pools at the first eos, not argmax id).
SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<unk>", "<eos>")

_PHRASE_GROUPS = (
    "crown_color", "forehead_color", "nape_color", "throat_color", "breast_color", "belly_color",
    "back_color", "wing_color", "upper_tail_color", "leg_color", "bill_color", "eye_color",
    "primary_color", "underparts_color", "upperparts_color",
    "breast_pattern", "wing_pattern", "tail_pattern",
)  # fmt: skip
_PATTERN_GROUPS = ("breast_pattern", "wing_pattern", "tail_pattern")


def held_out_matrix(world: BirdWorld) -> np.ndarray:
    """(C, 312) bool: ``True`` at (class, attribute) for every SUB pairing of the world."""
    out = np.zeros((world.num_classes, world.vocab.num_attributes), bool)
    for name, attribute in world.default_pairings():
        out[world.class_names.index(name), world.vocab.attribute_index(attribute)] = True
    return out


def is_held_out_free(labels: np.ndarray, label: int, held_out: np.ndarray) -> bool:
    """``True`` if an image of class ``label`` with (312,) ``labels`` shows no held-out S+."""
    return not bool(np.any(held_out[label] & (np.asarray(labels) > 0)))


def phrase_attributes(labels: np.ndarray, world: BirdWorld) -> list[str]:
    """CUB attribute names the image shows that have a TDG phrase, in vocabulary order."""
    vocab = world.vocab
    out = []
    for group in _PHRASE_GROUPS:
        for i in vocab.groups[group]:
            if labels[i]:
                out.append(vocab.attributes[i])
    return out


def _species_with(world: BirdWorld, attribute: str) -> list[str]:
    j = world.vocab.attribute_index(attribute)
    return [class_display_name(c) for c, row in zip(world.class_names, world.class_attributes) if row[j]]


#: Default probability of TDG's colour guide form ``a photo of a bird with {S}``.
GUIDE_CAPTION_RATE = 0.20
#: Upper bounds of the first five caption forms at :data:`GUIDE_CAPTION_RATE` (module table).
_DEFAULT_BOUNDS = (0.25, 0.55, 0.75, 0.85, 0.93)


def caption_thresholds(guide_rate: float = GUIDE_CAPTION_RATE) -> tuple[float, float, float, float, float]:
    """Upper bounds of the first five caption forms on a uniform draw ``u`` (the sixth takes
    the rest): the module table's probabilities with the guide form's set to ``guide_rate``
    and the others scaled by ``k = (1 - guide_rate) / 0.8``. Bounds before the guide form are
    :data:`_DEFAULT_BOUNDS` times ``k``, those after it the guide's end plus ``k`` times their
    default distance from it, so the default rate gives the default bounds exactly (the
    captions of earlier runs).

    >>> caption_thresholds()
    (0.25, 0.55, 0.75, 0.85, 0.93)
    >>> [round(t, 4) for t in caption_thresholds(0.5)]
    [0.1562, 0.3438, 0.8438, 0.9062, 0.9563]
    """
    if not 0.0 <= guide_rate < 1.0:
        raise ValueError(f"guide_rate must be in [0, 1), got {guide_rate}")
    k = (1.0 - guide_rate) / (1.0 - GUIDE_CAPTION_RATE)
    species, attributes, guide_end, pattern, shape = _DEFAULT_BOUNDS
    end = attributes * k + guide_rate
    return (species * k, attributes * k, end, end + (pattern - guide_end) * k, end + (shape - guide_end) * k)


def make_caption(
    labels: np.ndarray, label: int, world: BirdWorld, rng: np.random.Generator, guide_rate: float = GUIDE_CAPTION_RATE
) -> str:
    """One caption for an image of class ``label`` with (312,) exact ``labels`` (see module
    doc); the colour guide form is drawn with probability ``guide_rate``."""
    name = class_display_name(world.class_names[label])
    attrs = phrase_attributes(labels, world)
    patterns = [a for a in attrs if a.split("::")[0].removeprefix("has_") in _PATTERN_GROUPS]
    t_species, t_attributes, t_guide, t_pattern, t_shape = caption_thresholds(guide_rate)
    u = float(rng.random())
    if u < t_species or not attrs:
        return f"a photo of a {name}"
    if u < t_attributes:
        k = 1 if rng.random() < 0.6 or len(attrs) < 2 else 2
        picks = rng.choice(len(attrs), size=k, replace=False)
        return f"a photo of a {name} with " + " and ".join(caption_phrase(attrs[int(i)]) for i in picks)
    if u < t_guide:
        return f"a photo of a bird with {caption_phrase(attrs[int(rng.integers(len(attrs)))])}"
    if u < t_pattern and patterns:
        return f"a photo of a {name} with a {attribute_text(patterns[int(rng.integers(len(patterns)))])}"
    if u < t_shape:
        shape = [world.vocab.attributes[i] for i in world.vocab.groups["bill_shape"] if labels[i]]
        guides = _species_with(world, shape[0]) if shape else []
        if guides:
            guide = guides[int(rng.integers(len(guides)))]
            return f"a photo of a {name} with the body of a {name} and a beak like a {guide}"
        return f"a photo of a {name}"
    if patterns:
        pattern = patterns[int(rng.integers(len(patterns)))]
        guides = _species_with(world, pattern)
        if guides:
            guide = guides[int(rng.integers(len(guides)))]
            return f"a photo of a {name} with a {attribute_text(pattern)} like a {guide}"
    return f"a photo of a {name}"


#: How every :func:`make_caption` form begins: one bird, the grammar's count slot
#: (:class:`~concept_grounding.world.composition.CompositionPrompt`).
_ONE_BIRD = "a photo of a "


def compose_caption(caption: str, count: int, scene: str, facing: str, rng: np.random.Generator) -> str:
    """A caption of a composition (:mod:`concept_grounding.world.composition`): ``caption``
    (a :func:`make_caption` form, or ``""``) with its count, scene and facing named as
    ConceptBed's counting, relation and action categories.

    Two or three birds are always counted (``"a photo of a "`` -> ``"a photo of two "``), so
    an uncounted caption always means one bird. Then relation and action phrases are appended
    so that the caption names one or two categories besides the species (an attribute phrase
    or a count is one; ConceptBed composes at most two): with neither, one or both of
    relation and action (1/3 each way); with one, relation or action (1/2 each). An empty
    caption (dropped for classifier-free guidance) stays empty.

    >>> rng = np.random.default_rng(0)
    >>> compose_caption("a photo of a blue jay", 2, "sky", "left", rng)
    'a photo of two blue jay facing left'
    >>> compose_caption("a photo of a blue jay", 1, "water", "right", rng)
    'a photo of a blue jay by the water facing right'
    """
    from ..world.composition import RELATIONS, CompositionPrompt

    if not caption:
        return caption
    if not caption.startswith(_ONE_BIRD):
        raise ValueError(f"caption: {caption!r} does not start with {_ONE_BIRD!r} (a make_caption form)")
    named = int(" with " in caption) + int(count > 1)
    if named == 0:
        u = float(rng.random())
        relation, action = u < 2 / 3, u < 1 / 3 or u >= 2 / 3
    elif named == 1:
        relation = bool(rng.random() < 0.5)
        action = not relation
    else:
        relation = action = False
    noun, _, attribute = caption.removeprefix(_ONE_BIRD).partition(" with ")
    return CompositionPrompt(
        noun, count, attribute or None, scene if relation and scene in RELATIONS else None, facing if action else None
    ).text


def caption_phrase(attribute: str) -> str:
    """How the training captions name ``attribute`` (``"a striped tail"`` for a pattern, else
    :func:`~concept_grounding.tdg.prompts.attribute_text`); the world benchmark prompts with it.

    >>> caption_phrase("has_breast_color::blue")
    'a blue colored breast'
    """
    group = attribute.split("::")[0].removeprefix("has_")
    text = attribute_text(attribute)
    return f"a {text}" if group in _PATTERN_GROUPS else text


def _words(text: str) -> list[str]:
    from tokenizers.pre_tokenizers import Whitespace

    return [w for w, _ in Whitespace().pre_tokenize_str(text.lower())]


def caption_vocabulary(world: BirdWorld, compositions: bool = False) -> list[str]:
    """Every word a caption or a TDG prompt of the world's pairings can contain, sorted; with
    ``compositions``, also the words of :func:`compose_caption`'s counts, relations and actions."""
    words: set[str] = set(_words("a photo of a bird with the body of and beak like"))
    if compositions:
        from ..world.composition import ACTIONS, COUNT_WORDS, RELATIONS

        for phrase in (*COUNT_WORDS.values(), *RELATIONS.values(), *ACTIONS.values()):
            words.update(_words(phrase))
    for c in world.class_names:
        words.update(_words(class_display_name(c)))
    for group in _PHRASE_GROUPS:
        for i in world.vocab.groups[group]:
            words.update(_words(attribute_text(world.vocab.attributes[i])))
    for guide in world.vocab.sub_guidance_birds.values():
        words.update(_words(guide))
    for c, attribute in world.default_pairings():
        try:
            p = tdg_prompts(c, attribute, vocab=world.vocab)
        except ValueError:
            continue
        words.update(_words(p.reference) + _words(p.guide))
    return sorted(words)


def word_tokenizers(words: Sequence[str], max_length: int) -> tuple[Any, Any]:
    """(CLIP-style, T5-style) word-level ``PreTrainedTokenizerFast`` with ``model_max_length``.

    CLIP-style adds ``<bos> ... <eos>``; T5-style appends ``<eos>`` only. Both lower-case,
    split on whitespace and punctuation, and pad with ``<pad>`` (id 0).

    >>> clip, t5 = word_tokenizers(["a", "photo"], 6)
    >>> clip("A photo", padding="max_length", max_length=6).input_ids
    [1, 4, 5, 3, 0, 0]
    >>> t5("a photo").input_ids
    [4, 5, 3]
    """
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for w in words:
        vocab.setdefault(w, len(vocab))
    out = []
    for template in ("<bos> $A <eos>", "$A <eos>"):
        tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.post_processor = processors.TemplateProcessing(
            single=template, special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])]
        )
        out.append(
            PreTrainedTokenizerFast(
                tokenizer_object=tok,
                bos_token="<bos>" if template.startswith("<bos>") else None,
                eos_token="<eos>",
                pad_token="<pad>",
                unk_token="<unk>",
                model_max_length=max_length,
            )
        )
    return out[0], out[1]
