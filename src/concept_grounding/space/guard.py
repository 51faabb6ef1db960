"""The Space's error boundary and request plumbing, the Gradio side of every handler.

:func:`guarded` is the command line's own boundary (:func:`page_message` over
:func:`concept_grounding.errors.user_message`): a user error (a bad value, a file that is not
what it should be, a model that cannot be loaded) reaches the page as the one line the CLI
prints after ``error:``, server paths redacted; any other exception is a bug: one line in the
log, a generic line in the page, never a traceback. With a :class:`~concept_grounding.web.limits.Gate`, the handler
runs in one of its visitor's slots.

:func:`space_blocks` is the ``gr.Blocks`` of the Space: a value Gradio refuses reads as one
line, and a request may only name files the Space gave its visitor.

An abandoned request stops, on every tab: its handler is a generator that runs the tab's
work in a thread (:func:`run_while_wanted`) and yields a no-op update every
:data:`ALIVE_CHECK_SECONDS`; Gradio stops iterating a generator whose visitor disconnected
or cancelled and closes it, which turns the work's ``cancelled()`` true: Tied Diffusion
stops at its next denoising step, the other tabs before their next stage or batch
(:func:`~.common.stopper`), and the log says where in one line.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any

from ..web.limits import Gate, visitor_of
from .inputs import redact_paths
from .resources import FeatureUnavailable

__all__ = [
    "guarded",
    "page_message",
    "INTERNAL_ERROR",
    "request_visitor",
    "space_blocks",
    "run_while_wanted",
    "ALIVE_CHECK_SECONDS",
]

logger = logging.getLogger(__name__)

#: How often (seconds) a running Tied Diffusion request yields to Gradio, which then checks
#: that its visitor is still there.
ALIVE_CHECK_SECONDS = 0.5


def guarded(fn: Callable[..., Any], gate: Gate | None = None) -> Callable[..., Any]:
    """Wrap a handler (a function or a generator) so that errors reach the page as one line
    of ``gr.Error`` text, with server paths redacted (:func:`~.inputs.redact_paths`).

    With a ``gate``, the handler also takes Gradio's ``gr.Request`` (last argument) and runs
    inside one of its visitor's slots (:meth:`~concept_grounding.web.limits.Gate.slot`): a visitor with
    ``visitor_requests`` requests running is refused in one line."""
    import gradio as gr

    def page_error(err: Exception) -> Exception:
        if isinstance(err, gr.Error):
            return err
        return gr.Error(page_message(err, getattr(fn, "__name__", "handler")), print_exception=False)

    def split(args: tuple) -> tuple[tuple, str]:
        if gate is None:
            return args, ""
        request = next((a for a in args if isinstance(a, gr.Request)), None)
        rest = tuple(a for a in args if not isinstance(a, gr.Request))
        return rest, request_visitor(request)

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator(*args: Any, **kwargs: Any) -> Any:
            args, visitor = split(args)
            try:
                with _slot(gate, visitor):
                    yield from fn(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - GeneratorExit (a closed run) is not an Exception
                raise page_error(err) from None

        return _with_request(generator, fn, gate)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        args, visitor = split(args)
        try:
            with _slot(gate, visitor):
                return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - the page gets one line, the log the stack
            raise page_error(err) from None

    return _with_request(wrapper, fn, gate)


#: What a visitor reads when a request failed on a bug (the log has the one-line summary).
INTERNAL_ERROR = "Something went wrong on the server (an internal error, logged); try again or another input."


def page_message(err: BaseException, handler: str = "handler") -> str:
    """The one line a visitor reads for ``err``: the CLI's own classification
    (:func:`concept_grounding.errors.user_message`, so a user error reads as the command line
    prints it after ``error:``), with server paths redacted (:func:`~.inputs.redact_paths`);
    a bug gets :data:`INTERNAL_ERROR` and one log line (:func:`~concept_grounding.errors.internal_summary`).
    :class:`~.resources.FeatureUnavailable` (a feature this install lacks) is said as is.

    >>> page_message(ValueError("num_clusters must be >= 2, got 1"))
    'num_clusters must be >= 2, got 1'
    >>> page_message(FileNotFoundError(2, "No such file or directory", "/srv/data/notes.csv"))
    'notes.csv: no such file or folder'
    >>> page_message(KeyError("x")) == INTERNAL_ERROR
    True
    """
    from ..errors import internal_summary, user_message

    message = str(err) if isinstance(err, FeatureUnavailable) else user_message(err)
    if message is not None:
        return redact_paths(" ".join(message.split()))
    logger.error("space: %s failed: %s", handler, redact_paths(internal_summary(err)))
    return INTERNAL_ERROR


def request_visitor(request: Any) -> str:
    """The visitor (:func:`~concept_grounding.web.limits.visitor_of`) of a ``gr.Request``
    (``"unknown"`` for ``None``)."""
    return visitor_of(getattr(request, "client", None))


def _slot(gate: Gate | None, visitor: str) -> Any:
    import contextlib

    return gate.slot(visitor) if gate is not None else contextlib.nullcontext()


def _with_request(wrapper: Callable[..., Any], fn: Callable[..., Any], gate: Gate | None) -> Callable[..., Any]:
    """Give ``wrapper`` the signature of ``fn`` plus a last ``request: gr.Request`` parameter
    (Gradio fills parameters annotated so), when there is a ``gate``."""
    if gate is None:
        return wrapper
    import gradio as gr

    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    params.append(
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request)
    )
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {"request": gr.Request}
    del wrapper.__wrapped__  # type: ignore[attr-defined]  # Gradio reads the signature above
    return wrapper


def space_blocks(gr: Any, gate: Gate) -> type:
    """A ``gr.Blocks`` subclass whose input checks fail in one line: a value Gradio refuses
    (a choice not offered, a file outside its cache) gives the visitor one line naming the
    field, without the value or a server path, and the log one line, not a traceback.

    A request may only name files the Space gave its visitor: uploaded by them
    (:class:`~concept_grounding.web.middleware.UploadGate` grants those) or returned to them by an earlier request
    (granted here, after each answer); any other path, a cache folder or another visitor's
    file included, is refused before Gradio touches it (:meth:`~concept_grounding.web.limits.Gate.granted`)."""
    import inspect as _inspect

    from gradio_client.utils import traverse

    process_api_signature = _inspect.signature(gr.Blocks.process_api)

    def paths(value: Any) -> list[str]:
        found: list[str] = []
        traverse(
            value,
            lambda d: found.append(d["path"]) or d,
            lambda d: isinstance(d, dict) and isinstance(d.get("path"), str),
        )
        return found

    class SpaceBlocks(gr.Blocks):
        async def process_api(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            call = process_api_signature.bind(self, *args, **kwargs).arguments
            block_fn = call["block_fn"]
            block_fn = self.fns[block_fn] if isinstance(block_fn, int) else block_fn
            visitor = request_visitor(call.get("request"))
            for block, value in zip(getattr(block_fn, "inputs", ()), call.get("inputs") or ()):
                if any(not gate.granted(visitor, path) for path in paths(value)):
                    label = str(getattr(block, "label", None) or type(block).__name__)
                    refusal = gate.refuse(label, "not a file uploaded here or given to you by this Space.", visitor)
                    raise gr.Error(str(refusal), print_exception=False)
            result = await super().process_api(*args, **kwargs)
            gate.grant(visitor, paths(result.get("data")))
            return result

        async def preprocess_data(self, block_fn: Any, inputs: list[Any], state: Any, explicit_call: bool = False):
            try:
                return await super().preprocess_data(block_fn, inputs, state, explicit_call)
            except Exception as err:
                if isinstance(err, gr.Error) and not err.print_exception:
                    raise
                field = _refused_field(block_fn, inputs)
                refusal = gate.refuse(field, _short(err).rstrip(".") + ".")
                raise gr.Error(str(refusal), print_exception=False) from None

    return SpaceBlocks


def _short(err: Exception, limit: int = 120) -> str:
    """The first line of an error, paths redacted, values shortened to ``limit`` characters."""
    text = " ".join(redact_paths(str(err)).split())
    if "Value:" in text and "not in the list of choices" in text:
        return "not one of the choices offered"
    if "not in the upload folder" in text or "cannot be accessed" in text or "Cannot move" in text:
        return "only files uploaded through this page can be used"
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"this value is not accepted ({text})"


def _refused_field(block_fn: Any, inputs: list[Any]) -> str:
    """The label of the first input whose value its component refuses (else "an input")."""
    for block, value in zip(getattr(block_fn, "inputs", ()), inputs):
        try:
            block.preprocess(value)
        except Exception:  # noqa: BLE001 - looking for the culprit
            return str(getattr(block, "label", None) or type(block).__name__)
    return "Input"


def run_while_wanted(work: Callable[[Callable[[], bool]], Any], idle: Any) -> Any:
    """A generator over ``work(cancelled)`` run in a thread: it yields ``idle`` every
    :data:`ALIVE_CHECK_SECONDS` until the work is done, then its result. When Gradio closes
    the generator (the visitor disconnected or cancelled), ``cancelled()`` turns true and
    the work is expected to stop soon; the generator does not wait for it."""
    from concurrent.futures import ThreadPoolExecutor

    left = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="space-work")
    future = pool.submit(work, left.is_set)
    pool.shutdown(wait=False)  # the thread ends with the work

    def log_abandoned(done: Any) -> None:
        if left.is_set() and not done.cancelled() and done.exception() is not None:
            logger.info("space: an abandoned request ended: %s", done.exception())

    future.add_done_callback(log_abandoned)
    try:
        while True:
            try:
                result = future.result(timeout=ALIVE_CHECK_SECONDS)
                break
            except TimeoutError:
                yield idle
    finally:
        left.set()
    yield result
