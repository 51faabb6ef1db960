"""Time the annotation store under concurrent annotators (SUB's human studies, issue 33).

``--annotators`` threads (default 10, as a Gradio server serves them), each with its own
SQLite connection to one WAL store of ``--images`` study-1 images (k = 3), loop
``next_image`` -> ``submit`` for ``--seconds``; prints the latency percentiles of
``next_image`` and of ``submit`` (ms), the submits per second, and checks that no image got
more than k answers and no annotator saw an image twice.

Usage: ``python benchmarks/bench_annotation.py [--annotators 10] [--images 38400] [--seconds 20]``
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import numpy as np


def main() -> None:
    from concept_grounding.curation.annotations import AnnotationStore, study1_item

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=10)
    parser.add_argument("--images", type=int, default=38400)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--k", type=int, default=3)
    args = parser.parse_args()

    db = Path(tempfile.mkdtemp()) / "bench.db"
    store = AnnotationStore(db, k=args.k, timeout=60)
    t0 = time.perf_counter()
    store.add_images(study1_item(f"1:c{i:06d}", "017.Cardinal", "has_crown_color::pink", candidate=f"c{i:06d}")
                     for i in range(args.images))
    print(f"store: {args.images} images added in {time.perf_counter() - t0:.2f} s ({db})")

    next_ms: list[float] = []
    submit_ms: list[float] = []
    lock = threading.Lock()
    stop = time.perf_counter() + args.seconds

    def annotate(name: str) -> None:
        own = AnnotationStore(db, k=args.k, timeout=60)
        rng = np.random.default_rng(sum(map(ord, name)))
        mine_next, mine_submit = [], []
        while time.perf_counter() < stop:
            t = time.perf_counter()
            item = own.next_image(name, 1)
            mine_next.append(1e3 * (time.perf_counter() - t))
            if item is None:
                break
            t = time.perf_counter()
            try:
                own.submit(name, item.image, {"q1": ("yes", "somewhat", "no")[int(rng.integers(3))], "q2": "no"})
            except Exception as exc:  # noqa: BLE001 - an image filled by others between next and submit
                if "already has its" not in str(exc):
                    raise
            mine_submit.append(1e3 * (time.perf_counter() - t))
        with lock:
            next_ms.extend(mine_next)
            submit_ms.extend(mine_submit)

    threads = [threading.Thread(target=annotate, args=(f"annotator{i}",)) for i in range(args.annotators)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    rows = store.rows()
    per_image: dict[str, int] = {}
    for ann, image, _study, q, _a in rows:
        if q == "q1":
            per_image[image] = per_image.get(image, 0) + 1
    assert max(per_image.values()) <= args.k, "an image got more than k annotators"
    assert len({(r[0], r[1], r[3]) for r in rows}) == len(rows), "a duplicate answer"
    n, s = np.array(next_ms), np.array(submit_ms)
    print(f"{args.annotators} concurrent annotators, {wall:.1f} s: {len(s)} submits ({len(s) / wall:.0f}/s), "
          f"{len(per_image)} images answered")
    print(f"next_image ms: p50 {np.percentile(n, 50):.2f}  p95 {np.percentile(n, 95):.2f}  max {n.max():.2f}")
    print(f"submit     ms: p50 {np.percentile(s, 50):.2f}  p95 {np.percentile(s, 95):.2f}  max {s.max():.2f}")


if __name__ == "__main__":
    main()
