"""``conceptbed --generated``: seconds to check and score a folder of 1,000 images made elsewhere as one row.

The folder holds ``--concepts`` object concepts of ``--images`` world renders each (``concepts x images`` images,
32 px PNGs); the oracles are trained once into a cache first (not timed). Timed: the whole run with the row alone
(``--learners`` empty: checks, reading, oracle scoring, the DINO-style baseline, Fig. 5, Table 3) and, of it, the
folder checks (:func:`~concept_grounding.conceptbed.byo.check_source`). docs/conceptbed/bring_your_own.md.

    .venv/bin/python benchmarks/bench_conceptbed_generated.py [--concepts 10] [--images 100] [--threads 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from PIL import Image

from concept_grounding.conceptbed import ConceptBedConfig, ConceptWorld, run_conceptbed, task_species
from concept_grounding.conceptbed.byo import ByoSource, check_source
from concept_grounding.vocabulary import load_vocabulary


def _folder(root: Path, cw: ConceptWorld, concepts: int, images: int) -> tuple[Path, dict]:
    """``root/object/<concept>/*.png``: ``images`` held-out renders of each concept's species."""
    chosen = {"object": cw.concepts("object", concepts)}
    for c in chosen["object"]:
        folder = root / "object" / c.name
        folder.mkdir(parents=True)
        for i, image in enumerate(cw.renders(c.label, images, "exact", offset=0)):
            Image.fromarray(image).save(folder / f"{i:04d}.png")
    return root, chosen


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concepts", type=int, default=10)
    p.add_argument("--images", type=int, default=100, help="images per concept")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    vocab = load_vocabulary()
    classes = task_species(vocab, "object")[: args.concepts] + task_species(vocab, "fine_grained_object")[:2]
    sizes = dict(concepts=args.concepts, m=4, real=8, images=args.images, oracle_per_class=30, oracle_epochs=8)
    common = dict(sizes, capacity="small", table8=("small",), classes=classes, tasks=("object",))
    with tempfile.TemporaryDirectory() as tmp:
        cw = ConceptWorld(m=4, real=8, classes=classes)
        root, chosen = _folder(Path(tmp) / "generated", cw, args.concepts, args.images)
        cache = str(Path(tmp) / "oracles")
        run_conceptbed(ConceptBedConfig(learners=("Original",), cache=cache, **common))  # trains the oracles
        known = {"object": [c.name for c in chosen["object"]]}
        t = time.perf_counter()
        check_source(ByoSource("mine", "generated", root), chosen, known, args.images)
        checks = time.perf_counter() - t
        config = ConceptBedConfig(learners=(), cache=cache, generated=str(root), name="mine", **common)
        t = time.perf_counter()
        result = run_conceptbed(config)
        total = time.perf_counter() - t
    n = args.concepts * args.images
    print(
        f"--generated, {n} images ({args.concepts} concepts x {args.images}, {args.threads} thread(s)): "
        f"{total:.1f} s in all ({n / total:.0f} images/s), of which the folder checks {checks:.1f} s; "
        f"CCD {result.results['table1']['mine']['object']:.4f}"
    )


if __name__ == "__main__":
    main()
