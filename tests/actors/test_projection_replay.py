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
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st, target

from relaystore.actors import projector_wiring as wiring_module, reader as reader_module
from relaystore.actors.settings import ProjectionMode
from relaystore.actors.store import EventStore
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    SaveSession,
)
from relaystore.domain.projection import frozen
from relaystore.domain.relay import RelayEvent, decode_relay_event, encode_relay_event
from relaystore.domain.wire import encode
from relaystore.storage.materialized import load_transcript_item
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


def _events(steps: list[tuple[str, int, str]]) -> list[RelayEvent]:
    """The journal of ``steps``, each event read back from its journal line."""
    return [
        decode_relay_event(encode_relay_event(e)) for e in build_events(journal_observations(steps))
    ]


def _count_fetches(patch: pytest.MonkeyPatch) -> list[str]:
    """Record the stable id of every transcript item a projector fetches from the store."""
    fetched: list[str] = []

    def counting(connection: Any, session_id: str, stable_id: str) -> Any:
        fetched.append(stable_id)
        return load_transcript_item(connection, session_id, stable_id)

    patch.setattr(reader_module, "load_transcript_item", counting)
    return fetched


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
@pytest.mark.integration
def test_a_journal_replayed_through_the_store_in_any_pieces_equals_projecting_it_whole(
    steps: list[tuple[str, int, str]], cuts: list[int]
) -> None:
    pages = _replayed_in_pieces_equals_whole(steps, cuts)
    target(float(pages))
    event(f"pages: {pages}")  # steer toward journals that span several pages


def _replayed_in_pieces_equals_whole(
    steps: list[tuple[str, int, str]], cuts: list[int], projection: ProjectionMode = "process"
) -> int:
    """Replay the journal of ``steps`` cut at ``cuts`` through a store, check it equals
    projecting it whole; return how many pages of 128 it spans. (A test that patches
    the projection's rules projects in threads: a worker process would not see it.)"""
    events = _events(steps)
    whole, feed = replay(MaterializedSession.empty("session-1"), events)
    points = sorted({cut % (len(events) + 1) for cut in cuts} | {0, len(events)})
    with (
        tempfile.TemporaryDirectory() as folder,
        EventStore.open(Path(folder) / "s.sqlite3", projection=projection) as store,
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
    return len(events) // 128 + 1


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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.tuples(steps_strategy, st.integers(1, 20)).map(_repeated),
    cuts=st.lists(st.integers(0, 10_000), max_size=4),
)
def test_a_projector_that_drops_committed_items_from_memory_projects_the_same(
    steps: list[tuple[str, int, str]], cuts: list[int]
) -> None:
    """With a window of one item, nearly every item goes cold as soon as its page
    commits, and every later read of it is fetched from the store through a reader, while
    the next page is projected ahead of the commit: the result must not change."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frozen, "WINDOW", 1)
        patch.setattr(frozen, "SLACK", 1)
        fetched = _count_fetches(patch)
        _replayed_in_pieces_equals_whole(steps, cuts, "thread")
    event(f"fetched from the store: {bool(fetched)}")


def test_cold_items_are_fetched_from_the_store_on_a_long_journal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    steps = [("prompt", 0, "go"), ("start", 0, ""), ("tool", 1, "run"), ("chunk", 0, "x")]
    steps += [("tool_update", 1, "again"), ("complete", 0, "")]  # updates the second tool
    monkeypatch.setattr(frozen, "WINDOW", 2)
    monkeypatch.setattr(frozen, "SLACK", 1)
    fetched = _count_fetches(monkeypatch)
    _replayed_in_pieces_equals_whole(steps * 120, [100, 333], "thread")
    assert fetched  # the path under test ran


def test_projectors_reloaded_on_every_message_page_their_sessions_in_and_project_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One projector for two sessions: every message stops the other session's projector,
    so each message reloads its session a few items at a time (its old items cold at once)
    and fetches what events name: both end as projecting their journals whole."""
    steps = [("prompt", 0, "go"), ("start", 0, ""), ("tool", 1, "run"), ("chunk", 0, "x")]
    steps += [("tool_update", 1, "again"), ("complete", 0, "")]
    events = _events(steps * 40)
    whole, _ = replay(MaterializedSession.empty("session-1"), events)
    monkeypatch.setattr(frozen, "WINDOW", 2)
    monkeypatch.setattr(frozen, "SLACK", 1)
    monkeypatch.setattr(wiring_module, "LOAD_PAGE_ITEMS", 7)
    fetched = _count_fetches(monkeypatch)
    sessions = ("session-1", "session-2")
    with (
        tempfile.TemporaryDirectory() as folder,
        EventStore.open(Path(folder) / "s.sqlite3", max_projectors=1, projection="thread") as store,
    ):
        for sid in sessions:
            store.ask(SaveSession(record=example_session(sid)))
        for start in range(0, len(events), 50):
            for sid in sessions:
                store.ask(ObserveRelayEvents(session_id=sid, events=events[start : start + 50]))
        stored = [store.ask(LoadMaterializedSession(session_id=sid)) for sid in sessions]
    for sid, session in zip(sessions, stored, strict=True):
        assert session is not None
        expected = MaterializedSession(**{**_fields(whole), "session_id": sid})
        assert _canonical(session) == _canonical(expected)
    assert fetched
