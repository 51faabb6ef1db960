"""The items folder of ConceptBed's human study (Patel et al., App. G; docs/human_validation.md): generated images
to rate 1-5, each on its own, against three reference images of the concept (concept
similarity) or against its caption (image-text alignment).

:func:`concept_grounding.conceptbed.export_rating_items` writes the folder and
``concept-grounding annotate --items`` reads it into the annotation store::

    DIR/items.jsonl            one line per item: id, kind ("concept" / "caption"), learner,
                               task, concept, file_name, references (file names), caption
    DIR/images/<id>.png        the generated image to rate
    DIR/references/<sha>.png   the real reference images (one file per distinct image)
    DIR/truth.jsonl            id, truth in [0, 1] for the items given one (what simulated raters
                               follow; never shown to a rater, never copied to a Space)

An item's id is a digest of its content (kind, learner, task, concept, caption, image bytes),
so writing the same records again gives the same ids and a store never mixes two items under
one id. Ratings, whoever gives them, have the columns :data:`RATING_COLUMNS`; :func:`read_ratings` reads them from
the study store's export of the rating study (or a table with those columns).

>>> import numpy as np, tempfile
>>> im = np.zeros((8, 8, 3), np.uint8)
>>> folder = write_rating_items(tempfile.mkdtemp(), [{"image": im, "learner": "LoRA", "task": "composition",
...     "concept": "c0", "kind": "caption", "caption": "a photo of V* on a branch"}])
>>> [(it.kind, it.learner, it.caption) for it in read_rating_items(folder)]
[('caption', 'LoRA', 'a photo of V* on a branch')]
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import UsageError
from .errors import DatasetFormatError

__all__ = [
    "RATING_KINDS",
    "RATING_SCALE",
    "REFERENCES",
    "RATING_COLUMNS",
    "RatingItem",
    "write_rating_items",
    "read_rating_items",
    "read_rating_truth",
    "EXPORT_NAMES",
    "ratings_frame",
    "read_ratings",
]

#: what an item asks: concept similarity (vs three references) or image-text alignment (vs its caption)
RATING_KINDS: tuple[str, ...] = ("concept", "caption")
#: the ratings a rater gives (App. G: 1 least similar, 5 an exact match)
RATING_SCALE: tuple[int, ...] = (1, 2, 3, 4, 5)
#: reference images shown beside a concept-similarity item (App. G)
REFERENCES = 3
#: the columns of every table of ratings (the store's export, the simulated raters')
RATING_COLUMNS: tuple[str, ...] = ("rater", "item", "kind", "learner", "task", "concept", "rating")


@dataclass(frozen=True)
class RatingItem:
    """One image to rate; file names are relative to the items folder."""

    id: str
    kind: str
    learner: str
    task: str
    concept: str
    file_name: str
    references: tuple[str, ...] = ()
    caption: str | None = None

    def row(self) -> dict:
        """The item as its ``items.jsonl`` line (a dict)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "learner": self.learner,
            "task": self.task,
            "concept": self.concept,
            "file_name": self.file_name,
            "references": list(self.references),
            "caption": self.caption,
        }


def _png(image: object, where: str) -> bytes:
    """``image`` (``(H, W, 3)`` uint8) as PNG bytes; anything else refused naming ``where``."""
    import io

    from PIL import Image

    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3 or min(arr.shape[:2]) < 1:
        raise UsageError(f"{where}: expected an (H, W, 3) uint8 image, got {arr.dtype} {arr.shape}")
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def _text(record: Mapping, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise UsageError(f"{where}: {key!r} must be one line of text, got {value!r:.60}")
    return value


def _check_record(record: Mapping, i: int) -> tuple[str, float | None]:
    """``record``'s kind and truth, checked (one line naming ``records[i]``)."""
    where = f"records[{i}]"
    if not isinstance(record, Mapping):
        raise UsageError(f"{where}: expected a mapping, got {type(record).__name__}")
    kind = record.get("kind")
    if kind not in RATING_KINDS:
        raise UsageError(f"{where}: kind must be one of {list(RATING_KINDS)}, got {kind!r:.40}")
    refs = record.get("references")
    if kind == "concept" and (0 if refs is None else len(refs)) != REFERENCES:
        raise UsageError(
            f"{where}: a concept-similarity item needs {REFERENCES} reference images, got "
            f"{0 if refs is None else len(refs)}"
        )
    if kind == "caption":
        _text(record, "caption", where)
    truth = record.get("truth")
    if truth is not None and not (isinstance(truth, (int, float)) and 0.0 <= float(truth) <= 1.0):
        raise UsageError(f"{where}: truth must be a number in [0, 1], got {truth!r:.40}")
    return kind, None if truth is None else float(truth)


def write_rating_items(out_dir: str | Path, records: Iterable[Mapping]) -> Path:
    """Write the module docstring's folder from ``records`` and return it.

    Args:
        out_dir: the folder (created; items already there are kept, ``items.jsonl`` and
            ``truth.jsonl`` gain the new lines).
        records: mappings with ``image`` (``(H, W, 3)`` uint8), ``learner``, ``task``,
            ``concept``, ``kind`` (:data:`RATING_KINDS`), ``references`` (:data:`REFERENCES`
            arrays; kind "concept") or ``caption`` (kind "caption"), and optionally ``truth``
            (in [0, 1]: what simulated raters follow).

    Every record is checked before anything is written (a bad one: one line naming its index).
    """
    from ..fileio import atomic_write_lines

    records = list(records)
    checked = [_check_record(r, i) for i, r in enumerate(records)]
    encoded = []
    for i, (record, (kind, truth)) in enumerate(zip(records, checked)):
        where = f"records[{i}]"
        meta = [
            kind,
            *(_text(record, k, where) for k in ("learner", "task", "concept")),
            record["caption"] if kind == "caption" else "",
        ]
        image = _png(record.get("image"), f"{where}.image")
        given = record.get("references") if kind == "concept" else None
        refs = [_png(r, f"{where}.references[{j}]") for j, r in enumerate(given if given is not None else ())]
        digest = hashlib.sha256(json.dumps(meta).encode() + image).hexdigest()[:16]
        encoded.append((meta, f"r-{digest}", image, refs, truth))
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "references").mkdir(exist_ok=True)
    old = {it.id: it for it in read_rating_items(out)} if (out / "items.jsonl").is_file() else {}
    truths = read_rating_truth(out)
    for (kind, learner, task, concept, caption), item_id, image, refs, truth in encoded:
        names = []
        for data in refs:
            name = f"references/{hashlib.sha256(data).hexdigest()[:16]}.png"
            if not (out / name).is_file():
                (out / name).write_bytes(data)
            names.append(name)
        (out / "images" / f"{item_id}.png").write_bytes(image)
        old.setdefault(
            item_id,
            RatingItem(item_id, kind, learner, task, concept, f"images/{item_id}.png", tuple(names), caption or None),
        )
        if truth is not None:
            truths[item_id] = truth
    atomic_write_lines(out / "items.jsonl", [json.dumps(it.row(), sort_keys=True) for it in old.values()])
    atomic_write_lines(out / "truth.jsonl", [json.dumps({"id": k, "truth": v}) for k, v in truths.items()])
    return out


def _lines(path: Path) -> list[tuple[int, dict]]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append((n, json.loads(line)))
            except json.JSONDecodeError as err:
                raise DatasetFormatError(f"not JSON ({err.msg})", file=path, line=n) from None
    return out


def read_rating_items(folder: str | Path) -> list[RatingItem]:
    """``folder``'s items in file order; a missing file, a malformed line or a missing image
    is refused naming the file (and line)."""
    folder = Path(folder)
    path = folder / "items.jsonl"
    if not path.is_file():
        raise DatasetFormatError(
            "no items.jsonl: not a rating items folder (conceptbed's export_rating_items writes one)", file=folder
        )
    items = []
    for n, row in _lines(path):
        try:
            item = RatingItem(
                str(row["id"]),
                row["kind"],
                str(row["learner"]),
                str(row["task"]),
                str(row["concept"]),
                str(row["file_name"]),
                tuple(map(str, row.get("references") or ())),
                row.get("caption"),
            )
        except (KeyError, TypeError) as err:
            raise DatasetFormatError(
                f"an item needs id, kind, learner, task, concept, file_name ({err})", file=path, line=n
            ) from None
        if item.kind not in RATING_KINDS:
            raise DatasetFormatError(
                f"kind must be one of {list(RATING_KINDS)}, got {item.kind!r:.40}", file=path, line=n
            )
        for name in (item.file_name, *item.references):
            if ".." in Path(name).parts or Path(name).is_absolute() or not (folder / name).is_file():
                raise DatasetFormatError(f"image {name!r:.80} is missing (or outside the folder)", file=path, line=n)
        items.append(item)
    return items


def read_rating_truth(folder: str | Path) -> dict[str, float]:
    """``folder``'s ``truth.jsonl``: item id -> truth in [0, 1] (empty when there is none)."""
    path = Path(folder) / "truth.jsonl"
    if not path.is_file():
        return {}
    out = {}
    for n, row in _lines(path):
        value = row.get("truth") if isinstance(row, dict) else None
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0 or math.isnan(value):
            raise DatasetFormatError(f"truth must be a number in [0, 1], got {value!r:.40}", file=path, line=n)
        out[str(row.get("id"))] = float(value)
    return out


#: the study store's export columns of the rating study (:mod:`concept_grounding.curation.study_export`) -> ours
EXPORT_NAMES: dict[str, str] = {"annotator": "rater", "record": "item"}


def ratings_frame(table: object):
    """Ratings as a ``pandas.DataFrame`` with :data:`RATING_COLUMNS` (``rating`` an int): from the study store's
    export of the rating study (a ``datasets.Dataset`` or a frame: ``annotator``, ``record``, the metadata columns and
    ``rating``), a table that has those columns already, or rows (dicts or tuples in that order).

    >>> ratings_frame([{"annotator": "ann", "record": "r-1", "kind": "concept", "learner": "LoRA",
    ...                 "task": "object", "concept": "c0", "rating": "4"}]).values.tolist()
    [['ann', 'r-1', 'concept', 'LoRA', 'object', 'c0', 4]]
    """
    import pandas as pd

    if hasattr(table, "to_pandas"):
        table = table.to_pandas()
    if not isinstance(table, pd.DataFrame):
        rows = list(table)  # type: ignore[call-overload]
        table = (
            pd.DataFrame(rows)
            if not rows or isinstance(rows[0], Mapping)
            else pd.DataFrame(rows, columns=RATING_COLUMNS)
        )
    frame = table.rename(columns=EXPORT_NAMES)
    missing = [c for c in RATING_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"ratings lack the columns {missing} (expected {list(RATING_COLUMNS)} or the study export)")
    frame = frame[list(RATING_COLUMNS)].copy()
    frame["rating"] = frame["rating"].astype(int)
    return frame


def read_ratings(path: str | Path):
    """The ratings of a Parquet file (the study store's export of the rating study, ``annotate --items ... --export``,
    or a table with :data:`RATING_COLUMNS`) as :func:`ratings_frame`; one line naming the file when it is neither."""
    import pandas as pd

    path = Path(path)
    try:
        return ratings_frame(pd.read_parquet(path))
    except (OSError, ValueError) as err:
        raise DatasetFormatError(str(err).splitlines()[0] if str(err) else type(err).__name__, file=path) from None
