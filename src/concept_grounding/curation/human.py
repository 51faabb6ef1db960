"""The Human rows of SUB's Tables 1-2 from study-2 answers: the implementation is
:mod:`concept_grounding.evaluation.human` (below ``bench``, whose report shows them, and this
package, whose ``curate`` job writes the answers); re-exported here."""

from __future__ import annotations

from ..evaluation.human import AS_PUBLISHED, human_rows, human_rows_beside, human_table_rows

__all__ = ["human_rows", "human_table_rows", "human_rows_beside", "AS_PUBLISHED"]
