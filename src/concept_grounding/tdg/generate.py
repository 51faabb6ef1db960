"""Plan SUB pairings and write TDG images as a resumable ``datasets`` image folder (SUB Sec. 4.2).

Planning. A *pairing* is (reference class, target attribute ``S+``). The default plan is
SUB's 33 classes x 32 substitution attributes, minus the attributes a class already has
by its class-level labels (the paper's ``S+ != S-``). ``removed_attributes`` (``S-``) are
the class's positive class-level attributes in the target's group.

Seeds. Image ``i`` of a pairing gets
``seed = int(sha256(f"{base_seed}|{class}|{attribute}|{i}")[:8 bytes]) & (2**63 - 1)``,
so an image's seed depends on nothing but its own identity: not on the plan, the order,
the batch or the shard.

Writing. Images are PNG files ``<out>/<class folder>/<group>-<value>_<i:04d>.png`` written
to a temporary name and moved into place with ``os.replace`` (atomic), then a sidecar JSON
with the image's metadata goes to ``<out>/.tdg_parts/`` the same way. A job counts as done
only once its sidecar exists, so a killed run that is restarted regenerates exactly the
missing images. Jobs are grouped into fixed *chunks* (consecutive images of one pairing,
one pipeline call each); a chunk is redone whole, so batch composition, and with it every
pixel, is the same as in an uninterrupted run. ``finalize`` merges the sidecars, in plan
order, into ``metadata.jsonl``, which ``datasets.load_dataset("imagefolder", data_dir=out)``
reads (hidden folders are ignored by it).

Manifest. Before the first image, ``<out>/.tdg_manifest.json`` records everything that
decides the pixels (:func:`generation_manifest`: method, steps, guidance, size, sequence
length, schedule, batch size, the transformer cache and compilation
(:class:`~.acceleration.Acceleration`), the pairing list with its image counts, and what
the caller adds: model, dtype, seed). A later run into the same folder compares its own
manifest first (:func:`check_manifest`) and stops with
:class:`ManifestMismatchError` listing each differing setting and its two values, so a
resume never mixes images made under other settings.

>>> image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", 0) == image_seed(0, "073.Blue_Jay", "has_crown_color::yellow", 0)
True
>>> image_file_name("073.Blue_Jay", "has_bill_shape::curved_(up_or_down)", 7)
'073.Blue_Jay/bill_shape-curved_up_or_down_0007.png'
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..errors import UsageError, read_text_file
from ..fileio import atomic_write_bytes
from ..vocabulary import Vocabulary, load_vocabulary, split_attribute
from .acceleration import Acceleration, accelerated
from .prompts import tdg_prompts
from .schedule import EtaSchedule, schedule_for_attribute

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Pairing", "image_seed", "plan_jobs", "generate_images"]

PARTS_DIR = ".tdg_parts"
MANIFEST_FILE = ".tdg_manifest.json"
MANIFEST_FORMAT = 1
#: Manifest settings added after format 1, with the value a folder without them was made with.
MANIFEST_DEFAULTS: dict[str, Any] = {"cache": None, "compile": False}
Method = Literal["tdg", "prompting"]


@dataclass(frozen=True)
class Pairing:
    """One (reference class, target attribute) substitution."""

    reference_class: str
    target_attribute: str
    removed_attributes: tuple[str, ...] = ()


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


def read_pairings(path: str | Path, vocab: Vocabulary | None = None) -> list[Pairing]:
    """Pairings from a file: JSON lines with ``reference_class``, ``target_attribute`` and
    optional ``removed_attributes``, or text lines ``class,attribute`` (``#`` comments).

    Raises:
        UsageError: the file is missing, not UTF-8, or a line is malformed or names an
            unknown class or attribute (the message gives the file and line).
    """
    from ..errors import suggest

    vocab = vocab or load_vocabulary()
    out = []
    for n, line in enumerate(read_text_file(path, argument="--pairings").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            try:
                row = json.loads(line)
                pairing = Pairing(row["reference_class"], row["target_attribute"],
                                  tuple(row.get("removed_attributes", ())))
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise UsageError(f"expected a JSON object with reference_class and target_attribute ({err})",
                                 file=path, line=n) from None
        else:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 2:
                raise UsageError(f"expected 'class,attribute', got {line!r}", file=path, line=n)
            pairing = Pairing(parts[0], parts[1])
        try:
            cls = vocab.classes[vocab.class_index(pairing.reference_class)]
        except KeyError:
            raise UsageError(f"unknown CUB class {pairing.reference_class!r}"
                             f"{suggest(pairing.reference_class, vocab.classes)}", file=path, line=n) from None
        if not vocab.is_attribute(pairing.target_attribute):
            raise UsageError(f"unknown CUB attribute {pairing.target_attribute!r}"
                             f"{suggest(pairing.target_attribute, vocab.attributes)}", file=path, line=n)
        out.append(Pairing(cls, pairing.target_attribute, pairing.removed_attributes))
    return out


def plan_jobs(pairings: Sequence[Pairing], images_per_pairing: int, base_seed: int = 0) -> list[GenerationJob]:
    """``images_per_pairing`` jobs per pairing (paper: N = 500), pairing-major."""
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
        for i in range(images_per_pairing)
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


def _part_path(out_dir: Path, job: GenerationJob) -> Path:
    return out_dir / PARTS_DIR / (job.file_name.replace("/", "__") + ".json")


def is_done(out_dir: str | Path, job: GenerationJob) -> bool:
    """A job is done when its sidecar exists (written after its image)."""
    out_dir = Path(out_dir)
    return _part_path(out_dir, job).exists() and (out_dir / job.file_name).exists()


@dataclass
class GenerationSettings:
    """How images are generated; recorded in every image's metadata."""

    method: Method = "tdg"
    num_inference_steps: int = 28
    guidance_scale: float = 3.5
    height: int = 1024
    width: int = 1024
    max_sequence_length: int = 512
    schedule: EtaSchedule | None = None  # None: the paper's schedule per attribute category
    save_guides: bool = False  # also write each guide image to .guides/<file_name> (SUB keeps only references)
    extra: dict[str, Any] = field(default_factory=dict)
    acceleration: Acceleration = field(default_factory=Acceleration)  # diffusers cache / torch.compile


class ManifestMismatchError(UsageError):
    """A resume whose settings differ from the folder's manifest.

    Attributes:
        differences: ``(setting, value in the folder, value now)`` per differing setting.
    """

    def __init__(self, out_dir: Path, differences: list[tuple[str, Any, Any]],
                 labels: dict[str, str] | None = None) -> None:
        self.differences = differences
        labels = labels or {}
        listed = "; ".join(_describe_difference(k + (f" ({labels[k]})" if k in labels else ""), old, new)
                           for k, old, new in differences)
        super().__init__(
            f"the folder was generated with other settings, and resuming would mix datasets. Differing: {listed}",
            file=out_dir, hint="rerun with the folder's settings, or write to another output folder")


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


def generation_manifest(
    jobs: Sequence[GenerationJob],
    settings: GenerationSettings,
    batch_size: int,
    run_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The settings that decide every pixel of a run, as plain JSON values.

    Args:
        jobs: the planned jobs (their pairings and per-pairing image counts are recorded).
        settings: how images are made.
        batch_size: images per pipeline call (batching changes the numerics).
        run_info: what the caller resolved: e.g. ``{"model": ..., "dtype": ..., "seed": ...}``.
    """
    counts: dict[Pairing, int] = {}
    for job in jobs:
        counts[job.pairing] = counts.get(job.pairing, 0) + 1
    seeds = hashlib.sha256(",".join(str(j.seed) for j in jobs).encode()).hexdigest()[:16]
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        **(run_info or {}),
        "method": settings.method,
        "num_inference_steps": settings.num_inference_steps,
        "guidance_scale": settings.guidance_scale,
        "height": settings.height,
        "width": settings.width,
        "max_sequence_length": settings.max_sequence_length,
        "schedule": asdict(settings.schedule) if settings.schedule is not None else "per attribute (paper)",
        "save_guides": settings.save_guides,
        "extra": settings.extra,
        **settings.acceleration.manifest(settings.num_inference_steps),
        "batch_size": batch_size,
        "image_seeds": seeds,
        "pairings": [
            {"reference_class": p.reference_class, "target_attribute": p.target_attribute,
             "removed_attributes": list(p.removed_attributes), "images": n}
            for p, n in counts.items()
        ],
    }
    return json.loads(json.dumps(manifest, sort_keys=True))


def check_manifest(out_dir: str | Path, manifest: dict[str, Any], labels: dict[str, str] | None = None) -> bool:
    """Compare ``manifest`` with the folder's; returns whether the folder has one.

    ``labels`` names, per setting, what sets it (``{"num_inference_steps": "--steps"}``)
    for the error message.

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
            raise UsageError("holds generated images but no manifest of their settings (an older version made "
                             "them), so a resume cannot be checked", file=out_dir,
                             hint="write to another output folder")
        return False
    try:
        found = json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise UsageError(f"not valid JSON ({err.msg})", file=path, line=err.lineno,
                         hint="restore it or write to another output folder") from None
    found = {**MANIFEST_DEFAULTS, **found}  # settings added later: an older folder used their default
    differences = [(k, found.get(k), manifest.get(k)) for k in sorted(set(found) | set(manifest))
                   if found.get(k) != manifest.get(k)]
    if "seed" in found and "seed" in manifest:  # image_seeds follow from the base seed and the pairings
        differences = [d for d in differences if d[0] != "image_seeds"]
    if differences:
        raise ManifestMismatchError(out_dir, differences, labels)
    return True


def _write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    """Check the folder's manifest, or write it when there is none (before the first image)."""
    if not check_manifest(out_dir, manifest):
        atomic_write_bytes(out_dir / MANIFEST_FILE, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def _generate_chunk(pipe: Any, chunk: list[GenerationJob],
                    settings: GenerationSettings) -> list[tuple[Any, Any, dict]]:
    """``(reference image, guide image or None, metadata)`` per job of one pairing."""
    import torch
    from diffusers import FluxPipeline

    pairing = chunk[0].pairing
    prompts = tdg_prompts(pairing.reference_class, pairing.target_attribute)
    schedule = settings.schedule or schedule_for_attribute(pairing.target_attribute)
    device = getattr(pipe, "_execution_device", "cpu")
    generators = [torch.Generator(device=device).manual_seed(job.seed) for job in chunk]
    common = dict(
        num_inference_steps=settings.num_inference_steps,
        guidance_scale=settings.guidance_scale,
        height=settings.height,
        width=settings.width,
        max_sequence_length=settings.max_sequence_length,
        generator=generators,
        output_type="pil",
        **settings.extra,
    )
    if settings.method == "tdg":
        output = pipe(prompts.reference, prompts.guide, eta_schedule=schedule, num_images_per_prompt=len(chunk), **common)
        images, guides = output.reference_images, output.guide_images
        guide_prompt, schedule_meta = prompts.guide, asdict(schedule)
    elif settings.method == "prompting":
        images = FluxPipeline.__call__(pipe, prompt=prompts.reference, num_images_per_prompt=len(chunk), **common).images
        guides = [None] * len(images)
        guide_prompt, schedule_meta = None, None
    else:
        raise ValueError(f"method must be 'tdg' or 'prompting', got {settings.method!r}")
    vocab = load_vocabulary()
    out = []
    for job, image, guide in zip(chunk, images, guides):
        meta = {
            "file_name": job.file_name,
            "reference_class": pairing.reference_class,
            "target_attribute": pairing.target_attribute,
            "removed_attributes": list(pairing.removed_attributes),
            "group": vocab.group_of(pairing.target_attribute),
            "image_index": job.image_index,
            "seed": job.seed,
            "method": settings.method,
            "reference_prompt": prompts.reference,
            "guide_prompt": guide_prompt,
            "guide_bird": prompts.guide_bird,
            "schedule": schedule_meta,
            "num_inference_steps": settings.num_inference_steps,
            "guidance_scale": settings.guidance_scale,
            "height": settings.height,
            "width": settings.width,
        }
        if settings.save_guides and guide is not None:
            meta["guide_file_name"] = f".guides/{job.file_name}"  # hidden: imagefolder skips it
        out.append((image, guide, meta))
    return out


def _png_bytes(image: Any) -> bytes:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def generate_images(
    pipe: Any,
    jobs: Sequence[GenerationJob],
    out_dir: str | Path,
    settings: GenerationSettings | None = None,
    *,
    batch_size: int = 4,
    process_index: int = 0,
    num_processes: int = 1,
    max_images: int | None = None,
    progress: bool = True,
    run_info: dict[str, Any] | None = None,
) -> int:
    """Generate the jobs of this process's shard that are not done yet; returns images written.

    Args:
        pipe: a :class:`TiedDiffusionPipeline` (also used for ``method="prompting"``).
        jobs: from :func:`plan_jobs`.
        batch_size: images per pipeline call (one pairing per call).
        process_index, num_processes: chunk ``i`` belongs to process ``i % num_processes``
            (accelerate's ``PartialState`` gives both).
        max_images: stop after writing this many images (a bounded run; resume later).
        run_info: recorded in the folder's manifest next to ``settings`` (model, dtype,
            seed, ...); a resume must give the same (see :func:`check_manifest`).

    Raises:
        ManifestMismatchError: ``out_dir`` was generated with other settings.
    """
    from tqdm.auto import tqdm

    settings = settings or GenerationSettings()
    out_dir = Path(out_dir)
    if not 0 <= process_index < num_processes:
        raise ValueError(f"process_index must lie in [0, num_processes={num_processes}), got {process_index}")
    if getattr(pipe.transformer, "is_cache_enabled", False):
        raise ValueError("pipe.transformer already has a cache enabled; pass it as settings.acceleration instead, "
                         "so that the manifest records it")
    mine = [c for i, c in enumerate(chunk_jobs(jobs, batch_size)) if i % num_processes == process_index]
    _write_manifest(out_dir, generation_manifest(jobs, settings, batch_size, run_info))
    todo = [c for c in mine if not all(is_done(out_dir, j) for j in c)]
    total = sum(len(c) for c in todo)
    written = 0
    with tqdm(total=total, desc=f"TDG images [{process_index}/{num_processes}]", disable=not progress, unit="img") as bar, \
            accelerated(pipe, settings.acceleration, settings.num_inference_steps):
        for chunk in todo:
            if max_images is not None and written >= max_images:
                break
            for job, (image, guide, meta) in zip(chunk, _generate_chunk(pipe, chunk, settings)):
                if "guide_file_name" in meta:
                    atomic_write_bytes(out_dir / meta["guide_file_name"], _png_bytes(guide))
                atomic_write_bytes(out_dir / job.file_name, _png_bytes(image))
                atomic_write_bytes(_part_path(out_dir, job), json.dumps(meta, sort_keys=True).encode())
                written += 1
                bar.update(1)
    return written


def finalize(out_dir: str | Path, jobs: Sequence[GenerationJob]) -> Path:
    """Merge the sidecars of all done jobs, in plan order, into ``<out>/metadata.jsonl`` (atomic).

    Warns (``warnings``) when jobs are still missing; those are left out.
    """
    import warnings

    out_dir = Path(out_dir)
    lines, missing = [], 0
    for job in jobs:
        part = _part_path(out_dir, job)
        if part.exists() and (out_dir / job.file_name).exists():
            lines.append(part.read_text())
        else:
            missing += 1
    if missing:
        warnings.warn(f"{missing} of {len(jobs)} images are not generated yet; metadata.jsonl lists the others")
    path = out_dir / "metadata.jsonl"
    atomic_write_bytes(path, "".join(line + "\n" for line in lines).encode())
    return path
