"""Oracle scoring batched against a per-image loop (issue 43: >= 5x), measured in one run.

    PYTHONPATH=src python benchmarks/bench_conceptbed.py
"""

from __future__ import annotations

import time

import numpy as np
import torch

from concept_grounding.conceptbed import ConceptWorld, OracleSpec, task_species, train_oracle
from concept_grounding.vocabulary import load_vocabulary


def main() -> None:
    torch.set_num_threads(1)
    classes = task_species(load_vocabulary(), "object")[:12]
    cw = ConceptWorld(classes=classes)
    oracle = train_oracle(OracleSpec("species", "medium", per_class=10, epochs=2, classes=classes), cw)
    images = np.concatenate([cw.renders(c, 40, "concept_real") for c in range(len(classes))])  # 480 images
    t = time.perf_counter()
    batched = oracle.probabilities(images, batch_size=256)
    t_batched = time.perf_counter() - t
    t = time.perf_counter()
    loop = np.concatenate([oracle.probabilities(images[i:i + 1]) for i in range(len(images))])
    t_loop = time.perf_counter() - t
    assert np.allclose(batched, loop, atol=1e-5)
    print(f"{len(images)} images: batched {t_batched:.3f} s, per-image loop {t_loop:.3f} s, ratio {t_loop / t_batched:.1f}x")


if __name__ == "__main__":
    main()
