"""The served annotation app as a hostile client meets it: who annotates is decided
by the server (a personal link's token locally, the verified Hugging Face login on a Space),
never by a field the client fills; only the images reach the page; a repeated or stale submit
is refused, never applied to another image; a refusal is one log line without the value."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time

import pytest

from concept_grounding.curation.study import SUB_STUDY_1, Record
from concept_grounding.curation.study_store import StudyStore

pytest.importorskip("gradio")
client_mod = pytest.importorskip("gradio_client")
httpx = pytest.importorskip("httpx")

META = {"plus": "pink crown color", "reference": "017.Cardinal"}
START, SUBMIT = "/sub_1_start", "/sub_1_submit"


def _study1(store: StudyStore, n: int) -> None:
    store.add_records(SUB_STUDY_1, [Record(f"1:c{i}", "sub-1", {"image": "bird.png"}, metadata=META) for i in range(n)])


def _rows(store: StudyStore) -> list[tuple[str, str, str, str]]:
    return [(r.annotator, r.record, q, a) for r in store.responses("sub-1") for q, a in sorted(r.answers.items())]


@pytest.fixture
def served(tmp_path):
    """The app of ``annotate`` over a candidates folder holding truth / metadata files, a store
    beside them, 3 study-1 images and one annotator with a link; yields (url, store, token, root)."""
    from PIL import Image

    from concept_grounding.curation.annotate_serve import serve_app
    from concept_grounding.testing.serving import free_port

    root = tmp_path / "cands"
    root.mkdir()
    Image.new("RGB", (8, 8)).save(root / "bird.png")
    (root / "truth.jsonl").write_text('{"id": "c0", "applied": true}\n')
    (root / "metadata.jsonl").write_text('{"file_name": "bird.png"}\n')
    store = StudyStore(root / "a.db", k=2)
    _study1(store, 3)
    token = store.issue_token("ann")
    port = free_port()
    app = serve_app(
        store, lambda record, name: root / name, port=port, private=[root], prevent_thread_lock=True, quiet=True
    )
    try:
        yield f"http://127.0.0.1:{port}/", store, token, root
    finally:
        app.close()


def test_no_token_or_a_typed_name_is_refused_and_nothing_is_written(served):
    url, store, token, _ = served
    client = client_mod.Client(url, verbose=False)
    for forged in ("", "ann", "Ann", token.upper(), "x" * 300):
        view = client.predict(forged, api_name=START)
        assert "personal link" in view[3] and view[1] == "" and "ann" not in view[2]
        submit = client.predict(forged, "1:c0", "yes", "no", api_name=SUBMIT)
        assert "personal link" in submit[3]
    assert _rows(store) == [] and store.open_record("ann", "sub-1") is None
    view = client.predict(token, api_name=START)
    assert view[2] == "ann: 0 / 3 images" and view[1] == "1:c0"


def test_only_images_reach_the_page_no_file_route_into_the_folder(served):
    url, _, _, root = served
    for name in ("truth.jsonl", "metadata.jsonl", "a.db", "bird.png"):
        for route in ("gradio_api/file=", "file="):
            response = httpx.get(f"{url}{route}{root / name}")
            assert response.status_code in (403, 404), (route, name, response.status_code)
            assert b"applied" not in response.content and b"SQLite" not in response.content


def test_repeated_or_stale_submit_is_refused_never_applied_to_another_image(served):
    url, store, token, _ = served
    client = client_mod.Client(url, verbose=False)
    first = client.predict(token, api_name=START)
    second = client.predict(token, first[1], "yes", "no", api_name=SUBMIT)
    assert second[1] == "1:c1"
    again = client.predict(token, first[1], "no", "yes", api_name=SUBMIT)  # a double click's second half
    assert again[3].startswith("not stored") and again[1] == "1:c1"
    other = client.predict(token, "1:c2", "no", "yes", api_name=SUBMIT)  # an image never shown
    assert other[3].startswith("not stored")
    assert _rows(store) == [("ann", "1:c0", "q1", "yes"), ("ann", "1:c0", "q2", "no")]
    assert store.open_record("ann", "sub-1") == "1:c1"


def test_a_huge_or_forged_answer_is_one_log_line_without_the_value(served, caplog, capfd):
    url, store, token, _ = served
    client = client_mod.Client(url, verbose=False)
    shown = client.predict(token, api_name=START)[1]
    huge = "Z" * 1_000_000
    with caplog.at_level(logging.WARNING, logger="concept_grounding.annotate"):
        view = client.predict(token, shown, huge, "no", api_name=SUBMIT)
    assert "not one of" in view[3] and len(view[3]) < 300 and view[1] == shown
    lines = [r.getMessage() for r in caplog.records if r.name == "concept_grounding.annotate"]
    assert lines == ["annotate: refused a sub-1 submit by 'ann': answer to q1 outside its choices"]
    out, err = capfd.readouterr()
    assert "ZZZZZZZZZZ" not in out + err and "Traceback" not in out + err
    assert _rows(store) == []


def _session_cookie(secret: str, username: str) -> str:
    """The cookie Gradio's session middleware (starlette + itsdangerous) sets after a Hugging
    Face login, signed with the key Gradio derives from the Space's OAuth secret."""
    itsdangerous = pytest.importorskip("itsdangerous")
    info = {
        "oauth_info": {
            "userinfo": {"preferred_username": username, "name": username, "profile": "", "picture": ""},
            "access_token": "t",
            "scope": "openid profile",
            "expires_at": int(time.time()) + 3600,
        }
    }
    signer = itsdangerous.TimestampSigner(hashlib.sha256(f"{secret}-v4".encode()).hexdigest())
    return signer.sign(base64.b64encode(json.dumps(info).encode())).decode()


def test_on_a_space_only_the_verified_login_annotates(tmp_path, monkeypatch):
    """A simulated Space (Spaces' environment, OAuth configured): without a login, neither a
    name in the token field nor a valid local token gets in; a login annotates as its username."""
    pytest.importorskip("authlib")
    import gradio.oauth as oauth
    from PIL import Image

    from concept_grounding.curation.annotate_serve import serve_app
    from concept_grounding.testing.serving import free_port

    secret = "space-secret"
    for key, value in {"SYSTEM": "spaces", "SPACE_ID": "me/annotate"}.items():
        monkeypatch.setenv(key, value)
    for key, value in {
        "OAUTH_CLIENT_ID": "id",
        "OAUTH_CLIENT_SECRET": secret,
        "OAUTH_SCOPES": "openid profile",
        "OPENID_PROVIDER_URL": "http://127.0.0.1:9",
    }.items():
        monkeypatch.setattr(oauth, key, value)
    import gradio.block_function as block_function

    # the repository's spaces/ folder is importable as a namespace package "spaces" from its root,
    # which Gradio then takes for the ZeroGPU package on a Space: not what a Space imports
    if getattr(block_function.spaces, "__file__", None) is None:
        monkeypatch.setattr(block_function, "spaces", None)
    import gradio.http_server as http_server

    monkeypatch.setattr(http_server, "get_space", lambda: None)  # no hot reloader (it needs that package too)
    Image.new("RGB", (8, 8)).save(tmp_path / "bird.png")
    store = StudyStore(tmp_path / "a.db", k=2)
    _study1(store, 2)
    token = store.issue_token("alice")
    port = free_port()
    app = serve_app(store, lambda record, name: tmp_path / name, port=port, prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        anonymous = client_mod.Client(url, verbose=False)
        for field in ("alice", token):
            assert "sign in with Hugging Face" in anonymous.predict(field, api_name=START)[3]
            assert "sign in with Hugging Face" in anonymous.predict(field, "1:c0", "yes", "no", api_name=SUBMIT)[3]
        assert _rows(store) == []
        forged = client_mod.Client(url, verbose=False, headers={"Cookie": f"session={_session_cookie('x', 'alice')}"})
        assert "sign in with Hugging Face" in forged.predict("", api_name=START)[3]  # wrong signing key
        bob = client_mod.Client(url, verbose=False, headers={"Cookie": f"session={_session_cookie(secret, 'Bob')}"})
        view = bob.predict("alice", api_name=START)  # the field says alice; the login says Bob
        assert view[2] == "bob: 0 / 2 images"
        bob.predict("alice", view[1], "yes", "no", api_name=SUBMIT)
    finally:
        app.close()
    assert {r[0] for r in _rows(store)} == {"bob"}


def test_space_folder_has_oauth_card_requirements_and_no_truth(tmp_path, capsys):
    from concept_grounding.cli import main

    gen, db, space = tmp_path / "gen", tmp_path / "a.db", tmp_path / "space"
    assert (
        main(
            [
                "annotate",
                "--candidates",
                str(gen),
                "--db",
                str(db),
                "--world-task",
                "--per-attribute",
                "2",
                "--per-pairing",
                "1",
                "--space-folder",
                str(space),
            ]
        )
        == 0
    )
    assert "hf_oauth: true" in (space / "README.md").read_text()
    assert "gradio[oauth]" in (space / "requirements.txt").read_text()
    assert (space / "candidates" / "metadata.jsonl").is_file() and not list(space.rglob("truth*"))
    assert StudyStore(space / "annotations.db").complete("sub-1") == StudyStore(db).complete("sub-1")
    assert "annotate" in (space / "app.py").read_text()


def test_serving_without_links_is_refused_in_one_line_and_links_print(tmp_path, capsys):
    from concept_grounding.cli import main

    gen, db = tmp_path / "gen", tmp_path / "a.db"
    args = [
        "annotate",
        "--candidates",
        str(gen),
        "--db",
        str(db),
        "--world-task",
        "--per-attribute",
        "1",
        "--per-pairing",
        "0",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--annotators" in err[0]
    assert main(args[:-1] + ["0", "--annotators", "Ann,ANN "]) == 2
    assert "are one annotator id 'ann'" in capsys.readouterr().err
    assert main(args + ["--annotators", "ann,bob", "--status"]) == 0
    out = capsys.readouterr().out
    links = [line.split("?token=")[1] for line in out.splitlines() if "?token=" in line]
    store = StudyStore(db)
    assert len(links) == 2 and [store.annotator_for_token(t) for t in links] == ["ann", "bob"]
