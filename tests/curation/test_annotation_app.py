"""The annotation app's handlers, without a browser: two annotators at once, each
finishing a batch, a refusal keeps the image, a restart resumes; plus the commands. The served
app's identity, file and edge checks are in test_annotation_trust.py."""

from __future__ import annotations

import json

import pytest

from concept_grounding.curation.annotate_app import KEYS, SHORTCUTS_JS, AnnotationHandlers, option_label
from concept_grounding.curation.annotations import AnnotationError, AnnotationStore, study1_item, study2_item

CHOICES = ("has_crown_color::pink", "has_crown_color::blue")


@pytest.fixture
def store(tmp_path):
    s = AnnotationStore(tmp_path / "a.db", k=2)
    s.add_images(
        [study1_item(f"1:c{i}", "017.Cardinal", CHOICES[0], candidate=f"c{i}") for i in range(4)]
        + [study2_item("2:c0", "017.Cardinal", CHOICES[0], CHOICES, candidate="c0")]
    )
    return s


def _path(item):
    return f"/images/{item.meta['candidate']}.png"


def test_two_annotators_at_once_finish_their_batches(store):
    h = AnnotationHandlers(store, 1, _path)
    views = {n: h.current(h.identify(store.issue_token(n))) for n in ("ann", "bob")}
    assert "faithfully applied" in views["ann"].questions["q1"] and "Cardinal" in views["ann"].questions["q2"]
    assert views["ann"].progress == "ann: 0 / 4 images"
    while any(v.image_id for v in views.values()):
        for n, v in views.items():
            if v.image_id:
                views[n] = h.submit(n, v.image_id, {"q1": "yes", "q2": "somewhat"})
    rows = store.rows()
    assert len(rows) == 2 * 4 * 2 and len(set(rows)) == len(rows)
    assert views["ann"].message.startswith("All done") and views["ann"].progress == "ann: 4 / 4 images"


def test_refusal_keeps_the_image_and_says_why(store):
    h = AnnotationHandlers(store, 1, _path)
    first = h.current("ann")
    again = h.submit("ann", first.image_id, {"q1": "yes", "q2": None})
    assert again.image_id == first.image_id and again.message == "answer q2 first"
    forged = h.submit("ann", "1:forged", {"q1": "yes", "q2": "no"})
    assert forged.message.startswith("not stored") and forged.image_id == first.image_id
    assert store.rows() == []


def test_app_second_submit_and_out_of_set_answer_one_line_nothing_lost(store):
    """A double click (the same image id submitted twice) and a forged radio value: one line
    each, the first answer kept, nothing else written."""
    h = AnnotationHandlers(store, 1, _path)
    first = h.current("ann")
    bad = h.submit("ann", first.image_id, {"q1": "definitely", "q2": "no"})
    assert bad.image_id == first.image_id and "'definitely'" in bad.message and "\n" not in bad.message
    assert store.rows() == []
    after = h.submit("ann", first.image_id, {"q1": "yes", "q2": "no"})
    again = h.submit("ann", first.image_id, {"q1": "no", "q2": "yes"})
    assert again.message.startswith("not stored") and "\n" not in again.message and again.image_id == after.image_id
    assert store.rows() == [("ann", first.image_id, 1, "q1", "yes"), ("ann", first.image_id, 1, "q2", "no")]
    assert store.open_image("ann", 1) == after.image_id  # the next image is still open, unanswered


def test_restart_resumes_where_each_left_off(store, tmp_path):
    h = AnnotationHandlers(store, 1, _path)
    done = h.current("ann").image_id
    h.submit("ann", done, {"q1": "no", "q2": "no"})
    store.close()
    restarted = AnnotationHandlers(AnnotationStore(tmp_path / "a.db", k=2), 1, _path)
    view = restarted.current("ann")
    assert view.image_id != done and view.progress == "ann: 1 / 4 images"
    assert restarted.current("bob").image_id == done


def test_study2_choices_and_oauth_identity(store):
    """On a Space the id is the OAuth username (normalised); a token or a missing login is no id."""
    h = AnnotationHandlers(store, 2, _path, spaces=True)
    view = h.current(h.identify(store.issue_token("ann"), oauth_username="HF-User"))
    assert view.choices == CHOICES and view.image == "/images/c0.png"
    assert h.submit("hf-user", view.image_id, {"present": CHOICES[1]}).message.startswith("All done")
    with pytest.raises(AnnotationError, match="sign in with Hugging Face"):
        h.identify(store.issue_token("bob"), oauth_username=None)


def test_local_identity_is_the_token_holder_only(store):
    h = AnnotationHandlers(store, 1, _path)
    token = store.issue_token("Ann ")
    assert h.identify(token) == "ann" and store.issue_token("ann") is None  # one link per annotator
    for bad in (None, "", "ann", token[:-1] + "x", "x" * 10**6):
        with pytest.raises(AnnotationError, match="personal link"):
            h.identify(bad, oauth_username="ann")
    fresh = store.issue_token("ann", replace=True)
    assert h.identify(fresh) == "ann" and store.annotator_for_token(token) is None
    assert token not in {v for r in store._read("SELECT * FROM annotators") for v in r}  # only its hash is kept


def test_shortcuts_cover_both_studies_and_every_option():
    """Study 2's groups have up to 15 options: each has a key, shown on its button."""
    for needle in ("'q1'", "'q2'", "'present'", "Enter", "#submit", KEYS):
        assert needle in SHORTCUTS_JS
    colours = [f"has_crown_color::{c}" for c in range(15)]
    labels = [option_label(i, c) for i, c in enumerate(colours)]
    assert len({lab.split(" · ")[0] for lab in labels}) == 15 and labels[9].startswith("a · ")


def test_build_app_constructs(store):
    pytest.importorskip("gradio")
    from concept_grounding.curation.annotate_app import build_app

    app = build_app(store, _path)
    assert app is not None


def test_build_app_serves_submits_concurrently_without_per_event_analytics(store):
    """Every event of the app runs CONCURRENCY at once with no progress overlay, and Gradio's
    queue recomputes its monitoring summary once per 1,000 events, not after every submit."""
    pytest.importorskip("gradio")
    from concept_grounding.curation.annotate_app import CONCURRENCY, build_app

    app = build_app(store, _path)
    deps = [d for d in app.config["dependencies"] if d.get("api_name", "").startswith("on_")]
    assert len(deps) == 4 and CONCURRENCY >= 10
    assert all(fn.concurrency_limit == CONCURRENCY and fn.show_progress == "hidden" for fn in app.fns.values())
    assert app._queue.ANAYLTICS_CACHE_FREQUENCY == 1000 and app._queue.ANALYTICS_MAX_EVENTS == 1000


def test_annotate_simulate_then_curate_commands(tmp_path, capsys):
    from concept_grounding.cli import main
    from concept_grounding.loaders import load_sub

    gen, db = tmp_path / "gen", tmp_path / "a.db"
    assert (
        main(
            [
                "annotate",
                "--candidates",
                str(gen),
                "--db",
                str(db),
                "--world-task",
                "--simulate",
                "1,1,1",
                "--export",
                str(tmp_path / "ann.parquet"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "curate",
                "--candidates",
                str(gen),
                "--annotations",
                str(db),
                "--out",
                str(tmp_path / "out"),
                "--truth",
                str(gen / "truth.jsonl"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Human s+/s- binary 100.0/100.0, group 100.0/100.0" in out
    assert main(["annotate", "--candidates", str(gen), "--db", str(db), "--status"]) == 0
    status = capsys.readouterr().out
    assert "study 1: " in status and "have their 3 annotators" in status and "sim0-1: study 1" in status
    assert "3 annotators answered so far" in status and " 1 images" not in status
    summary = json.loads((tmp_path / "out" / "curation.json").read_text())
    assert sum(not a["kept"] for a in summary["attributes"].values()) == 1
    assert len(load_sub(tmp_path / "out" / "dataset")) == summary["kept_images"]


def test_curate_command_bad_store_one_line(tmp_path, capsys):
    from concept_grounding.cli import main

    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "metadata.jsonl").write_text(
        json.dumps({"file_name": "x.png", "reference_class": "017.Cardinal", "target_attribute": CHOICES[0]}) + "\n"
    )
    (tmp_path / "bad.db").write_bytes(b"garbage" * 100)
    assert (
        main(
            [
                "curate",
                "--candidates",
                str(gen),
                "--annotations",
                str(tmp_path / "bad.db"),
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not an annotation database" in err[0]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(store, image):
    from concept_grounding.curation.annotate_serve import serve_app

    port = _free_port()
    app = serve_app(store, lambda item: str(image), port=port, prevent_thread_lock=True, quiet=True)
    return app, f"http://127.0.0.1:{port}/"


def test_served_app_two_sessions_then_restart_resumes(store, tmp_path):
    """The real server over HTTP (gradio_client; no browser here): two annotators in two
    sessions at once, each finishing part of a batch; the server stops and a new one resumes."""
    pytest.importorskip("gradio")
    client_mod = pytest.importorskip("gradio_client")
    from PIL import Image

    image = tmp_path / "bird.png"
    Image.new("RGB", (16, 16)).save(image)
    tokens = {n: store.issue_token(n) for n in ("ann", "bob")}
    app, url = _serve(store, image)
    try:
        ann, bob = client_mod.Client(url, verbose=False), client_mod.Client(url, verbose=False)
        shown = {
            "ann": ann.predict(tokens["ann"], api_name="/on_start"),
            "bob": bob.predict(tokens["bob"], api_name="/on_start"),
        }
        assert shown["ann"][2] == "ann: 0 / 4 images" and shown["bob"][2] == "bob: 0 / 4 images"
        for _ in range(2):
            shown["ann"] = ann.predict(tokens["ann"], shown["ann"][1], "yes", "no", api_name="/on_submit")
            shown["bob"] = bob.predict(tokens["bob"], shown["bob"][1], "somewhat", "no", api_name="/on_submit")
    finally:
        app.close()
    first = store.rows()
    assert len(first) == 2 * 2 * 2 and len(set(first)) == len(first)
    app, url = _serve(AnnotationStore(tmp_path / "a.db", k=2), image)
    try:
        ann = client_mod.Client(url, verbose=False)
        view = ann.predict(tokens["ann"], api_name="/on_start")
        assert view[2] == "ann: 2 / 4 images"
        for _ in range(2):
            view = ann.predict(tokens["ann"], view[1], "no", "yes", api_name="/on_submit")
        assert view[2] == "ann: 4 / 4 images" and view[3].startswith("All done")
    finally:
        app.close()
    assert store.progress("ann", 1) == (4, 4) and len(store.rows()) == len(first) + 2 * 2
