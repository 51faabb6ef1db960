"""The annotation app in a real browser: ``concept-grounding annotate`` served in a
subprocess, two annotators in two Chromium contexts at once, each finishing a batch with the
keyboard shortcuts; the store holds both, no duplicate, no lost answer; the server is killed
and restarted, and each annotator resumes on the image they had open.

Needs Debian's ``/usr/bin/chromium`` and playwright (skipped without them). With
``SAVE_SCREENSHOTS=docs/screenshots`` it writes ``annotate.png`` there for the docs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from concept_grounding.curation.study_store import StudyStore
from concept_grounding.testing.serving import free_port, wait_until_serving

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
#: study-1 images (one class x one S+ x this many), each answered by both annotators (k = 2)
IMAGES = 6
BATCH = 3  # what each annotator finishes before the server is killed

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install -y chromium)"),
]


def _candidates(folder: Path) -> Path:
    """:data:`IMAGES` world candidates of one pairing (128 px, for a readable screenshot)."""
    from concept_grounding.curation.simulate import WorldTask, world_candidates, write_candidates

    task = WorldTask(classes=1, attributes=("has_crown_color::blue",), images_per_pairing=IMAGES, image_size=128)
    world = task.world()
    return write_candidates(world_candidates(task, world), folder, world)


def _serve(candidates: Path, db: Path, log: Path, names=("ann", "bob")) -> tuple[subprocess.Popen, str, dict[str, str]]:
    """``concept-grounding annotate`` on a free loopback port, each of ``names`` given a personal
    link; returns once it answers HTTP 200, with the URL and each link's token (the first start prints them)."""
    port = free_port()
    env = {
        **os.environ,
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "HF_HUB_OFFLINE": "1",
        "GRADIO_ANALYTICS_ENABLED": "False",
        "PYTHONPATH": str(ROOT / "src"),
    }
    cmd = [
        sys.executable,
        "-m",
        "concept_grounding.cli",
        "annotate",
        "--candidates",
        str(candidates),
        "--db",
        str(db),
        "--k",
        "2",
        "--per-pairing",
        "0",
        "--port",
        str(port),
        "--annotators",
        ",".join(names),
    ]
    start = log.stat().st_size if log.exists() else 0
    with open(log, "a") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    wait_until_serving(proc, url, timeout=90, log=log)
    printed = log.read_text()[start:]
    tokens = {
        n: line.split("?token=")[1].strip()
        for n in names
        for line in printed.splitlines()
        if line.strip().startswith(f"{n}: http") and "?token=" in line
    }
    return proc, url, tokens


def _answers(db: Path) -> list[tuple[str, str, str, str]]:
    """Study 1's stored answers: (annotator, record, Q1, Q2)."""
    return [
        (r.annotator, r.record, r.answers["q1"], r.answers["q2"])
        for r in StudyStore(db, read_only=True).responses("sub-1")
    ]


def _sign_in(page, link: str, name: str, expect, timeout: int) -> None:
    page.goto(link, wait_until="domcontentloaded")  # the personal link: its token is read from the URL
    page.get_by_role("button", name="Start / resume").click()
    expect(page.get_by_text(f"{name}: ", exact=False).first).to_be_visible(timeout=timeout)


def _shown_image(page) -> str:
    """The file name of the image on screen (the candidate's, e.g. ``c000003.png``)."""
    return page.locator("#image1 img").first.get_attribute("data-file")


def _screenshot(page, path: Path) -> None:
    """Full page, as a 128-colour palette PNG (small enough for docs/)."""
    from PIL import Image

    page.screenshot(path=str(path), full_page=True)
    Image.open(path).convert("RGB").quantize(128, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def test_two_annotators_in_two_browsers_then_kill_and_resume(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("gradio")
    expect = playwright.expect
    candidates, db, log = _candidates(tmp_path / "cands"), tmp_path / "a.db", tmp_path / "server.log"
    shots = os.environ.get("SAVE_SCREENSHOTS")
    timeout = 30_000
    names = ("ann", "bob")
    proc, url, tokens = _serve(candidates, db, log)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
            )
            pages = {n: browser.new_context(viewport={"width": 1100, "height": 900}).new_page() for n in names}
            for n, page in pages.items():
                _sign_in(page, f"{url}?token={tokens[n]}", n, expect, timeout)
                expect(page.locator("#q1")).to_be_visible(timeout=timeout)
                expect(page.get_by_text(f"{n}: 0 / {IMAGES} images")).to_be_visible(timeout=timeout)
            if shots:  # Q1 "yes" and Q2 "no" chosen by keys 1 and 6, before the submit
                page = pages["ann"]
                page.locator("body").click(position={"x": 5, "y": 5})
                page.keyboard.press("1")
                page.keyboard.press("6")
                expect(page.locator("#q2 input[type=radio]").nth(2)).to_be_checked()
                _screenshot(page, Path(shots) / "annotate.png")
            # both annotators answer at once: each key press is sent before either page waits for its reply
            for k in range(1, BATCH + 1):
                for n, page in pages.items():
                    page.locator("body").click(position={"x": 5, "y": 5})  # focus off the name box: shortcuts live
                    page.keyboard.press("1")  # Q1 yes
                    page.keyboard.press("6" if n == "ann" else "5")  # Q2 no / somewhat
                    page.keyboard.press("Enter")
                for n, page in pages.items():
                    expect(page.get_by_text(f"{n}: {k} / {IMAGES} images")).to_be_visible(timeout=timeout)
            open_before = {n: _shown_image(page) for n, page in pages.items()}
            browser.close()
        rows = _answers(db)
        assert len(rows) == len(set(rows)) == len(names) * BATCH  # none twice, none lost
        assert {r[0] for r in rows} == set(names)
        assert {r[2:] for r in rows if r[0] == "ann"} == {("yes", "no")}  # keys 1 and 6
        assert {r[2:] for r in rows if r[0] == "bob"} == {("yes", "somewhat")}  # keys 1 and 5

        proc.kill()  # no clean shutdown: the store must not depend on one
        proc.wait(timeout=10)
        proc, url, _ = _serve(candidates, db, log)  # the tokens printed at the first start still work
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
            for n in names:
                page = browser.new_context().new_page()
                _sign_in(page, f"{url}?token={tokens[n]}", n, expect, timeout)
                expect(page.get_by_text(f"{n}: {BATCH} / {IMAGES} images")).to_be_visible(timeout=timeout)
                expect(page.locator("#q1")).to_be_visible(timeout=timeout)
                assert _shown_image(page) == open_before[n]  # the image they had open when the server died
                for k in range(BATCH + 1, IMAGES + 1):
                    page.locator("#q1 input[type=radio]").nth(0).check()
                    page.locator("#q2 input[type=radio]").nth(2).check()
                    page.locator("#submit").click()
                    expect(page.get_by_text(f"{n}: {k} / {IMAGES} images")).to_be_visible(timeout=timeout)
                expect(page.get_by_text("All done").first).to_be_visible(timeout=timeout)
            browser.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    store = StudyStore(db, read_only=True)
    rows = _answers(db)
    assert len(rows) == len({r[:2] for r in rows}) == len(names) * IMAGES
    assert all(store.progress(n, "sub-1") == (IMAGES, IMAGES) for n in names)
    assert store.complete("sub-1") == (IMAGES, IMAGES)
