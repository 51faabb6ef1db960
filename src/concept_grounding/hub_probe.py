"""Is the Hugging Face Hub reachable, and does it hold this repo? Asked within seconds.

:func:`probe_hub` answers for one repo within :func:`probe_timeout` seconds; :func:`hub_offline`
and :func:`go_offline` read and set the offline switches. :mod:`.hub`'s resolver asks these
before it names a model as unavailable.
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Literal

from .errors import ModelUnavailableError

__all__ = ["TIMEOUT_ENV", "probe_timeout", "hub_offline", "go_offline", "HubProbe", "probe_hub"]

logger = logging.getLogger("concept_grounding.hub")

#: seconds the Hub probe may take before the Hub counts as unreachable
TIMEOUT_ENV = "CONCEPT_GROUNDING_HUB_TIMEOUT"
_DEFAULT_TIMEOUT = 4.0
RepoType = Literal["model", "dataset"]


def probe_timeout() -> float:
    """The probe deadline in seconds: ``$CONCEPT_GROUNDING_HUB_TIMEOUT`` or 4."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, _DEFAULT_TIMEOUT))
    except ValueError:
        raise ModelUnavailableError(
            f"must be a number of seconds, got {os.environ[TIMEOUT_ENV]!r}", argument=TIMEOUT_ENV
        ) from None
    return value if value > 0 else _DEFAULT_TIMEOUT


def hub_offline() -> bool:
    """Whether Hugging Face offline mode is on (``HF_HUB_OFFLINE``, read by huggingface_hub)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def go_offline() -> None:
    """Switch this process to Hugging Face offline mode: cache only, no network waits."""
    from huggingface_hub import constants

    os.environ["HF_HUB_OFFLINE"] = "1"
    constants.HF_HUB_OFFLINE = True
    try:
        import datasets.config as dconfig
    except ImportError:  # pragma: no cover - datasets is a dependency
        return
    dconfig.HF_HUB_OFFLINE = dconfig.HF_DATASETS_OFFLINE = True


@dataclass(frozen=True)
class HubProbe:
    """Outcome of one probe: ``status`` is the HTTP status, or ``None`` when nothing answered."""

    endpoint: str
    status: int | None
    reason: str


_PROBES: dict[str, HubProbe] = {}


def probe_hub(repo_id: str, repo_type: RepoType = "model", timeout: float | None = None) -> HubProbe:
    """Ask the Hub about one repository, giving up after ``timeout`` seconds (connect, DNS and read)."""
    from huggingface_hub import constants

    endpoint = constants.ENDPOINT.rstrip("/")
    timeout = probe_timeout() if timeout is None else timeout
    unreachable = _PROBES.get(endpoint)
    if unreachable is not None:
        return unreachable
    url = f"{endpoint}/api/{repo_type}s/{repo_id}"
    result: list[HubProbe] = []

    def ask() -> None:
        request = urllib.request.Request(url, method="GET", headers={"User-Agent": "concept-grounding"})
        token = _token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                result.append(HubProbe(endpoint, response.status, "ok"))
        except urllib.error.HTTPError as err:
            result.append(HubProbe(endpoint, err.code, str(err.reason)))
        except (OSError, ValueError) as err:
            result.append(HubProbe(endpoint, None, str(getattr(err, "reason", err))))

    thread = threading.Thread(target=ask, name="hub-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    probe = result[0] if result else HubProbe(endpoint, None, f"no answer within {timeout:g} s")
    if probe.status is None:
        _PROBES[endpoint] = probe  # unreachable stays unreachable for this process
    return probe


def _token() -> str | None:
    try:
        from huggingface_hub import get_token

        return get_token()
    except Exception:  # noqa: BLE001 - no token is fine
        return None
