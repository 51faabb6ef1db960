"""What a concept learner learns from: :class:`LearnConfig` (one ``learn`` run) and its checks.

The four learners of ConceptBed's Table 5 (Patel et al.; docs/guide/learners.md), each a ``method``
object of :mod:`.methods` (its steps and learning rates, Table 5's and the world Flux's, are the one
table :data:`~.methods.METHOD_DEFAULTS`, used when ``steps`` / ``lr`` are left ``None``).

>>> (LearnConfig(method="lora", images="birds", model="flux-dev/").resolved_steps(),
...  LearnConfig(method="lora", images="birds", model="flux-dev/").resolved_lr(),
...  LearnConfig(method="lora", images="birds").resolved_lr())
(500, 0.0001, 0.001)
>>> LearnConfig(method="textual_inversion", images="birds", steps=5).prompt()
'a photo of <v*>'
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError, named
from ..settings import setting
from ..validators import float_range, int_at_least, nonnegative_int, positive_int
from .methods import METHOD_DEFAULTS, METHODS, LearnerMethod

__all__ = ["METHODS", "METHOD_DEFAULTS", "IMAGE_SUFFIXES", "LearnConfig", "check_images", "model_folder", "check_token"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
#: ``model`` naming the shipped world Flux.
WORLD_MODEL = "world"


def _optional(parse: Any) -> Any:
    def read(text: str) -> Any:
        return None if text.lower() == "none" else parse(text)

    read.__name__ = getattr(parse, "__name__", "value")
    return read


@dataclass(frozen=True, kw_only=True)
class LearnConfig:
    """One concept learnt by one learner (every field is a ``learn`` flag).

    Args:
        method: one of :data:`METHODS`.
        model: ``"world"`` (the shipped world Flux) or a diffusers ``FluxPipeline`` folder.
        images: folder of the concept's ``m`` training images (one size; PNG / JPEG / WebP / BMP).
        token: the placeholder V*, a NEW token of both tokenizers.
        init_word: the word whose embedding starts V* (textual inversion, Custom Diffusion).
        class_prompt: the prior-preservation prompt (DreamBooth, Custom Diffusion).
        instance_prompt: the training caption, ``{token}`` replaced by ``token``.
        steps, lr: optimisation steps and AdamW learning rate (``None``: :data:`METHOD_DEFAULTS`).
        batch: training images per step (and prior images per step).
        seed: every random draw (batches, noise, timesteps, LoRA init, prior images) follows it.
        device, dtype: torch device and the frozen weights' precision; under ``bfloat16`` the forward
            runs in bf16 autocast and every trained weight keeps a float32 master copy.
        min_images: ``m``: the fewest training images accepted (default 8; Patel et al., Sec. 3, use 100 per concept).
        num_prior, prior_weight, prior_steps: prior images generated from ``class_prompt``, the
            prior loss's weight lambda, and their sampling steps.
        class_data_dir: the user's own class images (prior preservation); missing ones are drawn by the model.
        gradient_accumulation: micro-batches per optimisation step (each ``batch`` images).
        lr_scheduler, lr_warmup_steps: ``diffusers.optimization.get_scheduler``'s schedule and warm-up.
        weighting_scheme: the timestep density of ``diffusers.training_utils``.
        rank: LoRA rank (alpha = rank).
        guidance: the guidance embedding's value for a guidance-distilled Flux (FLUX.1-dev).
        checkpoint_every: steps between resumable checkpoints.
        validation_prompt, num_validation_images, validation_steps, validation_inference_steps: images drawn
            with the current weights every ``validation_steps`` steps and at the end (``None``: none), as
            diffusers' scripts' ``--validation_prompt`` (``{token}`` replaced by ``token``); image ``i`` has the
            same noise at every step (docs/guide/learners.md, "Validation images").
        gradient_checkpointing: recompute the transformer's activations in backward (large models).
        threads: torch CPU threads while learning (restored afterwards).
        progress: progress bars.
    """

    method: str = setting(help="the learner", choices=tuple(METHODS))
    images: str | Path = setting(help="folder of the concept's training images (one size)", parse=Path)
    model: str | Path = setting(WORLD_MODEL, "'world' (the shipped world Flux) or a diffusers FluxPipeline folder")
    token: str = setting("<v*>", "the placeholder V*: a new token of both tokenizers")
    init_word: str = setting("bird", "word whose embedding starts V* (textual inversion, Custom Diffusion)")
    class_prompt: str = setting("a photo of a bird", "prior-preservation prompt (DreamBooth, Custom Diffusion)")
    instance_prompt: str = setting("a photo of {token}", "training caption; {token} is replaced by --token")
    steps: int | None = setting(
        None, "optimisation steps (none: the method's Table 5 count)", parse=_optional(positive_int)
    )
    lr: float | None = setting(
        None,
        "AdamW learning rate (none: the method's rate, Table 5's or the world Flux's)",
        parse=_optional(float_range(0.0, low_open=True)),
    )
    batch: int = setting(4, "training images per step (and prior images per step)", parse=positive_int)
    seed: int = setting(0, "seed of every random draw", parse=nonnegative_int)
    device: str = setting("cpu", "torch device (e.g. cuda)")
    dtype: str = setting("float32", "precision of the pipeline (bfloat16 on a GPU)", choices=("float32", "bfloat16"))
    min_images: int = setting(8, "m: fewest training images accepted", parse=positive_int)
    num_prior: int = setting(
        16, "prior-preservation images generated from --class-prompt (Table 5: 200)", parse=positive_int
    )
    prior_weight: float = setting(1.0, "weight lambda of the prior-preservation loss", parse=float_range(0.0))
    prior_steps: int = setting(20, "sampling steps of the prior images", parse=positive_int)
    prior_cache: str | None = setting(
        None,
        "folder of prior images shared by runs (the same model, prompt, count, "
        "steps, seed and size draw the same images; default: the run's own)",
    )
    class_data_dir: str | None = setting(
        None,
        "folder of the user's own class (prior-preservation) images, one size as --images; "
        "the model draws the missing ones up to --num-prior",
    )
    gradient_accumulation: int = setting(1, "micro-batches summed into one optimisation step", parse=positive_int)
    lr_scheduler: str = setting(
        "constant",
        "learning-rate schedule (diffusers.optimization.get_scheduler)",
        choices=("constant", "constant_with_warmup", "linear", "cosine", "cosine_with_restarts", "polynomial"),
    )
    lr_warmup_steps: int = setting(0, "warm-up steps of --lr-scheduler", parse=nonnegative_int)
    weighting_scheme: str = setting(
        "logit_normal",
        "timestep density (diffusers.training_utils.compute_density_for_timestep_sampling; "
        "logit_normal: t = sigmoid(N(0, 1)))",
        choices=("logit_normal", "mode", "uniform"),
    )
    rank: int = setting(16, "LoRA rank (alpha = rank)", parse=positive_int)
    guidance: float = setting(
        1.0, "guidance embedding value of a guidance-distilled Flux (ignored otherwise)", parse=float_range(0.0)
    )
    checkpoint_every: int = setting(50, "steps between resumable checkpoints", parse=int_at_least(1))
    validation_prompt: str | None = setting(
        None, "prompt of validation images drawn while learning ({token} is replaced by --token; none: no images)"
    )
    num_validation_images: int = setting(4, "validation images per --validation-prompt", parse=positive_int)
    validation_steps: int = setting(100, "steps between validation images (and at the end)", parse=positive_int)
    validation_inference_steps: int = setting(28, "sampling steps of the validation images", parse=positive_int)
    gradient_checkpointing: bool = setting(
        False, "recompute transformer activations in backward (large models)", action="store_true"
    )
    threads: int = setting(
        1, "torch CPU threads while learning (1: fastest on a shared 2-core machine)", parse=positive_int
    )
    progress: bool = setting(True, "show no progress bars", flag="--no-progress", action="store_false")

    def learner_method(self) -> LearnerMethod:
        """The method object (:mod:`.methods`) these settings build."""
        return METHODS[self.method].from_config(self)

    def resolved_steps(self) -> int:
        """``steps``, or the method's Table 5 count."""
        return int(self.steps if self.steps is not None else METHODS[self.method].steps)

    def resolved_lr(self) -> float:
        """``lr``, or the method's rate: Table 5's, or its world-Flux rate on the shipped world Flux."""
        if self.lr is not None:
            return float(self.lr)
        cls = METHODS[self.method]
        return float(cls.world_lr if str(self.model) == WORLD_MODEL else cls.lr)

    def prompt(self) -> str:
        """The training caption (``instance_prompt`` with ``{token}`` filled in)."""
        return self.instance_prompt.replace("{token}", self.token)

    def validation(self) -> str | None:
        """The validation prompt (``{token}`` filled in), or ``None``: no validation images."""
        return None if self.validation_prompt is None else self.validation_prompt.replace("{token}", self.token)

    def uses_prior(self) -> bool:
        """Whether the method trains with prior-preservation images."""
        return METHODS[self.method].uses_prior and self.prior_weight > 0

    def to_json(self) -> str:
        """The config as JSON (paths as strings; ``progress`` left out: it changes no result)."""
        values = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items() if k != "progress"}
        return json.dumps(values, indent=1, sort_keys=True)

    def check(self) -> None:
        """The cheap checks, before any weight is loaded (one line naming the setting).

        Raises:
            UsageError: an unknown method, a bad images folder, a model folder that is not a
                Flux, a token already in a tokenizer's vocabulary, a ``{token}``-less prompt.
        """
        if self.method not in METHODS:
            raise UsageError(f"unknown learner {self.method!r}; known: {', '.join(METHODS)}", argument=named("method"))
        if self.dtype not in ("float32", "bfloat16"):
            raise UsageError(f"must be float32 or bfloat16, got {self.dtype!r}", argument=named("dtype"))
        if "{token}" not in self.instance_prompt:
            raise UsageError("must contain {token}", argument=named("instance_prompt"))
        width, height = check_images(self.images, self.min_images)
        if self.class_data_dir is not None:
            size = check_images(self.class_data_dir, 1, "class_data_dir")
            if size != (width, height):
                raise UsageError(
                    f"{size[0]}x{size[1]} class images, {width}x{height} concept images: give one size",
                    argument=named("class_data_dir"),
                )
        folder = model_folder(self.model)
        vae = json.loads((folder / "vae" / "config.json").read_text())
        multiple = 2 ** len(vae["block_out_channels"])  # the VAE's downsampling x Flux's 2 x 2 packing
        if width % multiple or height % multiple:
            raise UsageError(
                f"{width}x{height} images: sides must be multiples of {multiple} for this model",
                argument=named("images"),
            )
        check_token(folder, self.token, self.init_word)


def model_folder(model: str | Path) -> Path:
    """The ``FluxPipeline`` folder of ``model`` (``"world"``: the shipped one).

    Raises:
        UsageError: not a folder whose ``model_index.json`` names a ``FluxPipeline``.
    """
    if str(model) == WORLD_MODEL:
        from ..worldflux import world_flux_path

        return world_flux_path()
    folder = Path(model)
    index = folder / "model_index.json"
    if not index.is_file():
        raise UsageError(f"{folder} is not a diffusers pipeline folder (no model_index.json)", argument=named("model"))
    name = json.loads(index.read_text()).get("_class_name")
    if name != "FluxPipeline" or not (folder / "transformer").is_dir():
        raise UsageError(f"{folder} holds a {name}, not a FluxPipeline (FLUX.1) folder", argument=named("model"))
    return folder


def image_files(folder: str | Path) -> list[Path]:
    """The image files of ``folder`` (:data:`IMAGE_SUFFIXES`), sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)


def check_images(folder: str | Path, min_images: int, argument: str = "images") -> tuple[int, int]:
    """The common ``(width, height)`` of ``folder``'s images (headers only).

    Raises:
        UsageError: no such folder, fewer than ``min_images`` images, mixed sizes or an unreadable image.
    """
    from PIL import Image

    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"no such folder: {path}", argument=named(argument))
    files = image_files(path)
    if len(files) < min_images:
        raise UsageError(
            f"{path} holds {len(files)} images, fewer than m = {min_images}",
            argument=named(argument),
            hint="add images or lower min_images",
        )
    sizes: dict[tuple[int, int], str] = {}
    for f in files:
        try:
            with Image.open(f) as im:
                sizes.setdefault(im.size, f.name)
        except OSError:
            raise UsageError("not a readable image", file=f) from None
    if len(sizes) > 1:
        shown = ", ".join(f"{w}x{h} ({name})" for (w, h), name in list(sizes.items())[:3])
        raise UsageError(f"{path} mixes image sizes: {shown}", argument=named(argument))
    return next(iter(sizes))


def check_token(folder: Path, token: str, init_word: str) -> None:
    """Refuse a placeholder already in either tokenizer's vocabulary, or an ``init_word`` neither knows.

    Raises:
        UsageError: naming ``token`` or ``init_word``.
    """
    from transformers import AutoTokenizer

    for sub in ("tokenizer", "tokenizer_2"):
        tok = AutoTokenizer.from_pretrained(folder / sub)
        if token in tok.get_vocab() or token.lower() in tok.get_vocab():
            raise UsageError(
                f"{token!r} is already in {folder.name}/{sub}'s vocabulary; a placeholder must be a new token",
                argument=named("token"),
                hint="pick an unused string such as <v*>",
            )
        ids = [i for i in tok(init_word, add_special_tokens=False).input_ids if i != tok.unk_token_id]
        if not ids:
            raise UsageError(f"{init_word!r} is unknown to {folder.name}/{sub}", argument=named("init_word"))
