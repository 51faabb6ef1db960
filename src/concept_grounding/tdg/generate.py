"""The ``generate`` writer: TDG images as a resumable ``datasets`` image folder (SUB Sec. 4.2).

:class:`~.generate_config.GenerateConfig` holds every setting of a run. The job
(:func:`~.generate_job.run_generate`) plans the pairings (:mod:`.plan`), resolves the model
(:mod:`.sources`) and checks the folder (:mod:`.resume`); :func:`generate_images` writes the
images of one process's shard.

Writing. Images are PNG files ``<out>/<class folder>/<group>-<value>_<i:04d>.png`` written
to a temporary name and moved into place with ``os.replace`` (atomic), then a sidecar JSON
with the image's metadata goes to ``<out>/.tdg_parts/`` the same way (:mod:`.resume`).
A chunk of one pairing is one pipeline call and is redone whole on resume, so every pixel
is the same as in an uninterrupted run. :func:`finalize` merges the sidecars, in plan order,
into ``metadata.jsonl``, which ``datasets.load_dataset("imagefolder", data_dir=out)`` reads
(hidden folders are ignored by it).

"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..fileio import atomic_write_bytes
from ..vocabulary import load_vocabulary
from .acceleration import accelerated
from .baseline import prompting_images
from .plan import GenerationJob, chunk_jobs
from .prompts import tdg_prompts
from .resume import generation_manifest, is_done, part_path, write_manifest
from .schedule import schedule_for_attribute

if TYPE_CHECKING:
    from .generate_config import GenerateConfig
    from .sources import FluxModel

__all__ = ["generate_images", "time_estimate"]


def _duration(seconds: float) -> str:
    """``"40 s"``, ``"12 min"``, ``"3.5 h"``, ``"9 days"``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def time_estimate(seconds: float, measured: int, remaining: int) -> str:
    """The line ``generate`` prints after its first batch: the rate measured on it (``measured``
    images in ``seconds``, first-call warm-up included, so it errs long) and the time the
    ``remaining`` images of this run would take at that rate. An estimate, and said to be one.

    >>> time_estimate(6.0, 4, 96)
    'estimate: 1.5 s an image (measured on the first batch of 4, warm-up included), so about 2 min for the 96
     images left in this run'
    >>> time_estimate(3600.0, 1, 2_681_499)[-60:]
    'about 111,729 days for the 2,681,499 images left in this run'
    """
    rate = seconds / max(measured, 1)
    return (
        f"estimate: {rate:.2g} s an image (measured on the first batch of {measured}, warm-up included), "
        f"so about {_duration(rate * remaining)} for the {remaining:,} images left in this run"
    )


def _generate_chunk(
    pipe: Any, chunk: list[GenerationJob], config: GenerateConfig, model: FluxModel
) -> list[tuple[Any, Any, dict]]:
    """``(reference image, guide image or None, metadata)`` per job of one pairing."""
    import torch

    pairing = chunk[0].pairing
    prompts = tdg_prompts(
        pairing.reference_class, pairing.target_attribute, guide_bird=pairing.guide_bird or config.guide_bird
    )
    schedule = config.eta_schedule() or schedule_for_attribute(pairing.target_attribute)
    size, steps = config.resolved_size(model), config.resolved_steps(model)
    device = getattr(pipe, "_execution_device", "cpu")
    guidance = {"guidance_scale": config.guidance_scale} if model.uses_guidance else {}
    common = dict(num_inference_steps=steps, **guidance, **model.call_kwargs(size), output_type="pil")
    if config.method == "tdg":
        generators = [torch.Generator(device=device).manual_seed(job.seed) for job in chunk]
        output = pipe(
            prompts.reference,
            prompts.guide,
            eta_schedule=schedule,
            num_images_per_prompt=len(chunk),
            generator=generators,
            **common,
        )
        images, guides = output.images, output.guide_images
        guide_prompt, schedule_meta = prompts.guide, asdict(schedule)
    elif config.method == "prompting":
        images = prompting_images(
            pipe,
            [prompts.reference] * len(chunk),
            [job.seed for job in chunk],
            batch_size=len(chunk),
            generator_device=device,
            **common,
        )
        guides = [None] * len(images)
        guide_prompt, schedule_meta = None, None
    else:
        raise ValueError(f"method must be 'tdg' or 'prompting', got {config.method!r}")
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
            "method": config.method,
            "reference_prompt": prompts.reference,
            "guide_prompt": guide_prompt,
            "guide_bird": prompts.guide_bird,
            "schedule": schedule_meta,
            "num_inference_steps": steps,
            **guidance,
            "height": size,
            "width": size,
        }
        if config.save_guides and guide is not None:
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
    config: GenerateConfig,
    model: FluxModel,
    *,
    process_index: int = 0,
    num_processes: int = 1,
    progress: bool = True,
) -> int:
    """Generate the jobs of this process's shard that are not done yet into ``config.out``;
    returns images written (at most ``config.max_images``; ``config.batch_size`` per call).

    Args:
        pipe: a :class:`TiedDiffusionPipeline` (also used for ``method="prompting"``).
        jobs: from :func:`~concept_grounding.tdg.plan.plan_jobs`.
        config: the run's settings (its ``model``, ``pairings``, ``classes``, ``attributes``
            and ``images_per_pairing`` are what :func:`~.generate_job.run_generate` plans
            ``jobs`` and resolves ``model`` from; unused here).
        model: the resolved Flux ``pipe`` was loaded from: its prompt length, default size
            and call arguments (e.g. true CFG) are used, and recorded in the manifest with
            its name and dtype.
        process_index, num_processes: chunk ``i`` belongs to process ``i % num_processes``
            (accelerate's ``PartialState`` gives both).

    Raises:
        ManifestMismatchError: ``config.out`` was generated with other settings.
    """
    import sys
    import time

    from tqdm.auto import tqdm

    out_dir = Path(config.out)
    if not 0 <= process_index < num_processes:
        raise ValueError(f"process_index must lie in [0, num_processes={num_processes}), got {process_index}")
    if getattr(pipe.transformer, "is_cache_enabled", False):
        raise ValueError(
            "pipe.transformer already has a cache enabled; pass it as config.acceleration instead, "
            "so that the manifest records it"
        )
    mine = [c for i, c in enumerate(chunk_jobs(jobs, config.batch_size)) if i % num_processes == process_index]
    write_manifest(out_dir, generation_manifest(jobs, config, model))
    todo = [c for c in mine if not all(is_done(out_dir, j) for j in c)]
    total = sum(len(c) for c in todo)
    if config.max_images is not None:
        total = min(total, config.max_images)
    written, started = 0, time.perf_counter()
    desc = ("TDG images" if config.method == "tdg" else f"{config.method} images") + (
        f" (process {process_index + 1} of {num_processes})" if num_processes > 1 else ""
    )
    with (
        tqdm(total=total, desc=desc, disable=not progress, unit="img") as bar,
        accelerated(pipe, config.acceleration, config.resolved_steps(model)),
    ):
        for chunk in todo:
            if config.max_images is not None:
                if written >= config.max_images:
                    break
                chunk = chunk[: config.max_images - written]  # per-job seeds: the same images as in a full chunk
            for job, (image, guide, meta) in zip(chunk, _generate_chunk(pipe, chunk, config, model)):
                if "guide_file_name" in meta:
                    atomic_write_bytes(out_dir / meta["guide_file_name"], _png_bytes(guide))
                atomic_write_bytes(out_dir / job.file_name, _png_bytes(image))
                atomic_write_bytes(part_path(out_dir, job), json.dumps(meta, sort_keys=True).encode())
                written += 1
                bar.update(1)
            if progress and written == len(chunk) and total > written:  # after the first batch: the rate, once
                bar.write(time_estimate(time.perf_counter() - started, written, total - written), file=sys.stderr)
    return written


def finalize(out_dir: str | Path, jobs: Sequence[GenerationJob]) -> Path:
    """Merge the sidecars of all done jobs, in plan order, into ``<out>/metadata.jsonl`` (atomic).

    Warns (``warnings``) when jobs are still missing; those are left out.
    """
    import warnings

    out_dir = Path(out_dir)
    lines, missing = [], 0
    for job in jobs:
        part = part_path(out_dir, job)
        if part.exists() and (out_dir / job.file_name).exists():
            lines.append(part.read_text())
        else:
            missing += 1
    if missing:
        warnings.warn(
            f"{missing} of {len(jobs)} images are not generated yet; metadata.jsonl lists the others", stacklevel=2
        )
    path = out_dir / "metadata.jsonl"
    atomic_write_bytes(path, "".join(line + "\n" for line in lines).encode())
    return path
