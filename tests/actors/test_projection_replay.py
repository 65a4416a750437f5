"""Projecting through the store equals projecting in memory, however the journal is split.

A generated journal is projected whole in memory, and replayed into a fresh
``EventStore`` as ``ObserveRelayEvents`` messages cut at arbitrary points (the
projector commits pages of 128 inside each message). The store's API events and its
materialized projection must be exactly the in-memory ones.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings, target
from hypothesis import strategies as st

from relaystore.actors.store import EventStore
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    SaveSession,
)
from relaystore.domain.relay import decode_relay_event, encode_relay_event
from relaystore.domain.wire import encode
from relaystore.testing import example_session
from tests.domain.journal_stories import (
    build_events,
    journal_observations,
    replay,
    steps_strategy,
)


def _canonical(session: MaterializedSession) -> bytes:
    """The session as the store orders its transcript (by position, then stable id)."""
    ordered = sorted(session.transcript, key=lambda item: (item.position, item.stable_id))
    return encode(MaterializedSession(**{**_fields(session), "transcript": ordered}))


def _repeated(
    drawn: tuple[list[tuple[str, int, str]], int],
) -> list[tuple[str, int, str]]:
    steps, times = drawn
    return steps * times


def _fields(session: MaterializedSession) -> dict[str, object]:
    return {name: getattr(session, name) for name in session.__struct_fields__}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # Up to a few hundred events, so messages span several pages of 128.
    steps=st.tuples(steps_strategy, st.integers(1, 20)).map(_repeated),
    cuts=st.lists(st.integers(0, 10_000), max_size=4),
)
def test_a_journal_replayed_through_the_store_in_any_pieces_equals_projecting_it_whole(
    steps: list[tuple[str, int, str]], cuts: list[int]
) -> None:
    events = [
        decode_relay_event(encode_relay_event(e)) for e in build_events(journal_observations(steps))
    ]
    target(float(len(events)))
    event(f"pages: {len(events) // 128 + 1}")  # steer toward journals that span several pages
    whole, feed = replay(MaterializedSession.empty("session-1"), events)
    points = sorted({cut % (len(events) + 1) for cut in cuts} | {0, len(events)})
    with (
        tempfile.TemporaryDirectory() as folder,
        EventStore.open(Path(folder) / "s.sqlite3") as store,
    ):
        store.ask(SaveSession(record=example_session()))
        for start, end in itertools.pairwise(points):
            store.ask(ObserveRelayEvents(session_id="session-1", events=events[start:end]))
        stored_feed = [
            encode(event.event)
            for event in store.ask(LoadApiEvents(after_seq=0, limit=1000)).events
        ]
        stored = store.ask(LoadMaterializedSession(session_id="session-1"))
    assert stored_feed == feed
    assert stored is not None
    assert _canonical(stored) == _canonical(whole)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.tuples(steps_strategy, st.integers(1, 60)).map(_repeated),
    cuts=st.lists(st.integers(0, 100_000), max_size=8),
)
def test_soak_long_journals_replayed_in_many_pieces_equal_projecting_whole(
    steps: list[tuple[str, int, str]], cuts: list[int]
) -> None:
    test_a_journal_replayed_through_the_store_in_any_pieces_equals_projecting_it_whole.hypothesis.inner_test(  # type: ignore[attr-defined]
        steps, cuts
    )
