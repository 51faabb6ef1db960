"""Resumable TDG folders: the manifest of a run's settings, and which images are done.

Writing (:func:`~concept_grounding.tdg.generate.generate_images`) puts each image at its
final name atomically, then a sidecar JSON with its metadata in ``<out>/.tdg_parts/``; a job
counts as done only once its sidecar exists (:func:`is_done`), so a killed run that is
restarted regenerates exactly the missing images.

Manifest. Before the first image, ``<out>/.tdg_manifest.json`` records everything that
decides the pixels (:func:`generation_manifest`: method, steps, guidance (for a model that
reads it), size, sequence length, schedule, batch size, the transformer cache and compilation
(:class:`~.acceleration.Acceleration`), the pairing list with its image counts, the model,
its dtype and the seed). A later run into the same folder compares its own manifest first
(:func:`check_manifest`) and stops with :class:`ManifestMismatchError` listing each
differing setting, the argument that sets it (:data:`MANIFEST_ARGUMENTS`) and its two
values, so a resume never mixes images made under other settings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, read_text_file
from ..fileio import atomic_write_bytes
from ..settings import flags
from .generate_config import GenerateConfig
from .plan import GenerationJob, Pairing

if TYPE_CHECKING:
    from .sources import FluxModel

__all__ = []

PARTS_DIR = ".tdg_parts"
MANIFEST_FILE = ".tdg_manifest.json"
MANIFEST_FORMAT = 1
#: Manifest settings added after format 1, with the value a folder without them was made with.
MANIFEST_DEFAULTS: dict[str, Any] = {"cache": None, "compile": False}
_FLAGS = flags(GenerateConfig)
#: manifest setting -> the argument that sets it (for resume messages): a setting's own flag
#: (declared once, on :class:`~.generate_config.GenerateConfig`), or the flags a recorded value
#: comes from
MANIFEST_ARGUMENTS = {
    **{
        name: _FLAGS[name]
        for name in ("seed", "method", "num_inference_steps", "guidance_scale", "size", "save_guides", "batch_size")
    },
    "model": "--model/--tiny",
    "dtype": "--dtype",
    "max_sequence_length": "--tiny/--model",
    "schedule": "/".join(_FLAGS[name] for name in ("t_min", "t_max", "k")),
    "pairings": f"{_FLAGS['classes']}/{_FLAGS['attributes']}/--pairings/{_FLAGS['images_per_pairing']}",
    "cache": "--cache",
    "compile": "--compile",
}


def upgrade_manifest(found: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """A folder's manifest in today's keys, compared with ``manifest`` (the run's):

    * settings added after format 1 (:data:`MANIFEST_DEFAULTS`) take the value a folder without
      them was made with;
    * ``height`` + ``width`` (equal sides, before the image side had one name) become ``size``;
    * ``guidance_scale``, recorded before the manifest knew which models ignore it, is dropped
      when this run's model ignores it (so its value never decided a pixel).

    >>> old = {"height": 32, "width": 32, "guidance_scale": 3.5, "model": "world"}
    >>> upgrade_manifest(old, {"size": 32, "model": "world"})
    {'cache': None, 'compile': False, 'model': 'world', 'size': 32}
    """
    found = {**MANIFEST_DEFAULTS, **found}
    if "size" not in found and "height" in found and found.get("height") == found.get("width"):
        found["size"] = found.pop("height")
        found.pop("width")
    if "guidance_scale" not in manifest:
        found.pop("guidance_scale", None)
    return found


def part_path(out_dir: Path, job: GenerationJob) -> Path:
    """The sidecar of ``job``: ``<out>/.tdg_parts/<file name with / as __>.json``."""
    return out_dir / PARTS_DIR / (job.file_name.replace("/", "__") + ".json")


def is_done(out_dir: str | Path, job: GenerationJob) -> bool:
    """A job is done when its sidecar exists (written after its image)."""
    out_dir = Path(out_dir)
    return part_path(out_dir, job).exists() and (out_dir / job.file_name).exists()


class ManifestMismatchError(UsageError):
    """A resume whose settings differ from the folder's manifest.

    Attributes:
        differences: ``(setting, value in the folder, value now)`` per differing setting.
    """

    def __init__(
        self, out_dir: Path, differences: list[tuple[str, Any, Any]], labels: dict[str, str] | None = None
    ) -> None:
        self.differences = differences
        labels = labels or {}
        listed = "; ".join(
            _describe_difference(k + (f" ({labels[k]})" if k in labels else ""), old, new)
            for k, old, new in differences
        )
        super().__init__(
            f"the folder was generated with other settings, and resuming would mix datasets. Differing: {listed}",
            file=out_dir,
            hint="rerun with the folder's settings, or write to another output folder",
        )


def _describe_difference(key: str, old: Any, new: Any) -> str:
    if key.startswith("pairings") and isinstance(old, list) and isinstance(new, list):
        as_key = lambda p: f"{p['reference_class']} + {p['target_attribute']} x{p['images']}"  # noqa: E731
        before, now = [as_key(p) for p in old], [as_key(p) for p in new]
        added, removed = [p for p in now if p not in set(before)], [p for p in before if p not in set(now)]
        parts = [f"{len(before)} in the folder, {len(now)} now"]
        if added:
            parts.append(f"{len(added)} new, e.g. {added[0]!r}")
        if removed:
            parts.append(f"{len(removed)} gone, e.g. {removed[0]!r}")
        if not added and not removed:
            parts.append("same pairings in another order")
        return f"{key}: {', '.join(parts)}"
    return f"{key}: {json.dumps(old)} in the folder, {json.dumps(new)} now"


def generation_manifest(jobs: Sequence[GenerationJob], config: GenerateConfig, model: FluxModel) -> dict[str, Any]:
    """The settings that decide every pixel of a run, as plain JSON values.

    Args:
        jobs: the planned jobs (their pairings and per-pairing image counts are recorded).
        config: the run's settings (steps, guidance, size, schedule, batch size, seed, ...).
        model: the resolved Flux (its name, dtype, default size, prompt length and call
            arguments are recorded).
    """
    counts: dict[Pairing, int] = {}
    for job in jobs:
        counts[job.pairing] = counts.get(job.pairing, 0) + 1
    seeds = hashlib.sha256(",".join(str(j.seed) for j in jobs).encode()).hexdigest()[:16]
    schedule = config.eta_schedule()
    steps = config.resolved_steps(model)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "model": model.name,
        "dtype": model.dtype,
        "seed": config.seed,
        "method": config.method,
        "num_inference_steps": steps,
        **({"guidance_scale": config.guidance_scale} if model.uses_guidance else {}),
        "size": config.resolved_size(model),
        "max_sequence_length": model.max_sequence_length,
        "schedule": asdict(schedule) if schedule is not None else "per attribute (paper)",
        "save_guides": config.save_guides,
        "extra": dict(model.extra),
        **config.acceleration.manifest(steps),
        "batch_size": config.batch_size,
        "image_seeds": seeds,
        "pairings": [
            {
                "reference_class": p.reference_class,
                "target_attribute": p.target_attribute,
                "removed_attributes": list(p.removed_attributes),
                "images": n,
                **({"guide_bird": p.guide_bird or config.guide_bird} if p.guide_bird or config.guide_bird else {}),
            }
            for p, n in counts.items()
        ],
    }
    return json.loads(json.dumps(manifest, sort_keys=True))


def check_manifest(out_dir: str | Path, manifest: dict[str, Any], labels: dict[str, str] | None = None) -> bool:
    """Compare ``manifest`` with the folder's; returns whether the folder has one.

    ``labels`` names, per setting, what sets it (:data:`MANIFEST_ARGUMENTS`) for the error message.

    Raises:
        ManifestMismatchError: a setting differs (each is listed with both values).
        UsageError: the folder holds generated images but no manifest (made by an older
            version): their settings cannot be checked.
    """
    out_dir = Path(out_dir)
    path = out_dir / MANIFEST_FILE
    if not path.is_file():
        parts = out_dir / PARTS_DIR
        if parts.is_dir() and any(parts.iterdir()):
            raise UsageError(
                "holds generated images but no manifest of their settings (an older version made "
                "them), so a resume cannot be checked",
                file=out_dir,
                hint="write to another output folder",
            )
        return False
    try:
        found = json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise UsageError(
            f"not valid JSON ({err.msg})",
            file=path,
            line=err.lineno,
            hint="restore it or write to another output folder",
        ) from None
    found = upgrade_manifest(found, manifest)  # a folder written by an older version: in today's keys
    differences = [
        (k, found.get(k), manifest.get(k))
        for k in sorted(set(found) | set(manifest))
        if found.get(k) != manifest.get(k)
    ]
    if "seed" in found and "seed" in manifest:  # image_seeds follow from the base seed and the pairings
        differences = [d for d in differences if d[0] != "image_seeds"]
    if differences:
        raise ManifestMismatchError(out_dir, differences, labels)
    return True


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    """Check the folder's manifest, or write it when there is none (before the first image)."""
    if not check_manifest(out_dir, manifest):
        atomic_write_bytes(out_dir / MANIFEST_FILE, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
