"""How often a world Flux draws what a compositional prompt asks (ConceptBed's categories).

For every species of the generator's world and every category the world can draw
(:mod:`concept_grounding.world.composition`), prompts in the training captions' forms:

============ ============================================ =====================================
category     prompt                                       correct when the judge finds
============ ============================================ =====================================
counting     ``a photo of two {name}`` (and three)        that many birds
relation     ``a photo of a {name} in the sky`` (5 scenes) that scene
action       ``a photo of a {name} facing left`` (right)  that facing
composite    ``a photo of two {name} by the water``       both the count and the scene
============ ============================================ =====================================

The judge (:class:`~concept_grounding.judge.composition.CompositionJudge`) is trained on the
varied world's compositions and validated on held-out ones first; its per-head validation is
returned beside the rates, and a head below :data:`~concept_grounding.judge.composition.COMPOSITION_BAR`
gives no rate (``None``). The attribute category is the world TDG benchmark's "prompted
attributes" (canonical birds, the grounded attribute judge).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from concept_grounding.judge.composition import COMPOSITION_BAR, HEADS
from concept_grounding.vocabulary import class_display_name
from concept_grounding.world.composition import CompositionPrompt

__all__ = ["composition_prompts", "measure_compositions", "compositions_markdown"]


def composition_prompts(world: Any) -> list[dict[str, Any]]:
    """Per species, one record per prompt: ``category``, ``prompt``, ``label`` and ``asked``
    (head -> the value index the prompt asks for).

    >>> from concept_grounding.world import BirdWorld, WorldConfig
    >>> recs = composition_prompts(BirdWorld(WorldConfig(image_size=32, class_names=("073.Blue_Jay",))))
    >>> len(recs), recs[0]["prompt"], recs[-1]["prompt"], recs[-1]["asked"]
    (10, 'a photo of two Blue Jay', 'a photo of two Blue Jay on a branch', {'count': 1, 'scene': 1})
    """
    scenes, facings = list(HEADS["scene"]), list(HEADS["facing"])
    out = []
    for label, c in enumerate(world.class_names):
        name = class_display_name(c)
        for k in (2, 3):
            out.append(
                {
                    "category": "counting",
                    "prompt": CompositionPrompt(name, k).text,
                    "label": label,
                    "asked": {"count": k - 1},
                }
            )
        for s in scenes:
            out.append(
                {
                    "category": "relation",
                    "prompt": CompositionPrompt(name, scene=s).text,
                    "label": label,
                    "asked": {"scene": scenes.index(s)},
                }
            )
        for f in facings:
            out.append(
                {
                    "category": "action",
                    "prompt": CompositionPrompt(name, facing=f).text,
                    "label": label,
                    "asked": {"facing": facings.index(f)},
                }
            )
        s = scenes[(label + 1) % len(scenes)]
        out.append(
            {
                "category": "composite",
                "prompt": CompositionPrompt(name, 2, scene=s).text,
                "label": label,
                "asked": {"count": 1, "scene": scenes.index(s)},
            }
        )
    return out


def measure_compositions(
    pipe: Any,
    world: Any,
    judge: Any,
    validation: dict[str, float],
    call_kwargs: dict,
    images_per_prompt: int = 2,
    batch: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """Generate ``images_per_prompt`` images of every :func:`composition_prompts` record with
    ``pipe`` (true CFG against the empty prompt, seeds ``seed + i``) and judge them.

    Returns:
        ``validation`` (head -> held-out accuracy), ``categories`` (category -> ``rate`` (the
        fraction judged to show everything asked; ``None`` where a head asked misses the bar),
        ``p_yes`` (mean judge probability of the asked values, ConceptBed's VQA score), ``n``),
        ``species`` (the species head's agreement with the prompt, ``None`` below the bar),
        and ``images`` (a few (H, W, 3) uint8 per category, for a contact sheet).
    """
    from concept_grounding.tdg.baseline import prompting_images

    recs = [r for r in composition_prompts(world) for _ in range(images_per_prompt)]
    seeds = [seed + i for i in range(len(recs))]
    images = prompting_images(
        pipe, [r["prompt"] for r in recs], seeds, batch_size=batch, negative_prompt="", output_type="np", **call_kwargs
    )
    arr = np.clip(np.rint(np.stack([np.asarray(im) for im in images]) * 255), 0, 255).astype(np.uint8)
    probs = judge.probabilities(arr)
    ok_heads = {k for k, v in validation.items() if v >= COMPOSITION_BAR}
    categories: dict[str, Any] = {}
    for cat in dict.fromkeys(r["category"] for r in recs):
        rows = [i for i, r in enumerate(recs) if r["category"] == cat]
        heads = list(recs[rows[0]]["asked"])
        hit = np.ones(len(rows), bool)
        p_yes = np.ones(len(rows))
        for h in heads:
            want = np.asarray([recs[i]["asked"][h] for i in rows])
            hit &= probs[h][rows].argmax(1) == want
            p_yes *= probs[h][rows, want]
        valid = all(h in ok_heads for h in heads)
        categories[cat] = {
            "rate": float(hit.mean()) if valid else None,
            "p_yes": float(p_yes.mean()) if valid else None,
            "n": len(rows),
            "heads": heads,
        }
    labels = np.asarray([r["label"] for r in recs])
    species = float((probs["species"].argmax(1) == labels).mean()) if "species" in ok_heads else None
    sheet = {cat: arr[[i for i, r in enumerate(recs) if r["category"] == cat][:8]] for cat in categories}
    return {
        "validation": validation,
        "bar": COMPOSITION_BAR,
        "categories": categories,
        "species": species,
        "images": sheet,
    }


def compositions_markdown(result: dict[str, Any]) -> str:
    """The categories' table with the judge's validation beside it."""

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f} %"

    lines = ["| category | images | judged to show it | mean P(yes) |", "|---|---|---|---|"]
    for cat, r in result["categories"].items():
        lines.append(f"| {cat} | {r['n']} | {pct(r['rate'])} | {pct(r['p_yes'])} |")
    lines.append(f"| species (all prompts) | | {pct(result['species'])} | |")
    val = ", ".join(f"{k} {pct(v)}" for k, v in result["validation"].items())
    lines.append("")
    lines.append(f"Judge validation on held-out world compositions (bar {pct(result['bar'])}): {val}.")
    return "\n".join(lines)
