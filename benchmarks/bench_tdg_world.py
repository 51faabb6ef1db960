"""SUB's central claim where the truth is known: TDG vs prompting on the world-trained Flux.

One command reproduces the table (README results, issue 15)::

    .venv/bin/python benchmarks/bench_tdg_world.py --out reports/tdg_world

Steps (all seeded):

1. **Judges**, trained on real bird-world renders at the generator's resolution: a joint
   concept bottleneck model over every attribute the world renders (its class head is the
   33-way species classifier, its concept head the attribute oracle), and the world CLIP
   (:func:`~concept_grounding.models.clip.train_world_clip`), used as the VQA filter's
   scorer (no pretrained VLM can be downloaded here; the filter code is the project's own).
2. **Quality** on in-distribution prompts: ``a photo of a {species}`` (species top-1
   agreement, chance 1/33) and ``a photo of a {species} with {S}`` for class-level
   attributes ``S`` of the species (fraction of prompted attributes the oracle finds), next
   to the same figures on real held-out renders.
3. **Substitution** for every SUB pairing of the world (a species x an S+ it lacks; every one
   held out of the generator's training), ``--images`` images each, ``prompting`` (c_R alone,
   no tie) vs ``tdg`` (c_R tied to c_G, SUB's schedule per category) with the same seeds and
   steps. Success = the oracle finds S+ (p > 0.5) and the species classifier keeps the
   reference species; S- removal = the oracle finds none of the class's S- values.
   Per attribute (pairings pooled) and overall, with 95 % bootstrap intervals over pairings.
   Guide birds for pattern / shape attributes are world species that have the attribute at
   class level (SUB App. B's real-world guides do not exist or lack it in the world).
4. **Eta sweep** on a subset of pairings: constant eta values and the paper schedule.
5. **VQA filter** (``tdg.filter.filter_records`` with the world-CLIP scorer) on both sets:
   precision of the kept images (oracle success among kept) vs all, and the AUROC of the
   filter's target probability for the oracle's S+ verdict.
6. **Time**: one TDG pair vs one FluxPipeline call on 2 prompts, same steps, as a ratio.

Writes ``report.md``, ``results.json`` and ``contact_sheet.png`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from concept_grounding.worldflux.loader import WORLD_STEPS, WORLD_TRUE_CFG  # noqa: E402  (no torch at import)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--pipeline", type=Path, default=None, help="world Flux folder (default: the shipped one)")
    p.add_argument("--images", type=int, default=1, help="images per SUB pairing and method")
    p.add_argument("--quality-images", type=int, default=4, help="images per species for the quality prompts")
    p.add_argument("--steps", type=int, default=WORLD_STEPS, help="sampling steps (both methods)")
    p.add_argument("--cfg", type=float, default=WORLD_TRUE_CFG, help="true CFG scale against the empty prompt (both methods)")
    p.add_argument("--sweep-pairings", type=int, default=96, help="pairings in the eta sweep")
    p.add_argument("--sweep-etas", type=float, nargs="*", default=[0.0, 0.5, 0.8, 0.95, 1.0])
    p.add_argument("--judge-train", type=int, default=80, help="real renders per species to train the judges")
    p.add_argument("--judge-test", type=int, default=20, help="real held-out renders per species")
    p.add_argument("--judge-epochs", type=int, default=12)
    p.add_argument("--bootstrap", type=int, default=1000)
    p.add_argument("--batch", type=int, default=64, help="images per pipeline call")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit-pairings", type=int, default=None, help="debug: only the first N pairings")
    p.add_argument("--judges-only", action="store_true", help="train and cache the judges (under --out), then stop")
    p.add_argument("--size", type=int, default=32, help="judge resolution with --judges-only (else the pipeline's)")
    args = p.parse_args(argv)
    for name in ("images", "quality_images", "steps", "judge_train", "judge_test", "judge_epochs", "batch", "threads"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be > 0")
    if args.pipeline is not None and not (args.pipeline / "model_index.json").is_file():
        p.error(f"--pipeline: {args.pipeline} has no model_index.json")
    return args


# ----------------------------------------------------------------------------- statistics
def bootstrap_ci(values: np.ndarray, clusters: np.ndarray, n: int = 1000, seed: int = 0) -> tuple[float, float]:
    """95 % percentile interval of the mean of ``values``, resampling whole ``clusters``.

    >>> lo, hi = bootstrap_ci(np.array([0.0, 1.0] * 50), np.arange(100), 500)
    >>> 0.35 < lo < 0.5 < hi < 0.65
    True
    """
    values, clusters = np.asarray(values, float), np.asarray(clusters)
    if values.size == 0:
        return float("nan"), float("nan")
    keys, inverse = np.unique(clusters, return_inverse=True)
    sums = np.bincount(inverse, weights=values, minlength=len(keys))
    counts = np.bincount(inverse, minlength=len(keys)).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(len(keys), size=(n, len(keys)))
    means = sums[draws].sum(1) / counts[draws].sum(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (ties counted half); nan if one class is missing.

    >>> auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]))
    0.75
    """
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = scores[labels], scores[~labels]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def summarise(values: np.ndarray, clusters: np.ndarray, n: int, seed: int) -> dict[str, float]:
    lo, hi = bootstrap_ci(values, clusters, n, seed)
    return {"mean": float(np.mean(values)) if len(values) else float("nan"), "ci95": [lo, hi], "n": int(len(values))}


# ----------------------------------------------------------------------------- judges
def real_split(world: Any, start: int, count: int) -> dict[str, np.ndarray]:
    """Renders ``c + k * C`` for ``k in [start, start + count)``: images (N,H,W,3), labels, attributes."""
    idx = [c + k * world.num_classes for k in range(start, start + count) for c in range(world.num_classes)]
    ims, labels, attrs = [], [], []
    for s in world.samples(idx):
        ims.append(s.image)
        labels.append(s.label)
        attrs.append(s.attributes)
    return {"images": np.stack(ims), "labels": np.asarray(labels), "attributes": np.stack(attrs)}


def to_unit(images: Any) -> Any:
    """uint8 (N,H,W,3) array or list of PIL images -> float (N,3,H,W) in [0, 1]."""
    import torch

    arr = np.stack([np.asarray(im.convert("RGB")) if hasattr(im, "convert") else np.asarray(im) for im in images])
    return torch.from_numpy(arr).permute(0, 3, 1, 2).float() / 255.0


def train_judges(world: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Joint CBM (species + attribute oracle) and world CLIP, trained on real renders."""
    import datasets
    import torch

    from concept_grounding.models import train_cbm
    from concept_grounding.models.clip import train_world_clip
    from concept_grounding.models.data import ConceptTensors
    from concept_grounding.world.dataset import sample_row
    from concept_grounding.schema import cub_features

    columns = tuple(world.rendered_attributes)
    train = real_split(world, 1000, args.judge_train)  # indices far from the generator's training renders
    test = real_split(world, 1000 + args.judge_train, args.judge_test)
    tensors = ConceptTensors(
        to_unit(train["images"]),
        torch.from_numpy(train["attributes"][:, list(columns)].astype(np.float32)),
        torch.from_numpy(train["labels"]).long(),
        concept_indices=columns,
        concept_names=tuple(world.vocab.attributes[i] for i in columns),
    )
    cbm = train_cbm(tensors, mode="joint", epochs=args.judge_epochs, seed=args.seed)
    # world CLIP: needs a cub_features split
    idx = [c + k * world.num_classes for k in range(1000, 1000 + args.judge_train) for c in range(world.num_classes)]
    rows = [sample_row(world, s, True) for s in world.samples(idx)]
    features = cub_features(world.class_names, world.vocab)
    ds = datasets.Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)
    clip, tokenizer = train_world_clip(ds, image_size=world.config.image_size, epochs=args.judge_epochs, seed=args.seed)
    return {"cbm": cbm, "columns": columns, "clip": clip, "clip_tokenizer": tokenizer, "test": test}


def cached_judges(world: Any, args: argparse.Namespace) -> dict[str, Any]:
    """:func:`train_judges`, cached as ``save_pretrained`` folders (safetensors, no pickles) in
    ``<out>/judges-<settings>/``; the columns and the test split are rebuilt from the world."""
    from concept_grounding.models import ConceptBottleneckModel
    from concept_grounding.models.clip import WorldCLIP

    folder = args.out / f"judges-s{world.config.image_size}-n{args.judge_train}-t{args.judge_test}-e{args.judge_epochs}-seed{args.seed}"
    if (folder / "cbm").is_dir() and (folder / "clip").is_dir():
        clip = WorldCLIP.from_pretrained(folder / "clip").eval()
        return {"cbm": ConceptBottleneckModel.from_pretrained(folder / "cbm").eval(),
                "columns": tuple(world.rendered_attributes), "clip": clip, "clip_tokenizer": clip.tokenizer,
                "test": real_split(world, 1000 + args.judge_train, args.judge_test)}
    judges = train_judges(world, args)
    judges["cbm"].save_pretrained(folder / "cbm")
    judges["clip"].save_pretrained(folder / "clip")
    return judges


def judge(judges: dict[str, Any], images: Any, num_attributes: int) -> tuple[np.ndarray, np.ndarray]:
    """(species argmax (N,), attribute probabilities (N, 312), 0.5 off the judged columns)."""
    from concept_grounding.models.base import predict

    out = predict(judges["cbm"], to_unit(images))
    probs = np.full((out.concept_probs.shape[0], num_attributes), 0.5)
    probs[:, list(judges["columns"])] = out.concept_probs.numpy()
    return out.class_logits.argmax(1).numpy(), probs


class WorldClipScorer:
    """The filter's ``OptionScorer`` over the world CLIP: softmax of 100 x the cosine
    similarities with the group's value prompts and "a photo of a bird" for "Other"."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer

    def score(self, images: Any, question: str, options: Any, group: str) -> np.ndarray:
        import torch

        from concept_grounding.models.clip import clip_group_scores

        sims = clip_group_scores(self.model, self.tokenizer, to_unit(images), group, include_none=True)
        if sims.shape[1] != len(options):
            raise ValueError(f"options: expected {sims.shape[1]}, got {len(options)}")
        return torch.softmax(100.0 * sims, dim=1).numpy()


# ----------------------------------------------------------------------------- generation
def world_guide(world: Any, reference: str, attribute: str) -> str | None:
    """A world species (display name) with ``attribute`` at class level, not ``reference``."""
    from concept_grounding.tdg.prompts import attribute_category
    from concept_grounding.vocabulary import class_display_name

    if attribute_category(attribute, world.vocab) == "colour":
        return None
    j = world.vocab.attribute_index(attribute)
    for name, row in zip(world.class_names, world.class_attributes):
        if row[j] and name != reference:
            return class_display_name(name)
    return None


def call_kwargs(pipe: Any, args: argparse.Namespace) -> dict[str, Any]:
    from concept_grounding.worldflux import world_flux_call_kwargs

    return world_flux_call_kwargs(pipe, true_cfg_scale=args.cfg, num_inference_steps=args.steps)


def generators(seeds: list[int]) -> list[Any]:
    import torch

    return [torch.Generator().manual_seed(int(s)) for s in seeds]


def run_prompting(flux: Any, prompts: list[str], seeds: list[int], kw: dict, batch: int) -> list[Any]:
    out = []
    for i in range(0, len(prompts), batch):
        p = prompts[i : i + batch]
        out += flux(p, negative_prompt=[""] * len(p), generator=generators(seeds[i : i + batch]), **kw).images
    return out


def run_tdg(tdg: Any, refs: list[str], guides: list[str], seeds: list[int], schedule: Any, kw: dict, batch: int) -> tuple[list, list]:
    r_out, g_out = [], []
    half = max(1, batch // 2)
    for i in range(0, len(refs), half):
        res = tdg(refs[i : i + half], guides[i : i + half], eta_schedule=schedule, negative_prompt="",
                  generator=generators(seeds[i : i + half]), **kw)
        r_out += res.reference_images
        g_out += res.guide_images
    return r_out, g_out


def vae_roundtrip(vae: Any, images: np.ndarray) -> np.ndarray:
    """uint8 (N,H,W,3) -> the VAE's reconstruction of the posterior mean, uint8 (N,H,W,3)."""
    import torch

    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0).to(vae.dtype)
    with torch.no_grad():
        rec = torch.cat([vae.decode(vae.encode(x[i : i + 128]).latent_dist.mean).sample for i in range(0, len(x), 128)])
    return ((rec.float().clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).numpy()


# ----------------------------------------------------------------------------- stages
def quality(world: Any, flux: Any, judges: dict, kw: dict, args: argparse.Namespace) -> tuple[dict, list]:
    from concept_grounding.tdg.generate import image_seed
    from concept_grounding.vocabulary import class_display_name
    from concept_grounding.worldflux.captions import _phrase, phrase_attributes

    rng = np.random.default_rng(args.seed)
    prompts, seeds, labels = [], [], []
    for c, name in enumerate(world.class_names):
        for i in range(args.quality_images):
            prompts.append(f"a photo of a {class_display_name(name)}")
            seeds.append(image_seed(args.seed, name, "species", i))
            labels.append(c)
    attr_prompts, attr_seeds, attr_targets, attr_labels = [], [], [], []
    for c, name in enumerate(world.class_names):
        options = phrase_attributes(world.class_attributes[c], world)
        for i in rng.choice(len(options), size=min(3, len(options)), replace=False):
            a = options[int(i)]
            attr_prompts.append(f"a photo of a {class_display_name(name)} with {_phrase(a)}")
            attr_seeds.append(image_seed(args.seed, name, a, 0))
            attr_targets.append(world.vocab.attribute_index(a))
            attr_labels.append(c)
    ims = run_prompting(flux, prompts, seeds, kw, args.batch)
    species, _ = judge(judges, ims, world.vocab.num_attributes)
    aims = run_prompting(flux, attr_prompts, attr_seeds, kw, args.batch)
    aspecies, aprobs = judge(judges, aims, world.vocab.num_attributes)
    found = aprobs[np.arange(len(aims)), attr_targets] > 0.5
    test = judges["test"]
    rspecies, rprobs = judge(judges, test["images"], world.vocab.num_attributes)
    # real renders: the same (species, attribute) prompts, judged on that species' test renders
    real_found = [
        float(np.mean(rprobs[test["labels"] == c, j] > 0.5)) for c, j in zip(attr_labels, attr_targets)
    ]
    rec_species, rec_probs = judge(judges, vae_roundtrip(flux.vae, test["images"]), world.vocab.num_attributes)
    rec_found = [float(np.mean(rec_probs[test["labels"] == c, j] > 0.5)) for c, j in zip(attr_labels, attr_targets)]
    res = {
        "species_accuracy_vae_reconstructions": float(np.mean(rec_species == test["labels"])),
        "attribute_agreement_vae_reconstructions": float(np.mean(rec_found)),
        "species_agreement_generated": float(np.mean(species == np.asarray(labels))),
        "species_agreement_generated_attribute_prompts": float(np.mean(aspecies == np.asarray(attr_labels))),
        "attribute_agreement_generated": float(np.mean(found)),
        "species_accuracy_real": float(np.mean(rspecies == test["labels"])),
        "attribute_agreement_real": float(np.mean(real_found)),
        "n_species_images": len(ims),
        "n_attribute_images": len(aims),
        "n_real_images": int(len(test["labels"])),
        "chance_species": 1.0 / world.num_classes,
    }
    return res, ims


def substitution(world: Any, flux: Any, tdg: Any, judges: dict, kw: dict, args: argparse.Namespace) -> dict[str, Any]:
    """Prompting vs TDG for every SUB pairing; per-image records for the report and the filter."""
    from concept_grounding.tdg.generate import image_seed
    from concept_grounding.tdg.prompts import tdg_prompts
    from concept_grounding.tdg.schedule import schedule_for_attribute
    from tqdm.auto import tqdm

    vocab = world.vocab
    pairings = world.default_pairings()
    if args.limit_pairings:
        pairings = pairings[: args.limit_pairings]
    by_attr: dict[str, list[str]] = defaultdict(list)
    for c, a in pairings:
        by_attr[a].append(c)
    records: list[dict] = []
    images: dict[str, list] = {"prompting": [], "tdg": [], "guide": []}
    for attribute, classes in tqdm(list(by_attr.items()), desc="substitution"):
        j = vocab.attribute_index(attribute)
        group = vocab.group_of(j)
        refs, guides, seeds, meta = [], [], [], []
        for c in classes:
            p = tdg_prompts(c, attribute, guide_bird=world_guide(world, c, attribute) or None, vocab=vocab)
            label = world.class_names.index(c)
            removed = [vocab.attributes[i] for i in vocab.groups[group] if world.class_attributes[label, i]]
            for i in range(args.images):
                refs.append(p.reference)
                guides.append(p.guide)
                seeds.append(image_seed(args.seed, c, attribute, i))
                meta.append({"reference_class": c, "target_attribute": attribute, "label": label, "removed": removed,
                             "reference_prompt": p.reference, "guide_prompt": p.guide, "image_index": i})
        prompted = run_prompting(flux, refs, seeds, kw, args.batch)
        tied, guide_ims = run_tdg(tdg, refs, guides, seeds, schedule_for_attribute(attribute), kw, args.batch)
        for method, ims in (("prompting", prompted), ("tdg", tied)):
            species, probs = judge(judges, ims, vocab.num_attributes)
            for m, s, pr, im in zip(meta, species, probs, ims):
                splus = bool(pr[j] > 0.5)
                kept = bool(s == m["label"])
                sminus = [bool(pr[vocab.attribute_index(r)] <= 0.5) for r in m["removed"]]
                records.append({**{k: v for k, v in m.items() if k != "removed"}, "method": method,
                                "removed_attributes": m["removed"], "s_plus_found": splus, "species_kept": kept,
                                "success": splus and kept, "s_minus_removed": all(sminus) if sminus else True,
                                "p_s_plus": float(pr[j]), "image_id": len(images[method])})
            images[method] += ims
        images["guide"] += guide_ims
    return {"records": records, "images": images, "pairings": pairings}


def table(records: list[dict], args: argparse.Namespace, vocab: Any) -> dict[str, Any]:
    """Per-attribute and overall success / S+ / species / S- rates with bootstrap intervals."""
    out: dict[str, Any] = {"overall": {}, "per_attribute": {}, "per_pairing": {}}
    for method in ("prompting", "tdg"):
        rows = [r for r in records if r["method"] == method]
        clusters = np.array([f"{r['reference_class']}|{r['target_attribute']}" for r in rows])
        res = {}
        for key in ("success", "s_plus_found", "species_kept", "s_minus_removed"):
            res[key] = summarise(np.array([r[key] for r in rows], float), clusters, args.bootstrap, args.seed)
        out["overall"][method] = res
        for attribute in sorted({r["target_attribute"] for r in rows}, key=vocab.attribute_index):
            sub = [r for r in rows if r["target_attribute"] == attribute]
            cl = np.array([r["reference_class"] for r in sub])
            out["per_attribute"].setdefault(attribute, {})[method] = {
                key: summarise(np.array([r[key] for r in sub], float), cl, args.bootstrap, args.seed)
                for key in ("success", "s_minus_removed")
            }
        for r in rows:
            key = f"{r['reference_class']}|{r['target_attribute']}"
            out["per_pairing"].setdefault(key, {}).setdefault(method, []).append(r["success"])
    for key, d in out["per_pairing"].items():
        out["per_pairing"][key] = {m: float(np.mean(v)) for m, v in d.items()}
    return out


def eta_sweep(world: Any, flux: Any, tdg: Any, judges: dict, kw: dict, args: argparse.Namespace, pairings: list) -> dict:
    from concept_grounding.tdg.generate import image_seed
    from concept_grounding.tdg.prompts import tdg_prompts
    from concept_grounding.tdg.schedule import ConstantEta, schedule_for_attribute

    vocab = world.vocab
    step = max(1, len(pairings) // max(1, args.sweep_pairings))
    subset = pairings[::step][: args.sweep_pairings]
    settings: list[tuple[str, Any]] = [(f"constant eta={e:g}", e) for e in args.sweep_etas] + [("paper schedule", None)]
    results = {}
    prompts = {(c, a): tdg_prompts(c, a, guide_bird=world_guide(world, c, a) or None, vocab=vocab) for c, a in subset}
    for label, eta in settings:
        # one batched call per schedule (a constant eta is one schedule; the paper's depends on the category)
        groups: dict[Any, list] = defaultdict(list)
        for c, a in subset:
            groups[ConstantEta(eta) if eta is not None else schedule_for_attribute(a)].append((c, a))
        hits, clusters = [], []
        for sched, pairs in groups.items():
            ims, _ = run_tdg(tdg, [prompts[p].reference for p in pairs], [prompts[p].guide for p in pairs],
                             [image_seed(args.seed, c, a, 0) for c, a in pairs], sched, kw, args.batch)
            species, probs = judge(judges, ims, vocab.num_attributes)
            for (c, a), sp, pr in zip(pairs, species, probs):
                hits.append(float(pr[vocab.attribute_index(a)] > 0.5 and sp == world.class_names.index(c)))
                clusters.append(f"{c}|{a}")
        results[label] = summarise(np.array(hits), np.array(clusters), args.bootstrap, args.seed)
    return {"pairings": len(subset), "results": results}


def filter_agreement(sub: dict, judges: dict, vocab: Any) -> dict[str, Any]:
    from concept_grounding.tdg.filter import filter_records

    scorer = WorldClipScorer(judges["clip"], judges["clip_tokenizer"])
    out = {}
    for method in ("prompting", "tdg"):
        rows = [r for r in sub["records"] if r["method"] == method]
        ims = sub["images"][method]

        def probs_for(recs: list[dict], question: str, options: list[str]) -> np.ndarray:
            group = vocab.group_of(vocab.attribute_index(recs[0]["target_attribute"]))
            return scorer.score([ims[r["image_id"]] for r in recs], question, options, group)

        result = filter_records(rows, probs_for, keep_fraction=0.1, vocab=vocab)
        kept_ids = {r["image_id"] for r in result.kept}
        # filter's target probability for every image (for AUROC vs the oracle)
        target_p = []
        for r in rows:
            group = vocab.group_of(vocab.attribute_index(r["target_attribute"]))
            values = [vocab.attributes[i] for i in vocab.groups[group]]
            col = values.index(r["target_attribute"])
            from concept_grounding.tdg.filter import group_options, vqa_question

            options = group_options(group, vocab)
            target_p.append(float(scorer.score([ims[r["image_id"]]], vqa_question(group, options), options, group)[0, col]))
        success = np.array([r["success"] for r in rows], bool)
        splus = np.array([r["s_plus_found"] for r in rows], bool)
        kept = np.array([r["image_id"] in kept_ids for r in rows], bool)
        out[method] = {
            "kept": int(kept.sum()),
            "images": int(len(rows)),
            "oracle_success_all": float(success.mean()),
            "oracle_success_kept": float(success[kept].mean()) if kept.any() else float("nan"),
            "oracle_s_plus_kept": float(splus[kept].mean()) if kept.any() else float("nan"),
            "auroc_filter_p_vs_oracle_s_plus": auroc(np.array(target_p), splus),
            "pairings_kept": result.report.get("pairings_kept"),
            "pairings_dropped": result.report.get("pairings_dropped"),
        }
    return out


def timing(flux: Any, tdg: Any, kw: dict, repeats: int = 5) -> dict[str, float]:
    """Median seconds of one TDG pair vs one FluxPipeline call on 2 prompts (same run)."""
    from concept_grounding.tdg.schedule import EtaSchedule

    t_tdg, t_flux = [], []
    for r in range(repeats):
        t = time.perf_counter()
        flux(["a photo of a Blue Jay", "a photo of a bird"], negative_prompt=["", ""], generator=generators([r, r]), **kw)
        t_flux.append(time.perf_counter() - t)
        t = time.perf_counter()
        tdg("a photo of a Blue Jay", "a photo of a bird", eta_schedule=EtaSchedule(), negative_prompt="",
            generator=generators([r]), **kw)
        t_tdg.append(time.perf_counter() - t)
    a, b = float(np.median(t_tdg)), float(np.median(t_flux))
    return {"tdg_pair_s": a, "flux_batch2_s": b, "ratio": a / b}


def contact_sheet(quality_ims: list, sub: dict, world: Any, path: Path, per_row: int = 12) -> None:
    """Row 1-2: quality samples; then prompting / TDG reference / TDG guide triples."""
    from PIL import Image, ImageDraw

    s = world.config.image_size
    scale = 3
    rows = []
    rows.append(quality_ims[:: max(1, len(quality_ims) // per_row)][:per_row])
    recs = [r for r in sub["records"] if r["method"] == "tdg"]
    step = max(1, len(recs) // per_row)
    picks = recs[::step][:per_row]
    rows.append([sub["images"]["prompting"][r["image_id"]] for r in picks])
    rows.append([sub["images"]["tdg"][r["image_id"]] for r in picks])
    rows.append([sub["images"]["guide"][r["image_id"]] for r in picks])
    labels = ["quality: 'a photo of a {species}'", "prompting c_R", "TDG reference", "TDG guide"]
    pad = 14
    sheet = Image.new("RGB", (per_row * s * scale, len(rows) * (s * scale + pad)), "white")
    draw = ImageDraw.Draw(sheet)
    for r, (row, label) in enumerate(zip(rows, labels)):
        y = r * (s * scale + pad)
        draw.text((2, y), label, fill="black")
        for i, im in enumerate(row):
            sheet.paste(im.resize((s * scale, s * scale), Image.NEAREST), (i * s * scale, y + pad))
    sheet.save(path)


def write_report(results: dict, path: Path, vocab: Any) -> None:
    q, ov = results["quality"], results["table"]["overall"]

    def ci(d: dict) -> str:
        return f"{100 * d['mean']:.1f} % [{100 * d['ci95'][0]:.1f}, {100 * d['ci95'][1]:.1f}]"

    lines = [
        "# TDG vs prompting on the world-trained Flux (bench_tdg_world.py)",
        "",
        f"Command: `{results['command']}`; wall time {results['seconds']:.0f} s.",
        "",
        "## Quality on in-distribution prompts",
        "",
        "| judged on | species top-1 agreement (33 classes) | prompted attributes found by the oracle |",
        "|---|---|---|",
        f"| generated ({q['n_species_images']} + {q['n_attribute_images']} images) | {100 * q['species_agreement_generated']:.1f} % "
        f"| {100 * q['attribute_agreement_generated']:.1f} % |",
        f"| real held-out renders ({q['n_real_images']}) | {100 * q['species_accuracy_real']:.1f} % | {100 * q['attribute_agreement_real']:.1f} % |",
        f"| VAE reconstructions of those renders (the decoder's ceiling) | {100 * q['species_accuracy_vae_reconstructions']:.1f} % "
        f"| {100 * q['attribute_agreement_vae_reconstructions']:.1f} % |",
        "",
        f"Quality bar (issue 15): species >= 50 %, attributes >= 75 %: "
        f"**{'met' if q['species_agreement_generated'] >= 0.5 and q['attribute_agreement_generated'] >= 0.75 else 'NOT met'}**.",
        "",
        "## Substitution, every SUB pairing (95 % bootstrap intervals over pairings)",
        "",
        "| method | success (S+ found and species kept) | S+ found | species kept | S- removed |",
        "|---|---|---|---|---|",
    ]
    for m in ("prompting", "tdg"):
        o = ov[m]
        lines.append(f"| {m} | {ci(o['success'])} | {ci(o['s_plus_found'])} | {ci(o['species_kept'])} | {ci(o['s_minus_removed'])} |")
    lines += ["", "### Per attribute (success)", "", "| S+ | pairings | prompting | TDG |", "|---|---|---|---|"]
    for a, d in results["table"]["per_attribute"].items():
        lines.append(f"| {a} | {d['tdg']['success']['n']} | {ci(d['prompting']['success'])} | {ci(d['tdg']['success'])} |")
    lines += ["", f"## Eta sweep ({results['eta_sweep']['pairings']} pairings, success)", "", "| TDG setting | success |", "|---|---|"]
    for k, d in results["eta_sweep"]["results"].items():
        lines.append(f"| {k} | {ci(d)} |")
    lines += ["", "## VQA filter (world-CLIP scorer) vs the oracle", "",
              "| method | kept / images | oracle success, all | oracle success, kept | AUROC(filter p(S+), oracle S+) |", "|---|---|---|---|---|"]
    for m, d in results["filter"].items():
        lines.append(f"| {m} | {d['kept']} / {d['images']} | {100 * d['oracle_success_all']:.1f} % | "
                     f"{100 * d['oracle_success_kept']:.1f} % | {d['auroc_filter_p_vs_oracle_s_plus']:.3f} |")
    t = results["timing"]
    lines += ["", "## Time", "", f"TDG pair {t['tdg_pair_s']:.3f} s vs FluxPipeline batch-2 {t['flux_batch2_s']:.3f} s: "
              f"ratio **{t['ratio']:.2f}** (median of 5, same run).", "", "![contact sheet](contact_sheet.png)", ""]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    from diffusers import FluxPipeline

    from concept_grounding.tdg.pipeline import TiedDiffusionPipeline
    from concept_grounding.world import BirdWorld, WorldConfig
    from concept_grounding.worldflux import load_world_flux

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.judges_only:
        world = BirdWorld(WorldConfig(image_size=args.size, seed=0))
        cached_judges(world, args)
        return 0
    tdg = load_world_flux(args.pipeline, pipeline_cls=TiedDiffusionPipeline)
    flux = FluxPipeline(**{k: v for k, v in tdg.components.items()})
    flux.set_progress_bar_config(disable=True)
    kw = call_kwargs(tdg, args)
    world = BirdWorld(WorldConfig(image_size=kw["height"], seed=0))
    print("training judges ...", flush=True)
    judges = cached_judges(world, args)
    print("quality ...", flush=True)
    q, q_ims = quality(world, flux, judges, kw, args)
    print(json.dumps(q), flush=True)
    sub = substitution(world, flux, tdg, judges, kw, args)
    tab = table(sub["records"], args, world.vocab)
    print(json.dumps(tab["overall"]), flush=True)
    print("eta sweep ...", flush=True)
    sweep = eta_sweep(world, flux, tdg, judges, kw, args, sub["pairings"])
    print("filter ...", flush=True)
    filt = filter_agreement(sub, judges, world.vocab)
    tim = timing(flux, tdg, kw)
    results = {
        "command": "python benchmarks/bench_tdg_world.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "call_kwargs": kw,
        "quality": q,
        "table": tab,
        "eta_sweep": sweep,
        "filter": filt,
        "timing": tim,
        "records": sub["records"],
        "seconds": time.perf_counter() - t0,
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    contact_sheet(q_ims, sub, world, args.out / "contact_sheet.png")
    write_report(results, args.out / "report.md", world.vocab)
    print((args.out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
