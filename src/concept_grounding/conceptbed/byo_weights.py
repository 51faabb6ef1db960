"""``conceptbed --learned DIR``: the files diffusers' Flux training scripts write, checked and loaded per concept.

``pytorch_lora_weights.safetensors`` (``load_lora_weights``), ``*_emb.safetensors`` (pivotal tuning, keys ``clip_l``
/ ``t5``) and ``learned_embeds.safetensors`` / ``learned_embeds_2.safetensors`` (``load_textual_inversion``), or a
whole pipeline folder (``FluxPipeline.from_pretrained``). docs/conceptbed/bring_your_own.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from .concepts import Concept

__all__ = [
    "LORA_FILE",
    "PLACEHOLDER",
    "BaseShapes",
    "LearnedFiles",
    "LearnedLearner",
    "base_shapes",
    "check_weights",
    "load_into",
    "lora_layers",
]

LORA_FILE = "pytorch_lora_weights.safetensors"
#: textual inversion files of diffusers' scripts: file -> the encoder they extend (CLIP, then T5)
EMBED_FILES = {"learned_embeds.safetensors": "clip_l", "learned_embeds_2.safetensors": "t5"}
#: the placeholder token ``--export-concepts`` writes into ``concept.json`` (``V*`` in the evaluation prompts)
PLACEHOLDER = "<v*>"
_FLAG = "--learned"


@dataclass(frozen=True)
class BaseShapes:
    """What a base Flux accepts: the transformer's ``(out, in)`` weight shape per linear module name and the width
    of each text encoder's embeddings (``clip_l``: CLIP, ``t5``: T5)."""

    model: str
    linear: dict[str, tuple[int, int]]
    widths: dict[str, int]


def base_shapes(model: str | None) -> BaseShapes:
    """:class:`BaseShapes` of the Flux folder ``model`` (default: the shipped world Flux), from its configs only:
    the transformer is built with empty weights (``accelerate.init_empty_weights``), so a 12B model costs nothing."""
    import torch
    from accelerate import init_empty_weights
    from diffusers import FluxTransformer2DModel

    from .learners import FluxLearner

    path = FluxLearner("base", model=model).model_path()
    try:
        config = FluxTransformer2DModel.load_config(path, subfolder="transformer")
        clip = FluxTransformer2DModel.load_config(path, subfolder="text_encoder")
        t5 = FluxTransformer2DModel.load_config(path, subfolder="text_encoder_2")
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"not a diffusers Flux folder ({exc.__class__.__name__})", argument="--model", file=path
        ) from None
    with init_empty_weights():
        transformer = FluxTransformer2DModel.from_config(config)
    linear = {
        name: (int(m.out_features), int(m.in_features))
        for name, m in transformer.named_modules()
        if isinstance(m, torch.nn.Linear)
    }
    return BaseShapes(path, linear, {"clip_l": int(clip["hidden_size"]), "t5": int(t5["d_model"])})


@dataclass(frozen=True)
class LearnedFiles:
    """One concept's weights: a LoRA file, embedding files, or a pipeline folder, and its placeholder token."""

    folder: Path
    lora: Path | None = None
    embeddings: tuple[Path, ...] = ()
    pipeline: bool = False
    token: str = PLACEHOLDER


def _header(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of a safetensors file (its header only); one line naming it when unreadable."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}  # noqa: SIM118 (safe_open is no dict)
    except Exception as exc:  # noqa: BLE001 (safetensors raises its own and OS errors: all mean unreadable)
        raise UsageError(f"unreadable safetensors file ({exc.__class__.__name__})", argument=_FLAG, file=path) from None


def _fits(key: str, shape: tuple[int, ...], target: tuple[int, int]) -> bool:
    """Whether a LoRA matrix fits its module's ``(out, in)`` weight: ``lora_A`` is ``(r, in)``, ``lora_B`` ``(out, r)``.

    >>> _fits("x.lora_A.weight", (4, 64), (128, 64)), _fits("x.lora_B.weight", (64, 4), (128, 64))
    (True, False)
    """
    if len(shape) != 2:
        return False
    if key.endswith("lora_A.weight"):
        return shape[1] == target[1]
    return not key.endswith("lora_B.weight") or shape[0] == target[0]


def _check_lora(path: Path, base: BaseShapes) -> None:
    """Every key is diffusers' ``transformer.<module>.lora_A/B.weight`` (or a text encoder's) and fits the module's
    shape in ``base``: another base model's LoRA (``load_lora_weights`` only warns about it) is refused."""
    keys = _header(path)
    if not keys:
        raise UsageError("holds no tensors", argument=_FLAG, file=path)
    bad = []
    for key, shape in keys.items():
        prefix, _, rest = key.partition(".")
        module, lora, _ = rest.rpartition(".lora_")
        if prefix == "text_encoder" and lora:
            continue
        if prefix != "transformer" or not lora:
            bad.append(f"{key} is not diffusers' Flux LoRA format (transformer.<module>.lora_A.weight)")
            continue
        target = base.linear.get(module)
        if target is None:
            bad.append(f"{key}: the transformer has no linear module {module!r}")
        elif not _fits(rest, shape, target):
            bad.append(f"{key} {list(shape)} does not fit {module} (out, in) {list(target)}")
    if bad:
        raise UsageError(
            f"{len(bad)} of its {len(keys)} LoRA keys do not match the base model {base.model} (a LoRA of another "
            f"base model?): {bad[0]}",
            argument=_FLAG,
            file=path,
        )


def _check_embeddings(path: Path, base: BaseShapes) -> None:
    """A pivotal-tuning ``*_emb.safetensors`` holds ``clip_l`` and / or ``t5`` rows ``(k, width)``; a
    ``learned_embeds*.safetensors`` one tensor per token of its encoder's width."""
    keys = _header(path)
    if path.name in EMBED_FILES:
        encoder = EMBED_FILES[path.name]
        wanted = dict.fromkeys(keys, encoder)
    else:
        wanted = {k: k for k in keys if k in base.widths}
        if not wanted or set(keys) - set(wanted):
            raise UsageError(
                f"a pivotal-tuning embedding file holds the keys 'clip_l' and / or 't5', not {sorted(keys)}",
                argument=_FLAG,
                file=path,
            )
    for key, encoder in wanted.items():
        shape = keys[key]
        if not keys[key] or shape[-1] != base.widths[encoder]:
            raise UsageError(
                f"{key} {list(shape)}: the base model's {encoder} embeddings are {base.widths[encoder]} wide "
                f"({base.model}); embeddings of another base model?",
                argument=_FLAG,
                file=path,
            )


def _check_pipeline(folder: Path) -> None:
    """``model_index.json`` is JSON naming a Flux pipeline class."""
    path = folder / "model_index.json"
    try:
        name = str(json.loads(path.read_text(encoding="utf-8")).get("_class_name", ""))
    except (OSError, ValueError, AttributeError) as exc:
        raise UsageError(f"unreadable pipeline index ({exc.__class__.__name__})", argument=_FLAG, file=path) from None
    if "Flux" not in name:
        raise UsageError(f"a {name or 'nameless'} pipeline, not a Flux one", argument=_FLAG, file=path)


def _token(folder: Path) -> str:
    """The placeholder of ``folder/concept.json`` (as ``--export-concepts`` writes it), else :data:`PLACEHOLDER`."""
    path = folder / "concept.json"
    if not path.is_file():
        return PLACEHOLDER
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["placeholder"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"no readable 'placeholder' ({exc.__class__.__name__})", argument=_FLAG, file=path) from None


def check_weights(folder: Path, base: BaseShapes) -> LearnedFiles:
    """The weights of one concept folder, each checked against ``base`` (headers only: nothing is loaded).

    Raises:
        UsageError: one line naming the file: none of the known files, an unreadable or foreign one.
    """
    names = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    embeddings = tuple(sorted(folder / n for n in names if n.endswith("_emb.safetensors") or n in EMBED_FILES))
    lora = folder / LORA_FILE if LORA_FILE in names else None
    pipeline = "model_index.json" in names
    if not (lora or embeddings or pipeline):
        raise UsageError(
            f"holds none of {LORA_FILE}, *_emb.safetensors, {', '.join(EMBED_FILES)}, model_index.json",
            argument=_FLAG,
            file=folder,
        )
    if pipeline:
        _check_pipeline(folder)
    else:
        if lora is not None:
            _check_lora(lora, base)
        for path in embeddings:
            _check_embeddings(path, base)
    return LearnedFiles(folder, lora, embeddings, pipeline, _token(folder))


def lora_layers(transformer: Any) -> int:
    """How many modules of ``transformer`` carry a LoRA layer (peft's ``lora_A``)."""
    return sum(1 for name, _ in transformer.named_modules() if name.endswith(".lora_A"))


def load_into(pipe: Any, files: LearnedFiles) -> Any:
    """``pipe`` with ``files`` loaded through diffusers' own loaders (``load_lora_weights``,
    ``load_textual_inversion`` on both encoders); a LoRA that adds no layer is refused in one line."""
    from safetensors.torch import load_file

    if files.lora is not None:
        pipe.load_lora_weights(str(files.folder), weight_name=files.lora.name)
        if not lora_layers(pipe.transformer):
            raise UsageError("loaded no LoRA layer into the transformer", argument=_FLAG, file=files.lora)
    encoders = {"clip_l": (pipe.text_encoder, pipe.tokenizer), "t5": (pipe.text_encoder_2, pipe.tokenizer_2)}
    for path in files.embeddings:
        tensors = load_file(str(path))
        for key, rows in tensors.items():
            encoder, tokenizer = encoders[EMBED_FILES.get(path.name, key)]
            rows = rows.reshape(-1, rows.shape[-1]).to(encoder.dtype)
            pipe.load_textual_inversion(rows, token=files.token, text_encoder=encoder, tokenizer=tokenizer)
    return pipe


@dataclass
class LearnedLearner:
    """A :class:`~.learners.Learner` over weights trained elsewhere: ``fit`` loads the concept's files into a fresh
    base pipeline (or its own pipeline folder), ``generate`` is :meth:`~.learners.FluxLearner.generate` on it with
    ``V*`` as the concept's placeholder (a multi-vector embedding expands it, as diffusers' loader does)."""

    name: str
    source: Any
    model: str | None = None
    device: str = "cpu"
    flux: Any = field(default=None, repr=False)

    def fit(self, concept: Concept, out: Path) -> None:
        import torch
        from diffusers import FluxPipeline

        from .learners import FluxLearner

        files: LearnedFiles = self.source.checked[concept.task, concept.name]
        flux = FluxLearner(self.name, model=self.model, device=self.device, token=files.token)
        if files.pipeline:
            pipe = FluxPipeline.from_pretrained(str(files.folder), torch_dtype=torch.float32).to(self.device)
        else:
            pipe = load_into(flux.base_pipeline(), files)
        flux.pipe, flux.size = pipe, int(concept.train.shape[1])
        self.flux = flux

    def generate(self, prompts: Sequence[str], n: int, seed: int) -> np.ndarray:
        if self.flux is None:
            raise RuntimeError(f"{self.name}: generate before fit")
        return self.flux.generate(prompts, n, seed)
