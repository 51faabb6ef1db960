"""ConceptBed's rating study in a real browser: ``concept-grounding annotate --items``
served in a subprocess, two raters in two Chromium contexts at once, each rating every image
with the keys 1-5 and Enter, one image per screen (the one app rendering the rating study alone: tab 1); the
store holds both, kept apart, k = 2.

Needs Debian's ``/usr/bin/chromium`` and playwright (skipped without them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from concept_grounding.conceptbed.human_ratings import export_rating_items
from concept_grounding.curation.study_store import StudyStore
from concept_grounding.testing.serving import free_port, wait_until_serving

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install -y chromium)"),
]


def _items(folder: Path) -> Path:
    """Four world images to rate: two against three references of their species, two against a caption."""
    from concept_grounding.world import BirdWorld, WorldConfig

    world = BirdWorld(WorldConfig(image_size=64))
    n = world.num_classes
    refs = [world.sample(j * n).image for j in range(1, 4)]
    records = [
        {
            "image": world.sample(c + 5 * n).image,
            "learner": learner,
            "task": "object",
            "concept": "c0",
            "kind": "concept",
            "references": refs,
        }
        for c, learner in ((0, "exact"), (1, "another species"))
    ]
    records += [
        {
            "image": world.sample(c + 6 * n).image,
            "learner": learner,
            "task": "composition",
            "concept": "c0",
            "kind": "caption",
            "caption": "a photo of V* on a branch",
        }
        for c, learner in ((0, "exact"), (1, "LoRA"))
    ]
    return export_rating_items(folder, records)


def test_two_raters_in_two_browsers_rate_every_image_with_the_keys(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    pytest.importorskip("gradio")
    expect = playwright.expect
    items, db, log = _items(tmp_path / "items"), tmp_path / "a.db", tmp_path / "server.log"
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
        "--items",
        str(items),
        "--db",
        str(db),
        "--k",
        "2",
        "--port",
        str(port),
        "--annotators",
        "ann,bob",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url, timeout, given = f"http://127.0.0.1:{port}/", 30_000, {"ann": "5", "bob": "2"}
    try:
        wait_until_serving(proc, url, timeout=90, log=log)
        tokens = {
            n: line.split("?token=")[1].strip()
            for n in given
            for line in log.read_text().splitlines()
            if line.strip().startswith(f"{n}: http")
        }
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=CHROMIUM,
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
            )
            pages = {n: browser.new_context(viewport={"width": 1100, "height": 900}).new_page() for n in given}
            for n, page in pages.items():
                page.goto(f"{url}?token={tokens[n]}", wait_until="domcontentloaded")
                page.get_by_role("button", name="Start / resume").click()
                expect(page.get_by_text(f"{n}: 0 / 4 images")).to_be_visible(timeout=timeout)
            shown = {n: [] for n in given}
            for k in range(1, 5):  # both raters at once: each key press sent before either page waits
                for n, page in pages.items():
                    expect(page.locator("#image1 img")).to_have_count(1, timeout=timeout)  # one image per screen
                    shown[n].append(page.locator("#image1 img").first.get_attribute("data-file"))
                    page.locator("body").click(position={"x": 5, "y": 5})
                    page.keyboard.press(given[n])
                    page.keyboard.press("Enter")
                for n, page in pages.items():
                    expect(page.get_by_text(f"{n}: {k} / 4 images")).to_be_visible(timeout=timeout)
            for page in pages.values():
                expect(page.get_by_text("All done").first).to_be_visible(timeout=timeout)
            browser.close()
    finally:
        proc.kill()
        proc.wait(timeout=10)
    store = StudyStore(db, read_only=True)
    rows = store.responses("conceptbed-rating")
    assert len(rows) == len({(r.annotator, r.record) for r in rows}) == 8
    assert {(r.annotator, r.answers["rating"]) for r in rows} == {("ann", "5"), ("bob", "2")}
    assert all(len(set(v)) == 4 for v in shown.values()) and store.complete("conceptbed-rating") == (4, 4)
