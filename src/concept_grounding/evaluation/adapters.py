"""Adapters: any concept model or CLIP-like model behind one small protocol SUB can score.

A :class:`SubModel` turns a batch of PIL images into a score matrix:

* :class:`BinaryConceptModel` (``mode = "binary"``): a callable / ``nn.Module`` mapping a
  ``(B, 3, H, W)`` batch to ``(B, C)`` concept logits or probabilities, the ``C`` concept
  names (:func:`~.concepts.resolve_concept_names`) and its preprocessing
  (:func:`~.preprocessing.make_preprocess`), which must be stated: ``mean`` / ``std``, a
  transform or processor, or ``normalize=False`` for [0, 1] pixels (a model fed pixels it
  was not trained on scores wrong without a word). Outputs that are tuples, dicts or
  dataclasses (``(concepts, classes)``, :class:`~concept_grounding.models.ConceptModelOutput`,
  pytorch-concepts' ``InferenceOutput`` of ``AnnotatedTensor``) are picked by a declared
  key or index (``output=``). Scores are probabilities ``sigmoid(logit)`` (or the model's
  own probabilities).
* :class:`OpenVocabularyModel` (``mode = "group"``): SUB's group mode over the one CLIP
  handle, :class:`~concept_grounding.models.clip.ClipHandle`, which encodes (a CLIP-like model: open_clip,
  transformers CLIP / SigLIP, :class:`~concept_grounding.models.WorldCLIP`; its tokenizer
  and its preprocessing, where the normalisation lives). Scores are the cosine
  similarities of each image with the SUB group prompts
  (:func:`~concept_grounding.models.clip.group_prompts`), one column per attribute of
  the groups asked for, plus the "none" prompt when wanted (SUB group mode, docs/sub_accuracy.md).

:func:`as_sub_model` wraps whatever it is given: an adapter (returned as is), a
``ClipHandle``, one of the project's concept models (``load_concept_model``), a
pytorch-concepts model (:mod:`.pyc`; concept names from its annotations), a CLIP-like
model plus ``tokenizer=``, or any callable plus ``concept_names=``.

>>> import torch
>>> net = torch.nn.Linear(3, 2)            # a "model" reading the mean colour
>>> m = BinaryConceptModel(lambda x: net(x.mean(dim=(2, 3))), ["has_crown_color::black", "has_crown_color--blue"],
...                        size=8, normalize=False)
>>> m.mode, m.concept_names
('binary', ('has_crown_color::black', 'has_crown_color::blue'))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch
from torch import nn

from ..errors import UsageError, option
from ..models.clip import NONE_PROMPT, ClipHandle, backend_for, group_prompts, model_device
from ..vocabulary import Vocabulary
from .concepts import resolve_concept_names
from .preprocessing import Preprocess, make_preprocess
from .pyc import PyCConcepts, is_pyc_model, plain_tensor

__all__ = ["SubModel", "BinaryConceptModel", "OpenVocabularyModel", "as_sub_model", "model_device"]

#: torch dtypes by the names ``--dtype`` takes.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@runtime_checkable
class SubModel(Protocol):
    """What :func:`~.sub.evaluate_sub` needs of a model.

    ``preprocess`` turns PIL images into a batch, ``forward`` a batch into ``(B, C)``
    float32 CPU scores plus ``(B,)`` "none" scores (group mode with a none option) or
    ``None``; ``prepare`` is called once before with the attribute groups to score and
    returns the ``C`` column names (also kept as ``columns``).
    """

    mode: str
    columns: tuple[str, ...]
    preprocess: Preprocess

    def prepare(self, groups: Sequence[str], vocab: Vocabulary) -> tuple[str, ...]: ...

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> SubModel: ...


def pick_output(output: Any, key: str | int | None) -> torch.Tensor:
    """The concept tensor of a model's output.

    ``key`` ``None``: a tensor is itself; an object with ``concept_logits`` (the project's
    :class:`~concept_grounding.models.ConceptModelOutput`) gives that. An ``int`` indexes a
    tuple / list; a ``str`` looks up a mapping key or an attribute (dataclasses, HF
    ``ModelOutput``, pytorch-concepts' ``InferenceOutput``). A pytorch-concepts
    ``AnnotatedTensor`` gives its tensor.

    >>> pick_output((torch.zeros(1, 2), torch.ones(1, 5)), 0).shape
    torch.Size([1, 2])
    >>> pick_output({"concepts": torch.ones(1, 3)}, "concepts").shape
    torch.Size([1, 3])
    """
    output = plain_tensor(output)
    if key is None:
        if isinstance(output, torch.Tensor):
            return output
        if getattr(output, "concept_logits", None) is not None:
            return output.concept_logits
        raise UsageError(
            f"the model returns a {type(output).__name__}, not a tensor: declare which part holds the concepts "
            f"with {option('output')} (an index for tuples, a key or attribute name for dicts and dataclasses)"
        )
    try:
        if (isinstance(key, int) and not isinstance(output, (Mapping, torch.Tensor))) or isinstance(output, Mapping):
            value = output[key]
        else:
            value = getattr(output, str(key))
    except (KeyError, IndexError, AttributeError, TypeError):
        raise UsageError(
            f"{option('output', key)}: the model's {type(output).__name__} output has no such part"
        ) from None
    value = plain_tensor(value)
    if not isinstance(value, torch.Tensor):
        raise UsageError(f"{option('output', key)} is a {type(value).__name__}, not a tensor of concept scores")
    return value


def _check_names(names: tuple[str, ...]) -> tuple[str, ...]:
    seen: set[str] = set()
    dupes = [n for n in names if n in seen or seen.add(n)]
    if dupes:
        raise UsageError(f"{option('concept_names')} names an attribute twice: {dupes[:3]}")
    return names


class _Placed:
    """``device`` / ``dtype`` of an adapter, moved together with its ``model``."""

    model: Any
    device: torch.device
    dtype: torch.dtype

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None):
        """Move the model (when it is an ``nn.Module``) and its inputs to ``device`` / ``dtype``."""
        if device is not None:
            self.device = torch.device(device)
        if dtype is not None:
            self.dtype = dtype
        if isinstance(self.model, nn.Module):
            self.model.to(device=self.device, dtype=self.dtype)
        return self


@dataclass
class BinaryConceptModel(_Placed):
    """A binary concept model behind the :class:`SubModel` protocol (module docstring).

    Args:
        model: ``(B, 3, H, W)`` tensor -> ``(B, C)`` tensor (or a tuple / dict / dataclass holding it).
        concept_names: the ``C`` column names (a named set or a list, see
            :func:`~.concepts.resolve_concept_names`).
        preprocess: PIL images -> batch; or build one from ``transform`` / ``processor`` /
            ``size`` + ``mean`` / ``std`` (:func:`~.preprocessing.make_preprocess`).
        normalize: whether the model reads normalised pixels (the default): built from
            ``size`` + ``mean`` / ``std``, it then needs ``mean`` and ``std``. ``False`` feeds
            [0, 1] pixels (the project's own models). Read only when neither ``preprocess``
            nor a ``transform`` / ``processor`` is given (those normalise themselves); a
            model without any of these is refused, never fed unnormalised pixels silently.
        output: which part of a structured output holds the concepts (:func:`pick_output`).
        outputs: ``"logits"`` (scores are ``sigmoid`` of them) or ``"probabilities"``.
        index_base: what integer concept names are (:data:`~.concepts.INDEX_BASES`:
            ``"cub_312"``, 0-based CUB indices; ``"cbm_112"``; ``"cub_id"``, CUB's 1-based ids).

    Raises:
        UsageError: a bad option or a missing preprocessing choice (names the option).
    """

    model: Callable[[torch.Tensor], Any]
    concept_names: Sequence[str | int] | str
    preprocess: Preprocess | None = None
    transform: Callable | None = None
    processor: Any | None = None
    size: int | None = None
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    normalize: bool = True
    output: str | int | None = None
    outputs: Literal["logits", "probabilities"] = "logits"
    index_base: str = "cub_312"
    device: torch.device = field(default=None)  # type: ignore[assignment]
    dtype: torch.dtype = torch.float32
    mode: str = field(default="binary", init=False)

    def __post_init__(self) -> None:
        if not callable(self.model):
            raise UsageError(f"model must be callable (images -> concept scores), got {type(self.model).__name__}")
        if self.outputs not in ("logits", "probabilities"):
            raise UsageError(f"{option('outputs', self.outputs)} is not 'logits' or 'probabilities'")
        self.concept_names = _check_names(resolve_concept_names(self.concept_names, index_base=self.index_base))
        if self.preprocess is None:
            if self.transform is None and self.processor is None:
                self._check_normalisation()
            self.preprocess = make_preprocess(
                self.transform, processor=self.processor, size=self.size, mean=self.mean, std=self.std
            )
        elif any(v is not None for v in (self.transform, self.processor, self.size, self.mean, self.std)):
            raise UsageError(
                f"pass {option('preprocess')} or {option('transform')} / {option('processor')} / "
                f"{option('size')} / {option('mean')} / {option('std')}, not both"
            )
        self.device = torch.device(self.device) if self.device is not None else model_device(self.model)

    def _check_normalisation(self) -> None:
        """Built from ``size`` + ``mean`` / ``std``: the normalisation is stated, one way or the other."""
        stated = self.mean is not None or self.std is not None
        if stated and not self.normalize:
            raise UsageError(f"{option('normalize', False)} contradicts {option('mean')} / {option('std')}; pass one")
        if not stated and self.normalize:
            model = self.model.model if isinstance(self.model, PyCConcepts) else self.model
            raise UsageError(
                f"{type(model).__name__} comes with no preprocessing: pass {option('mean')} and {option('std')} "
                f"(the normalisation it was trained with), {option('transform')} or {option('processor')}, or "
                f"{option('normalize', False)} to feed it [0, 1] pixels"
            )

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.concept_names)

    def prepare(self, groups: Sequence[str], vocab: Vocabulary) -> tuple[str, ...]:
        """The model's own concept columns (a binary model scores every image on all of them)."""
        return self.columns

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, None]:
        """``(B, 3, H, W)`` preprocessed batch -> ``(B, C)`` float32 probabilities on the CPU (and ``None``)."""
        with torch.inference_mode():
            out = pick_output(self.model(pixels.to(self.device, self.dtype)), self.output)
        if out.ndim != 2 or out.shape[1] != len(self.concept_names):
            raise UsageError(
                f"the model's concept output is {tuple(out.shape)}; expected (B, {len(self.concept_names)}) "
                f"for the declared {option('concept_names')}"
            )
        out = out.float()
        return (torch.sigmoid(out) if self.outputs == "logits" else out).cpu(), None

    def scores(self, images: Sequence[Any]) -> tuple[torch.Tensor, None]:
        """PIL images -> :meth:`forward` of their preprocessed batch."""
        return self.forward(self.preprocess(images))


@dataclass
class OpenVocabularyModel(_Placed):
    """SUB's group mode over a :class:`~concept_grounding.models.clip.ClipHandle` (module docstring):
    the handle encodes, this scores SUB's group prompts.

    Args:
        clip: the CLIP-like model with its tokenizer and preprocessing (``load_clip`` returns one).
        include_none: add the "none" prompt (:data:`~concept_grounding.models.clip.NONE_PROMPT`)
            as an option beside each group's values (SUB's paper rule; the official code has none).
    """

    clip: ClipHandle
    include_none: bool = False
    device: torch.device = field(default=None)  # type: ignore[assignment]
    dtype: torch.dtype = torch.float32
    mode: str = field(default="group", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.clip, ClipHandle):
            raise UsageError(
                f"clip must be a ClipHandle (concept_grounding.models.load_clip), got {type(self.clip).__name__}"
            )
        self.clip.backend.check_towers(self.clip.model)
        self.device = torch.device(self.device) if self.device is not None else self.clip.device
        self._text: torch.Tensor | None = None
        self._none: torch.Tensor | None = None
        self.columns: tuple[str, ...] = ()

    @property
    def model(self) -> Any:
        """The handle's model (moved by :meth:`to`)."""
        return self.clip.model

    @property
    def preprocess(self) -> Preprocess:
        """The handle's preprocessing: PIL images -> the model's input batch."""
        return self.clip.preprocess

    def to(self, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> OpenVocabularyModel:
        """Move the model; the prompts are embedded again by the next :meth:`prepare`."""
        self._text = None
        return super().to(device, dtype)

    def prepare(self, groups: Sequence[str], vocab: Vocabulary) -> tuple[str, ...]:
        """Embed the prompts of every attribute of ``groups`` once; the columns are those attributes."""
        if hasattr(self.model, "eval"):
            self.model.eval()
        prompts = [p for g in groups for p in group_prompts(g, vocab)]
        names = tuple(vocab.attributes[i] for g in groups for i in vocab.groups[g])
        with torch.inference_mode():
            self._text = self.clip.encode_texts(prompts + [NONE_PROMPT]).cpu()
        self._text, self._none = self._text[:-1], self._text[-1]
        self.columns = names
        return names

    def image_embeddings(self, pixels: torch.Tensor) -> torch.Tensor:
        """``(B, D)`` L2-normalised float32 image embeddings of a preprocessed batch (on the CPU)."""
        with torch.inference_mode():
            return self.clip.encode_images(pixels.to(self.dtype), batch_size=max(len(pixels), 1))

    def forward(self, pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(B, M)`` cosine similarities with the prepared prompts and ``(B,)`` with the "none"
        prompt (``None`` without ``include_none``)."""
        if self._text is None:
            raise RuntimeError("call prepare(groups, vocab) before forward()")
        image = self.image_embeddings(pixels)
        return image @ self._text.T, (image @ self._none if self.include_none else None)

    def scores(self, images: Sequence[Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """PIL images -> :meth:`forward` of their preprocessed batch."""
        return self.forward(self.preprocess(images))


def _clip_backend(model: Any) -> Any:
    """The model's :class:`~concept_grounding.models.clip.ClipBackend` if it has both CLIP towers, else ``None``."""
    try:
        backend = backend_for(model)
        backend.check_towers(model)
    except ValueError:
        return None
    return backend


def project_concept_model(model: nn.Module, image_size: int = 64) -> BinaryConceptModel:
    """A saved / trained project model (CBM, CEM, post-hoc CBM): [0, 1] images at
    ``image_size`` px, concept logits from its :class:`~concept_grounding.models.ConceptModelOutput`."""
    if not model.concept_names:
        raise UsageError(
            f"this {type(model).__name__} does not record its concept names; pass {option('concept_names')}"
        )
    return BinaryConceptModel(
        model.eval(), list(model.concept_names), size=int(image_size), normalize=False, output="concept_logits"
    )


def as_sub_model(
    model: Any,
    *,
    concept_names: Sequence[str | int] | str | None = None,
    tokenizer: Callable | None = None,
    preprocess: Preprocess | None = None,
    image_size: int | None = None,
    include_none: bool = False,
    **kwargs: Any,
) -> SubModel:
    """Wrap ``model`` for :func:`~.sub.evaluate_sub` (module docstring).

    ``kwargs`` go to :class:`BinaryConceptModel` (``transform``, ``processor``, ``mean``,
    ``std``, ``normalize``, ``output``, ``outputs``, ``index_base``). A pytorch-concepts model
    is asked for its concepts (:class:`~.pyc.PyCConcepts`, ``output="logits"``), named by
    its annotations unless ``concept_names`` says otherwise.
    """
    from ..models.base import ConceptModelMixin

    if isinstance(model, (BinaryConceptModel, OpenVocabularyModel)):
        if isinstance(model, OpenVocabularyModel) and include_none:
            model.include_none = True
        return model
    if isinstance(model, ClipHandle):
        return OpenVocabularyModel(model, include_none)
    backend = _clip_backend(model) if concept_names is None else None
    if backend is not None:
        world = backend.name == "world"  # [0, 1] images, normalised inside, its own tokenizer
        tokenizer = tokenizer or (model.tokenizer if world else None)
        if tokenizer is None or (preprocess is None and not world):
            raise UsageError(
                f"{type(model).__name__} is CLIP-like: pass {option('tokenizer')} and "
                f"{option('preprocess')} (or a ClipHandle from concept_grounding.models.load_clip)"
            )
        if preprocess is None:
            preprocess = make_preprocess(size=image_size or model.image_size)
        return OpenVocabularyModel(ClipHandle(model, tokenizer, preprocess, backend), include_none)
    if isinstance(model, ConceptModelMixin) and concept_names is None and preprocess is None and not kwargs:
        return project_concept_model(model, image_size or 64)
    if is_pyc_model(model):
        model = PyCConcepts(model)
        concept_names = model.concept_names() if concept_names is None else concept_names
        kwargs.setdefault("output", "logits")
    if concept_names is None:
        concept_names = getattr(model, "concept_names", None)
    if concept_names is None:
        raise UsageError(
            f"{type(model).__name__}: pass {option('concept_names')} (a named set like 'cbm_112', or one "
            "name per output column)"
        )
    if preprocess is None and "transform" not in kwargs and "processor" not in kwargs:
        kwargs["size"] = image_size
    return BinaryConceptModel(model, concept_names, preprocess, **kwargs)
