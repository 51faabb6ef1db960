"""Cards through ``huggingface_hub``'s card classes: the YAML comes from a ``CardData``.

Every card of a published repo is ``<Card class>(---\\n<card_data.to_yaml()>\\n---\\n<body>)``,
so its metadata is typed (``DatasetCardData``, ``ModelCardData``, ``SpaceCardData``) and
loads back with ``<Card class>.load``; only the markdown body is text (its tables:
:func:`concept_grounding.fileio.markdown_table` with ``spaced=True``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from huggingface_hub import CardData, RepoCard

__all__ = ["make_card", "save_card", "rewrite_local_paths"]

C = TypeVar("C", bound=RepoCard)


def make_card(card_class: type[C], data: CardData, body: str) -> C:
    """A card of ``card_class`` with ``data`` as its YAML header and ``body`` as its text."""
    return card_class(f"---\n{data.to_yaml()}\n---\n\n{body.strip()}\n")


def save_card(card: RepoCard, folder: Path) -> Path:
    """Write ``folder/README.md`` (UTF-8, ``\\n`` line ends)."""
    path = Path(folder) / "README.md"
    card.save(path)
    return path


def rewrite_local_paths(text: str, replacements: dict[str, str]) -> str:
    """Replace checkout-relative references (``"metrics/sub_accuracy"``) by their Hub ids.

    >>> rewrite_local_paths('evaluate.load("metrics/x")', {'"metrics/x"': '"me/x"'})
    'evaluate.load("me/x")'
    """
    for old, new in replacements.items():
        text = text.replace(old, new)
    return text
