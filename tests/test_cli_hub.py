"""Named models without network: local, cached, or a clear error within seconds.

The Hub is replaced by local sockets: one that accepts connections and never answers,
one that answers 404. ``huggingface_hub``'s endpoint, cache and offline switch are
patched for each test and restored after it.

Only :func:`test_uncached_model_fails_within_10_s_when_the_hub_does_not_answer` waits for
the default probe deadline (4 s), which is what it pins; the other tests against the
silent endpoint set ``CONCEPT_GROUNDING_HUB_TIMEOUT`` to :data:`SHORT_TIMEOUT`: a socket
that never answers gives the same "does not answer" at any deadline, and the tests stay
bounded by their own 10 s limits (a path that bypassed the probe would wait far longer).
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from concept_grounding import hub, hub_probe
from concept_grounding.cli import main
from concept_grounding.errors import ModelUnavailableError

#: Probe deadline (seconds) for the tests that do not pin the default one.
SHORT_TIMEOUT = "0.25"


@pytest.fixture
def silent_endpoint():
    """``http://127.0.0.1:<port>`` that accepts TCP connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.05)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def not_found_endpoint():
    """A Hub that answers 404 to everything."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def online(monkeypatch, tmp_path):
    """Offline mode off, an empty cache, no remembered probes; everything restored afterwards."""
    import datasets.config as dconfig
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv(hub.TIMEOUT_ENV, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(dconfig, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(dconfig, "HF_DATASETS_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(hub_probe, "_PROBES", {})

    def use(endpoint: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)

    return use


def _fake_cached(cache: Path, repo_id: str) -> Path:
    """The cache layout ``snapshot_download(local_files_only=True)`` finds."""
    commit = "0" * 40
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "fake"}))
    return snapshot


def test_uncached_model_fails_within_10_s_when_the_hub_does_not_answer(online, silent_endpoint, tmp_path, capsys):
    """HF_HUB_OFFLINE unset, no network: an uncached name must not wait on the Hub for minutes.

    The libraries are imported before the clock starts: the limit is on waiting for the
    network, not on importing torch on a busy machine.
    """
    import accelerate  # noqa: F401
    import diffusers  # noqa: F401

    import concept_grounding.tdg  # noqa: F401
    from concept_grounding.world import BirdWorld

    BirdWorld()
    online(silent_endpoint)
    start = time.monotonic()
    code = main(
        [
            "generate",
            "--out",
            str(tmp_path / "out"),
            "--model",
            "someone/flux-not-here",
            "--steps",
            "2",
            "--classes",
            "Cardinal",
            "--attributes",
            "has_crown_color::black",
            "--images-per-pairing",
            "1",
        ]
    )
    elapsed = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 10, (elapsed, err)
    assert "--model: model 'someone/flux-not-here' is not cached here" in err
    assert f"the Hugging Face Hub at {silent_endpoint} does not answer" in err
    assert "hf download someone/flux-not-here" in err and "HF_HUB_OFFLINE=1" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "argument"),
    [
        (["filter", "--in", "{images}", "--out", "{out}", "--vlm-model", "someone/vlm"], "--vlm-model"),
        (["explain", "--out", "{out}", "--model", "someone/clip"], "--model"),
        (["covar", "--out", "{out}", "--inpaint-model", "someone/inpaint"], "--inpaint-model"),
        (["bench", "--out", "{out}", "--model", "someone/clip"], "--model"),
        (
            ["filter", "--in", "{images}", "--out", "{out}", "--scorer", "clip", "--clip-model", "hf-hub:someone/oc"],
            "--clip-model",
        ),
    ],
)
def test_every_model_argument_goes_through_the_fast_check(
    online, silent_endpoint, tmp_path, monkeypatch, capsys, argv, argument
):
    monkeypatch.setenv(hub.TIMEOUT_ENV, SHORT_TIMEOUT)
    online(silent_endpoint)
    images = tmp_path / "images"
    images.mkdir()
    row = {"file_name": "a.png", "reference_class": "017.Cardinal", "target_attribute": "has_crown_color::black"}
    (images / "metadata.jsonl").write_text(json.dumps(row) + "\n")
    from PIL import Image

    Image.new("RGB", (8, 8)).save(images / "a.png")
    start = time.monotonic()
    code = main([a.format(images=images, out=tmp_path / "out") for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and time.monotonic() - start < 10, err
    assert f"error: {argument}: model 'someone/" in err and "does not answer" in err


def test_cached_model_is_used_offline_when_the_hub_does_not_answer(online, silent_endpoint, tmp_path, monkeypatch):
    from huggingface_hub import constants

    online(silent_endpoint)
    monkeypatch.setenv(hub.TIMEOUT_ENV, SHORT_TIMEOUT)
    _fake_cached(Path(constants.HF_HUB_CACHE), "someone/cached")
    start = time.monotonic()
    assert hub.resolve_model_spec("someone/cached", family="hub").target == "someone/cached"
    assert time.monotonic() - start < 10
    assert constants.HF_HUB_OFFLINE  # the libraries now read the cache without waiting


def test_offline_mode_fails_at_once_without_a_probe(online, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub, "probe_hub", lambda *a, **k: pytest.fail("no probe in offline mode"))
    with pytest.raises(ModelUnavailableError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE=1"):
        hub.resolve_model_spec("someone/x", "--vlm-model", family="hub").target  # noqa: B018 - the lookup raises
    _fake_cached(Path(constants.HF_HUB_CACHE), "someone/x")
    assert hub.resolve_model_spec("someone/x", family="hub").target == "someone/x"


def test_a_hub_that_has_no_such_model_says_so(online, not_found_endpoint):
    online(not_found_endpoint)
    with pytest.raises(ModelUnavailableError, match=r"the Hub has no model 'someone/typo' .*\(HTTP 404\)"):
        hub.resolve_model_spec("someone/typo", family="hub").target  # noqa: B018 - the lookup raises


def test_local_folders_and_paths(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    assert hub.resolve_model_spec(str(folder), family="hub").target == str(folder.resolve())
    with pytest.raises(ModelUnavailableError, match="--vlm-model: no such folder or file './gone'"):
        hub.resolve_model_spec("./gone", "--vlm-model", family="hub").target  # noqa: B018 - the lookup raises
    with pytest.raises(ModelUnavailableError, match="neither an existing folder nor a valid Hub id"):
        hub.resolve_model_spec("two words", family="hub").target  # noqa: B018 - the lookup raises


def test_space_named_models_fail_within_10_s_when_the_hub_does_not_answer(online, silent_endpoint, monkeypatch):
    """The Space's TDG and Explain tabs resolve visitor-chosen models through the same fast check."""
    import concept_grounding.tdg.pipeline  # noqa: F401  (imports outside the clock, as above)
    from concept_grounding.space import tab_explain, tab_tdg
    from concept_grounding.space.inputs import UserInputError

    online(silent_endpoint)
    monkeypatch.setenv(hub.TIMEOUT_ENV, SHORT_TIMEOUT)
    for builder in (tab_tdg._build_named("someone/flux-not-here"), tab_explain.build_named_clip("someone/clip")):
        start = time.monotonic()
        with pytest.raises(
            (UserInputError, ModelUnavailableError), match="not cached here|not in the local Hugging Face cache"
        ):
            builder(SimpleNamespace(image_size=32))
        assert time.monotonic() - start < 10
