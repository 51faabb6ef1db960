"""The Space's declared limits: :class:`WebLimits` and the :class:`Gate` that
enforces them, with known answers (a fake clock for the cache age)."""

from __future__ import annotations

import threading

import pytest

from concept_grounding.web.limits import (
    SPACE_PROXIES,
    Gate,
    Refused,
    WebLimits,
    trusted_proxies,
    unsafe_name,
    visitor_of,
)

MB = 2**20


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_upload_bytes_are_limited_per_visitor_and_in_total_until_the_cache_drops_them():
    clock = Clock()
    limits = WebLimits(
        max_upload_bytes=10 * MB,
        visitor_upload_bytes=15 * MB,
        total_upload_bytes=25 * MB,
        cache_age_s=60,
        sweep_every_s=30,
    )
    gate = Gate(limits, clock=clock)
    gate.admit_upload("a", 10 * MB)
    gate.record_upload("a", 10 * MB)
    with pytest.raises(Refused, match=r"^files: at most 15 MB of uploads per visitor within 1 minutes\.$"):
        gate.admit_upload("a", 6 * MB)
    gate.admit_upload("b", 10 * MB)
    gate.record_upload("b", 10 * MB)
    with pytest.raises(Refused, match=r"^files: this Space keeps at most 25 MB of uploads; try again later\.$"):
        gate.admit_upload("c", 6 * MB)
    with pytest.raises(Refused, match=r"^files: at most 10 MB per upload request, got 11\.0 MB\.$"):
        gate.admit_upload("c", 11 * MB)
    assert gate.stored_bytes() == 20 * MB and gate.stored_bytes("a") == 10 * MB
    clock.now = 91  # past cache age + one sweep: the sweep has deleted them
    assert gate.stored_bytes() == 0
    gate.admit_upload("a", 10 * MB)
    assert gate.refusals == {"files": 3}


def test_a_visitor_holds_at_most_its_slots_and_gets_them_back():
    gate = Gate(WebLimits(visitor_requests=2))
    with gate.slot("a"), gate.slot("a"):
        with (
            pytest.raises(
                Refused, match=r"^Requests: at most 2 requests at once per visitor; wait for one to finish\.$"
            ),
            gate.slot("a"),
        ):
            pass
        with gate.slot("b"):
            assert gate.running("a") == 2 and gate.running("b") == 1
    assert gate.running("a") == 0
    with pytest.raises(RuntimeError), gate.slot("a"):
        raise RuntimeError("the handler failed")
    assert gate.running("a") == 0


def test_slots_are_counted_right_under_threads():
    gate = Gate(WebLimits(visitor_requests=3))
    held, refused, barrier = [], [], threading.Barrier(8)

    def visit() -> None:
        try:
            with gate.slot("a"):
                held.append(1)
                barrier.wait(timeout=5)
        except Refused:
            refused.append(1)
            barrier.wait(timeout=5)

    threads = [threading.Thread(target=visit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (len(held), len(refused), gate.running("a")) == (3, 5, 0)


def test_lists_pixels_and_names():
    gate = Gate(WebLimits(max_list_items=2, max_pixels=100))
    assert gate.check_items("Baselines", ["x"] * 1000) == ["x"]
    gate.check_pixels("Image", 10, 10)
    with pytest.raises(Refused, match=r"^Image: at most 100 pixels after decoding, got 11 x 10\.$"):
        gate.check_pixels("Image", 11, 10)
    assert unsafe_name("") == "is empty" and unsafe_name("../x") == "is a path, not a file name"
    assert unsafe_name("a\u202eb.png") and unsafe_name("a\nb") and unsafe_name("oiseau-été.png") is None
    with pytest.raises(Refused, match=r"^files: at most 4 files per upload request, got 5\.$"):
        Gate().check_upload_names([f"{i}.png" for i in range(5)], "a")


def test_the_visitor_is_the_client_the_server_resolved_and_proxies_are_named_by_the_operator():
    """X-Forwarded-For was believed from any private peer; the visitor is now the
    scope's client (which the web server rewrites only for the operator's proxies)."""
    from types import SimpleNamespace

    assert visitor_of(("127.0.0.1", 5000)) == "127.0.0.1" and visitor_of(SimpleNamespace(host="8.8.4.4")) == "8.8.4.4"
    assert visitor_of(None) == "unknown" and visitor_of(()) == "unknown"
    assert trusted_proxies({}) == () and trusted_proxies({"SPACE_ID": "a/b"}) == SPACE_PROXIES
    assert trusted_proxies({"SPACE_ID": "a/b", "CONCEPT_GROUNDING_TRUSTED_PROXIES": ""}) == ()
    assert trusted_proxies({"CONCEPT_GROUNDING_TRUSTED_PROXIES": "10.1.0.0/16,10.1.0.0/16, ::1"}) == (
        "10.1.0.0/16",
        "::1",
    )
    with pytest.raises(ValueError, match=r"^CONCEPT_GROUNDING_TRUSTED_PROXIES: 'proxy.local' is not an IP address"):
        trusted_proxies({"CONCEPT_GROUNDING_TRUSTED_PROXIES": "proxy.local"})


def test_a_visitor_may_name_only_the_files_granted_to_them_until_the_sweep_may_have_taken_them():
    clock = Clock()
    gate = Gate(WebLimits(cache_age_s=60, sweep_every_s=30), clock=clock)
    gate.grant("a", ["/cache/ab/x.png", "/cache/cd/../ef/y.png"])
    assert gate.granted("a", "/cache/ab/x.png") and gate.granted("a", "/cache//ef/./y.png")
    assert not gate.granted("b", "/cache/ab/x.png") and not gate.granted("a", "/cache/ab")
    assert not gate.granted("a", "/cache/ab/../../etc/passwd")
    clock.now = 90
    assert gate.granted("a", "/cache/ab/x.png")
    clock.now = 91
    assert not gate.granted("a", "/cache/ab/x.png")


def test_limits_are_checked_and_read_from_the_environment():
    with pytest.raises(ValueError, match="visitor_requests must be an integer >= 1"):
        WebLimits(visitor_requests=0)
    with pytest.raises(ValueError, match="sweep_every_s must be at most cache_age_s"):
        WebLimits(cache_age_s=10, sweep_every_s=20)
    limits = WebLimits.from_env({"CONCEPT_GROUNDING_LIMIT_CACHE_AGE_S": "1200", "UNRELATED": "x"})
    assert limits.cache_age_s == 1200 and limits.delete_cache == (300, 1200)
    assert WebLimits().delete_cache == (300, 900)


def test_the_space_app_binds_loopback_unless_told_otherwise():
    """``app.py`` bound 0.0.0.0 where ``concept-grounding space`` binds 127.0.0.1 (a
    hosted Space sets ``GRADIO_SERVER_NAME=0.0.0.0`` itself)."""
    from pathlib import Path

    app = (Path(__file__).resolve().parents[2] / "spaces" / "concept-grounding" / "app.py").read_text()
    assert 'os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1")' in app and '0.0.0.0")' not in app
