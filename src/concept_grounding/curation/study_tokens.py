"""The study store's annotators and their personal links (docs/human_validation.md, "Who annotates"): the records
each annotator answered, and the secret tokens of their links, only a token's SHA-256 stored. The base of
:class:`~.study_store.StudyStore`, over the SQLite layer :class:`~.study_db.StudyDatabase`.
"""

from __future__ import annotations

import sqlite3

from .annotation_items import annotator_id, new_token, token_hash
from .study_db import StudyDatabase

__all__ = ["AnnotatorTokens"]


class AnnotatorTokens(StudyDatabase):
    """Who annotates: :meth:`annotators`' tallies, and each annotator's link token (issued once, looked up by hash)."""

    def annotators(self) -> dict[str, dict[str, int]]:
        """Records answered per annotator and study: ``{annotator: {study: records}}``."""
        out: dict[str, dict[str, int]] = {}
        for name, study, n in self.read(
            "SELECT annotator, study, COUNT(*) FROM responses GROUP BY annotator, study ORDER BY annotator, study"
        ):
            out.setdefault(name, {})[study] = int(n)
        return out

    def issue_token(self, annotator: str, *, replace: bool = False) -> str | None:
        """A new secret token for ``annotator``'s personal link, its SHA-256 stored (the token is returned once and
        never stored); ``None`` when they already have one and not ``replace``."""
        who, token = annotator_id(annotator), new_token()
        issued: list[bool] = []

        def put(con: sqlite3.Connection) -> None:
            keep = "" if replace else " WHERE annotators.token_hash IS NULL"
            cur = con.execute(
                "INSERT INTO annotators (annotator, token_hash) VALUES (?, ?) ON CONFLICT (annotator) "
                f"DO UPDATE SET token_hash = excluded.token_hash{keep}",
                (who, token_hash(token)),
            )
            issued.append(bool(cur.rowcount))

        self.write(put)
        return token if issued[0] else None

    def annotator_for_token(self, token: object) -> str | None:
        """The annotator whose personal link carries ``token`` (compared by hash); ``None`` for a missing or unknown
        one."""
        if not isinstance(token, str) or not 16 <= len(token) <= 128:
            return None
        rows = self.read("SELECT annotator FROM annotators WHERE token_hash = ?", (token_hash(token),))
        return rows[0][0] if rows else None

    def token_holders(self) -> list[str]:
        """The annotators who have a personal link."""
        return [
            r[0]
            for r in self.read(
                "SELECT annotator FROM annotators WHERE token_hash IS NOT NULL ORDER BY created, annotator"
            )
        ]
