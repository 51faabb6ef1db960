"""Time ``curate`` on a SUB-scale study: ``--images`` candidates x ``--annotators`` answers each.

Candidates are the bird world's SUB pairings (cycled up to ``--images``, default 38,400),
every one a study-1 image answered by ``--annotators`` (default 3) simulated annotators of
accuracy 0.9 (two questions each), and every ``--study2-every``-th (default 4th) also a
study-2 image; the answers are drawn vectorised from the world's truth and written as the
store's Parquet export. All candidates point at one small rendered PNG (the timing is the
curation, not image decoding). Prints the time of
:func:`~concept_grounding.curation.curate_job.run_curate` end to end (reading, scores,
discard rules, Krippendorff's alpha, Human rows, Figs. 6 and 9, the Parquet dataset with
every kept image embedded) and of its steps.

Usage: ``python benchmarks/bench_curate.py [--images 38400] [--annotators 3]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def make_study(folder: Path, images: int, annotators: int, study2_every: int, seed: int = 0) -> Path:
    """Write ``metadata.jsonl``, one PNG and ``answers.parquet`` into ``folder``; return the Parquet path."""
    from PIL import Image

    from concept_grounding.curation.sampling import group_choices
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=64))
    vocab = world.vocab
    pairings = world.default_pairings()
    Image.fromarray(world.sample(0).image).save(folder / "bird.png")
    rows = []
    for i in range(images):
        ref, target = pairings[i % len(pairings)]
        c = world.class_names.index(ref)
        group = vocab.group_of(target)
        removed = [vocab.attributes[j] for j in vocab.groups[group] if world.class_attributes[c, j]]
        rows.append(
            {
                "id": f"c{i:06d}",
                "file_name": "bird.png",
                "reference_class": ref,
                "target_attribute": target,
                "removed_attributes": removed,
                "group": group,
                "source_id": i,
                "seed": 0,
            }
        )
    (folder / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = np.random.default_rng(seed)
    likert = np.array(["yes", "somewhat", "no"])
    out = []
    for a in range(annotators):
        name = f"sim{a}"
        ok = rng.random((images, 2)) < 0.9
        q1 = np.where(ok[:, 0], "yes", likert[1 + rng.integers(2, size=images)])
        q2 = np.where(ok[:, 1], "no", likert[rng.integers(2, size=images)])
        ids = np.array([f"1:c{i:06d}" for i in range(images)])
        out.append(pd.DataFrame({"annotator": name, "image": ids, "study": 1, "question": "q1", "answer": q1}))
        out.append(pd.DataFrame({"annotator": name, "image": ids, "study": 1, "question": "q2", "answer": q2}))
        s2 = np.arange(0, images, study2_every)
        picks = []
        for i in s2:
            target = rows[i]["target_attribute"]
            choices = group_choices(target, vocab)
            picks.append(target if rng.random() < 0.9 else choices[int(rng.integers(len(choices)))])
        out.append(
            pd.DataFrame(
                {
                    "annotator": name,
                    "image": [f"2:c{i:06d}" for i in s2],
                    "study": 2,
                    "question": "present",
                    "answer": picks,
                }
            )
        )
    path = folder / "answers.parquet"
    pd.concat(out, ignore_index=True).to_parquet(path, index=False)
    return path


def main() -> None:
    import concept_grounding.curation.curate  # noqa: F401 (the job imports these lazily: loaded before the clock,
    import concept_grounding.evaluation.human_rows  # noqa: F401  as when curate_job imported them at its top)
    from concept_grounding.curation.curate_inputs import CurateConfig
    from concept_grounding.curation.curate_job import run_curate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=38400)
    parser.add_argument("--annotators", type=int, default=3)
    parser.add_argument("--study2-every", type=int, default=4)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    t0 = time.perf_counter()
    answers = make_study(folder, args.images, args.annotators, args.study2_every)
    n = len(pd.read_parquet(answers))
    print(
        f"study: {args.images} candidates, {n} answers by {args.annotators} annotators "
        f"(made in {time.perf_counter() - t0:.1f} s)"
    )
    t0 = time.perf_counter()
    res = run_curate(CurateConfig(folder, answers))
    res.save(folder / "out")
    wall = time.perf_counter() - t0
    print(
        f"curate: {wall:.2f} s end to end; kept {len(res.kept)} images, {int(res.attributes.kept.sum())} of "
        f"{len(res.attributes)} attributes, {int((res.pairings.reason == '').sum())} of {len(res.pairings)} pairings; "
        f"alpha {', '.join(f'{k} {v:.3f}' for k, v in res.alpha.items())}"
    )


if __name__ == "__main__":
    main()
