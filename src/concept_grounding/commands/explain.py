"""``concept-grounding explain``: CCI maps and overlays for images and texts -> PNG report.

Images come from ``--images`` (files) or, by default, the bird world; texts from
``--texts`` (one per image, or one shared) or, by default, the class prompt of each
world image's class. Writes under ``--out``: ``explain.png`` (image, CCI overlay, clusters,
and with ``--baselines`` Grad-CAM and rollout overlays), ``explain.json`` (drops, weights,
similarities per image) and ``report.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from concept_grounding.commands._types import existing_file, output_dir, positive_int
from concept_grounding.commands.covar import WORLD_SIZE
from concept_grounding.errors import UsageError


__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--images", nargs="*", type=existing_file, default=None, help="image files (default: world samples)")
    parser.add_argument("--texts", nargs="*", default=None, help="one text per image, or one for all")
    parser.add_argument("--num", type=positive_int, default=4, help="world samples when --images is not given")
    parser.add_argument("--size", type=WORLD_SIZE, default=64,
                        help="world image side / tiny model input size (a multiple of 8, >= 32)")
    parser.add_argument("--model", default=None, help="WorldCLIP folder, open_clip name or transformers id/path "
                        "(default: tiny config-built open_clip CLIP, random weights)")
    parser.add_argument("--clusters", type=positive_int, default=7, help="K of the k-means")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method", choices=("fast", "hook"), default="fast")
    parser.add_argument("--baselines", action="store_true", help="also draw Grad-CAM and attention rollout")


def _read_image(path: Path):
    """``(H, W, 3) uint8`` of an image file; an unreadable one is a :class:`UsageError` naming it."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as err:
        raise UsageError(f"not an image PIL can read ({type(err).__name__})", argument="--images", file=path) from None


def _inputs(args: argparse.Namespace):
    """(images as uint8 arrays, texts, foreground masks or None)."""
    import numpy as np
    from PIL import Image

    from concept_grounding.cci.loading import class_prompt

    if args.images:
        if not args.texts:
            raise UsageError("give one text per image (or one for all) with --images", argument="--texts")
        images = [_read_image(p) for p in args.images]
        return images, list(args.texts), None
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=args.size, seed=args.seed))
    samples = [world.sample(i) for i in range(args.num)]
    texts = list(args.texts) if args.texts else [class_prompt(world.class_names[s.label]) for s in samples]
    return [s.image for s in samples], texts, [s.mask for s in samples]


def run(args: argparse.Namespace) -> int:
    from concept_grounding.hub import resolve_clip

    if args.model:  # first, before torch: a model that cannot be loaded fails within seconds
        args.model = resolve_clip(args.model, "--model")
    import numpy as np
    import torch

    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.baselines import BASELINE_TITLES, BASELINES
    from concept_grounding.cci.diagnosis import foreground_share
    from concept_grounding.cci.loading import load_explainable_clip
    from concept_grounding.cci.plots import overlay, save_panel_grid

    # 1. inputs and model
    n_images = len(args.images) if args.images else args.num
    if args.texts and len(args.texts) not in (1, n_images):
        raise UsageError(f"{len(args.texts)} texts for {n_images} images; give one per image or one for all",
                         argument="--texts")
    images, texts, masks = _inputs(args)
    clip = load_explainable_clip(args.model, image_size=args.size)
    cci = ConceptClusterImportance(clip.model, num_clusters=args.clusters, seed=args.seed, method=args.method)
    px = clip.pixels(images)
    text_embeds = clip.encode_text(texts)

    # 2. CCI (and baselines)
    out = cci(px, text_embeds)
    h, w = images[0].shape[:2]
    resize = lambda m: torch.nn.functional.interpolate(m[:, None].float(), size=(h, w), mode="bilinear",  # noqa: E731
                                                       align_corners=False)[:, 0].numpy()
    maps = resize(out.maps)
    extra = {}
    if args.baselines:
        t = text_embeds.expand(len(images), -1) if text_embeds.shape[0] == 1 else text_embeds
        extra = {BASELINE_TITLES[name]: resize(fn(clip.model, px, t)) for name, fn in BASELINES.items() if name != "random"}

    # 3. figure
    rows = []
    for i, img in enumerate(images):
        lab = out.labels[i].view(*cci.backend.grid_size).numpy()
        row = [(texts[i if len(texts) > 1 else 0][:28], img), ("CCI", overlay(img, maps[i])), ("clusters", lab)]
        row += [(name, overlay(img, m[i])) for name, m in extra.items()]
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    save_panel_grid(rows, args.out / "explain.png", title=f"CCI, K={args.clusters}: {clip.description}")

    # 4. numbers and report
    record = []
    for i in range(len(images)):
        rec = {
            "text": texts[i if len(texts) > 1 else 0],
            "similarity": float(out.similarity[i]),
            "drops": out.drops[i].tolist(),
            "weights": out.weights[i].tolist(),
            "normalizer": int(out.normalizer[i]),
        }
        if masks is not None:
            rec["foreground_share"] = float(foreground_share(torch.from_numpy(maps[i : i + 1]),
                                                             torch.from_numpy(np.asarray(masks[i])[None])))
        record.append(rec)
    (args.out / "explain.json").write_text(json.dumps({"model": clip.description, "images": record}, indent=2))
    lines = [f"# CCI explanations\n\nModel: {clip.description}. K = {args.clusters}, seed {args.seed}, "
             f"method {args.method}.\n\n![explanations](explain.png)\n\n| # | text | s | largest drop | FG share |",
             "|---|---|---|---|---|"]
    for i, rec in enumerate(record):
        fg = f"{rec['foreground_share']:.2f}" if "foreground_share" in rec else "-"
        lines.append(f"| {i} | {rec['text']} | {rec['similarity']:.3f} | {max(rec['drops']):.4f} | {fg} |")
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    return 0
