"""EventGate's counts at the piece, on a fake clock: sessions expire with the cache age, and a
visitor's share frees up as joins are answered."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from concept_grounding.web.events import EventGate
from concept_grounding.web.limits import Gate, Refused, WebLimits


def _gate(clock: list[float]) -> EventGate:
    limits = WebLimits(visitor_sessions=2, visitor_queue_events=2, queue_size=4, cache_age_s=10, sweep_every_s=5)
    return EventGate(None, Gate(limits, clock=lambda: clock[0]), SimpleNamespace(fns={}))


def test_sessions_are_counted_per_visitor_and_expire_with_the_cache_age():
    clock = [0.0]
    events = _gate(clock)
    for session in ("a", "b"):
        events.admit("v1", session)
        events.release("v1", None)
    with pytest.raises(Refused, match=r"^session: at most 2 page sessions per visitor"):
        events.admit("v1", "c")
    events.admit("v1", "a")  # a known session goes on
    events.release("v1", None)
    events.admit("v2", "c")  # another visitor has their own
    events.release("v2", None)
    clock[0] = 11.0
    events.admit("v1", "c")  # "a" and "b" expired


def test_a_visitor_s_joins_being_answered_count_against_their_share():
    events = _gate([0.0])
    events.admit("v1", "")
    events.admit("v1", "")
    with pytest.raises(Refused, match=r"^queue: at most 2 events per visitor in the queue"):
        events.admit("v1", "")
    events.release("v1", None)  # answered, and the queue did not keep it
    events.admit("v1", "")
