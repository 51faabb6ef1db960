"""``concept-grounding filter``: SUB's VQA filter over a generated image folder.

Reads ``<in>/metadata.jsonl`` (from ``concept-grounding generate``), scores every image's
multiple-choice question, keeps the top 10 % per pairing, and writes ``<out>/metadata.jsonl``
(kept rows, with ``target_probability``; ``file_name`` is the absolute path of the image in ``<in>``) plus
``filter_report.json`` / ``filter_report.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


#: SUB filtered with InternVL-2.5-8B, whose Hub repository ships its own modelling code
#: (``AutoModel`` + ``trust_remote_code``, no logits API that AutoModelForImageTextToText
#: loads). The default is the same family's native transformers checkpoint.
DEFAULT_VLM = "OpenGVLab/InternVL3-8B-hf"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="input", required=True, help="generated image folder")
    parser.add_argument("--out", required=True, help="folder for the kept list and the report")
    parser.add_argument("--scorer", choices=("vlm", "clip", "tiny-clip", "oracle"), default="vlm")
    parser.add_argument("--vlm-model", default=DEFAULT_VLM,
                        help="a VLM that AutoModelForImageTextToText loads: Hub id or local folder (--scorer vlm)")
    parser.add_argument("--clip-model", default="ViT-B-32", help="open_clip architecture (--scorer clip)")
    parser.add_argument("--clip-pretrained", default="openai", help="open_clip weights tag (--scorer clip)")
    parser.add_argument("--oracle", help="a concept model folder saved by `bench` (the world's attribute oracle), or"
                        " 'module:function' mapping a list of PIL images to (N, 312) probabilities")
    parser.add_argument("--keep-fraction", type=float, default=0.1)


def _scorer(args: argparse.Namespace):
    from concept_grounding.tdg import filter as f

    if args.scorer == "tiny-clip":
        return f.tiny_clip_scorer()
    if args.scorer == "clip":
        import open_clip

        model, _, preprocess = open_clip.create_model_and_transforms(args.clip_model, pretrained=args.clip_pretrained)
        return f.CLIPScorer(model.eval(), preprocess, open_clip.get_tokenizer(args.clip_model))
    if args.scorer == "oracle":
        if args.oracle and Path(args.oracle).is_dir():
            from concept_grounding.models.loading import concept_probability_oracle

            return f.AttributeOracleScorer(concept_probability_oracle(args.oracle))
        if not args.oracle or ":" not in args.oracle:
            raise ValueError("--oracle must be a saved concept model folder or 'module:function' with --scorer oracle")
        import importlib

        module, name = args.oracle.split(":", 1)
        return f.AttributeOracleScorer(getattr(importlib.import_module(module), name))
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(args.vlm_model, trust_remote_code=True)
    model = AutoModelForImageTextToText.from_pretrained(args.vlm_model, trust_remote_code=True).eval()
    return f.VisionLanguageScorer(model, processor)


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from PIL import Image
    from tqdm.auto import tqdm

    from concept_grounding.tdg.filter import filter_records, write_report

    src, out = Path(args.input), Path(args.out)
    records = [json.loads(line) for line in (src / "metadata.jsonl").read_text().splitlines() if line.strip()]
    scorer = _scorer(args)
    bar = tqdm(total=len(records), desc="VQA filter", unit="img")

    def probs_for(rows, question, options):
        images = [Image.open(src / r["file_name"]).convert("RGB") for r in rows]
        group = rows[0]["group"] if "group" in rows[0] else rows[0]["target_attribute"].split("::")[0][4:]
        probs = scorer.score(images, question, options, group)
        bar.update(len(rows))
        return probs

    result = filter_records(records, probs_for, args.keep_fraction)
    bar.close()
    out.mkdir(parents=True, exist_ok=True)
    kept = [{**r, "file_name": str((src / r["file_name"]).resolve())} for r in result.kept]
    (out / "metadata.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
    json_path, md_path = write_report(result.report, out)
    print(f"kept {len(kept)} of {len(records)} images; report: {md_path}")
    return 0
