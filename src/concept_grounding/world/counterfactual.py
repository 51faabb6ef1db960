"""Exact counterfactuals: the same bird with one attribute substituted (SUB's S+ / S-).

The edited bird is re-rendered with the original's pose, background and noise seed and
traits that differ only in the target's group (for a derived group, in every base group
behind it; see :mod:`.species`). Pixels therefore differ only on the repainted parts and
their 1-pixel antialiased rim; for a bill-shape edit, on the union of both bills.

This module needs only the rendered vocabulary and the image size, not the world that
drew the sample, so it sits below :mod:`.world` (which calls it).
"""

from __future__ import annotations

from .render import render_bird
from .sample import BirdSample, Counterfactual
from .species import BASE_GROUPS, RenderedVocabulary, substitute, trait_labels

__all__ = ["make_counterfactual"]


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
    group, value = rendered.parse(target_attribute)
    traits = substitute(sample.traits, group, value)
    vocab = rendered.vocab
    labels = trait_labels(traits, vocab)
    r = render_bird(traits, sample.pose, image_size, sample.noise_seed)
    edited = BirdSample(
        index=sample.index,
        label=sample.label,
        image=r.image,
        mask=r.mask,
        part_map=r.part_map,
        part_xy=r.part_xy,
        part_visible=r.part_visible,
        attributes=labels,
        pose=sample.pose,
        traits=traits,
        noise_seed=sample.noise_seed,
    )
    removed = tuple(
        vocab.attributes[i] for i in vocab.groups[group] if sample.attributes[i] == 1 and labels[i] == 0
    )
    changed_groups = [g for g in BASE_GROUPS if traits[g] != sample.traits[g]]
    parts = {p for g in changed_groups for p in vocab.group_parts[g]}
    changed = tuple(p for p in vocab.parts if p in parts)
    return Counterfactual(
        original=sample,
        edited=edited,
        target_attribute=target_attribute,
        removed_attributes=removed,
        changed_parts=changed,
    )
