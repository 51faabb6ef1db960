"""Tied Diffusion tab: the two prompts, the eta schedule and a generated pair.

The default model is the world-trained Flux shipped with the package
(:func:`build_world_pipeline`, ``concept_grounding/assets/world_flux``): 32 px bird-world
birds, loaded and sampled as ``generate`` does, through its Flux source
(:class:`~concept_grounding.worldflux.source.WorldFlux`: its card's steps, true
classifier-free guidance at its trained prompt length). The prompting-only image is
:func:`~concept_grounding.tdg.baseline.prompting_images`, the baseline ``generate`` and the
benchmark use. The tiny,
randomly initialised Flux of :mod:`concept_grounding.tdg.tiny` (:func:`build_default_pipeline`,
noise-like images) stays in the dropdown for the mechanics. Other Flux models (a
local folder, or a Hub id when online) are offered only when the operator lists them at
launch (``--tdg-model`` / ``CONCEPT_GROUNDING_TDG_MODEL``, :mod:`.policy`); they load through
:func:`~concept_grounding.tdg.loading.load_flux_pipeline` in float32 whatever their precision
on disk, sample at their trained side (at most 512 px) and share the store's LRU cache of
visitor-chosen models.

Concurrent visitors share one pipeline per model: ``TiedDiffusionPipeline`` gives every
call its own scheduler, so simultaneous requests each get exactly the images they get
alone (``tests/space/test_space_app.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..fileio import markdown_table
from ..settings import default
from ..tdg.generate_config import GenerateConfig
from ..tdg.zerogpu import GPU_DTYPE, on_gpu, on_spaces_gpu
from ..web.limits import WebLimits
from ..worldflux.loader import WORLD_STEPS, WORLD_TDG_EXPECTATION
from .common import Cancelled, attribute_label, class_label, figure_to_image
from .inputs import UserInputError, whole_number
from .policy import TDG_MODELS_ENV, ModelPolicy
from .resources import FeatureUnavailable, ResourceStore

__all__ = [
    "TINY_MODEL",
    "WORLD_MODEL",
    "DEFAULT_MODEL",
    "MODEL_ENV",
    "build_world_pipeline",
    "pipeline_key",
    "choices",
    "prompts",
    "eta_figure",
    "generate",
    "model_choices",
    "build_default_pipeline",
    "get_pipeline",
    "Cancelled",
    "DEFAULT_PAIRING",
    "DEFAULT_SEED",
    "EXPECTATION",
]

#: Name of the built-in tiny model in the model dropdown.
TINY_MODEL = "tiny (built-in, random weights)"
#: Name of the shipped world-trained Flux in the model dropdown (the default).
WORLD_MODEL = "world Flux (trained on the bird world)"
#: Default sampling steps: the world Flux's own (``concept_grounding.worldflux.loader.WORLD_STEPS``,
#: the setting it was measured at, model card).
DEFAULT_STEPS = WORLD_STEPS
#: Most sampling steps a visitor may ask for, and the largest seed (both checked by :func:`generate`).
MAX_STEPS = WebLimits().max_steps
MAX_SEED = 2**32 - 1
DEFAULT_MODEL = WORLD_MODEL
#: The pairing (reference class, S+) and seed the tab opens on: with the world Flux at
#: :data:`DEFAULT_STEPS`, the shipped judge finds S+ in this guide (a test checks it through
#: :func:`generate` and :func:`verdicts`), so a visitor first sees what the tie has to carry.
DEFAULT_PAIRING: tuple[str, str] = ("035.Purple_Finch", "has_breast_color::blue")
DEFAULT_SEED = default(GenerateConfig, "seed")  # where `generate --seed` starts
#: What a visitor should expect, in one sentence (the world Flux's measured TDG behaviour).
EXPECTATION = WORLD_TDG_EXPECTATION
#: Environment variable naming extra Flux models (comma-separated local folders or Hub ids), read at launch.
MODEL_ENV = TDG_MODELS_ENV
#: Output side (px) of the tiny model; a named model samples at its trained side, at most MAX_SIZE.
TINY_SIZE = 32
MAX_SIZE = 512


def model_choices(policy: ModelPolicy | None = None) -> list[str]:
    """The model dropdown: the built-in model, then the Flux models ``policy`` offers.

    >>> model_choices(ModelPolicy(tdg_models=("my/flux",)))
    ['world Flux (trained on the bird world)', 'tiny (built-in, random weights)', 'my/flux']
    """
    return [WORLD_MODEL, TINY_MODEL, *(policy or ModelPolicy()).offered("tdg")]


def choices() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(reference classes, target attributes) as ``(label, value)`` pairs: SUB's 33
    classes and its 32 substitution attributes, from the packaged vocabulary.

    >>> classes, attributes = choices()
    >>> len(classes), len(attributes), attributes[0][1].startswith("has_")
    (33, 32, True)
    """
    from ..vocabulary import load_vocabulary

    vocab = load_vocabulary()
    classes = [(class_label(c), c) for c in vocab.sub_classes]
    attributes = [(attribute_label(a), a) for a in vocab.sub_substitutions.values()]
    return classes, attributes


def prompts(reference_class: str, target_attribute: str) -> tuple[str, str, str]:
    """``(c_R, c_G, category)`` of SUB Sec. 4.1 for the chosen pair.

    >>> c_r, c_g, category = prompts("017.Cardinal", "has_crown_color::black")
    >>> c_g, category
    ('A photo of a bird with black colored feathers on the crown of its head', 'colour')
    """
    if not reference_class or not target_attribute:
        raise UserInputError("Pick a reference class and a target attribute.")
    from ..tdg.prompts import tdg_prompts

    try:
        pair = tdg_prompts(reference_class, target_attribute)
    except ValueError as err:
        raise UserInputError(str(err)) from None
    return pair.reference, pair.guide, pair.category


def eta_figure(target_attribute: str, steps: int = 28) -> np.ndarray:
    """The attribute's eta(t) schedule (SUB Eq. 4) as a plot, ``(H, W, 3)`` uint8, with
    the normalised times of a ``steps``-step Flux sampler marked."""
    from matplotlib.figure import Figure

    from ..tdg.schedule import schedule_for_attribute

    steps = whole_number(steps, "Steps", 1, MAX_STEPS)
    try:
        schedule = schedule_for_attribute(target_attribute)
    except ValueError as err:
        raise UserInputError(str(err)) from None
    t = np.linspace(0.0, 1.0, 401)
    fig = Figure(figsize=(4.8, 2.8))  # not pyplot: its global figure registry is not thread-safe
    ax = fig.subplots()
    ax.plot(t, [schedule(x) for x in t], color="#2b6cb0", lw=2)
    step_t = np.linspace(1.0, 1.0 / steps, steps)
    ax.scatter(step_t, [schedule(x) for x in step_t], s=10, color="#c05621", zorder=3, label=f"{steps} sampler steps")
    ax.set_xlabel("t (1 = pure noise)")
    ax.set_ylabel("eta(t)")
    ax.set_xlim(1.0, 0.0)
    ax.set_ylim(-0.03, 1.03)
    ax.set_title(f"eta schedule: t_min={schedule.t_min:g}, t_max={schedule.t_max:g}, k={schedule.k:g}", fontsize=9)
    ax.legend(fontsize=8, loc="lower left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return figure_to_image(fig)


def build_default_pipeline(store: ResourceStore) -> tuple[Any, str]:
    """The tab's default model (``TINY_MODEL`` in the dropdown) and where it came from."""
    from ..tdg.tiny import tiny_flux_pipeline

    return tiny_flux_pipeline(seed=store.seed), "tiny random Flux (1+1 blocks), built in memory"


def _world_model() -> Any:
    """The shipped world Flux's :class:`~concept_grounding.tdg.sources.FluxModel` (``generate``'s
    ``--model world``: its size, prompt length, true CFG and loader; reads two small JSON files)."""
    from ..worldflux.source import WorldFlux

    return WorldFlux().resolve()


def build_world_pipeline(store: ResourceStore) -> tuple[Any, str]:
    """The shipped world-trained Flux (``WORLD_MODEL`` in the dropdown), loaded as ``generate`` loads it."""
    return _world_model().load(), "world Flux (package data, trained on the bird world)"


def pipeline_key(model: str | None) -> str:
    """The store key of a dropdown value (``tdg:world``, ``tdg:tiny`` or ``tdg:<name>``)."""
    if model == WORLD_MODEL:
        return "tdg:world"
    if model in (None, "", TINY_MODEL):
        return "tdg:tiny"
    return f"tdg:{model.strip()}"


def _build_named(name: str) -> Any:
    def builder(store: ResourceStore) -> tuple[Any, str]:
        from ..hub import resolve_model_spec
        from ..tdg.loading import load_flux_pipeline
        from .env import is_offline

        try:
            # Fails within seconds for an uncached model when the Hub does not answer.
            source = resolve_model_spec(name, "model", family="hub").target
            # float32 on a CPU whatever the folder holds (fp16 on disk, e.g. the shipped world Flux, once mixed
            # Half and Float); bfloat16 on CUDA on a GPU Space (ZeroGPU hands the GPU to on_gpu-wrapped calls)
            dtype = GPU_DTYPE if on_spaces_gpu() else "float32"
            pipe = load_flux_pipeline(source, dtype, local_files_only=is_offline())
            if on_spaces_gpu():
                pipe.to("cuda")
        except (OSError, ValueError) as err:
            raise UserInputError(f"Could not load the Flux model {name!r}: {err}") from None
        return pipe, f"{name} (from_pretrained, {dtype})"

    return builder


def get_pipeline(store: ResourceStore, model: str) -> Any:
    """The pipeline for the dropdown value ``model``: the default one, or a Flux model the
    store's policy allows (built on first use, kept in the LRU cache).

    Raises:
        UserInputError: ``model`` is not offered by this Space, or cannot be loaded.
    """
    if model == WORLD_MODEL:
        return store.get("tdg:world", build_world_pipeline)
    if model in (None, "", TINY_MODEL):
        return store.get("tdg:tiny", build_default_pipeline)
    name = store.policy.check("tdg", model)
    return store.get(f"tdg:{name}", _build_named(name), evictable=True)


def _stop_when(cancelled: Callable[[], bool], steps: int) -> Callable[..., dict]:
    """A diffusers ``callback_on_step_end`` that raises :class:`Cancelled` once ``cancelled()``
    is true (it runs on the call's own view of the shared pipeline, so other calls go on)."""
    calls = {"done": 0}

    def callback(pipe: Any, step: int, timestep: Any, callback_kwargs: dict) -> dict:
        calls["done"] += 1
        if cancelled():
            raise Cancelled(f"stopped after {calls['done']} of {2 * steps} denoising steps")
        return {}

    return callback


def _to_uint8(images: Any) -> list[np.ndarray]:
    out = []
    for image in images:
        arr = np.asarray(image)
        if arr.dtype != np.uint8:
            arr = np.clip(np.rint(arr * 255.0), 0, 255).astype(np.uint8)
        out.append(arr)
    return out


@on_gpu(duration=120)  # a GPU Space's GPU for the call (ZeroGPU); the function itself elsewhere
def generate(
    store: ResourceStore,
    reference_class: str,
    target_attribute: str,
    *,
    model: str = DEFAULT_MODEL,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Generate the TDG pair and the prompting-only baseline from the same seed.

    ``cancelled`` is asked after every denoising step (both calls); once it answers true
    the run stops with :class:`Cancelled` (the Space asks whether the visitor is still there).

    Returns:
        (reference, guide, prompting-only) images, each ``(H, W, 3)`` uint8. On the world
        and tiny models ``H = W = 32``; the tiny model's images are noise-like (random weights);
        a named model's side is its trained one, at most :data:`MAX_SIZE`.
    """
    steps = whole_number(steps, "Steps", 1, MAX_STEPS)
    seed = whole_number(seed, "Seed", 0, MAX_SEED)
    c_r, c_g, _ = prompts(reference_class, target_attribute)
    pipe = get_pipeline(store, model)
    import torch

    from ..tdg.baseline import prompting_images
    from ..tdg.prompts import prompting_only_prompt
    from ..tdg.schedule import schedule_for_attribute

    schedule = schedule_for_attribute(target_attribute)

    tiny = model in (None, "", TINY_MODEL)
    size = TINY_SIZE if tiny else min(MAX_SIZE, pipe.default_sample_size * pipe.vae_scale_factor)
    common: dict[str, Any] = {"height": size, "width": size, "num_inference_steps": steps, "output_type": "np"}
    if tiny:  # a named model's prompt length is its tokenizer's (TiedDiffusionPipeline.default_max_sequence_length)
        common["max_sequence_length"] = 32
    if model == WORLD_MODEL:  # generate's settings of it: trained size and prompt length, true CFG against ""
        world = _world_model()
        common = {**world.call_kwargs(world.default_size), "num_inference_steps": steps, "output_type": "np"}
    if cancelled is not None:
        common["callback_on_step_end"] = _stop_when(cancelled, steps)
    baseline_prompt = prompting_only_prompt(reference_class, target_attribute)
    try:
        tied = pipe(c_r, c_g, eta_schedule=schedule, generator=torch.Generator().manual_seed(int(seed)), **common)
        # Prompting only (SUB Fig. 4): c_R alone, untied, from the same seed (the start latents of the pair).
        plain = prompting_images(pipe, [baseline_prompt], [int(seed)], batch_size=1, **common)
    except TypeError as err:
        raise FeatureUnavailable(
            f"The Tied Diffusion pipeline in this build has another call signature: {err}"
        ) from None
    reference, guide = _to_uint8(tied.reference_images)[0], _to_uint8(tied.guide_images)[0]
    baseline = _to_uint8(plain)[0]
    return reference, guide, baseline


def build_world_judge(store: ResourceStore) -> tuple[Any, str]:
    """The shipped judge of the world Flux's birds (validated on exact edits; model card inside),
    the world it judges (for each species' class-level S- values) and the attribute groups its
    validation passed."""
    from ..judge import create_judge, judge_validated_groups
    from ..world import BirdWorld
    from ..worldflux.loader import trained_world_config

    return (
        create_judge("world-judge"),
        BirdWorld(trained_world_config()),
        judge_validated_groups(),
    ), "world judge (package data)"


def verdicts(
    store: ResourceStore, reference_class: str, target_attribute: str, images: Any, model: str = DEFAULT_MODEL
) -> str:
    """A Markdown table of the shipped judge's verdicts on (reference, guide, prompting-only):
    S+ found (and its probability), S- removed and species kept; the guide only needs S+.
    The judge reads the world Flux's 32 px birds, so other models get a note instead."""
    if model != WORLD_MODEL:
        return "*The judge reads the world Flux's 32 px birds only; pick that model to see its verdicts.*"
    judge, world, validated = store.get("judge:world", build_world_judge)
    from ..judge import judge_images
    from ..judge.validation import substitution_verdicts

    vocab = world.vocab
    target = vocab.attribute_index(target_attribute)
    label = world.class_names.index(reference_class)
    removed = [i for i in vocab.groups[vocab.group_of(target)] if world.class_attributes[label, i]]
    species, probs = judge_images(judge, np.stack(images))
    v = substitution_verdicts(species, probs, np.full(3, label), np.full(3, target), [removed] * 3)
    yes = lambda b: "yes" if b else "no"  # noqa: E731
    rows = [
        [
            name,
            f"{yes(v['s_plus_found'][k])} ({v['p_s_plus'][k]:.2f})",
            "-" if name == "TDG guide" else yes(v["species_kept"][k]),
        ]
        for k, name in enumerate(("TDG reference", "TDG guide", "Prompting only"))
    ]
    header = ["**The world judge's verdicts** (validated on exact edits; see its model card):", ""]
    group = vocab.group_of(target)
    if validated is not None and group not in validated:
        header += [
            f"*Not validated on {group.replace('_', ' ')}: the judge misses a bar on this group's held-out"
            " exact edits, so these verdicts are indicative only.*",
            "",
        ]
    return "\n".join([*header, markdown_table(["image", "S+ found (p)", "species kept"], rows)])
