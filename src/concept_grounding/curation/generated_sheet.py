"""The contact sheet ``generate`` writes beside its images: a row per pairing, its first images, and under
each the judge's verdict when the model has one (the shipped world judge for a world Flux).

:func:`judge_captions` is the one place that turns generated images and their metadata rows into SUB's
verdicts (S+ found? species kept?; :func:`~concept_grounding.judge.validation.substitution_verdicts`);
the demo's TDG sheet and :func:`contact_sheet` both use it. Verdicts on a group the judge is not
validated on are marked "(judge not validated)" in the row's label: they are not findings.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["SHEET_NAME", "judge_captions", "contact_sheet", "read_metadata"]

#: the sheet's file name inside the generated folder (hidden: ``datasets``' imagefolder skips it)
SHEET_NAME = ".contact_sheet.png"


def read_metadata(folder: str | Path) -> list[dict]:
    """The rows of ``<folder>/metadata.jsonl`` (``[]`` when the file is absent)."""
    path = Path(folder) / "metadata.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge_captions(
    judge: Any, images: Sequence[Any], records: Sequence[dict], *, guide: bool = False
) -> tuple[list[tuple[str, bool]], dict[str, Any]]:
    """The verdict caption of each image (``(text, holds)``, as
    :func:`~concept_grounding.plotting.verdict_sheet` draws it) and the verdicts themselves.

    Args:
        judge: a :class:`~concept_grounding.judge.WorldJudge`.
        images: ``N`` PIL images meant to show ``records[i]``'s reference bird with its S+.
        records: ``N`` rows of a ``generate`` folder's ``metadata.jsonl`` (``reference_class``,
            ``target_attribute``, ``removed_attributes``).
        guide: the images are TDG guides: only S+ is asked of them (no species).
    """
    import numpy as np

    from ..judge import judge_images
    from ..judge.validation import substitution_verdicts, verdict_caption
    from ..vocabulary import load_vocabulary

    vocab = load_vocabulary()
    labels = np.array(
        [
            judge.class_names.index(r["reference_class"]) if r["reference_class"] in judge.class_names else -1
            for r in records
        ]
    )
    targets = np.array([vocab.attribute_index(r["target_attribute"]) for r in records])
    removed = [[vocab.attribute_index(a) for a in r["removed_attributes"]] for r in records]
    verdicts = substitution_verdicts(*judge_images(judge, list(images)), labels, targets, removed)
    captions = [
        verdict_caption(verdicts["s_plus_found"][i], None if guide else verdicts["species_kept"][i])
        for i in range(len(records))
    ]
    return captions, verdicts


def _by_pairing(records: Sequence[dict], per_pairing: int, max_rows: int) -> list[list[dict]]:
    """The first ``per_pairing`` rows of each of the first ``max_rows`` pairings (plan order)."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        key = (record["reference_class"], record["target_attribute"])
        if key in rows or len(rows) < max_rows:
            rows.setdefault(key, [])
            if len(rows[key]) < per_pairing:
                rows[key].append(record)
    return list(rows.values())


def contact_sheet(
    folder: str | Path, *, judge: bool, per_pairing: int = 4, max_rows: int = 12, path: str | Path | None = None
) -> Path | None:
    """Draw ``<folder>/.contact_sheet.png`` (or ``path``) from a ``generate`` folder: a row per pairing (at most
    ``max_rows``), its first ``per_pairing`` images; with ``judge`` each image is captioned with the shipped world
    judge's verdict (green: S+ found and species kept), else with its seed. ``None`` when the folder holds no
    generated image yet."""
    from PIL import Image

    from ..judge import create_judge, judge_validated_groups
    from ..plotting import verdict_sheet
    from ..vocabulary import attribute_phrase, class_display_name, load_vocabulary

    folder = Path(folder)
    rows = _by_pairing(read_metadata(folder), per_pairing, max_rows)
    if not rows:
        return None
    width = max(len(r) for r in rows)
    pictures = [[Image.open(folder / r["file_name"]).convert("RGB") for r in row] for row in rows]
    if judge:
        model, validated = create_judge("world-judge"), judge_validated_groups()
        flat, _ = judge_captions(model, [p for row in pictures for p in row], [r for row in rows for r in row])
        captions, start = [], 0
        for row in rows:
            captions.append(flat[start : start + len(row)])
            start += len(row)
        title = "world judge's verdicts (green: S+ found, species kept)"
    else:
        validated = None
        captions = [[(f"seed {r['seed']}", True) for r in row] for row in rows]
        title = "first images of each pairing (no judge)"
    blank = Image.new("RGB", pictures[0][0].size, "white")
    vocab = load_vocabulary()
    labels = [
        f"{class_display_name(row[0]['reference_class'])}\n+ {attribute_phrase(row[0]['target_attribute'])}"
        + (
            "\n(judge not validated)"
            if judge and validated is not None and vocab.group_of(row[0]["target_attribute"]) not in validated
            else ""
        )
        for row in rows
    ]
    return verdict_sheet(
        [p + [blank] * (width - len(p)) for p in pictures],
        [c + [("", True)] * (width - len(c)) for c in captions],
        labels,
        [f"image {i + 1}" for i in range(width)],
        Path(path) if path else folder / SHEET_NAME,
        title=title,
    )
