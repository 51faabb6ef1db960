"""``concept-grounding covar``: build COVAR on the world, evaluate a CLIP, diagnose errors.

Steps: (1) render ``--objects`` world birds (image, mask, label) and build their COVAR
variants (``--backgrounds`` procedural backgrounds, or one generated background per
``--inpaint-prompts`` with ``--inpaint-model``, x identity + 11 transforms); (2) zero-shot classify every
variant with class prompts; (3) explain the predicted class with CCI and split the errors
into BG-Er / Fine-Er / FG-Er (judge: the world's class attribute vectors, or the prompts'
text embeddings); (4) on the untransformed birds, the known-truth checks for CCI and the
baselines: share of importance inside the bird mask and the pointing game against the
visible parts, plus Deletion/Insertion AUCs. Writes under ``--out``: ``accuracy_bg_er.png``,
``shares.png``, ``overlays.png``, ``covar.json``, ``report.md`` (and ``dataset/`` with
``--save-dataset``).
"""

from __future__ import annotations

import argparse
import json

from concept_grounding.commands._types import closed_unit_interval, float_range, multiple_of, output_dir, positive_int

#: world renders >= 32 px; the tiny CLIP uses patches of size // 8
WORLD_SIZE = multiple_of(8, low=32, why="world images are >= 32 px and the tiny CLIP cuts 8 x 8 patches")
COSINE = float_range(-1.0, 1.0)


__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=output_dir, help="output folder")
    parser.add_argument("--objects", type=positive_int, default=4, help="world birds to vary")
    parser.add_argument("--backgrounds", type=positive_int, default=20, help="backgrounds per bird")
    parser.add_argument("--size", type=WORLD_SIZE, default=64, help="world image side in pixels (a multiple of 8, >= 32)")
    parser.add_argument("--model", default=None, help="WorldCLIP folder, open_clip name or transformers id/path "
                        "(default: tiny config-built open_clip CLIP, random weights)")
    parser.add_argument("--clusters", type=positive_int, default=7)
    parser.add_argument("--judge", choices=("attributes", "text"), default="attributes", help="Fine-Er judge")
    parser.add_argument("--judge-threshold", type=COSINE, default=None,
                        help="cosine above which two classes are similar (default: the 90th percentile of class pairs)")
    parser.add_argument("--threshold", type=closed_unit_interval, default=0.5,
                        help="map binarisation, fraction of the maximum, in [0, 1]")
    parser.add_argument("--steps", type=positive_int, default=10, help="Deletion/Insertion steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-dataset", action="store_true", help="save the COVAR dataset with save_to_disk")
    parser.add_argument("--inpaint-model", default=None,
                        help="diffusers inpainting checkpoint (Hub id or folder): generate object-free backgrounds "
                        "from --inpaint-prompts instead of the procedural ones (--backgrounds is then ignored)")
    parser.add_argument("--inpaint-prompts", nargs="+", default=list(INPAINT_PROMPTS), metavar="PROMPT",
                        help="one generated background per prompt (--inpaint-model)")
    parser.add_argument("--inpaint-size", type=multiple_of(8, why="the VAE downsamples by 8"), default=512, help="generation side in pixels (--inpaint-model)")
    parser.add_argument("--inpaint-steps", type=positive_int, default=30, help="denoising steps (--inpaint-model)")


#: Default scenes for ``--inpaint-model``.
INPAINT_PROMPTS = ("a photo of a forest", "a photo of a sandy beach", "a photo of a snowy field",
                   "a photo of a city street", "a photo of a lake shore")


def _backgrounds(args: argparse.Namespace, sample) -> list | None:
    """Generated backgrounds (``--inpaint-model``), or None for the procedural ones."""
    if args.inpaint_model is None:
        return None
    from concept_grounding.cci.covar import inpaint_backgrounds

    return inpaint_backgrounds(sample.image, sample.mask, args.inpaint_prompts, args.inpaint_model, seed=args.seed,
                               num_inference_steps=args.inpaint_steps, height=args.inpaint_size,
                               width=args.inpaint_size)


def _truth_checks(cci, clip, samples, class_embeds, steps: int) -> dict[str, dict[str, float]]:
    """Foreground share, pointing game and Deletion/Insertion AUCs per method on the world birds."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from concept_grounding.cci.baselines import BASELINES
    from concept_grounding.cci.diagnosis import foreground_share, pointing_game
    from concept_grounding.cci.faithfulness import Replacement, classification_curves

    px = clip.pixels([s.image for s in samples])
    labels = torch.tensor([s.label for s in samples])
    text = class_embeds[labels]
    h, w = samples[0].image.shape[:2]
    fg = torch.from_numpy(np.stack([s.mask for s in samples]))
    xy = torch.from_numpy(np.stack([s.part_xy for s in samples])).float()
    vis = torch.from_numpy(np.stack([s.part_visible for s in samples]))
    t = F.normalize(class_embeds.float(), dim=-1)

    def score(x):
        return F.normalize(cci.backend.encode_image(x).float(), dim=-1) @ t.T

    methods = {"CCI": cci(px, text).maps}
    methods.update({name: fn(clip.model, px, text) for name, fn in BASELINES.items()})
    result = {}
    for name, maps in methods.items():
        at_image = F.interpolate(maps[:, None].float(), size=(h, w), mode="bilinear", align_corners=False)[:, 0]
        aucs = classification_curves(score, px, maps, labels, steps=steps, replacement=Replacement("blur")).aucs
        result[name] = {
            "foreground_share": float(foreground_share(at_image, fg).mean()),
            "pointing_game": float(pointing_game(at_image, xy, vis, radius=0.1 * w).float().mean()),
            **aucs,
        }
    return result


def run(args: argparse.Namespace) -> int:
    from concept_grounding.hub import resolve_clip, resolve_model

    # 0. named models first (before torch): a model that cannot be loaded fails within seconds
    if args.model:
        args.model = resolve_clip(args.model, "--model")
    if args.inpaint_model:
        args.inpaint_model = resolve_model(args.inpaint_model, "--inpaint-model")
    import numpy as np
    import torch

    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.covar import build_covar, evaluate_covar
    from concept_grounding.cci.diagnosis import AttributeJudge, TextEmbeddingJudge
    from concept_grounding.cci.loading import class_prompt, load_explainable_clip
    from concept_grounding.cci.plots import overlay, save_bar_chart, save_panel_grid
    from concept_grounding.world import BirdWorld, WorldConfig

    args.out.mkdir(parents=True, exist_ok=True)
    # 1. objects and variants
    world = BirdWorld(WorldConfig(image_size=args.size, seed=args.seed))
    samples = [world.sample(i) for i in range(args.objects)]
    backgrounds = _backgrounds(args, samples[0])
    n_backgrounds = len(backgrounds) if backgrounds is not None else args.backgrounds
    ds = build_covar(((s.image, s.mask, s.label) for s in samples), num_backgrounds=n_backgrounds,
                     class_names=list(world.class_names), seed=args.seed, backgrounds=backgrounds)
    if args.save_dataset:
        ds.save_to_disk(str(args.out / "dataset"))

    # 2. model, prompts, judge
    clip = load_explainable_clip(args.model, image_size=args.size)
    cci = ConceptClusterImportance(clip.model, num_clusters=args.clusters, seed=args.seed)
    class_embeds = clip.encode_text([class_prompt(n) for n in world.class_names])
    if args.judge == "attributes":
        judge = AttributeJudge(world.class_attributes, threshold=args.judge_threshold)
    else:
        judge = TextEmbeddingJudge(class_embeds, threshold=args.judge_threshold)

    # 3. classify, explain, diagnose (COVAR images are fed through the model's own pixel pipe)
    ev = evaluate_covar(cci, ds, class_embeds, judge=judge, threshold=args.threshold,
                        pixels=lambda ims: clip.pixels([np.asarray(im.convert("RGB")) for im in ims]))
    per_t = {k: v for k, v in ev.shares.items() if k != "all"}

    # 4. truth checks on the untransformed birds
    truth = _truth_checks(cci, clip, samples, class_embeds, args.steps)

    # 5. figures
    save_bar_chart({"accuracy": {k: v["accuracy"] for k, v in per_t.items()},
                    "BG-Er share": {k: v["BG-Er"] for k, v in per_t.items()}},
                   args.out / "accuracy_bg_er.png", f"COVAR per transform ({clip.description})", "fraction")
    save_bar_chart({c: {k: v[c] for k, v in per_t.items()} for c in ("BG-Er", "Fine-Er", "FG-Er")},
                   args.out / "shares.png", "error sources per transform (share of errors)", "share")
    rows = []
    picks = [i for i in range(len(ds)) if i % (12 * n_backgrounds) < 12][:12]  # background 0
    for i in picks[:12]:
        img = np.asarray(ds[i]["image"])
        px = clip.pixels([img])
        emb = cci.embed(px)
        out = cci.explain_embeddings(emb, class_embeds[ev.preds[i : i + 1]])
        heat = torch.nn.functional.interpolate(out.maps[:, None], size=img.shape[:2], mode="bilinear",
                                               align_corners=False)[0, 0].numpy()
        rows.append([(ev.transforms[i], img), (ev.categories[i], overlay(img, heat)),
                     ("mask", np.asarray(ds[i]["mask"]))])
    save_panel_grid([sum(rows[j : j + 3], []) for j in range(0, len(rows), 3)], args.out / "overlays.png",
                    title="COVAR variants: image, CCI of the predicted class, mask")

    # 6. numbers and report
    summary = {"model": clip.description, "rows": len(ds), "per_transform": ev.shares, "truth": truth,
               "fg_share_mean": float(ev.fg_share.mean())}
    (args.out / "covar.json").write_text(json.dumps(summary, indent=2))
    lines = [f"# COVAR on the bird world\n\nModel: {clip.description}. {args.objects} birds x "
             f"{n_backgrounds} {'generated' if backgrounds is not None else 'procedural'} backgrounds x 12 variants"
             f" = {len(ds)} images; K = {args.clusters}; "
             f"judge: {args.judge}.\n", "| transform | accuracy | errors | BG-Er | Fine-Er | FG-Er |",
             "|---|---|---|---|---|---|"]
    for name, v in [*per_t.items(), ("all", ev.shares["all"])]:
        lines.append(f"| {name} | {v['accuracy']:.3f} | {int(v['errors'])} | {v['BG-Er']:.3f} | "
                     f"{v['Fine-Er']:.3f} | {v['FG-Er']:.3f} |")
    keys = list(next(iter(truth.values())))
    lines += ["\n## Known truth on the untransformed birds\n", "| method | " + " | ".join(keys) + " |",
              "|---" * (len(keys) + 1) + "|"]
    lines += [f"| {m} | " + " | ".join(f"{v[k]:.3f}" for k in keys) + " |" for m, v in truth.items()]
    lines += ["\n![accuracy and BG-Er](accuracy_bg_er.png)\n", "![shares](shares.png)\n", "![overlays](overlays.png)\n"]
    (args.out / "report.md").write_text("\n".join(lines))
    return 0
