"""The one annotation app served on loopback over the one store, driven over HTTP by gradio_client (no browser):
SUB's studies 1 and 2 and ConceptBed's rating study each answered end to end by two annotators at once; a repeated
or stale submit refused and never applied to another record; a malformed answer refused in one line, logged
without its value."""

from __future__ import annotations

import logging
import threading

import pytest

from concept_grounding.curation.study import CONCEPTBED_RATING, STUDIES, SUB_STUDY_1, SUB_STUDY_2, Record

pytest.importorskip("gradio")
client_mod = pytest.importorskip("gradio_client")

CHOICES = ("has_crown_color::pink", "has_crown_color::blue", "has_crown_color::red")
#: each study's API prefix, its records and the answers ann and bob give
N = 3


def _records() -> dict[str, list[Record]]:
    meta = {"plus": "pink crown color", "reference": "017.Cardinal"}
    return {
        "sub-1": [Record(f"1:c{i}", "sub-1", {"image": "bird.png"}, metadata=meta) for i in range(N)],
        "sub-2": [Record(f"2:c{i}", "sub-2", {"image": "bird.png"}, options={"present": CHOICES}) for i in range(N)],
        "conceptbed-rating": [
            Record(
                f"r{i}",
                "conceptbed-rating",
                {"image": "bird.png", "references": ["bird.png"] * 3}
                if i % 2
                else {"image": "bird.png", "caption": "V*"},
                metadata={"question": "How similar is the concept?" if i % 2 else "Does the caption match?"},
            )
            for i in range(N)
        ],
    }


ANSWERS = {
    "sub-1": {"ann": ("yes", "no"), "bob": ("somewhat", "no")},
    "sub-2": {"ann": (CHOICES[1],), "bob": (CHOICES[2],)},
    "conceptbed-rating": {"ann": ("5",), "bob": ("2",)},
}


@pytest.fixture
def served(tmp_path):
    """Every declared study in one app over one store (k = 2) beside a private folder; yields (url, store, tokens)."""
    from PIL import Image

    from concept_grounding.curation.annotate_serve import serve_app
    from concept_grounding.curation.study_store import StudyStore
    from concept_grounding.testing.serving import free_port

    root = tmp_path / "cands"
    root.mkdir()
    Image.new("RGB", (8, 8)).save(root / "bird.png")
    (root / "truth.jsonl").write_text('{"id": "c0", "applied": true}\n')
    store = StudyStore(root / "a.db", k=2)
    for name, records in _records().items():
        store.add_records(STUDIES[name], records)
    tokens = {n: store.issue_token(n) for n in ("ann", "bob", "carol")}
    port = free_port()
    app = serve_app(
        store,
        lambda record, name: root / name,
        port=port,
        studies=list(STUDIES.values()),
        private=[root],
        prevent_thread_lock=True,
        quiet=True,
    )
    try:
        yield f"http://127.0.0.1:{port}/", store, tokens
    finally:
        app.close()


def _api(study: str, event: str) -> str:
    return f"/{study.replace('-', '_')}_{event}"


def test_every_study_answered_end_to_end_by_two_annotators_at_once(served):
    """Outputs: the study's fields, the record id, progress, message, each question's wording and radio."""
    url, store, tokens = served
    seen: dict[tuple[str, str], list[str]] = {}

    def annotate(name: str, study: str) -> None:
        spec = STUDIES[study]
        at = len(spec.fields)  # the record id's position in the outputs
        client = client_mod.Client(url, verbose=False)
        view = client.predict(tokens[name], api_name=_api(study, "start"))
        ids = []
        while view[at]:
            assert 'data-file="bird.png"' in view[0] and view[0].count("<img") == 1
            ids.append(view[at])
            view = client.predict(tokens[name], view[at], *ANSWERS[study][name], api_name=_api(study, "submit"))
        assert view[at + 1] == f"{name}: {N} / {N} images" and view[at + 2].startswith("All done")
        seen[(name, study)] = ids

    threads = [threading.Thread(target=annotate, args=(n, s)) for s in ANSWERS for n in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 6 and all(len(set(ids)) == N for ids in seen.values())
    for study, given in ANSWERS.items():
        responses = store.responses(study)
        assert len(responses) == 2 * N and len({(r.annotator, r.record) for r in responses}) == 2 * N
        names = [q.name for q in STUDIES[study].questions]
        assert {(r.annotator, tuple(r.answers[q] for q in names)) for r in responses} == set(given.items())
    carol = client_mod.Client(url, verbose=False).predict(tokens["carol"], api_name=_api("sub-1", "start"))
    assert carol[1] == "" and carol[3].startswith("All done")  # k = 2: nothing left for a third annotator


def test_the_rating_study_shows_references_or_caption_and_each_question(served):
    url, _, tokens = served
    client = client_mod.Client(url, verbose=False)
    view = client.predict(tokens["ann"], api_name=_api("conceptbed-rating", "start"))
    fields, wording = view[:3], view[6]
    assert fields[1].count("<img") == 3 or 'class="caption">V*' in fields[2]
    assert wording in ("**How similar is the concept?**", "**Does the caption match?**")


def test_a_repeated_or_stale_submit_is_refused_never_applied_to_another_record(served):
    url, store, tokens = served
    client = client_mod.Client(url, verbose=False)
    submit = _api("sub-1", "submit")
    first = client.predict(tokens["ann"], api_name=_api("sub-1", "start"))
    second = client.predict(tokens["ann"], first[1], "yes", "no", api_name=submit)
    assert second[1] != first[1]
    again = client.predict(tokens["ann"], first[1], "no", "yes", api_name=submit)  # a double click's second half
    assert again[3].startswith("not stored") and again[1] == second[1]
    never_shown = next(r.id for r in _records()["sub-1"] if r.id not in (first[1], second[1]))
    other = client.predict(tokens["ann"], never_shown, "no", "yes", api_name=submit)
    assert other[3].startswith("not stored") and other[1] == second[1]
    assert [(r.record, dict(r.answers)) for r in store.responses("sub-1")] == [(first[1], {"q1": "yes", "q2": "no"})]
    assert store.open_record("ann", "sub-1") == second[1]


def test_a_malformed_answer_is_refused_in_one_line_logged_without_its_value(served, caplog, capfd):
    url, store, tokens = served
    client = client_mod.Client(url, verbose=False)
    shown = client.predict(tokens["ann"], api_name=_api("conceptbed-rating", "start"))[3]
    submit = _api("conceptbed-rating", "submit")
    with caplog.at_level(logging.WARNING, logger="concept_grounding.annotate"):
        for bad in ("9", "0", "Z" * 1_000_000, [3], {"rating": 3}):
            view = client.predict(tokens["ann"], shown, bad, api_name=submit)
            assert "is not one of 1, 2, 3, 4, 5" in view[5] and "\n" not in view[5] and len(view[5]) < 300
            assert view[3] == shown
        two = client.predict(tokens["ann"], api_name=_api("sub-2", "start"))[1]
        view = client.predict(tokens["ann"], two, "has_crown_color::green", api_name=_api("sub-2", "submit"))
        assert "present: 'has_crown_color::green' is not one of" in view[3]
    lines = [r.getMessage() for r in caplog.records if r.name == "concept_grounding.annotate"]
    assert lines == [
        "annotate: refused a conceptbed-rating submit by 'ann': answer to rating outside its choices"
    ] * 5 + ["annotate: refused a sub-2 submit by 'ann': answer to present outside its choices"]
    out, err = capfd.readouterr()
    assert "ZZZZZZZZZZ" not in out + err and "Traceback" not in out + err
    assert client.predict(tokens["ann"], shown, None, api_name=submit)[5] == "answer rating first"
    assert "personal link" in client.predict("ann", shown, "3", api_name=submit)[5]
    assert "personal link" in client.predict({"token": tokens["ann"]}, shown, "3", api_name=submit)[5]
    assert store.responses("conceptbed-rating") == [] and store.responses("sub-2") == []
    assert client.predict(tokens["ann"], shown, "3", api_name=submit)[5] == ""
    assert [dict(r.answers) for r in store.responses("conceptbed-rating")] == [{"rating": "3"}]


def test_the_studies_declared_elsewhere_render_too(tmp_path):
    """A study the project does not declare (three questions, an optional text field) gets its tab and its keys."""
    from concept_grounding.curation.annotate_app import build_app, shortcut_keys
    from concept_grounding.curation.study import Field, Question, Study

    study = Study(
        "mine",
        "Mine",
        "Look closely.",
        (Field("image", "image"), Field("note", "text", "Note", optional=True)),
        (Question("a", "label", "A?", ("x", "y")), Question("b", "rating", "B?"), Question("c", "choice", "C?")),
    )

    class Empty:
        def next_record(self, annotator, study):
            return None

    app = build_app(Empty(), [SUB_STUDY_1, SUB_STUDY_2, CONCEPTBED_RATING, study], lambda r, n: tmp_path / n)
    ids = {b.get("props", {}).get("elem_id") for b in app.config["components"]}
    assert {"a", "b", "c", "image4", "note4", "submit4"} <= ids and shortcut_keys(study)["b"] == "34567"
