"""``concept-grounding filter``: SUB's VQA filter over a generated image folder.

Reads ``<in>/metadata.jsonl`` (from ``concept-grounding generate``), scores every image's
multiple-choice question, keeps the top 10 % per pairing, and writes ``<out>/metadata.jsonl``
(kept rows, with ``target_probability``; ``file_name`` is the absolute path of the image in ``<in>``) plus
``filter_report.json`` / ``filter_report.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from concept_grounding.commands._types import existing_dir, output_dir, unit_interval


#: SUB filtered with InternVL-2.5-8B, whose Hub repository ships its own modelling code
#: (``AutoModel`` + ``trust_remote_code``, no logits API that AutoModelForImageTextToText
#: loads). The default is the same family's native transformers checkpoint.
DEFAULT_VLM = "OpenGVLab/InternVL3-8B-hf"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="input", required=True, type=existing_dir,
                        help="generated image folder (with metadata.jsonl)")
    parser.add_argument("--out", required=True, type=output_dir, help="folder for the kept list and the report")
    parser.add_argument("--scorer", choices=("vlm", "clip", "tiny-clip", "oracle"), default="vlm")
    parser.add_argument("--vlm-model", default=DEFAULT_VLM,
                        help="a VLM that AutoModelForImageTextToText loads: Hub id or local folder (--scorer vlm)")
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="let --vlm-model's repository run its own Python modelling code (off by default; "
                        "only for repositories you trust)")
    parser.add_argument("--clip-model", default="ViT-B-32", help="open_clip architecture (--scorer clip)")
    parser.add_argument("--clip-pretrained", default="openai", help="open_clip weights tag (--scorer clip)")
    parser.add_argument("--oracle", help="a concept model folder saved by `bench` (the world's attribute oracle), or"
                        " 'module:function' mapping a list of PIL images to (N, 312) probabilities")
    parser.add_argument("--keep-fraction", type=unit_interval, default=0.1,
                        help="fraction of the generated images kept per pairing, in (0, 1] (SUB: 0.1)")


def _scorer(args: argparse.Namespace):
    """The scorer; named models are resolved (local, cached, or a fast clear error) before loading."""
    from concept_grounding.errors import UsageError
    from concept_grounding.tdg import filter as f

    if args.scorer == "tiny-clip":
        return f.tiny_clip_scorer()
    if args.scorer == "clip":
        from concept_grounding.hub import resolve_open_clip

        resolve_open_clip(args.clip_model, args.clip_pretrained, "--clip-model")
        import open_clip

        model, _, preprocess = open_clip.create_model_and_transforms(args.clip_model, pretrained=args.clip_pretrained)
        return f.CLIPScorer(model.eval(), preprocess, open_clip.get_tokenizer(args.clip_model))
    if args.scorer == "oracle":
        if args.oracle and Path(args.oracle).is_dir():
            from concept_grounding.models.loading import concept_probability_oracle

            return f.AttributeOracleScorer(concept_probability_oracle(args.oracle))
        if not args.oracle or ":" not in args.oracle:
            raise UsageError("must be a saved concept model folder or 'module:function' with --scorer oracle, got "
                             f"{args.oracle!r}", argument="--oracle")
        import importlib

        module, name = args.oracle.split(":", 1)
        try:
            return f.AttributeOracleScorer(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError) as err:
            raise UsageError(f"cannot import {args.oracle!r}: {err}", argument="--oracle") from None
    from concept_grounding.hub import resolve_model

    name = resolve_model(args.vlm_model, "--vlm-model")  # before importing transformers: fail fast
    from transformers import AutoModelForImageTextToText, AutoProcessor

    remote = bool(args.trust_remote_code)
    processor = AutoProcessor.from_pretrained(name, trust_remote_code=remote)
    model = AutoModelForImageTextToText.from_pretrained(name, trust_remote_code=remote).eval()
    return f.VisionLanguageScorer(model, processor)


def _records(src: Path) -> list[dict]:
    """Rows of ``<src>/metadata.jsonl``; a missing file, bad JSON, missing keys or images name the line."""
    from concept_grounding.errors import UsageError, read_text_file

    path = src / "metadata.jsonl"
    if not path.is_file():
        raise UsageError("no metadata.jsonl here", argument="--in", file=src,
                         hint="point --in at a folder written by `concept-grounding generate`")
    records = []
    for n, line in enumerate(read_text_file(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"not valid JSON ({err.msg})", file=path, line=n) from None
        missing = [k for k in ("file_name", "reference_class", "target_attribute") if not isinstance(row, dict)
                   or k not in row]
        if missing:
            raise UsageError(f"row lacks {missing}", file=path, line=n)
        if not (src / row["file_name"]).is_file():
            raise UsageError(f"image {row['file_name']!r} not found in {src}", file=path, line=n)
        records.append(row)
    if not records:
        raise UsageError("lists no images", file=path)
    return records


def run(args: argparse.Namespace) -> int:
    from PIL import Image
    from tqdm.auto import tqdm

    from concept_grounding.tdg.filter import filter_records, write_report

    # 1. inputs and scorer, checked before any image is scored
    src, out = Path(args.input), Path(args.out)
    records = _records(src)
    scorer = _scorer(args)

    # 2. score pairing by pairing, keep the top fraction
    bar = tqdm(total=len(records), desc="VQA filter", unit="img")

    def probs_for(rows, question, options):
        images = [Image.open(src / r["file_name"]).convert("RGB") for r in rows]
        group = rows[0]["group"] if "group" in rows[0] else rows[0]["target_attribute"].split("::")[0][4:]
        probs = scorer.score(images, question, options, group)
        bar.update(len(rows))
        return probs

    result = filter_records(records, probs_for, args.keep_fraction)
    bar.close()

    # 3. kept list and report
    out.mkdir(parents=True, exist_ok=True)
    kept = [{**r, "file_name": str((src / r["file_name"]).resolve())} for r in result.kept]
    (out / "metadata.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
    json_path, md_path = write_report(result.report, out)
    print(f"kept {len(kept)} of {len(records)} images; report: {md_path}")
    return 0
