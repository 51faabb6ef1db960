"""SUB (Bader et al., ICCV 2025) from the Hub or a local copy, in our SUB schema.

Any spelling of a class or attribute is normalised to CUB's names; S- is taken from the source or
derived from ``class_attributes``; what no spelling explains is an error naming the row or file,
never repaired. The Hub copy's columns, the spellings and the rules: docs/bench.md, "Reading SUB".
"""

from __future__ import annotations

import csv
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import option
from ..fileio import atomic_write_bytes, encoded_image_bytes
from ..vocabulary import Vocabulary, attribute_phrase, class_display_name, load_vocabulary
from ._text import utf8_errors_named
from .errors import HubUnavailableError, SUBFormatError

if TYPE_CHECKING:
    import datasets

__all__ = ["DEFAULT_SUB_COLUMNS", "load_sub", "write_sub", "normalise_attribute"]

SUB_HUB_ID = "Jessica-bader/SUB"

#: Hub column -> our column (docs/bench.md, "Reading SUB": how sure we are of it).
DEFAULT_SUB_COLUMNS: dict[str, str] = {
    "image": "image",
    "bird_label": "reference_class",
    "attr_label": "target_attribute",
}

_REQUIRED = ("image", "reference_class", "target_attribute")
_OPTIONAL = ("removed_attributes", "group", "source_id", "seed")
_TRUE = {"1", "ON", "YES", "TRUE"}
_IMAGE_PATH_COLUMNS = ("image", "file_name", "file", "path", "image_path")


# --------------------------------------------------------------------------- names
def normalise_class(name: str, vocab: Vocabulary) -> str:
    """CUB folder name of a class given in any of SUB's spellings.

    >>> v = load_vocabulary()
    >>> normalise_class("Blue Jay", v), normalise_class("blue_jay", v), normalise_class("073.Blue_Jay", v)
    ('073.Blue_Jay', '073.Blue_Jay', '073.Blue_Jay')
    """
    text = str(name).strip()
    try:
        return vocab.classes[vocab.class_index(text)]
    except KeyError:
        pass
    key = text.lower().replace("_", " ")
    for folder in vocab.classes:
        if key in (folder.lower().replace("_", " "), class_display_name(folder).lower()):
            return folder
    raise KeyError(f"unknown CUB class {name!r}")


def normalise_attribute(name: str, vocab: Vocabulary) -> str:
    """CUB attribute name of an attribute given as a CUB name, Hub name or SUB phrase.

    >>> v = load_vocabulary()
    >>> normalise_attribute("black crown color", v), normalise_attribute("Has_Bill_Shape--Needle", v)
    ('has_crown_color::black', 'has_bill_shape::needle')
    """
    text = str(name).strip().replace("--", "::").lower()  # every CUB name is lower case
    if vocab.is_attribute(text):
        return text
    if text in vocab.sub_substitutions:
        return vocab.sub_substitutions[text]
    phrase = " ".join(text.lower().replace("_", " ").split())
    for attr in vocab.attributes:
        if attribute_phrase(attr) == phrase:
            return attr
    raise KeyError(f"unknown attribute {name!r} (not a CUB name, Hub name or SUB phrase)")


def _removed_attributes(
    reference: str, target: str, vocab: Vocabulary, class_attributes: np.ndarray, class_rows: dict[str, int]
) -> list[str]:
    """S-: the reference class's class-level attributes in S+'s group, S+ excluded."""
    row = class_rows.get(reference)
    if row is None:
        raise SUBFormatError(f"class {reference!r} has no row in class_attributes (class_names)")
    group = vocab.group_of(target)
    return [
        vocab.attributes[j] for j in vocab.groups[group] if class_attributes[row, j] and vocab.attributes[j] != target
    ]


# --------------------------------------------------------------------------- sources
def _offline() -> bool:
    return any(os.environ.get(v, "").strip().upper() in _TRUE for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_error(source: str, why: str) -> HubUnavailableError:
    return HubUnavailableError(
        f"cannot load {source!r} from the Hugging Face Hub ({why}). The Hub is unreachable from here: "
        f"download SUB elsewhere (e.g. `datasets.load_dataset({source!r}).save_to_disk('SUB')`, or "
        f"`hf download {source} --repo-type dataset --local-dir SUB`), copy the folder over and "
        "call load_sub('path/to/SUB'); a save_to_disk folder, a parquet folder, a CSV with images or a "
        "write_sub folder all work."
    )


def _looks_local(source: str) -> bool:
    """A string that cannot be a Hub id ``owner/name``."""
    return source.startswith((".", "/", "~")) or "\\" in source or source.count("/") != 1


def _pick_split(obj, split: str | None, where: str) -> datasets.Dataset:
    import datasets

    if isinstance(obj, datasets.Dataset):
        return obj
    names = list(obj.keys())
    if split is None:
        if len(names) == 1:
            return obj[names[0]]
        if "test" in names:  # SUB is published as a single "test" split
            return obj["test"]
        raise SUBFormatError(f"several splits {names}; pass {option('split')}", file=where)
    if split not in names:
        raise SUBFormatError(f"no split {split!r}; found {names}", file=where)
    return obj[split]


def _read_csv(path: Path, image_column: str | None) -> datasets.Dataset:
    """A CSV with a header; the image column holds paths relative to the CSV's folder.

    ``image_column`` is the column ``column_map`` sends to ``image``; without it the
    first of ``image, file_name, file, path, image_path`` found is used.
    """
    import datasets

    with utf8_errors_named(path, str(path), SUBFormatError), open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = list(reader.fieldnames or [])
    image_col = image_column or next((c for c in _IMAGE_PATH_COLUMNS if c in header), None)
    if image_col not in header:
        want = image_column or f"one of {list(_IMAGE_PATH_COLUMNS)}"
        raise SUBFormatError(f"no image path column ({want}); found columns {header}", file=path)
    for line, row in enumerate(rows, start=2):
        p = (path.parent / row[image_col]).resolve()
        if not p.is_file():
            raise SUBFormatError(f"image file {row[image_col]!r} not found", file=path, line=line)
        row[image_col] = str(p)
        if isinstance(row.get("removed_attributes"), str):
            row["removed_attributes"] = [t for t in row["removed_attributes"].split("|") if t.strip()]
    ds = datasets.Dataset.from_list(rows) if rows else datasets.Dataset.from_dict({c: [] for c in header})
    return ds.cast_column(image_col, datasets.Image())


def _open_local(path: Path, split: str | None, image_column: str | None) -> datasets.Dataset:
    import datasets

    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".csv":
            return _read_csv(path, image_column)
        if suffix in (".parquet", ".jsonl", ".json"):
            kind = "parquet" if suffix == ".parquet" else "json"
            return _pick_split(datasets.load_dataset(kind, data_files=str(path)), split, str(path))
        raise SUBFormatError("unsupported file type (use a folder, .parquet, .csv or .jsonl)", file=path)
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        return _pick_split(datasets.load_from_disk(str(path)), split, str(path))
    if (path / "metadata.jsonl").is_file() or (path / "metadata.csv").is_file():
        return _pick_split(datasets.load_dataset("imagefolder", data_dir=str(path)), split, str(path))
    parquet = sorted(path.rglob("*.parquet"))
    if parquet:
        by_split: dict[str, list[str]] = {}
        for p in parquet:
            name = p.stem.split("-")[0] if "-" in p.stem else p.stem
            by_split.setdefault(name, []).append(str(p))
        return _pick_split(datasets.load_dataset("parquet", data_files=by_split), split, str(path))
    csvs = sorted(path.glob("*.csv"))
    if len(csvs) == 1:
        return _read_csv(csvs[0], image_column)
    raise SUBFormatError(
        "not a SUB copy we can read: expected a save_to_disk folder, metadata.jsonl + images, parquet files, "
        f"or one CSV with an image path column (found {len(csvs)} CSV files)",
        file=path,
    )


def _open_source(source: str | Path, split: str | None, image_column: str | None = None) -> datasets.Dataset:
    path = Path(source).expanduser()
    if path.exists():
        return _open_local(path, split, image_column)
    text = str(source)
    if _looks_local(text):
        raise SUBFormatError("no such file or folder", file=path)
    if _offline():
        raise _hub_error(text, f"HF_HUB_OFFLINE / HF_DATASETS_OFFLINE is set, and no local path {text!r} exists")
    from ..errors import ModelUnavailableError
    from ..hub import resolve_model_spec

    try:  # cached, or the Hub answers within seconds; else fail now rather than after minutes of retries
        resolve_model_spec(text, "sub", family="dataset")
    except ModelUnavailableError as exc:
        raise _hub_error(text, exc.reason) from exc
    import datasets

    try:
        loaded = datasets.load_dataset(text)
    except Exception as exc:
        raise _hub_error(text, f"{type(exc).__name__}: {exc}") from exc
    return _pick_split(loaded, split, text)


# --------------------------------------------------------------------------- mapping
def _resolve_columns(found: Sequence[str], column_map: Mapping[str, str] | None) -> dict[str, str]:
    """Our column -> source column."""
    if column_map is None:
        column_map = {c: c for c in _REQUIRED} if all(c in found for c in _REQUIRED) else dict(DEFAULT_SUB_COLUMNS)
    ours = {dst: src for src, dst in column_map.items()}
    unknown = [d for d in ours if d not in _REQUIRED + _OPTIONAL]
    if unknown:
        raise ValueError(f"column_map targets {unknown} are not SUB schema columns {list(_REQUIRED + _OPTIONAL)}")
    missing = [f"{ours.get(c, c)!r} (-> {c})" for c in _REQUIRED if ours.get(c, c) not in found]
    missing += [f"{src!r} (-> {dst})" for dst, src in ours.items() if dst in _OPTIONAL and src not in found]
    if missing:
        raise SUBFormatError(
            f"missing column(s) {', '.join(missing)}; the source has columns {list(found)}; "
            f"mapping expected (source -> ours): {dict(column_map)}. Pass column_map= to map other names."
        )
    for c in _REQUIRED:
        ours.setdefault(c, c)
    for c in _OPTIONAL:
        if c not in ours and c in found:
            ours[c] = c
    return ours


def _as_text(values: list, feature) -> list:
    import datasets

    if isinstance(feature, datasets.ClassLabel):
        return [feature.int2str(int(v)) for v in values]
    return values


def load_sub(
    source: str | Path = SUB_HUB_ID,
    *,
    split: str | None = None,
    vocab: Vocabulary | None = None,
    column_map: Mapping[str, str] | None = None,
    class_attributes: np.ndarray | None = None,
    class_names: Sequence[str] | None = None,
) -> datasets.Dataset:
    """Load SUB (or any SUB-style set) into :func:`~concept_grounding.schema.sub_features`.

    Args:
        source: Hub id (default ``"Jessica-bader/SUB"``) or a local path: a
            :func:`write_sub` / imagefolder folder (``metadata.jsonl`` + images), a
            ``save_to_disk`` folder, a folder of parquet files (Hub layout
            ``data/<split>-*.parquet``), or a CSV (or folder with one CSV) whose image
            column holds paths relative to it.
        split: which split; ``None`` takes the only one, else ``"test"`` (SUB's).
        vocab: vocabulary used to normalise class and attribute names.
        column_map: source column -> our column, replacing :data:`DEFAULT_SUB_COLUMNS`
            (used when the source lacks our own column names).
        class_attributes: (C, A) 0/1 class-level labels used to derive S- when the
            source has no ``removed_attributes``.
        class_names: the C class names of ``class_attributes`` rows (any spelling);
            default ``vocab.classes`` (then C must be 200).

    Raises:
        HubUnavailableError: the Hub copy cannot be fetched (offline); says how to pass a copy.
        SUBFormatError: a needed column is missing (lists the columns found and the
            mapping expected), a value cannot be mapped (names the row), or the path is bad.
    """
    import datasets

    from ..schema import sub_features

    vocab = vocab or load_vocabulary()
    image_column = next((src for src, dst in column_map.items() if dst == "image"), None) if column_map else None
    ds = _open_source(source, split, image_column)
    ours = _resolve_columns(list(ds.column_names), column_map)
    where = str(source)

    class_rows: dict[str, int] = {}
    if class_attributes is not None:
        class_attributes = np.asarray(class_attributes)
        names = list(class_names) if class_names is not None else list(vocab.classes)
        if class_attributes.shape != (len(names), vocab.num_attributes):
            raise ValueError(
                f"class_attributes must be ({len(names)}, {vocab.num_attributes}) for {len(names)} class_names, "
                f"got {class_attributes.shape}"
            )
        class_rows = {normalise_class(n, vocab): i for i, n in enumerate(names)}

    columns: dict[str, list] = {}
    for dst in ("reference_class", "target_attribute", *_OPTIONAL):
        if dst in ours:
            columns[dst] = _as_text(list(ds[ours[dst]]), ds.features[ours[dst]])
    n = len(ds)
    refs, targets = [], []
    for i in range(n):
        try:
            refs.append(normalise_class(columns["reference_class"][i], vocab))
            targets.append(normalise_attribute(columns["target_attribute"][i], vocab))
        except KeyError as exc:
            raise SUBFormatError(f"row {i}: {exc.args[0]}", file=where) from None
    groups = [vocab.group_of(t) for t in targets]
    if "group" in columns:
        for i, (given, derived) in enumerate(zip(columns["group"], groups)):
            if str(given).removeprefix("has_") != derived:
                raise SUBFormatError(f"row {i}: group {given!r} disagrees with {targets[i]!r} ({derived})", file=where)
    if "removed_attributes" in columns:
        removed = []
        for i, values in enumerate(columns["removed_attributes"]):
            try:
                removed.append([normalise_attribute(v, vocab) for v in (values or [])])
            except KeyError as exc:
                raise SUBFormatError(f"row {i}: removed_attributes: {exc.args[0]}", file=where) from None
    elif class_attributes is not None:
        removed = [_removed_attributes(r, t, vocab, class_attributes, class_rows) for r, t in zip(refs, targets)]
    else:
        warnings.warn(
            "the source has no removed_attributes (S-) and no class_attributes were given to derive them: "
            "S- is left empty",
            stacklevel=2,
        )
        removed = [[] for _ in range(n)]

    out = ds.select_columns([ours["image"]]).cast_column(ours["image"], datasets.Image(decode=False))
    if ours["image"] != "image":
        out = out.rename_column(ours["image"], "image")
    out = out.add_column("reference_class", refs)
    out = out.add_column("target_attribute", targets)
    out = out.add_column("removed_attributes", removed)
    out = out.add_column("group", groups)
    out = out.add_column("source_id", [int(v) for v in columns.get("source_id", [-1] * n)])
    out = out.add_column("seed", [int(v) for v in columns.get("seed", [-1] * n)])
    return out.cast(sub_features())


def write_sub(dataset: datasets.Dataset, root: str | Path) -> Path:
    """Write a set in :func:`~concept_grounding.schema.sub_features` as images + ``metadata.jsonl``.

    The folder loads with ``datasets.load_dataset("imagefolder", data_dir=root)`` and with
    :func:`load_sub`. Images are written as ``images/<row:06d>.png``: PNG bytes unchanged,
    other formats decoded and saved as PNG (same pixels); every file is written atomically.

    Returns:
        ``Path(root)``.
    """
    import datasets

    missing = [c for c in (*_REQUIRED, *_OPTIONAL) if c not in dataset.column_names]
    if missing:
        raise ValueError(f"dataset lacks SUB schema column(s) {missing}; has {dataset.column_names}")
    root = Path(root)
    raw = dataset.cast_column("image", datasets.Image(decode=False))
    lines = []
    for i, row in enumerate(raw):
        data = encoded_image_bytes(row["image"], "PNG") if row["image"] is not None else None
        if data is None:
            raise ValueError(f"row {i} has no image")
        rel = f"images/{i:06d}.png"
        atomic_write_bytes(root / rel, data)
        record = {"file_name": rel}
        record.update({c: row[c] for c in ("reference_class", "target_attribute", *_OPTIONAL)})
        record["removed_attributes"] = list(record["removed_attributes"] or [])
        lines.append(json.dumps(record))
    atomic_write_bytes(root / "metadata.jsonl", ("\n".join(lines) + "\n").encode("utf-8"))
    return root
