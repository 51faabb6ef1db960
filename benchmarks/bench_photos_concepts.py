"""How well EfficientNet-Lite0's features carry the photo classes' class-level concepts, on animals the
CAVs never saw: one run, stamp-disjoint.

The ``photos`` folder (``--photos``, written with ``concept-grounding photos``) has 57 cut-outs of 44
classes, each on several backgrounds. ``analyse --photos`` trains its CAVs on one composite of each
cut-out per subset and tests on the others (the same animal, other backgrounds); here the cut-outs
alternate between train and test (sorted by name), so each test animal is one no CAV was learned on.
One CAV per concept (:func:`~concept_grounding.models.concept_bank.learn_cavs`, ``N_p = N_n = 100``, ``C = 1``)
on the pooled feature map, the ROC AUC of its score ``c . f + b`` for the concept's presence on the
held-out images (class-level truth, :mod:`concept_grounding.photos.concepts`).

Usage: ``python benchmarks/bench_photos_concepts.py --photos DIR``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    import numpy as np
    from PIL import Image
    from sklearn.metrics import roc_auc_score

    from concept_grounding.models.concept_bank import bank_scores, embed_images, learn_cavs
    from concept_grounding.models.data import images_to_tensor
    from concept_grounding.models.imagenet import CROP, load_imagenet_classifier
    from concept_grounding.models.posthoc import FeatureMapBackbone
    from concept_grounding.photos.concepts import CONCEPTS, class_concept_matrix

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=Path, required=True)
    args = parser.parse_args()
    records = json.loads((args.photos / "photos.json").read_text())["images"]
    stamps = sorted({r["stamp"] for r in records})
    held_out = {s for i, s in enumerate(stamps) if i % 2}
    test = np.array([r["stamp"] in held_out for r in records])
    classifier = load_imagenet_classifier()
    images = images_to_tensor([Image.open(args.photos / "images" / r["file"]).convert("RGB") for r in records], CROP)
    trunk = FeatureMapBackbone(classifier.feature_maps, 1280, mean=(0.5,) * 3, std=(0.5,) * 3)
    pooled = embed_images(trunk, images, 64)
    truth = class_concept_matrix([r["file"].split("/")[0] for r in records])
    bank = learn_cavs(pooled[~test], truth[~test], 100, 100, 1.0, 0, CONCEPTS, progress=False)
    scores = bank_scores(pooled[test], bank.vectors, bank.intercepts, "dot").numpy()
    print(f"{len(stamps)} cut-outs; train {int((~test).sum())} images, test {int(test.sum())} (other cut-outs)")
    for j, name in enumerate(CONCEPTS):
        present = truth[test, j].astype(bool)
        auc = roc_auc_score(present, scores[:, j]) if 0 < present.sum() < len(present) else float("nan")
        print(
            f"{name:10s} train positives {int(truth[~test, j].sum()):3d}  test positives {int(present.sum()):3d}  "
            f"held-out AUC {auc:.3f}"
        )


if __name__ == "__main__":
    main()
