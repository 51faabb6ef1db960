"""SUB App. E's discard thresholds (docs/human_validation.md) of the curation (no pandas: the ``curate`` command's
flags are declared from them when the command line parses; :mod:`.curate` applies them).

>>> CurationRules().min_yes
0.9
"""

from __future__ import annotations

from dataclasses import dataclass

from ..settings import setting
from ..validators import closed_unit_interval

__all__ = ["MIN_YES", "MIN_PAIRING_SCORE", "MAX_DEVIATION", "CurationRules"]

MIN_YES = 0.90
MIN_PAIRING_SCORE = 0.5
MAX_DEVIATION = 0.5


@dataclass(frozen=True)
class CurationRules:
    """SUB App. E's thresholds: keep an attribute iff its Q1 "yes" share >= ``min_yes``; drop a
    pairing if its mean Q1 score < ``min_pairing_score`` or its Q2 "yes" share > ``max_deviation``
    (settings: ``curate``'s flags, as its config's nested ``rules``)."""

    min_yes: float = setting(
        MIN_YES, 'keep an attribute iff its share of "yes" to Q1 is at least this', parse=closed_unit_interval
    )
    min_pairing_score: float = setting(
        MIN_PAIRING_SCORE, "drop a pairing whose mean Q1 score is below this (low accuracy)", parse=closed_unit_interval
    )
    max_deviation: float = setting(
        MAX_DEVIATION,
        'drop a pairing whose share of "yes" to Q2 is above this (excessive modification)',
        parse=closed_unit_interval,
    )
