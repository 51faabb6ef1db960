"""Why Textual Inversion's V* does not move on the world Flux: each suspect measured on one run.

Trains V* with the learners' own loop (:func:`~concept_grounding.learners.train.prepare_trainer` and
:func:`~concept_grounding.learners.train.training_step`, the rows hooked into both text encoders)
on a concept's world renders and records, every few steps, each encoder's row (norm, gradient, the
vocabulary word it is closest to); then draws ``a photo of V*`` as ConceptBed does (32 px, 20 steps,
true CFG 4) and asks ConceptBed's species oracle which species it sees. Variants change one thing
each: the caption, per-encoder learning rates, diffusers' retraction of the rows, pivotal tuning (V* + LoRA,
as diffusers' advanced Flux script's ``--train_text_encoder_ti``) and LoRA alone; a species the world Flux
learnt is the control. Findings: docs/conceptbed/textual_inversion.md.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from concept_grounding.learners.methods import LORA_TARGETS, LearnerMethod, LoRA, TextualInversion

__all__ = [
    "Variant",
    "PivotalTuning",
    "GenerationSettings",
    "load_world_pipeline",
    "tokenisation",
    "embedding_tables",
    "prepare_variant",
    "set_param_groups",
    "train_variant",
    "generate",
    "species_verdict",
    "named_species_verdicts",
    "retract_rows",
    "loader_roundtrip",
    "variants",
    "concepts",
    "run_one",
    "contact_sheet",
    "merge",
    "results_markdown",
    "main",
]

#: ConceptBed's placeholder and its training caption (``conceptbed.learners.FluxLearner``).
TOKEN = "<v*>"
CONCEPTBED_CAPTION = "a photo of {token}"
#: conceptbed's rate for Textual Inversion on the world Flux (``learners.methods.TextualInversion.world_lr``).
CONCEPTBED_TI_LR = 5e-3


@dataclass(frozen=True)
class Variant:
    """One way of learning V* (every field but ``name`` is a setting the run changes).

    Attributes:
        name: the table's row.
        caption: training caption, ``{token}`` filled in.
        init_word: the word whose row starts V* in both encoders.
        lr: AdamW rate of the rows (the T5 row's when ``per_table_lr``).
        per_table_lr: scale each row's rate by its table's root-mean-square entry over T5's
            (Adam moves every entry by about ``lr`` a step, whatever the table's scale).
        rows: train V*'s rows (``False``: LoRA alone).
        lora_rank: ``> 0``: also train peft LoRA adapters of this rank on the transformer (pivotal tuning).
        lora_lr: the adapters' rate (conceptbed's LoRA rate on the world Flux).
        retract: after each step pull each row's std toward its table's, as diffusers' advanced Flux
            script does (``TokenEmbeddingsHandler.retract_embeddings``: ``row *= (std_table / std_row) ** 0.1``).
        steps: optimisation steps (batch 4, seed 0, as conceptbed).
    """

    name: str
    caption: str = CONCEPTBED_CAPTION
    init_word: str = "bird"
    lr: float = CONCEPTBED_TI_LR
    per_table_lr: bool = False
    rows: bool = True
    lora_rank: int = 0
    lora_lr: float = 1e-3
    retract: bool = False
    steps: int = 300


@dataclass(frozen=True)
class GenerationSettings:
    """How ConceptBed draws V* on the world Flux (``conceptbed.learners.FluxLearner.generate``)."""

    n: int = 16
    seed: int = 0
    size: int = 32
    steps: int = 20
    true_cfg: float = 4.0


def load_world_pipeline() -> Any:
    """The shipped world Flux as a float32 ``FluxPipeline`` on the CPU."""
    import torch
    from diffusers import FluxPipeline

    from concept_grounding.worldflux import world_flux_path

    pipe = FluxPipeline.from_pretrained(world_flux_path(), torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tokenisation(pipe: Any, caption: str) -> dict[str, dict[str, Any]]:
    """Per tokenizer: the caption's tokens and whether V* is one token of it."""
    out = {}
    for name in ("tokenizer", "tokenizer_2"):
        tok = getattr(pipe, name)
        ids = tok(caption).input_ids
        tokens = tok.convert_ids_to_tokens(ids)
        out[name] = {"tokens": tokens, "v_star_one_token": tokens.count(TOKEN) == 1}
    return out


def embedding_tables(pipe: Any) -> dict[str, dict[str, float]]:
    """Per text encoder: the mean norm and the root-mean-square entry of its word rows (specials excluded)."""
    out = {}
    for enc_name, tok_name in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        table = getattr(pipe, enc_name).get_input_embeddings().weight.detach().float()
        special = set(getattr(pipe, tok_name).all_special_ids)
        words = table[[i for i in range(len(getattr(pipe, tok_name).get_vocab())) if i not in special]]
        out[enc_name] = {"word_norm": float(words.norm(dim=1).mean()), "rms": float(words.pow(2).mean().sqrt())}
    return out


def _nearest_word(pipe: Any, enc_name: str, tok_name: str, row: Any) -> tuple[str, float]:
    """The vocabulary word whose row has the highest cosine with ``row`` (V* itself excluded)."""
    import torch

    tok = getattr(pipe, tok_name)
    table = getattr(pipe, enc_name).get_input_embeddings().weight.detach().float()
    cos = torch.nn.functional.cosine_similarity(table, row.detach().float()[None], dim=1)
    cos[tok.convert_tokens_to_ids(TOKEN)] = -2.0
    cos[list(tok.all_special_ids)] = -2.0
    best = int(cos.argmax())
    return tok.convert_ids_to_tokens(best), float(cos[best])


@dataclass
class PivotalTuning(LoRA):
    """V*'s rows and peft LoRA adapters trained together: diffusers' advanced Flux script's pivotal tuning
    (``--train_text_encoder_ti``); with ``train_rows=False``, LoRA alone with V* held at its init word's rows."""

    name: ClassVar[str] = "pivotal_tuning"
    trains_rows: ClassVar[bool] = True
    train_rows: bool = True

    def trainable(self, pipe: Any, placeholder: Any, seed: int) -> dict[str, Any]:
        rows = LearnerMethod.trainable(self, pipe, placeholder, seed)
        if not self.train_rows:
            for row in rows.values():
                row.requires_grad_(False)
            rows = {}
        return {**rows, **LoRA.trainable(self, pipe, placeholder, seed)}


def set_param_groups(trainer: Any, groups: list[dict[str, Any]]) -> None:
    """Give ``trainer`` AdamW over ``groups`` (each ``{"params": [...], "lr": rate}``; the learners' weight decay)
    and its ``config.lr_scheduler`` schedule: the learners build one group of one rate."""
    import torch
    from diffusers.optimization import get_scheduler

    config = trainer.config
    optimizer = torch.optim.AdamW(groups, weight_decay=1e-2)
    trainer.scheduler = get_scheduler(
        config.lr_scheduler,
        optimizer=optimizer,
        num_warmup_steps=config.lr_warmup_steps,
        num_training_steps=config.resolved_steps(),
    )
    trainer.optimizer = trainer.accelerator.prepare(optimizer)


def _method(variant: Variant) -> Any:
    """The learner object of ``variant``: Textual Inversion, or :class:`PivotalTuning` when it trains LoRA."""
    from peft import LoraConfig

    if not variant.lora_rank:
        return TextualInversion()
    lora = LoraConfig(
        r=variant.lora_rank,
        lora_alpha=variant.lora_rank,
        init_lora_weights="gaussian",
        target_modules=list(LORA_TARGETS),
    )
    return PivotalTuning(lora=lora, train_rows=variant.rows)


def prepare_variant(pipe: Any, variant: Variant, images: np.ndarray) -> tuple[Any, Any]:
    """Add V* to ``pipe`` and set up ``variant``'s optimiser; (the :class:`~concept_grounding.learners.train.Trainer`,
    the images' latents)."""
    from concept_grounding.learners import LearnConfig
    from concept_grounding.learners.data import encode_images
    from concept_grounding.learners.train import prepare_trainer

    config = LearnConfig(
        method="textual_inversion",
        images="unused",
        token=TOKEN,
        init_word=variant.init_word,
        instance_prompt=variant.caption,
        lr=variant.lr,
        steps=variant.steps,
    )
    trainer = prepare_trainer(pipe, config, method=_method(variant))
    tables = embedding_tables(pipe)
    groups = []
    if variant.rows:
        for key, row in trainer.rows.items():
            scale = tables[key]["rms"] / tables["text_encoder_2"]["rms"] if variant.per_table_lr else 1.0
            groups.append({"params": [row], "lr": variant.lr * scale})
    lora = [p for name, p in trainer.params.items() if not name.startswith("row.")]
    if lora:
        groups.append({"params": lora, "lr": variant.lora_lr})
    set_param_groups(trainer, groups)
    with tempfile.TemporaryDirectory(prefix="ti-world-") as work:  # encode_images caches there
        latents = encode_images(pipe, images, Path(work), "cpu", False)
    return trainer, latents


def _row_record(trainer: Any, init: dict[str, Any], grads: dict[str, float]) -> dict[str, Any]:
    """Per row: norm, its last step's gradient norm (before the loop's clipping; ``grads``), distance moved,
    nearest word."""
    pipe = trainer.pipe
    out = {}
    for enc_name, tok_name in (("text_encoder", "tokenizer"), ("text_encoder_2", "tokenizer_2")):
        row = trainer.rows[enc_name]
        word, cos = _nearest_word(pipe, enc_name, tok_name, row)
        grad = grads.get(enc_name)
        out[enc_name] = {
            "norm": float(row.detach().norm()),
            "moved": float((row.detach() - init[enc_name]).norm()),
            "grad": grad,
            "nearest": word,
            "cosine": cos,
        }
    return out


def retract_rows(trainer: Any, table_std: dict[str, float]) -> None:
    """diffusers' advanced Flux script's retraction: each row times ``(table std / row std) ** 0.1``."""
    import torch

    with torch.no_grad():
        for key, row in trainer.rows.items():
            row.mul_((table_std[key] / row.std()) ** 0.1)


def train_variant(trainer: Any, latents: Any, steps: int, every: int = 25, retract: bool = False) -> dict[str, Any]:
    """``steps`` of the trainer's own :func:`training_step` (then :func:`retract_rows` if ``retract``);
    the loss per step and the rows every ``every``."""
    from concept_grounding.learners.train import training_step

    init = {k: v.detach().clone() for k, v in trainer.rows.items()}
    pipe = trainer.pipe
    table_std = {k: float(getattr(pipe, k).get_input_embeddings().weight.detach()[:-1].std()) for k in init}
    grads: dict[str, float] = {}  # the loop sets gradients to None after each step: read them as they arrive
    handles = [
        row.register_hook(lambda g, key=key: grads.__setitem__(key, float(g.norm())))
        for key, row in trainer.rows.items()
        if row.requires_grad
    ]
    losses, trace = [], [{"step": 0, **_row_record(trainer, init, grads)}]
    start = time.process_time()
    for step in range(steps):
        losses.append(float(training_step(trainer, step, latents)))
        if retract:
            retract_rows(trainer, table_std)
        if (step + 1) % every == 0 or step + 1 == steps:
            trace.append({"step": step + 1, **_row_record(trainer, init, grads)})
    for handle in handles:
        handle.remove()
    return {"losses": losses, "trace": trace, "cpu_seconds": time.process_time() - start}


def generate(pipe: Any, prompt: str, settings: GenerationSettings) -> np.ndarray:
    """``(n, S, S, 3)`` uint8 images of ``prompt`` drawn as ConceptBed draws V* (image ``i`` from seed ``seed + i``)."""
    import torch

    images = pipe(
        [prompt] * settings.n,
        height=settings.size,
        width=settings.size,
        num_inference_steps=settings.steps,
        true_cfg_scale=settings.true_cfg,
        negative_prompt=[""] * settings.n,
        max_sequence_length=pipe.tokenizer_2.model_max_length,
        output_type="np",
        generator=[torch.Generator().manual_seed(settings.seed + i) for i in range(settings.n)],
    ).images
    return (np.asarray(images) * 255).round().clip(0, 255).astype(np.uint8)


def species_verdict(oracle: Any, images: np.ndarray, label: int, learnt: set[str]) -> dict[str, Any]:
    """The species oracle on ``images``: the fraction classed as ``label``, its mean probability,
    the fraction classed as a species the world Flux learnt, and the three most frequent classes."""
    probs = oracle.scores(images)
    top = probs.argmax(1)
    names, counts = np.unique(top, return_counts=True)
    order = np.argsort(-counts)[:3]
    return {
        "accuracy": float(np.mean(top == label)),
        "p_concept": float(probs[:, label].mean()),
        "classed_learnt": float(np.mean([oracle.names[i] in learnt for i in top])),
        "top": [[oracle.names[int(names[i])], int(counts[i])] for i in order],
    }


def named_species_verdicts(
    pipe: Any, oracle: Any, species: list[str], settings: GenerationSettings, learnt: set[str]
) -> dict[str, Any]:
    """The base world Flux prompted ``a photo of a {name}`` for each CUB class in ``species``: the oracle's verdicts."""
    out = {}
    for name in species:
        display = name.split(".", 1)[1].replace("_", " ")
        out[name] = species_verdict(
            oracle, generate(pipe, f"a photo of a {display}", settings), oracle.names.index(name), learnt
        )
    return out


def loader_roundtrip(trainer: Any, prompt: str, settings: GenerationSettings, images: np.ndarray) -> float:
    """Largest uint8 difference between ``images`` (the trained pipeline, V* hooked in) and the same draw after
    the method's own files (``trainer.method.save``) are read by
    :func:`~concept_grounding.learners.load_learned` into a fresh world Flux: what ConceptBed generates from."""
    from concept_grounding.learners import load_learned

    with tempfile.TemporaryDirectory(prefix="ti-world-") as work:
        folder = Path(work)
        files = trainer.method.save(trainer.pipe, trainer.placeholder, trainer.params, folder)
        manifest = {"method": trainer.method.name, "token": TOKEN, "files": files}
        (folder / "learned.json").write_text(json.dumps(manifest))
        fresh = load_learned(load_world_pipeline(), folder)
    return float(np.abs(generate(fresh, prompt, settings).astype(int) - images.astype(int)).max())


# ----------------------------------------------------------------------------- the run
def variants(steps: int) -> list[tuple[str, Variant]]:
    """Every (concept, variant) the report's table holds."""
    base = Variant("Textual Inversion as conceptbed runs it", steps=steps)
    per_table = Variant("per-encoder rate (T5 5e-2, CLIP 1e-3)", lr=5e-2, per_table_lr=True, steps=steps)
    pivotal = Variant("pivotal tuning (V* + LoRA r16)", lora_rank=16, steps=steps)
    return [
        ("control", base),
        ("control", per_table),
        ("object", base),
        ("object", Variant("caption 'a photo of a V*'", caption="a photo of a {token}", steps=steps)),
        ("object", Variant("per-encoder rate (T5 5e-3, CLIP 1e-4)", per_table_lr=True, steps=steps)),
        ("object", per_table),
        ("object", pivotal),
        ("object", Variant("LoRA r16 alone (V* fixed)", rows=False, lora_rank=16, steps=steps)),
        ("fine_grained_object", base),
        ("fine_grained_object", per_table),
        ("fine_grained_object", pivotal),
        ("control", Variant("retraction (diffusers' advanced script)", retract=True, steps=steps)),
        ("object", Variant("retraction (diffusers' advanced script)", retract=True, steps=steps)),
    ]


def concepts(cw: Any) -> dict[str, tuple[str, int, np.ndarray]]:
    """key -> (CUB class, world label, 8 training renders): a species the world Flux learnt
    (the control) and the first concept of ConceptBed's object and fine-grained object tasks."""
    out = {}
    control = "017.Cardinal"
    label = cw.class_names.index(control)
    out["control"] = (control, label, cw.renders(label, cw.m, "concept_train"))
    for task in ("object", "fine_grained_object"):
        c = cw.concepts(task, 2)[0]
        out[task] = (c.name, c.label, c.train)
    return out


def run_one(
    oracle: Any,
    concept: tuple[str, int, np.ndarray],
    variant: Variant,
    settings: GenerationSettings,
    learnt: set[str],
    before: dict[tuple[str, str, str], np.ndarray],
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Train one variant on one concept; its record and its images before / after. ``before`` caches
    the untrained draws by (concept, init word, prompt): every variant starts from the same pipeline."""
    name, label, images = concept
    pipe = load_world_pipeline()
    trainer, latents = prepare_variant(pipe, variant, images)
    caption = trainer.config.prompt()
    prompts = list(dict.fromkeys([CONCEPTBED_CAPTION.format(token=TOKEN), caption]))
    drawn = {}
    for p in prompts:
        key = (name, variant.init_word, p)
        if key not in before:
            before[key] = generate(pipe, p, settings)
        drawn[f"before {p}"] = before[key]
    record: dict[str, Any] = {"concept": name, "variant": asdict(variant), "tokens": tokenisation(pipe, caption)}
    record["training"] = train_variant(trainer, latents, variant.steps, retract=variant.retract)
    drawn.update({f"after {p}": generate(pipe, p, settings) for p in prompts})
    record["verdicts"] = {k: species_verdict(oracle, v, label, learnt) for k, v in drawn.items()}
    if variant.rows and not variant.lora_rank and variant.caption == CONCEPTBED_CAPTION:
        record["loader_max_diff"] = loader_roundtrip(trainer, prompts[0], settings, drawn[f"after {prompts[0]}"])
    return record, drawn


def contact_sheet(rows: list[tuple[str, np.ndarray]], path: Any, per_row: int = 8) -> None:
    """One labelled row of ``per_row`` images per entry, saved as a PNG."""
    import matplotlib
    from PIL import Image

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 1, figsize=(per_row * 0.9, len(rows) * 1.05 + 0.2))
    for ax, (label, images) in zip(np.atleast_1d(axes), rows):
        ax.imshow(np.concatenate(list(images[:per_row]), axis=1))
        ax.set_title(label, fontsize=7, loc="left")
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    with Image.open(path) as sheet:  # 256 colours: a quarter of the bytes, the same picture
        quantized = sheet.convert("RGB").quantize(256)
    quantized.save(path, optimize=True)


def merge(out: Any, stems: list[str], name: str) -> dict[str, Any]:
    """Join runs written under ``out`` by several processes (``--only``) into ``NAME.json`` and
    ``NAME.png`` (per concept its training images and V* before training, then each run's V* after)."""
    results: dict[str, Any] = {"runs": []}
    images: dict[str, np.ndarray] = {}
    for stem in stems:
        part = json.loads((out / f"{stem}.json").read_text())
        results["runs"] += part.pop("runs")
        results.update({k: v for k, v in part.items() if k not in results})
        if (out / f"{stem}.npz").is_file():  # a part that ran no variant (the named species only) has none
            with np.load(out / f"{stem}.npz") as arrays:
                images.update({k: arrays[k] for k in arrays.files})
    results["runs"].sort(key=lambda r: r["index"])
    (out / f"{name}.json").write_text(json.dumps(results, indent=1))
    prompt = CONCEPTBED_CAPTION.format(token=TOKEN)
    first = {}
    for r in results["runs"]:
        first.setdefault(r["concept"], r["index"])
    rows, seen = [], set()
    for r in sorted(results["runs"], key=lambda r: (first[r["concept"]], r["index"])):
        if r["concept"] not in seen:
            seen.add(r["concept"])
            rows.append((f"{r['concept']}: training images", images[f"train|{r['concept']}"]))
            rows.append((f"{r['concept']}: '{prompt}' before training", images[f"{r['index']}|before {prompt}"]))
        rows.append((f"{r['concept']}: {r['variant']['name']}, after", images[f"{r['index']}|after {prompt}"]))
    contact_sheet(rows, out / f"{name}.png")
    return results


def results_markdown(results: dict[str, Any]) -> str:
    """The report's tables from a results JSON: per run the oracle's verdict on ``a photo of V*``
    before / after, and each row's norm, distance moved and nearest word after training."""
    prompt = CONCEPTBED_CAPTION.format(token=TOKEN)
    lines = [
        "| concept | variant | accuracy before -> after | p(concept) after | classed as a learnt species "
        "| top class after | CLIP row norm (moved) | T5 row norm (moved) | nearest word CLIP / T5 "
        "| loss first -> last 50 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["runs"]:
        before, after = r["verdicts"][f"before {prompt}"], r["verdicts"][f"after {prompt}"]
        last = r["training"]["trace"][-1]
        clip, t5 = last["text_encoder"], last["text_encoder_2"]
        losses = r["training"]["losses"]
        lines.append(
            f"| {r['concept']} | {r['variant']['name']} | {before['accuracy']:.2f} -> {after['accuracy']:.2f} "
            f"| {after['p_concept']:.3f} | {after['classed_learnt']:.2f} | {after['top'][0][0]} ({after['top'][0][1]}) "
            f"| {clip['norm']:.2f} ({clip['moved']:.2f}) | {t5['norm']:.2f} ({t5['moved']:.2f}) "
            f"| {clip['nearest']} {clip['cosine']:.2f} / {t5['nearest']} {t5['cosine']:.2f} "
            f"| {np.mean(losses[:50]):.3f} -> {np.mean(losses[-50:]):.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the variants, writing ``OUT/NAME.json`` and ``OUT/NAME.npz`` (the images) after each;
    ``--merge`` joins several such files instead."""
    import argparse

    import torch

    from concept_grounding.conceptbed.concepts import ConceptWorld
    from concept_grounding.judge import create_judge

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder of the JSON and PNG results")
    parser.add_argument(
        "--oracle-cache", type=Path, default=None, help="ConceptBed oracle cache (conceptbed's OUT/oracles)"
    )
    parser.add_argument("--steps", type=int, default=300, help="optimisation steps of every variant")
    parser.add_argument("--images", type=int, default=16, help="images drawn per verdict")
    parser.add_argument("--named-images", type=int, default=8, help="images per learnt species' name (0: none)")
    parser.add_argument("--name", default="textual_inversion_world", help="stem of the output files")
    parser.add_argument("--only", type=int, nargs="*", default=None, help="indices of variants() to run")
    parser.add_argument("--merge", nargs="+", default=None, help="stems under OUT to join into NAME")
    args = parser.parse_args(argv)
    if args.merge:
        merged = merge(args.out, args.merge, args.name)
        print(results_markdown(merged))
        return merged
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = GenerationSettings(n=args.images)
    oracle = create_judge("conceptbed-species", cache=args.oracle_cache)
    cw = ConceptWorld()
    learnt = set(cw.vocab.sub_classes)
    picked = concepts(cw)
    results: dict[str, Any] = {"oracle_accuracy": oracle.accuracy, "generation": asdict(settings), "runs": []}
    base = load_world_pipeline()
    results["tables"] = embedding_tables(base)
    if args.named_images:
        named = GenerationSettings(n=args.named_images)
        results["named_learnt_species"] = named_species_verdicts(base, oracle, sorted(learnt), named, learnt)
    images: dict[str, np.ndarray] = {}
    before: dict[tuple[str, str, str], np.ndarray] = {}
    runs = variants(args.steps)
    for k in args.only if args.only is not None else range(len(runs)):
        key, variant = runs[k]
        record, drawn = run_one(oracle, picked[key], variant, settings, learnt, before)
        results["runs"].append({"index": k, "task": key, **record})
        images[f"train|{record['concept']}"] = picked[key][2]
        images.update({f"{k}|{p}": im for p, im in drawn.items()})
        (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=1))
        np.savez_compressed(args.out / f"{args.name}.npz", **images)
        print(json.dumps({"variant": variant.name, "concept": record["concept"], "verdicts": record["verdicts"]}))
    (args.out / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
