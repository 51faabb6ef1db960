"""Model repos: the models ``concept-grounding bench`` saved, and the shipped world Flux.

A bench run folder (``--bench``, e.g. ``reports/demo/bench``) holds ``config.json`` (the
:class:`~concept_grounding.bench.config.BenchConfig`), ``results.json`` and
``models/<slug>/`` (``config.json`` + ``model.safetensors``). Each model becomes a repo
``world-<slug>`` with its weights and a model card (``ModelCardData`` with
``model-index`` results) that gives the exact ``bench`` command, the data and the
results measured in that run.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..fileio import markdown_table
from .cards import make_card, save_card

__all__ = []

_WEIGHTS = ("*.safetensors", "config.json")


@dataclass(frozen=True)
class BenchModel:
    """One saved bench model.

    Attributes:
        slug: its folder name under ``models/`` (``"cbm-joint"``).
        folder: the folder.
        kind: ``"concept"`` (CBM / CEM / post-hoc CBM) or ``"clip"`` (the world CLIP).
        result: its row of ``results.json`` (``table1`` or ``table2``), or ``None``.
    """

    slug: str
    folder: Path
    kind: str
    result: dict | None

    @property
    def repo_name(self) -> str:
        """``world-<slug>`` (``world-clip`` stays as it is)."""
        return self.slug if self.slug.startswith("world-") else f"world-{self.slug}"


def check_bench(bench: Path) -> None:
    """Raise ``ValueError`` naming ``--bench`` unless it is a finished bench run folder."""
    bench = Path(bench)
    missing = [n for n in ("config.json", "results.json", "models") if not (bench / n).exists()]
    if not bench.is_dir() or missing:
        raise ValueError(
            f"--bench: {bench} is not a finished `concept-grounding bench` folder (missing "
            f"{', '.join(missing) if bench.is_dir() else 'the folder'})"
        )
    if not any((bench / "models").glob("*/model.safetensors")):
        raise ValueError(f"--bench: {bench / 'models'} holds no saved model (models/<name>/model.safetensors)")


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _result_for(slug: str, kind: str, results: dict) -> dict | None:
    rows = results.get("table2" if kind == "clip" else "table1") or []
    exact = [r for r in rows if _slug(r.get("name", "")) == slug]
    loose = [r for r in rows if _slug(r.get("name", "")).startswith(slug)]
    return (exact or loose or [None])[0]


def find_bench_models(bench: Path) -> list[BenchModel]:
    """The saved models of a bench run folder, sorted by slug."""
    bench = Path(bench)
    results = json.loads((bench / "results.json").read_text(encoding="utf-8"))
    models = []
    for folder in sorted(p.parent for p in (bench / "models").glob("*/model.safetensors")):
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        kind = "clip" if "words" in config else "concept"
        models.append(BenchModel(folder.name, folder, kind, _result_for(folder.name, kind, results)))
    return models


def bench_command(config: dict) -> str:
    """The ``concept-grounding bench`` command of a saved ``BenchConfig`` (its ``config.json``).

    >>> bench_command({"image_size": 32, "epochs": 1, "models": ["CBM (joint)"], "posthoc": False, "seed": 0})
    "concept-grounding bench --out bench --image-size 32 --epochs 1 --models 'CBM (joint)' --no-posthoc --seed 0"
    """
    import shlex

    flags = {
        "image_size": "--image-size",
        "train_per_class": "--train-per-class",
        "test_per_class": "--test-per-class",
        "sub_per_pairing": "--sub-per-pairing",
        "concepts": "--concepts",
        "epochs": "--epochs",
        "clip_epochs": "--clip-epochs",
        "concept_loss_weight": "--concept-loss-weight",
        "models": "--models",
        "cub_root": "--cub-root",
        "sub": "--sub",
        "min_class_count": "--min-class-count",
        "clip_model": "--model",
        "classes": "--classes",
        "seed": "--seed",
    }
    parts = ["concept-grounding", "bench", "--out", "bench"]
    for key, value in config.items():
        if key == "posthoc" and value is False:
            parts.append("--no-posthoc")
        elif key == "clip" and value is False:
            parts.append("--no-clip")
        elif key in flags and value is not None:
            values = value if isinstance(value, list) else [value]
            parts += [flags[key], *map(str, values)]
    return shlex.join(parts)


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _eval_results(model: BenchModel, dataset_id: str):
    from huggingface_hub import EvalResult

    row = model.result or {}
    metrics = [
        ("s_plus", "SUB s+ (substituted attribute detected)"),
        ("s_minus", "SUB s- (removed attribute dropped)"),
        ("concept_accuracy", "concept accuracy (class-level labels)"),
        ("concept_accuracy_exact", "concept accuracy (exact per-image labels)"),
        ("class_accuracy", "class accuracy"),
    ]
    task = "zero-shot-image-classification" if model.kind == "clip" else "image-classification"
    return [
        EvalResult(
            task_type=task,
            dataset_type=dataset_id,
            dataset_name="Bird world SUB-style counterfactuals" if key.startswith("s_") else "Bird world (test)",
            dataset_split="test",
            metric_type=key,
            metric_name=label,
            metric_value=round(float(row[key]), 4),
        )
        for key, label in metrics
        if row.get(key) is not None
    ]


def _usage(model: BenchModel, repo_id: str) -> str:
    if model.kind == "clip":
        return "\n".join(
            [
                "```python",
                "from huggingface_hub import snapshot_download",
                "from concept_grounding.models import load_clip",
                "",
                f'clip = load_clip(snapshot_download("{repo_id}"))   # ClipHandle: model, tokenizer, preprocess',
                "```",
            ]
        )
    return "\n".join(
        [
            "```python",
            "from huggingface_hub import snapshot_download",
            "from concept_grounding.models.loading import load_concept_model",
            "",
            f'model = load_concept_model(snapshot_download("{repo_id}"))',
            "print(model.concept_names[:3])",
            "```",
        ]
    )


def build_bench_model(
    model: BenchModel, bench: Path, folder: Path, repo_id: str, namespace: str, datasets: tuple[str, str], version: str
) -> None:
    """One bench model as a repo: its safetensors + config and a model card.

    ``datasets``: the (world, SUB-style) dataset repo ids the card links.
    """
    from huggingface_hub import ModelCard, ModelCardData

    folder.mkdir(parents=True, exist_ok=True)
    for pattern in _WEIGHTS:
        for path in sorted(model.folder.glob(pattern)):
            shutil.copy2(path, folder / path.name)
    config = json.loads((Path(bench) / "config.json").read_text(encoding="utf-8"))
    row = model.result or {}
    name = row.get("name", model.slug)
    data = ModelCardData(
        library_name="concept-grounding",
        license="apache-2.0",
        datasets=list(datasets),
        tags=[
            "concept-bottleneck-model" if model.kind == "concept" else "clip",
            "interpretability",
            "bird-world",
            "pytorch_model_hub_mixin",
        ],
        model_name=repo_id,
        eval_results=_eval_results(model, datasets[1]) or None,
    )
    source = "the bird world" if config.get("cub_root") is None else f"CUB-200-2011 ({config['cub_root']})"
    classes = config.get("classes") or "SUB's 33 classes"
    results = (
        markdown_table(
            ["SUB s+", "SUB s-", "chance s+ / s-", "concept acc. (class-level)", "concept acc. (exact)", "class acc."],
            [
                [
                    _pct(row.get("s_plus")),
                    _pct(row.get("s_minus")),
                    f"{_pct(row.get('chance_s_plus'))} / {_pct(row.get('chance_s_minus'))}",
                    _pct(row.get("concept_accuracy")),
                    _pct(row.get("concept_accuracy_exact")),
                    _pct(row.get("class_accuracy")),
                ]
            ],
            spaced=True,
        )
        if row
        else "No row of results.json matches this model."
    )
    body = "\n".join(
        [
            f"# {name} on the bird world",
            "",
            f"A {'CLIP-like model' if model.kind == 'clip' else 'concept model'} trained by `concept-grounding bench` "
            f"(published with concept-grounding {version}) for SUB's "
            f"{'Table 2' if model.kind == 'clip' else 'Table 1'} (Bader et al., 2025). Weights: "
            "`model.safetensors`; architecture and concept names: `config.json`.",
            "",
            "## Use",
            "",
            _usage(model, repo_id),
            "",
            "## Training",
            "",
            f"Data: {source}, classes: {classes}; {config.get('train_per_class')} training and "
            f"{config.get('test_per_class')} test images per class at {config.get('image_size')} px "
            f"(published as [`{datasets[0]}`](https://huggingface.co/datasets/{datasets[0]}) when the settings match), "
            f"evaluated on its SUB-style counterfactuals "
            f"[`{datasets[1]}`](https://huggingface.co/datasets/{datasets[1]}). "
            "The exact command (every setting of the run):",
            "",
            f"```bash\n{bench_command(config)}\n```",
            "",
            "## Results measured in that run (percent)",
            "",
            results,
            "",
            "s+: the substituted attribute is detected; s-: a removed attribute is no longer detected "
            "(`concept_grounding.metrics.sub_accuracy`). Figures come from the run's `results.json`, "
            "not re-measured here.",
        ]
    )
    save_card(make_card(ModelCard, data, body), folder)


def build_world_flux(source: Path, folder: Path, repo_id: str, pipeline_id: str, version: str) -> None:
    """The shipped world Flux (a ``FluxPipeline`` folder) as a model repo, its card's YAML set here.

    The card text is the one shipped with the weights (training command, data, measured
    quality), with a usage section for the ``tied_diffusion`` custom pipeline.
    """
    from huggingface_hub import ModelCard, ModelCardData

    shutil.copytree(
        source, folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*", "README.md"), dirs_exist_ok=True
    )
    shipped = source / "README.md"
    card = ModelCard.load(shipped) if shipped.is_file() else None
    data = card.data if card is not None else ModelCardData()
    data.library_name, data.pipeline_tag = "diffusers", "text-to-image"
    data.license = data.license or "apache-2.0"
    data.tags = sorted(set(data.tags or []) | {"diffusers", "flux", "bird-world", "text-to-image"})
    text = card.text if card is not None else "# World Flux\n\nA small Flux trained on the bird world."
    usage = "\n".join(
        [
            "",
            "## Load it",
            "",
            "```python",
            "from diffusers import DiffusionPipeline",
            "",
            f'pipe = DiffusionPipeline.from_pretrained("{repo_id}")                       # plain Flux',
            f'tdg = DiffusionPipeline.from_pretrained("{repo_id}", custom_pipeline="{pipeline_id}",',
            "                                        trust_remote_code=True)             # Tied Diffusion Guidance",
            "```",
            "",
            f"The custom pipeline needs `pip install concept-grounding=={version}`.",
            "",
        ]
    )
    save_card(make_card(ModelCard, data, text.rstrip() + "\n" + usage), folder)
