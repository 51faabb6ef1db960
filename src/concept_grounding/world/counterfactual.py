"""Exact counterfactuals: the same bird with one attribute substituted (SUB's S+ / S-).

The edited bird is re-rendered with the original's pose, background and noise seed and
traits that differ only in the target's group (for a derived group, in every base group
behind it; see :mod:`.species`). Pixels therefore differ only on the repainted parts and
their 1-pixel antialiased rim; for a bill-shape edit, on the union of both bills.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..vocabulary import split_attribute
from .render import render_bird
from .sample import BirdSample, Counterfactual
from .species import BASE_GROUPS, substitute, trait_labels

if TYPE_CHECKING:
    from .world import BirdWorld

__all__ = ["make_counterfactual", "parse_target"]


def parse_target(world: "BirdWorld", target_attribute: str) -> tuple[str, str]:
    """Validate a CUB attribute name against the world; return (group, value)."""
    if not isinstance(target_attribute, str):
        raise ValueError(f"target_attribute must be a CUB attribute name, got {target_attribute!r}")
    try:
        world.vocab.attribute_index(target_attribute)
    except KeyError as err:
        raise ValueError(f"unknown target_attribute: {err.args[0]}") from None
    group, value = split_attribute(target_attribute)
    if group not in world.rendered_groups:
        raise ValueError(
            f"target_attribute {target_attribute!r}: group {group!r} is not rendered by the bird world; "
            f"rendered groups: {list(world.rendered_groups)}"
        )
    if world.vocab.attribute_index(target_attribute) not in world.rendered_attributes:
        raise ValueError(f"target_attribute {target_attribute!r}: value {value!r} is not drawn by the bird world")
    return group, value


def make_counterfactual(world: "BirdWorld", sample: BirdSample, target_attribute: str) -> Counterfactual:
    """Substitute ``target_attribute`` into ``sample`` and re-render it (see module docs).

    If the bird already shows the target in every region of its group, the edited bird is
    identical and ``removed_attributes`` and ``changed_parts`` are empty.
    """
    group, value = parse_target(world, target_attribute)
    traits = substitute(sample.traits, group, value)
    labels = trait_labels(traits, world.vocab)
    r = render_bird(traits, sample.pose, world.config.image_size, sample.noise_seed)
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
    vocab = world.vocab
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
