"""One object per concept learner: what it trains on a ``FluxPipeline``, its defaults, its files.

:data:`METHODS` maps a method's name to its class; :meth:`~.config.LearnConfig.learner_method` builds
one from a learner's settings. Each saves exactly the files diffusers' own training scripts write, so
diffusers' loaders read them with no project code (docs/guide/learners.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .placeholder import EMBED_KEYS, ENCODERS, Placeholder

__all__ = [
    "LearnerMethod",
    "TextualInversion",
    "DreamBooth",
    "LoRA",
    "CustomDiffusion",
    "METHODS",
    "METHOD_DEFAULTS",
    "LORA_TARGETS",
    "custom_diffusion_parameters",
    "embeddings_file",
    "load_learned",
]

#: attention projections LoRA adapts (diffusers' train_dreambooth_lora_flux default).
LORA_TARGETS = ("to_k", "to_q", "to_v", "to_out.0", "add_k_proj", "add_q_proj", "add_v_proj", "to_add_out")
LORA_FILE = "pytorch_lora_weights.safetensors"
#: textual inversion's single-encoder file (``pipe.load_textual_inversion(folder)`` reads it by default).
TI_FILE = "learned_embeds.safetensors"
CUSTOM_FILE = "custom_diffusion.safetensors"
TRANSFORMER_DIR = "transformer"


EMB_SUFFIX = "_emb.safetensors"


def embeddings_file(folder: Path) -> str:
    """``{folder name}_emb.safetensors``: diffusers' pivotal-tuning file (keys ``clip_l``, ``t5``)."""
    return f"{Path(folder).name}{EMB_SUFFIX}"


@dataclass
class LearnerMethod:
    """A concept learner: its defaults (class attributes: the one table of steps and rates) and what it trains.

    Class attributes:
        name: the ``--method`` value.
        steps: ConceptBed's Table 5 optimisation steps.
        lr: Table 5's AdamW learning rate (FLUX.1-size models).
        world_lr: the learning rate on the shipped world Flux (a model 1,000x smaller learns faster).
        trains_rows: V*'s rows are trained (else a fixed random row, DreamBooth's rare identifier).
        uses_prior: trained with DreamBooth's prior-preservation loss (Table 5's "Regularizer").
    """

    name: ClassVar[str]
    steps: ClassVar[int]
    lr: ClassVar[float]
    world_lr: ClassVar[float]
    trains_rows: ClassVar[bool] = False
    uses_prior: ClassVar[bool] = False

    @classmethod
    def from_config(cls, config: Any) -> LearnerMethod:
        """The method of a :class:`~.config.LearnConfig` (its own settings taken from it)."""
        return cls()

    def trainable(self, pipe: Any, placeholder: Placeholder, seed: int) -> dict[str, Any]:
        """Unfreeze (or add) what this method trains on the frozen ``pipe``; name -> parameter.

        Names: ``row.<encoder>`` for V*'s rows, the transformer's parameter names otherwise; ``seed``
        seeds any initialisation (on a forked generator: the global random state is left as it was).
        """
        return {f"row.{k}": v for k, v in placeholder.rows.items()} if self.trains_rows else {}

    def save(self, pipe: Any, placeholder: Placeholder, params: dict[str, Any], folder: Path) -> list[str]:
        """Write this method's files into ``folder`` (V*'s rows first); return their names."""
        return save_embeddings(placeholder, folder)

    def load(self, pipe: Any, folder: Path) -> None:
        """Apply this method's transformer files of ``folder`` to ``pipe`` (its rows are loaded already)."""


@dataclass
class TextualInversion(LearnerMethod):
    """V*'s embedding row in every text encoder (Gal et al., Sec. 3)."""

    name: ClassVar[str] = "textual_inversion"
    steps: ClassVar[int] = 3000
    lr: ClassVar[float] = 5e-4
    world_lr: ClassVar[float] = 5e-3
    trains_rows: ClassVar[bool] = True

    def save(self, pipe: Any, placeholder: Placeholder, params: dict[str, Any], folder: Path) -> list[str]:
        from safetensors.torch import save_file

        row = placeholder.rows[ENCODERS[0][0]].detach().float().cpu().contiguous()
        save_file({placeholder.token: row}, folder / TI_FILE)
        return [*save_embeddings(placeholder, folder), TI_FILE]


@dataclass
class DreamBooth(LearnerMethod):
    """Every transformer parameter, with prior preservation (Ruiz et al., Eq. 2)."""

    name: ClassVar[str] = "dreambooth"
    steps: ClassVar[int] = 400
    lr: ClassVar[float] = 5e-6
    world_lr: ClassVar[float] = 1e-4
    uses_prior: ClassVar[bool] = True

    def trainable(self, pipe: Any, placeholder: Placeholder, seed: int) -> dict[str, Any]:
        pipe.transformer.requires_grad_(True)
        return dict(pipe.transformer.named_parameters())

    def save(self, pipe: Any, placeholder: Placeholder, params: dict[str, Any], folder: Path) -> list[str]:
        pipe.transformer.save_pretrained(folder / TRANSFORMER_DIR, safe_serialization=True)
        return [*save_embeddings(placeholder, folder), TRANSFORMER_DIR]

    def load(self, pipe: Any, folder: Path) -> None:
        from diffusers import FluxTransformer2DModel

        transformer = pipe.transformer
        trained = FluxTransformer2DModel.from_pretrained(
            folder, subfolder=TRANSFORMER_DIR, torch_dtype=transformer.dtype
        )
        pipe.register_modules(transformer=trained.to(transformer.device))


def _default_lora(rank: int = 16) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=rank, lora_alpha=rank, init_lora_weights="gaussian", target_modules=list(LORA_TARGETS))


@dataclass
class LoRA(LearnerMethod):
    """peft LoRA adapters on the transformer's attention projections (Hu et al., Eq. 3).

    Attributes:
        lora: peft's ``LoraConfig``, as diffusers' ``train_dreambooth_lora_flux.py`` builds it.
    """

    name: ClassVar[str] = "lora"
    steps: ClassVar[int] = 500
    lr: ClassVar[float] = 1e-4
    world_lr: ClassVar[float] = 1e-3
    lora: Any = field(default_factory=_default_lora)

    @classmethod
    def from_config(cls, config: Any) -> LearnerMethod:
        """peft's ``LoraConfig`` of rank ``config.rank``, alpha = rank, gaussian init, diffusers' Flux targets."""
        return cls(lora=_default_lora(config.rank))

    def trainable(self, pipe: Any, placeholder: Placeholder, seed: int) -> dict[str, Any]:
        import torch

        transformer = pipe.transformer
        with torch.random.fork_rng(devices=[]):  # peft draws A from torch's global generator: fork it, seeded
            torch.manual_seed(seed)
            transformer.add_adapter(self.lora)
        return {n: p for n, p in transformer.named_parameters() if p.requires_grad}

    def save(self, pipe: Any, placeholder: Placeholder, params: dict[str, Any], folder: Path) -> list[str]:
        from diffusers import FluxPipeline
        from peft.utils import get_peft_model_state_dict

        layers = get_peft_model_state_dict(pipe.transformer)
        FluxPipeline.save_lora_weights(folder, transformer_lora_layers=layers, safe_serialization=True)
        return [*save_embeddings(placeholder, folder), LORA_FILE]

    def load(self, pipe: Any, folder: Path) -> None:
        pipe.load_lora_weights(str(folder), weight_name=LORA_FILE)


def custom_diffusion_parameters(transformer: Any) -> Iterator[tuple[str, Any]]:
    """``(name, parameter)`` of the key/value projections that read text (docs/guide/learners.md)."""
    for name, param in transformer.named_parameters():
        parts = name.split(".")
        if (parts[0] == "transformer_blocks" and ("add_k_proj" in parts or "add_v_proj" in parts)) or (
            parts[0] == "single_transformer_blocks" and ("to_k" in parts or "to_v" in parts)
        ):
            yield name, param


@dataclass
class CustomDiffusion(LearnerMethod):
    """V*'s rows and the key/value projections that read text, with prior preservation (Kumari et al., Sec. 3.1)."""

    name: ClassVar[str] = "custom_diffusion"
    steps: ClassVar[int] = 250
    lr: ClassVar[float] = 1e-5
    world_lr: ClassVar[float] = 1e-4
    trains_rows: ClassVar[bool] = True
    uses_prior: ClassVar[bool] = True

    def trainable(self, pipe: Any, placeholder: Placeholder, seed: int) -> dict[str, Any]:
        out = super().trainable(pipe, placeholder, seed)
        for name, param in custom_diffusion_parameters(pipe.transformer):
            param.requires_grad_(True)
            out[name] = param
        return out

    def save(self, pipe: Any, placeholder: Placeholder, params: dict[str, Any], folder: Path) -> list[str]:
        from safetensors.torch import save_file

        tensors = {k: v.detach().cpu().contiguous() for k, v in params.items() if not k.startswith("row.")}
        save_file(tensors, folder / CUSTOM_FILE)
        return [*save_embeddings(placeholder, folder), CUSTOM_FILE]

    def load(self, pipe: Any, folder: Path) -> None:
        import torch
        from safetensors.torch import load_file

        from ..errors import UsageError

        transformer = pipe.transformer
        tensors = load_file(folder / CUSTOM_FILE, device=str(transformer.device))
        missing = sorted(set(tensors) - set(transformer.state_dict()))
        if missing:
            raise UsageError(
                f"{len(missing)} tensors do not fit this transformer, e.g. {missing[0]}", file=folder / CUSTOM_FILE
            )
        with torch.no_grad():
            transformer.load_state_dict({k: v.to(transformer.dtype) for k, v in tensors.items()}, strict=False)


#: method name -> its class (the ``--method`` choices, in Table 5's order).
METHODS: dict[str, type[LearnerMethod]] = {m.name: m for m in (TextualInversion, DreamBooth, LoRA, CustomDiffusion)}
#: method -> (Table 5 steps, Table 5 learning rate), read from the classes.
METHOD_DEFAULTS = {name: (cls.steps, cls.lr) for name, cls in METHODS.items()}


def save_embeddings(placeholder: Placeholder, folder: Path) -> list[str]:
    """``{folder name}_emb.safetensors`` with V*'s rows as ``clip_l`` / ``t5`` ``(1, D)`` float32
    (diffusers' pivotal-tuning format); returns its name."""
    from safetensors.torch import save_file

    tensors = {
        key: placeholder.rows[enc].detach().float().cpu().reshape(1, -1).contiguous()
        for key, (enc, _) in zip(EMBED_KEYS, ENCODERS)
    }
    name = embeddings_file(folder)
    save_file(tensors, folder / name)
    return [name]


def load_embeddings(pipe: Any, path: Path, token: str) -> None:
    """Load V*'s rows of a pivotal-tuning file into both encoders with ``pipe.load_textual_inversion``."""
    from safetensors.torch import load_file

    tensors = load_file(path)
    for key, (enc, tok) in zip(EMBED_KEYS, ENCODERS):
        pipe.load_textual_inversion(
            tensors[key], token=[token], text_encoder=getattr(pipe, enc), tokenizer=getattr(pipe, tok)
        )


def load_learned(pipe: Any, folder: str | Path) -> Any:
    """Apply a learner's folder (written by :func:`~concept_grounding.learners.learn`) to ``pipe``.

    V* goes in through ``pipe.load_textual_inversion`` (both encoders), then the method's
    transformer files (:meth:`LearnerMethod.load`). Returns ``pipe``.

    Raises:
        UsageError: ``folder`` has no ``learned.json``, or its tensors do not fit ``pipe``.
    """
    import json

    from ..errors import UsageError

    folder = Path(folder)
    manifest_path = folder / "learned.json"
    if not manifest_path.is_file():
        raise UsageError("not a learner's folder (no learned.json)", file=folder)
    manifest = json.loads(manifest_path.read_text())
    embeds = [name for name in manifest["files"] if name.endswith(EMB_SUFFIX)]
    if not embeds or not (folder / embeds[0]).is_file():
        raise UsageError(f"no *{EMB_SUFFIX} file of V*'s rows", file=folder)
    load_embeddings(pipe, folder / embeds[0], manifest["token"])
    METHODS[manifest["method"]]().load(pipe, folder)
    return pipe
