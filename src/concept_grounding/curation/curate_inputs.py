"""The ``curate`` job's settings (:class:`CurateConfig`) and the readers of its inputs: the candidates,
the answers and the gold answers (docs/human_validation.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError, read_text_file
from ..settings import nested, setting
from ..validators import existing_dir, existing_file, optional_int
from .rules import CurationRules

if TYPE_CHECKING:  # pandas loads when the job runs, not when the command line parses
    import pandas as pd

#: the studies ``curate`` reads (SUB App. E, studies 1-2).
SUB_NAMES = ("sub-1", "sub-2")

__all__ = ["CurateConfig", "read_candidates", "read_answers", "gold_answers"]


@dataclass(frozen=True)
class CurateConfig:
    """What to curate and how (SUB App. E's thresholds are the defaults).

    Args:
        candidates: folder with ``metadata.jsonl`` (``generate`` / ``filter`` output).
        annotations: the annotation store (``.db``) or its export (``.parquet``).
        truth: gold answers (``truth.jsonl`` of :func:`.simulate.write_candidates`) for the
            annotators' accuracy; ``None`` skips it.
        world_seed: the bird world's seed when the candidates come from it; ``None``: they do
            not (``--world-seed none``; the old ``--not-world`` still parses, with a warning).
        rules: the discard thresholds (their settings are the ``--min-yes``,
            ``--min-pairing-score`` and ``--max-deviation`` flags).
        write_images: embed the kept images in the dataset (``False``: write only the report).

    >>> config = CurateConfig(Path("c"), Path("a.db"), world_seed=None, rules=CurationRules(min_yes=0.8))
    >>> config.rules.min_yes, config.world_seed
    (0.8, None)
    """

    candidates: Path = setting(help="folder with metadata.jsonl (generate or filter output)", parse=existing_dir)
    annotations: Path = setting(
        help="the annotation store (.db) of `annotate`, or its Parquet export", parse=existing_file
    )
    truth: Path | None = setting(
        None,
        "gold answers (truth.jsonl) to measure each annotator's accuracy (simulated annotators)",
        parse=existing_file,
    )
    world_seed: int | None = setting(
        0,
        "the bird world's seed when the candidates come from it (class-level "
        "attributes, Fig. 6); none: they do not (S+ = S- by study-2 majority only)",
        parse=optional_int,
        switches=(("--not-world", None),),
    )
    rules: CurationRules = nested(CurationRules)
    write_images: bool = True


def read_candidates(folder: Path) -> tuple[list[dict], Path]:
    """``(rows, folder)`` of ``folder/metadata.jsonl``; a bad line names the file and line."""
    folder = Path(folder)
    meta = folder / "metadata.jsonl" if folder.is_dir() else folder
    rows = []
    for n, line in enumerate(read_text_file(meta, "--candidates").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"not JSON ({err.msg})", file=meta, line=n) from None
        missing = [k for k in ("file_name", "reference_class", "target_attribute") if k not in row]
        if missing:
            raise UsageError(f"row lacks {missing}", file=meta, line=n)
        rows.append(row)
    if not rows:
        raise UsageError("no candidates", file=meta)
    return rows, meta.parent


def read_answers(path: Path) -> pd.DataFrame:
    """SUB's answers from a study store (``.db``, opened read-only) or its Parquet export (:mod:`.study_export`)."""
    import pandas as pd

    from .curate import answers_frame

    path = Path(path)
    if not path.is_file():
        raise UsageError("no such annotation store or export", file=path, argument="--annotations")
    try:
        if path.suffix.lower() == ".parquet":
            return answers_frame(pd.read_parquet(path))
        from .study_store import StudyStore

        return answers_frame(StudyStore(path, read_only=True).export(SUB_NAMES))
    except (ValueError, OSError) as err:
        if isinstance(err, UsageError):
            raise
        raise UsageError(str(err).splitlines()[0] if str(err) else type(err).__name__, file=path) from None


def gold_answers(truth: Path) -> pd.DataFrame:
    """``truth.jsonl`` -> gold answers (``image, question, answer``) for both studies' ids."""
    import pandas as pd

    out = []
    for line in read_text_file(truth, "--truth").splitlines():
        if line.strip():
            t = json.loads(line)
            out += [
                (f"1:{t['id']}", "q1", "yes" if t["applied"] else "no"),
                (f"1:{t['id']}", "q2", "yes" if t["deviates"] else "no"),
                (f"2:{t['id']}", "present", t["present"]),
            ]
    return pd.DataFrame(out, columns=["image", "question", "answer"])
