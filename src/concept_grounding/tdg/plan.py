"""Plan a TDG run: SUB pairings, pairing files, per-image jobs and their chunks (SUB Sec. 4.2).

A *pairing* is (reference class, target attribute ``S+``). The default plan is SUB's 33
classes x 32 substitution attributes, minus the attributes a class already has by its
class-level labels (the paper's ``S+ != S-``). ``removed_attributes`` (``S-``) are the
class's positive class-level attributes in the target's group.

Seeds. Image ``i`` of a pairing gets
``seed = int(sha256(f"{base_seed}|{class}|{attribute}|{i}")[:8 bytes]) & (2**63 - 1)``,
so an image's seed depends on nothing but its own identity: not on the plan, the order,
the batch or the shard.

Chunks. Jobs are grouped into fixed *chunks* (consecutive images of one pairing, one
pipeline call each); a chunk is redone whole on resume, so batch composition, and with it
every pixel, is the same as in an uninterrupted run.

>>> image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", 0) == image_seed(
...     0, "073.Blue_Jay", "has_crown_color::yellow", 0)
True
>>> image_file_name("073.Blue_Jay", "has_bill_shape::curved_(up_or_down)", 7)
'073.Blue_Jay/bill_shape-curved_up_or_down_0007.png'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError, named, read_text_file
from ..vocabulary import Vocabulary, load_vocabulary, split_attribute

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Pairing", "image_seed", "plan_jobs", "read_pairings", "write_pairings"]


@dataclass(frozen=True)
class Pairing:
    """One (reference class, target attribute) substitution.

    Attributes:
        reference_class: CUB class folder name of the reference bird R.
        target_attribute: S+.
        removed_attributes: S-, the class's class-level attributes in S+'s group.
        guide_bird: the guide bird of a shape / pattern S+ (SUB App. B; ``None``: App. B's own,
            see :func:`~concept_grounding.tdg.prompts.tdg_prompts`).
        images: N of this pairing (``None``: the run's ``images_per_pairing``).
    """

    reference_class: str
    target_attribute: str
    removed_attributes: tuple[str, ...] = ()
    guide_bird: str | None = None
    images: int | None = None


@dataclass(frozen=True)
class GenerationJob:
    """One image to generate."""

    pairing: Pairing
    image_index: int
    seed: int
    file_name: str


def image_seed(base_seed: int, reference_class: str, attribute: str, image_index: int) -> int:
    """Deterministic per-image seed in [0, 2**63) from the image's identity (see module docstring)."""
    key = f"{base_seed}|{reference_class}|{attribute}|{image_index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") & (2**63 - 1)


def image_file_name(reference_class: str, attribute: str, image_index: int) -> str:
    """Relative PNG path of an image: ``<class folder>/<group>-<value>_<i:04d>.png``."""
    group, value = split_attribute(attribute)
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", f"{group}-{value}").strip("_")
    return f"{reference_class}/{slug}_{image_index:04d}.png"


def plan_pairings(
    class_names: Sequence[str],
    class_attributes: np.ndarray,
    attributes: Sequence[str] | None = None,
    vocab: Vocabulary | None = None,
) -> list[Pairing]:
    """Every (class, attribute) with the attribute absent from the class's class-level labels.

    Args:
        class_names: C CUB class folder names (rows of ``class_attributes``).
        class_attributes: (C, 312) binary class-level attribute matrix.
        attributes: target attributes; default SUB's 32 substitutions.
    Returns:
        pairings in class-major order.
    """
    import numpy as np

    vocab = vocab or load_vocabulary()
    matrix = np.asarray(class_attributes)
    if matrix.shape != (len(class_names), vocab.num_attributes):
        raise ValueError(
            f"class_attributes must have shape ({len(class_names)}, {vocab.num_attributes}), got {matrix.shape}"
        )
    targets = list(attributes) if attributes is not None else list(vocab.sub_substitutions.values())
    out = []
    for c, name in enumerate(class_names):
        vocab.class_index(name)
        for attribute in targets:
            j = vocab.attribute_index(attribute)
            if matrix[c, j]:
                continue
            group = vocab.group_of(j)
            removed = tuple(vocab.attributes[i] for i in vocab.groups[group] if matrix[c, i])
            out.append(Pairing(name, attribute, removed))
    return out


def write_pairings(pairings: Sequence[Pairing], path: str | Path) -> Path:
    """Write pairings as the JSON lines :func:`read_pairings` reads (``guide_bird`` and
    ``images`` only when set); returns ``path``."""
    from ..fileio import atomic_write_lines

    rows = []
    for p in pairings:
        row = {
            "reference_class": p.reference_class,
            "target_attribute": p.target_attribute,
            "removed_attributes": list(p.removed_attributes),
        }
        row.update({k: v for k, v in (("guide_bird", p.guide_bird), ("images", p.images)) if v is not None})
        rows.append(json.dumps(row))
    atomic_write_lines(Path(path), rows)
    return Path(path)


def _row_pairing(row: dict) -> Pairing:
    """A :class:`Pairing` from one JSON row (``KeyError`` / ``TypeError`` / ``ValueError`` when malformed)."""
    images = row.get("images")
    if images is not None and (isinstance(images, bool) or not isinstance(images, int) or images < 1):
        raise ValueError(f"images must be a positive integer, got {images!r}")
    guide = row.get("guide_bird")
    if guide is not None and (not isinstance(guide, str) or not guide.strip()):
        raise ValueError(f"guide_bird must be a bird name, got {guide!r}")
    return Pairing(
        row["reference_class"], row["target_attribute"], tuple(row.get("removed_attributes", ())), guide, images
    )


def read_pairings(path: str | Path, vocab: Vocabulary | None = None) -> list[Pairing]:
    """Pairings from a file: JSON lines with ``reference_class``, ``target_attribute`` and
    optional ``removed_attributes``, ``guide_bird`` (SUB App. B) and ``images`` (N), as
    :func:`write_pairings` and ``concept-grounding candidates`` write them, or text lines
    ``class,attribute`` (``#`` comments).

    Raises:
        UsageError: the file is missing, not UTF-8, or a line is malformed or names an
            unknown class or attribute (the message gives the file and line).
    """
    from ..errors import suggest

    vocab = vocab or load_vocabulary()
    out = []
    for n, line in enumerate(read_text_file(path, argument=named("pairings")).splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                pairing = _row_pairing(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                raise UsageError(
                    f"expected a JSON object with reference_class and target_attribute ({err})", file=path, line=n
                ) from None
        else:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 2:
                raise UsageError(f"expected 'class,attribute', got {line!r}", file=path, line=n)
            pairing = Pairing(parts[0], parts[1])
        try:
            cls = vocab.classes[vocab.class_index(pairing.reference_class)]
        except KeyError:
            raise UsageError(
                f"unknown CUB class {pairing.reference_class!r}{suggest(pairing.reference_class, vocab.classes)}",
                file=path,
                line=n,
            ) from None
        if not vocab.is_attribute(pairing.target_attribute):
            raise UsageError(
                f"unknown CUB attribute {pairing.target_attribute!r}"
                f"{suggest(pairing.target_attribute, vocab.attributes)}",
                file=path,
                line=n,
            )
        out.append(
            Pairing(cls, pairing.target_attribute, pairing.removed_attributes, pairing.guide_bird, pairing.images)
        )
    return out


def plan_jobs(pairings: Sequence[Pairing], images_per_pairing: int, base_seed: int = 0) -> list[GenerationJob]:
    """``images_per_pairing`` jobs per pairing (paper: N = 500; a pairing's own ``images`` wins), pairing-major."""
    if images_per_pairing <= 0:
        raise ValueError(f"images_per_pairing must be > 0, got {images_per_pairing}")
    return [
        GenerationJob(
            p,
            i,
            image_seed(base_seed, p.reference_class, p.target_attribute, i),
            image_file_name(p.reference_class, p.target_attribute, i),
        )
        for p in pairings
        for i in range(p.images or images_per_pairing)
    ]


def chunk_jobs(jobs: Sequence[GenerationJob], batch_size: int) -> list[list[GenerationJob]]:
    """Fixed chunks of at most ``batch_size`` consecutive jobs of one pairing."""
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, got {batch_size}")
    chunks: list[list[GenerationJob]] = []
    for job in jobs:
        if chunks and chunks[-1][0].pairing == job.pairing and len(chunks[-1]) < batch_size:
            chunks[-1].append(job)
        else:
            chunks.append([job])
    return chunks
