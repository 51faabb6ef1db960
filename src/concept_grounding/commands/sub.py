"""``concept-grounding sub``: SUB accuracy of any model, written as a report folder.

``--model`` takes a saved project model folder, ``path/to/file.py:factory`` or
``package.module:factory`` (returning the model, optionally with its transform and concept
names; a pytorch-concepts model names its own concepts), or an open_clip / transformers
CLIP name or path. A plain module needs its preprocessing stated: ``--mean`` and
``--std``, a transform from the factory, or ``--no-normalize``. ``--sub`` takes a local
SUB copy or the Hub id; without it the bird world's SUB export is used. Under
``accelerate launch`` the images are split across the processes; the main process writes
the report. Errors name these flags, not the Python keywords behind them (:data:`FLAGS`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concept_grounding.hub import ModelSpec

from concept_grounding.settings import add_option
from concept_grounding.validators import int_at_least

__all__ = ["add_arguments", "run", "FLAGS"]

#: how an error raised by the Python API names each keyword when this command runs it
#: (:func:`concept_grounding.errors.options_as_flags`).
FLAGS: dict[str, str] = {
    "concept_names": "--concept-names", "index_base": "--index-base", "output": "--output", "outputs": "--outputs",
    "image_size": "--image-size", "size": "--image-size", "mean": "--mean", "std": "--std",
    "normalize=False": "--no-normalize", "include_none": "--include-none", "include_none=True": "--include-none",
    "protocol": "--protocol", "batch_size": "--batch-size", "dtype": "--dtype", "device": "--device", "split": "--split",
    "transform": "a transform", "processor": "a processor returned by the --model factory",
    "preprocess": "a preprocess returned by the --model factory",
    "tokenizer": "a tokenizer returned by the --model factory", "pretrained": "--pretrained",
}


def _floats(text: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in text.split(","))
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated numbers (R,G,B), got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, action="append",
                        help="saved model folder, file.py:factory, package.module:factory, or a CLIP name / path; "
                             "repeat it to score several in one run (one report each under --out, and a summary "
                             "table), or 'paper' for SUB Table 2's six open_clip models with their weights")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip weights tag for an architecture name (e.g. openai, laion2b_s34b_b79k), a "
                             "weights file, or 'random' for random weights on purpose (an architecture without it "
                             "is refused)")
    parser.add_argument("--sub", default=None, help="SUB source: local copy or 'Jessica-bader/SUB' (default: the world's)")
    parser.add_argument("--split", default=None, help="split of the SUB source (default: its only one, or 'test')")
    parser.add_argument("--cub-root", default=None,
                        help="CUB_200_2011 folder whose class-level labels give S- to sources without it (SUB's Hub copy)")
    parser.add_argument("--out", type=Path, default=Path("reports/sub"), help="report folder")
    parser.add_argument("--protocol", choices=("paper", "official"), default="paper",
                        help="'paper' (docs/sub_accuracy.md) or 'official' (SUB's published evaluation code)")
    parser.add_argument("--concept-names", default=None,
                        help="the model's columns: cub_312, cbm_112, sub, or a file with one CUB attribute name or "
                             "integer per line; integers are 0-based indices into CUB's 312 attributes in "
                             "attributes.txt order (0 = has_bill_shape::curved_(up_or_down)) unless --index-base "
                             "says otherwise (default: the factory's names, or a pytorch-concepts model's own)")
    parser.add_argument("--index-base", choices=("cub_312", "cbm_112", "cub_id"), default="cub_312",
                        help="what integer concept names are: cub_312, 0-based indices into CUB's 312 attributes; "
                             "cbm_112, 0-based indices into Koh et al.'s 112; cub_id, CUB's own 1-based attribute "
                             "ids as written in attributes.txt (default: %(default)s)")
    parser.add_argument("--output", default=None, help="which part of a tuple / dict / dataclass output holds the concepts")
    parser.add_argument("--outputs", choices=("logits", "probabilities"), default=None,
                        help="the concept output is logits (default) or probabilities")
    parser.add_argument("--image-size", type=int, default=None, help="resize images to this side (px)")
    parser.add_argument("--mean", type=_floats, default=None,
                        help="per-channel mean the model was trained with, e.g. 0.485,0.456,0.406 (a plain module "
                             "needs --mean and --std, a transform from its factory, or --no-normalize)")
    parser.add_argument("--std", type=_floats, default=None, help="per-channel std, e.g. 0.229,0.224,0.225")
    parser.add_argument("--no-normalize", dest="normalize", action="store_const", const=False, default=None,
                        help="feed a plain module [0, 1] pixels, unnormalised (the explicit choice instead of "
                             "--mean/--std)")
    parser.add_argument("--include-none", action="store_true", help="open-vocabulary: add the 'none' prompt (paper)")
    parser.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1 (default: where the model is)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="precision the model runs in (default: the model's own)")
    parser.add_argument("--batch-size", type=int, default=64, help="images per forward pass")
    add_option(parser, "--size", "--world-size", dest="world_size", type=int_at_least(32), default=64,
               help="world SUB export: image side (px; the model's own input side is --image-size)")
    parser.add_argument("--world-seed", type=int, default=0, help="world SUB export: seed")
    parser.add_argument("--per-pairing", type=int, default=1, help="world SUB export: images per (class, attribute)")
    parser.add_argument("--classes", nargs="*", default=None, help="world SUB export: class folder names (default: 33)")
    parser.add_argument("--save-scores", action="store_true", help="also write the score matrix (scores.npz)")
    parser.add_argument("--no-progress", action="store_true", help="show no progress bars")


def _concept_names(text: str | None, index_base: str):
    """A named set as it is; a file's lines as CUB names, each error naming its line."""
    from concept_grounding.errors import UsageError, read_text_file
    from concept_grounding.evaluation.concepts import NAMED_SETS, resolve_concept_names

    if text is None or text in NAMED_SETS:
        return text
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{text!r} is not a named set ({', '.join(NAMED_SETS)}) or a file", argument="--concept-names")
    names = []
    for line, item in enumerate(read_text_file(path, "--concept-names").splitlines(), start=1):
        item = item.strip()
        if not item:
            continue
        try:
            names += resolve_concept_names([int(item) if item.isdigit() else item], index_base=index_base)
        except UsageError as err:
            raise UsageError(err.reason, argument="--concept-names", file=path, line=line, hint=err.hint) from None
    return names


def _source_options(args: argparse.Namespace) -> dict:
    if args.sub is None:
        return {"image_size": args.world_size, "seed": args.world_seed, "per_pairing": args.per_pairing,
                "classes": args.classes}
    options: dict = {"split": args.split}
    if args.cub_root:
        from concept_grounding.bench.data import class_matrix
        from concept_grounding.loaders import load_cub
        from concept_grounding.vocabulary import load_vocabulary

        train = load_cub(args.cub_root, min_class_count=None, progress=not args.no_progress)["train"]
        names = tuple(train.features["label"].names)
        options.update(class_attributes=class_matrix(train, len(names), load_vocabulary().num_attributes),
                       class_names=names)
    return options


def run(args: argparse.Namespace) -> int:
    from concept_grounding.errors import options_as_flags

    with options_as_flags(FLAGS):
        return _run(args)


def check_model(name: str, pretrained: str | None) -> "ModelSpec":
    """First, before torch: a ``--model`` goes through the one resolver
    (:func:`concept_grounding.hub.resolve_model_spec`): a folder must exist, a factory's file or
    module too, a CLIP name must be loadable now and an open_clip architecture must name its
    weights (``--pretrained``). The :class:`~concept_grounding.hub.ModelSpec` goes on to
    :func:`~concept_grounding.evaluation.evaluate_sub`, which does not check it again."""
    from concept_grounding.hub import resolve_model_spec

    return resolve_model_spec(name, "--model", pretrained=pretrained, pretrained_argument="--pretrained")


def model_list(models: list[str], pretrained: str | None) -> list[tuple[str, str | None]]:
    """``--model`` values as ``(model, weights tag)``: ``paper`` is SUB Table 2's six
    (:data:`~concept_grounding.bench.config.PAPER_CLIP_MODELS`, with their own tags); every
    other model takes ``--pretrained``."""
    from concept_grounding.bench.config import PAPER_CLIP_MODELS

    out: list[tuple[str, str | None]] = []
    for model in models:
        out += list(PAPER_CLIP_MODELS) if model == "paper" else [(model, pretrained)]
    return out


def _run(args: argparse.Namespace) -> int:
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    models = model_list(args.model, args.pretrained)
    specs = [check_model(model, tag) for model, tag in models]  # every model is checked before any is scored
    if len(models) == 1:
        return _score(args, *models[0], args.out, spec=specs[0])
    from concept_grounding.bench.artifacts import model_slug

    rows = []
    for (model, tag), spec in zip(models, specs):
        out = args.out / model_slug(f"{model}-{tag}" if tag else Path(model).name or model)
        rows.append(_score(args, model, tag, out, row=True, spec=spec))
    _write_summary(rows, args.out)
    return 0


def _write_summary(rows: list[dict], out: Path) -> None:
    """``<out>/report.md``: one row per model (s+ / s- with their chance), each linking its report."""
    from concept_grounding.evaluation.distributed import process_info
    from concept_grounding.evaluation.report import score_cells
    from concept_grounding.fileio import markdown_table, write_report

    if not process_info().is_main:
        return
    columns = (("s_plus", "s+"), ("chance_s_plus", "chance s+"), ("s_minus", "s-"), ("chance_s_minus", "chance s-"))
    table = markdown_table(*score_cells([{**r, "name": f"[{r['name']}]({r['folder']}/report.md)"} for r in rows],
                                        columns))
    write_report(out, rows, f"# SUB accuracy of {len(rows)} models\n\n{table}\n")
    print(f"wrote {out / 'report.md'}")


def _score(args: argparse.Namespace, model_name: str, pretrained: str | None, out: Path, row: bool = False,
           spec: "ModelSpec | None" = None):
    """Score one model (``spec``, resolved by :func:`check_model`) into ``out``; returns 0, or
    its summary row when ``row``."""
    from concept_grounding.evaluation import evaluate_sub
    from concept_grounding.evaluation.distributed import process_info

    overrides = dict(concept_names=_concept_names(args.concept_names, args.index_base), output=args.output,
                     outputs=args.outputs, mean=args.mean, std=args.std, normalize=args.normalize)
    if args.index_base != "cub_312":
        overrides["index_base"] = args.index_base
    output = args.output
    if output is not None and output.lstrip("-").isdigit():
        overrides["output"] = int(output)
    result = evaluate_sub(spec or model_name, args.sub, protocol=args.protocol, batch_size=args.batch_size, device=args.device,
                          dtype=args.dtype, progress=not args.no_progress, source_options=_source_options(args),
                          image_size=args.image_size, include_none=args.include_none, pretrained=pretrained, **overrides)
    if process_info().is_main:
        result.save(out, scores=args.save_scores)
        print(f"{model_name + ': ' if row else ''}s+ {result.s_plus:.4f} (chance {result.chance_s_plus:.4f})  "
              f"s- {result.s_minus:.4f} (chance {result.chance_s_minus:.4f})  "
              f"{result.num_images} images, {result.images_per_second:.1f} images/s")
        print(f"wrote {out / 'report.md'}")
    if not row:
        return 0
    return {"name": f"{model_name} ({pretrained})" if pretrained else model_name, "folder": out.name,
            **{k: getattr(result, k) for k in ("s_plus", "chance_s_plus", "s_minus", "chance_s_minus")}}
