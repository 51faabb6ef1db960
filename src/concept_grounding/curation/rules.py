"""SUB App. E's discard thresholds (docs/human_validation.md) of the curation (no pandas: the ``curate`` command's flags are
declared from them when the command line parses; :mod:`.curate` applies them).

>>> CurationRules().min_yes
0.9
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MIN_YES", "MIN_PAIRING_SCORE", "MAX_DEVIATION", "CurationRules"]

MIN_YES = 0.90
MIN_PAIRING_SCORE = 0.5
MAX_DEVIATION = 0.5


@dataclass(frozen=True)
class CurationRules:
    """SUB App. E's thresholds: keep an attribute iff its Q1 "yes" share >= ``min_yes``; drop a
    pairing if its mean Q1 score < ``min_pairing_score`` or its Q2 "yes" share > ``max_deviation``."""

    min_yes: float = MIN_YES
    min_pairing_score: float = MIN_PAIRING_SCORE
    max_deviation: float = MAX_DEVIATION
