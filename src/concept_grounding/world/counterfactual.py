"""Exact counterfactuals: the same bird with one attribute substituted (SUB's S+ / S-).

The edited bird is re-rendered with the original's pose, background and noise seed and
traits that differ only in the target's group (for a derived group, in every base group
behind it; see :mod:`.species`). Pixels therefore differ only on the repainted parts and
their 1-pixel antialiased rim; for a bill-shape edit, on the union of both bills.

This module needs only the rendered vocabulary and the image size, not the world that
drew the sample, so it sits below :mod:`.world` (which calls it).
"""

from __future__ import annotations

from collections.abc import Mapping

from .config import Pose
from .render import render_bird
from .sample import BirdSample, Counterfactual
from .species import BASE_GROUPS, RenderedVocabulary, substitute, trait_labels

__all__ = ["substitution"]


def substitution(
    rendered: RenderedVocabulary, traits: Mapping[str, str], target_attribute: str
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """What substituting ``target_attribute`` into a bird with ``traits`` changes, without
    rendering anything: ``(edited traits, removed attributes (S-), changed parts)``.

    >>> from concept_grounding.world import BirdWorld
    >>> world = BirdWorld()
    >>> traits = world.sample(0).traits
    >>> edited, removed, parts = substitution(world.rendered, traits, "has_crown_color::pink")
    >>> edited["crown_color"], parts
    ('pink', ('crown',))
    >>> substitution(world.rendered, edited, "has_crown_color::pink")[1:]  # already pink: a no-op
    ((), ())
    """
    group, value = rendered.parse(target_attribute)
    edited = substitute(traits, group, value)
    vocab = rendered.vocab
    before, after = trait_labels(traits, vocab), trait_labels(edited, vocab)
    removed = tuple(vocab.attributes[i] for i in vocab.groups[group] if before[i] == 1 and after[i] == 0)
    changed_groups = [g for g in BASE_GROUPS if edited[g] != traits[g]]
    parts = {p for g in changed_groups for p in vocab.group_parts[g]}
    return edited, removed, tuple(p for p in vocab.parts if p in parts)


def render_sample(
    rendered: RenderedVocabulary,
    index: int,
    label: int,
    traits: Mapping[str, str],
    pose: Pose,
    image_size: int,
    noise_seed: int,
) -> BirdSample:
    """Render the bird with ``traits`` in ``pose`` with background/grain ``noise_seed``, with
    its ground truth: what :meth:`BirdWorld.sample` returns for sample ``index``."""
    r = render_bird(traits, pose, image_size, noise_seed)
    return BirdSample(
        index=int(index),
        label=int(label),
        image=r.image,
        mask=r.mask,
        part_map=r.part_map,
        part_xy=r.part_xy,
        part_visible=r.part_visible,
        attributes=trait_labels(traits, rendered.vocab),
        pose=pose,
        traits=dict(traits),
        noise_seed=int(noise_seed),
    )


def make_counterfactual(
    rendered: RenderedVocabulary, sample: BirdSample, target_attribute: str, image_size: int
) -> Counterfactual:
    """Substitute ``target_attribute`` into ``sample`` and re-render it (see module docs).

    Args:
        rendered: what the world draws (validates the target).
        sample: the original bird.
        target_attribute: the CUB attribute to substitute (S+), e.g. ``"has_crown_color::pink"``.
        image_size: side of the square image in pixels (the world's ``config.image_size``).

    If the bird already shows the target in every region of its group, the edited bird is
    identical and ``removed_attributes`` and ``changed_parts`` are empty.
    """
    traits, removed, changed = substitution(rendered, sample.traits, target_attribute)
    edited = render_sample(rendered, sample.index, sample.label, traits, sample.pose, image_size, sample.noise_seed)
    return Counterfactual(
        original=sample,
        edited=edited,
        target_attribute=target_attribute,
        removed_attributes=removed,
        changed_parts=changed,
    )
