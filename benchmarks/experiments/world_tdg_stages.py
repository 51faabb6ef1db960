"""The generation and the stages of the world TDG experiment (:mod:`.world_tdg`): validate,
quality, substitution, eta sweep, filter agreement, timing, and the contact sheet."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from concept_grounding.judge.validation import substitution_verdicts

from .world_tdg_judges import WorldClipScorer
from .world_tdg_settings import WorldTDGSettings
from .world_tdg_stats import METRICS, mark_guide_positive, summarise_rows

__all__ = [
    "world_guide",
    "generators",
    "run_prompting",
    "run_tdg",
    "vae_roundtrip",
    "validate",
    "guide_colour_prompt",
    "quality",
    "method_prompts",
    "substitution",
    "eta_sweep",
    "filter_agreement",
    "timing",
    "contact_sheet",
]


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


def generators(seeds: list[int]) -> list[Any]:
    """One CPU ``torch.Generator`` per seed (the benchmark's initial noise is drawn on the CPU)."""
    import torch

    return [torch.Generator().manual_seed(int(s)) for s in seeds]


def run_prompting(tdg: Any, prompts: list[str], seeds: list[int], kw: dict, batch: int) -> list[Any]:
    """The prompting-only images of ``prompts`` (:func:`~concept_grounding.tdg.baseline.prompting_images`,
    true CFG against the empty prompt), ``batch`` per call."""
    from concept_grounding.tdg.baseline import prompting_images

    return prompting_images(tdg, prompts, seeds, batch_size=batch, negative_prompt="", **kw)


def run_tdg(
    tdg: Any, refs: list[str], guides: list[str], seeds: list[int], schedule: Any, kw: dict, batch: int
) -> tuple[list, list]:
    """TDG reference and guide images of the pairs ``(refs[i], guides[i])``, ``batch // 2`` pairs per call."""
    r_out, g_out = [], []
    half = max(1, batch // 2)
    for i in range(0, len(refs), half):
        res = tdg(
            refs[i : i + half],
            guides[i : i + half],
            eta_schedule=schedule,
            negative_prompt="",
            generator=generators(seeds[i : i + half]),
            **kw,
        )
        r_out += res.reference_images
        g_out += res.guide_images
    return r_out, g_out


def vae_roundtrip(vae: Any, images: np.ndarray) -> np.ndarray:
    """uint8 (N,H,W,3) -> the VAE's reconstruction of the posterior mean, uint8 (N,H,W,3)."""
    import torch

    x = torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0).to(vae.device, vae.dtype)
    with torch.no_grad():
        rec = torch.cat([vae.decode(vae.encode(x[i : i + 128]).latent_dist.mean).sample for i in range(0, len(x), 128)])
    return ((rec.float().clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).cpu().numpy()


# ----------------------------------------------------------------------------- stages
def validate(world: Any, judge_fn: Any, vae: Any, settings: WorldTDGSettings, pairings: list) -> Any:
    """The judge on held-out exact edits and renders, raw and after the VAE's round trip."""
    from concept_grounding.judge import validate_judge

    return validate_judge(
        judge_fn,
        world,
        pairings,
        per_pairing=settings.validation_edits,
        renders_per_class=settings.validation_renders,
        transforms={"VAE round trip": lambda x: vae_roundtrip(vae, x)} if vae is not None else None,
    )


def guide_colour_prompt(attribute: str) -> str:
    """The colour guide prompt alone: ``"A photo of a bird with {S+}"``."""
    from concept_grounding.tdg.prompts import attribute_text

    return f"A photo of a bird with {attribute_text(attribute)}"


def quality(
    world: Any, tdg: Any, judge_fn: Any, kw: dict, settings: WorldTDGSettings, pairings: list
) -> tuple[dict, list]:
    """Species agreement, prompted attributes found and colour guides showing S+, by the judge."""
    from concept_grounding.tdg.plan import image_seed
    from concept_grounding.tdg.prompts import attribute_category
    from concept_grounding.vocabulary import class_display_name
    from concept_grounding.worldflux.captions import caption_phrase, phrase_attributes

    vocab = world.vocab
    rng = np.random.default_rng(settings.seed)
    prompts, seeds, labels = [], [], []
    for c, name in enumerate(world.class_names):
        for i in range(settings.quality_images):
            prompts.append(f"a photo of a {class_display_name(name)}")
            seeds.append(image_seed(settings.seed, name, "species", i))
            labels.append(c)
    attr_prompts, attr_seeds, attr_targets = [], [], []
    for c, name in enumerate(world.class_names):
        options = phrase_attributes(world.class_attributes[c], world)
        for i in rng.choice(len(options), size=min(3, len(options)), replace=False):
            a = options[int(i)]
            attr_prompts.append(f"a photo of a {class_display_name(name)} with {caption_phrase(a)}")
            attr_seeds.append(image_seed(settings.seed, name, a, 0))
            attr_targets.append(vocab.attribute_index(a))
    colours = sorted({a for _, a in pairings if attribute_category(a, vocab) == "colour"}, key=vocab.attribute_index)
    guide_prompts = [guide_colour_prompt(a) for a in colours for _ in range(settings.quality_images)]
    guide_seeds = [image_seed(settings.seed, "guide", a, i) for a in colours for i in range(settings.quality_images)]
    guide_targets = [vocab.attribute_index(a) for a in colours for _ in range(settings.quality_images)]
    ims = run_prompting(tdg, prompts, seeds, kw, settings.batch)
    species, _ = judge_fn(ims)
    aims = run_prompting(tdg, attr_prompts, attr_seeds, kw, settings.batch)
    _, aprobs = judge_fn(aims)
    gims = run_prompting(tdg, guide_prompts, guide_seeds, kw, settings.batch)
    _, gprobs = judge_fn(gims)
    groups = np.array([vocab.group_of(t) for t in guide_targets])
    guide_found = gprobs[np.arange(len(gims)), guide_targets] > 0.5
    res = {
        "species_agreement": float(np.mean(species == np.asarray(labels))),
        "prompted_attributes_found": float(np.mean(aprobs[np.arange(len(aims)), attr_targets] > 0.5)),
        "guide_s_plus_shown": float(np.mean(guide_found)),
        "guide_s_plus_shown_per_group": {g: float(np.mean(guide_found[groups == g])) for g in np.unique(groups)},
        "n_species_images": len(ims),
        "n_attribute_images": len(aims),
        "n_guide_images": len(gims),
        "chance_species": 1.0 / world.num_classes,
    }
    return res, ims


def method_prompts(world: Any, c: str, a: str) -> dict[str, Any]:
    """The TDG prompt pairs of one pairing by method: ``tdg`` (colour: the generic "bird"
    guide; pattern / shape: a world species with the attribute), and for pattern / shape
    also ``tdg-app-b`` (SUB App. B's guide bird, where it lists one) and ``tdg-bird``."""
    from concept_grounding.tdg.prompts import attribute_category, tdg_prompts

    vocab = world.vocab
    out = {"tdg": tdg_prompts(c, a, guide_bird=world_guide(world, c, a) or None, vocab=vocab)}
    if attribute_category(a, vocab) != "colour":
        if vocab.sub_guidance_birds.get(a):
            out["tdg-app-b"] = tdg_prompts(c, a, vocab=vocab)
        out["tdg-bird"] = tdg_prompts(c, a, guide_bird="bird", vocab=vocab)
    return out


def substitution(
    world: Any, tdg: Any, judge_fn: Any, kw: dict, settings: WorldTDGSettings, pairings: list
) -> dict[str, Any]:
    """Prompting vs TDG for every pairing; per-image records (with the guide's verdict)."""
    from tqdm.auto import tqdm

    from concept_grounding.tdg.plan import image_seed
    from concept_grounding.tdg.schedule import schedule_for_attribute

    vocab = world.vocab
    by_attr: dict[str, list[str]] = defaultdict(list)
    for c, a in pairings:
        by_attr[a].append(c)
    records: list[dict] = []
    images: dict[str, list] = defaultdict(list)
    for attribute, classes in tqdm(list(by_attr.items()), desc="substitution"):
        j = vocab.attribute_index(attribute)
        group = vocab.group_of(j)
        jobs: dict[str, list] = defaultdict(list)
        for c in classes:
            label = world.class_names.index(c)
            removed = [vocab.attributes[i] for i in vocab.groups[group] if world.class_attributes[label, i]]
            for method, pr in method_prompts(world, c, attribute).items():
                for i in range(settings.images):
                    jobs[method].append(
                        (
                            pr,
                            image_seed(settings.seed, c, attribute, i),
                            {
                                "reference_class": c,
                                "target_attribute": attribute,
                                "group": group,
                                "label": label,
                                "removed_attributes": removed,
                                "reference_prompt": pr.reference,
                                "guide_prompt": pr.guide,
                                "image_index": i,
                            },
                        )
                    )
        runs = {
            "prompting": (
                run_prompting(
                    tdg, [pr.reference for pr, _, _ in jobs["tdg"]], [s for _, s, _ in jobs["tdg"]], kw, settings.batch
                ),
                None,
                jobs["tdg"],
            )
        }
        for method, job in jobs.items():
            refs, guides = run_tdg(
                tdg,
                [pr.reference for pr, _, _ in job],
                [pr.guide for pr, _, _ in job],
                [s for _, s, _ in job],
                schedule_for_attribute(attribute),
                kw,
                settings.batch,
            )
            runs[method] = (refs, guides, job)
        for method, (ims, guide_ims, job) in runs.items():
            meta = [m for _, _, m in job]
            v = substitution_verdicts(
                *judge_fn(ims),
                np.array([m["label"] for m in meta]),
                np.full(len(meta), j),
                [[vocab.attribute_index(r) for r in m["removed_attributes"]] for m in meta],
            )
            g_probs = judge_fn(guide_ims)[1] if guide_ims is not None else None
            for k, m in enumerate(meta):
                rec = {
                    **m,
                    "method": method,
                    **{key: (float(v[key][k]) if key == "p_s_plus" else bool(v[key][k])) for key in METRICS},
                    "image_id": len(images[method]) + k,
                }
                if g_probs is not None:
                    rec["guide_s_plus"] = bool(g_probs[k, j] > 0.5)
                    rec["guide_image_id"] = len(images[method + ":guide"]) + k
                records.append(rec)
            images[method] += ims
            if guide_ims is not None:
                images[method + ":guide"] += guide_ims
    mark_guide_positive(records)
    return {"records": records, "images": dict(images)}


def eta_sweep(
    world: Any,
    tdg: Any,
    judge_fn: Any,
    kw: dict,
    settings: WorldTDGSettings,
    pairings: list,
    validated: tuple[str, ...],
) -> dict:
    """TDG at constant eta values and the paper schedules on an even subset of the pairings
    of the judge's validated groups: S+ found, species kept, success and mean p(S+)."""
    from concept_grounding.tdg.plan import image_seed
    from concept_grounding.tdg.prompts import tdg_prompts
    from concept_grounding.tdg.schedule import ConstantEta, schedule_for_attribute

    vocab = world.vocab
    pairings = [(c, a) for c, a in pairings if vocab.group_of(vocab.attribute_index(a)) in validated]
    step = max(1, len(pairings) // max(1, settings.sweep_pairings))
    subset = pairings[::step][: settings.sweep_pairings]
    sweep: list[tuple[str, Any]] = [(f"constant eta={e:g}", e) for e in settings.sweep_etas] + [
        ("paper schedule", None)
    ]
    results = {}
    prompts = {(c, a): tdg_prompts(c, a, guide_bird=world_guide(world, c, a) or None, vocab=vocab) for c, a in subset}
    for label, eta in sweep:
        groups: dict[Any, list] = defaultdict(list)
        for c, a in subset:
            groups[ConstantEta(eta) if eta is not None else schedule_for_attribute(a)].append((c, a))
        rows = []
        for sched, pairs in groups.items():
            ims, _ = run_tdg(
                tdg,
                [prompts[p].reference for p in pairs],
                [prompts[p].guide for p in pairs],
                [image_seed(settings.seed, c, a, 0) for c, a in pairs],
                sched,
                kw,
                settings.batch,
            )
            v = substitution_verdicts(
                *judge_fn(ims),
                np.array([world.class_names.index(c) for c, _ in pairs]),
                np.array([vocab.attribute_index(a) for _, a in pairs]),
                [()] * len(pairs),
            )
            rows += [
                {"reference_class": c, "target_attribute": a, **{key: v[key][k] for key in METRICS}}
                for k, (c, a) in enumerate(pairs)
            ]
        results[label] = summarise_rows(rows, settings.bootstrap, settings.seed)
    return {"pairings": len(subset), "results": results}


def filter_agreement(world: Any, sub: dict, clip: Any, settings: WorldTDGSettings, pairings: list) -> dict[str, Any]:
    """The VQA filter (world-CLIP scorer) against the judge, and the scorer validated on exact edits."""
    from concept_grounding.judge import validate_scorer_on_world
    from concept_grounding.judge.stats import auroc
    from concept_grounding.tdg.filter import filter_records, group_options, vqa_question

    vocab = world.vocab
    scorer = WorldClipScorer(clip, clip.tokenizer)
    out: dict[str, Any] = {"scorer_validation": validate_scorer_on_world(scorer, world, pairings).to_dict()}
    for method in ("prompting", "tdg"):
        rows = [r for r in sub["records"] if r["method"] == method]
        ims = sub["images"][method]

        def probs_for(recs: list[dict], question: str, options: list[str]) -> np.ndarray:
            # filter_records below calls it within this method's iteration
            return scorer.score([ims[r["image_id"]] for r in recs], question, options, recs[0]["group"])  # noqa: B023

        result = filter_records(rows, probs_for, keep_fraction=0.1, vocab=vocab)
        kept_ids = {r["image_id"] for r in result.kept}
        target_p = np.zeros(len(rows))
        by_group: dict[str, list[int]] = defaultdict(list)
        for k, r in enumerate(rows):
            by_group[r["group"]].append(k)
        for group, ks in by_group.items():
            options = group_options(group, vocab)
            probs = scorer.score([ims[rows[k]["image_id"]] for k in ks], vqa_question(group, options), options, group)
            values = [vocab.attributes[i] for i in vocab.groups[group]]
            for k, pr in zip(ks, probs):
                target_p[k] = pr[values.index(rows[k]["target_attribute"])]
        success = np.array([r["success"] for r in rows], bool)
        splus = np.array([r["s_plus_found"] for r in rows], bool)
        kept = np.array([r["image_id"] in kept_ids for r in rows], bool)
        out[method] = {
            "kept": int(kept.sum()),
            "images": len(rows),
            "judge_success_all": float(success.mean()),
            "judge_success_kept": float(success[kept].mean()) if kept.any() else float("nan"),
            "judge_s_plus_kept": float(splus[kept].mean()) if kept.any() else float("nan"),
            "auroc_filter_p_vs_judge_s_plus": auroc(target_p, splus),
        }
    return out


def timing(flux: Any, tdg: Any, kw: dict, rounds: int = 9) -> dict[str, Any]:
    """One TDG pair vs FluxPipeline on the same two prompts in one batch (same initial latents,
    negative prompt, steps), timed by :func:`concept_grounding.tdg.timing.interleave`: a warm-up
    call each, then ``rounds`` rounds in rotating order; CPU time (one torch thread) and wall
    time; the ratio is the median of the per-round ratios. An A/A control (FluxPipeline
    against itself) shows the run's noise floor."""
    import torch

    from concept_grounding.tdg.schedule import EtaSchedule
    from concept_grounding.tdg.timing import interleave

    reference, guide = "a photo of a Blue Jay", "a photo of a bird"
    channels = tdg.transformer.config.in_channels // 4
    latents, _ = tdg.prepare_latents(
        1,
        channels,
        kw["height"],
        kw["width"],
        tdg.transformer.dtype,
        tdg._execution_device,
        torch.Generator().manual_seed(0),
    )

    def run_flux() -> None:
        flux([reference, guide], negative_prompt=["", ""], latents=torch.cat([latents, latents]), **kw)

    calls = {
        "tdg": lambda: tdg(reference, guide, eta_schedule=EtaSchedule(), negative_prompt="", latents=latents, **kw),
        "flux": run_flux,
        "flux (A/A)": run_flux,
    }
    ratios = {"tdg / flux": ("tdg", "flux"), "A/A": ("flux (A/A)", "flux")}
    result = interleave(calls, rounds=rounds, warmup=1)
    cpu = result.ratio("tdg", "flux", "cpu")
    return {
        "tdg_pair_s": result.timings["tdg"].spread("cpu").median,
        "flux_batch2_s": result.timings["flux"].spread("cpu").median,
        "ratio": cpu.median,
        "ratio_min": cpu.min,
        "ratio_max": cpu.max,
        "ratio_wall": result.ratio("tdg", "flux", "wall").median,
        "ratio_aa": result.ratio("flux (A/A)", "flux", "cpu").median,
        "rounds": rounds,
        "details": result.as_dict(ratios),
    }


def contact_sheet(sub: dict, path: Path, rows: int = 10) -> None:
    """Rows: ``rows`` pairings spread over the run; columns: prompting c_R, TDG reference, TDG
    guide, each with the judge's verdict under it (S+ found? species kept?; the guide: S+ found?)."""
    from concept_grounding.judge.validation import verdict_caption
    from concept_grounding.plotting import verdict_sheet
    from concept_grounding.vocabulary import attribute_phrase, class_display_name

    recs = [r for r in sub["records"] if r["method"] == "tdg"]
    picks = recs[:: max(1, len(recs) // rows)][:rows]
    prompted = {
        (r["reference_class"], r["target_attribute"], r["image_index"]): r
        for r in sub["records"]
        if r["method"] == "prompting"
    }
    images, captions = [], []
    for r in picks:
        base = prompted[(r["reference_class"], r["target_attribute"], r["image_index"])]
        images.append(
            [
                sub["images"]["prompting"][base["image_id"]],
                sub["images"]["tdg"][r["image_id"]],
                sub["images"]["tdg:guide"][r["guide_image_id"]],
            ]
        )
        captions.append(
            [
                verdict_caption(base["s_plus_found"], base["species_kept"]),
                verdict_caption(r["s_plus_found"], r["species_kept"]),
                verdict_caption(r["guide_s_plus"]),
            ]
        )
    labels = [f"{class_display_name(r['reference_class'])}\n+ {attribute_phrase(r['target_attribute'])}" for r in picks]
    verdict_sheet(
        images,
        captions,
        labels,
        ["prompting only (c_R)", "TDG reference", "TDG guide"],
        path,
        title="Judge's verdicts (green: S+ found and species kept)",
    )
