"""The filter's evidence sheet (SUB Fig. 5): examples of kept and of discarded images, one row
per reason (:data:`~.filter.REASONS`), each tile captioned with the VQA's answer.

Drawn with Pillow only (``tdg`` imports no plotting code); the examples of a row are taken
round-robin over the pairings, so one pairing does not fill a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .filter import REASONS

__all__ = ["evidence_sheet", "sheet_examples"]

_LABEL_WIDTH = 150
_CAPTION = 30
#: each reason's row label
_SHORT = {
    "kept": "S+ answered, top rank",
    "no_change": "no change\n(S- answered)",
    "s_plus_not_seen": "S+ not seen",
    "low_rank": "low rank",
    "pairing_dropped": "pairing dropped\n(too few S+)",
}


def sheet_examples(evidence: Sequence[dict], reason: str, count: int) -> list[dict]:
    """Up to ``count`` evidence rows with ``reason``, round-robin over the pairings (plan order)."""
    by_pairing: dict[tuple[str, str], list[dict]] = {}
    for row in evidence:
        if row["reason"] == reason:
            by_pairing.setdefault((row["reference_class"], row["target_attribute"]), []).append(row)
    queues = [sorted(rows, key=lambda r: (r["rank"] is None, r["rank"] or 0)) for rows in by_pairing.values()]
    out: list[dict] = []
    while len(out) < count and any(queues):
        for queue in queues:
            if queue and len(out) < count:
                out.append(queue.pop(0))
    return out


def evidence_sheet(
    evidence: Sequence[dict], image_root: str | Path, path: str | Path, per_reason: int = 6, tile: int = 96
) -> Path:
    """Draw the sheet to ``path`` (PNG): a row per reason that occurs, ``per_reason`` tiles of
    ``tile`` px, each captioned "answer p" and "class / S+"; images are read from ``image_root``
    (``file_name`` relative to it, or absolute)."""
    from PIL import Image, ImageDraw

    reasons = [r for r in REASONS if any(e["reason"] == r for e in evidence)]
    if not reasons:
        raise ValueError("evidence: no rows to draw")
    width = _LABEL_WIDTH + per_reason * tile
    height = len(reasons) * (tile + _CAPTION) + 20
    sheet = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((4, 4), "VQA filter: kept and discarded images (SUB Fig. 5)", fill="black")
    root = Path(image_root)
    for r, reason in enumerate(reasons):
        top = 20 + r * (tile + _CAPTION)
        colour = "darkgreen" if reason == "kept" else "darkred"
        label = REASONS[reason].split(": ", 1)
        draw.text((4, top + 4), label[0], fill=colour)
        draw.text((4, top + 18), _SHORT.get(reason, reason), fill=colour)
        for c, row in enumerate(sheet_examples(evidence, reason, per_reason)):
            left = _LABEL_WIDTH + c * tile
            image = Image.open(root / row["file_name"]).convert("RGB").resize((tile - 4, tile - 4))
            sheet.paste(image, (left + 2, top + 2))
            draw.rectangle((left + 1, top + 1, left + tile - 2, top + tile - 2), outline=colour)
            short = row["target_attribute"].removeprefix("has_").split("::")[-1][:14]
            draw.text((left + 2, top + tile), f"{row['answer'][:10]} {row['answer_probability']:.2f}", fill="black")
            draw.text((left + 2, top + tile + 12), f"S+ {short}", fill="gray")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sheet.save(path)
    return path
