"""Sessions projected in worker processes cost an entry each, not a thread
(``projection="process"``, the default): a few runner threads per worker run every
session's messages, one at a time per session and in order."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from relaystore import EventStore, LoadMaterializedSession, ObserveRelayEvents, SaveSession
from relaystore.actors.workers.runners import RUNNERS_PER_WORKER
from relaystore.testing import example_session
from tests.actors.test_live_projectors import _journal

pytestmark = pytest.mark.integration  # its stores project in worker processes


def test_live_sessions_cost_no_thread_each(tmp_path: Path) -> None:
    sessions = [f"s-{n}" for n in range(120)]
    journal = _journal(1)
    with EventStore.open(tmp_path / "store.sqlite3", max_projectors=500) as store:
        for session_id in sessions:
            store.ask(SaveSession(record=example_session(session_id)))
        before = threading.active_count()
        for session_id in sessions:
            report = store.ask(ObserveRelayEvents(session_id=session_id, events=journal.events))
            assert report.applied == len(journal.events)
        assert store.metrics().live_projectors == len(sessions)
        pool = store._core._workers  # test access: how many workers run
        assert pool is not None
        assert threading.active_count() - before <= RUNNERS_PER_WORKER * len(pool)


def test_a_sessions_told_messages_are_projected_in_order(tmp_path: Path) -> None:
    """Forty messages told without waiting, one event each: any taken out of order would
    be a gap, refused; every one applies and the session ends at the last."""
    events = _journal(8).events[:40]
    with EventStore.open(tmp_path / "store.sqlite3", max_projectors=2) as store:
        for session_id in ("a", "b", "c"):
            store.ask(SaveSession(record=example_session(session_id)))
        for event in events[:-1]:
            for session_id in ("a", "b", "c"):  # three sessions over two live entries
                store.tell(ObserveRelayEvents(session_id=session_id, events=[event]))
        for session_id in ("a", "b", "c"):
            report = store.ask(ObserveRelayEvents(session_id=session_id, events=events[-1:]))
            assert (report.applied, report.frontier_ordinal) == (1, len(events))
            stored = store.ask(LoadMaterializedSession(session_id=session_id))
            assert stored is not None
            assert stored.frontier is not None
            assert stored.frontier.ordinal == len(events)


def test_a_flood_of_tells_to_new_sessions_never_grows_the_live_set(tmp_path: Path) -> None:
    """Told messages to sixty sessions over two live ones: a sender waits while both are
    busy, so the live set never passes its limit, and every message is applied."""
    sessions = [f"s-{n}" for n in range(60)]
    journal = _journal(2)
    seen: list[int] = []
    with EventStore.open(tmp_path / "store.sqlite3", max_projectors=2) as store:
        for session_id in sessions:
            store.ask(SaveSession(record=example_session(session_id)))
        watching = threading.Event()

        def watch() -> None:
            while not watching.is_set():
                seen.append(store.metrics().live_projectors)
                watching.wait(0.0005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        for session_id in sessions:
            store.tell(ObserveRelayEvents(session_id=session_id, events=journal.events))
        for session_id in sessions:  # answered after its told message
            report = store.ask(ObserveRelayEvents(session_id=session_id, events=journal.events))
            assert report.already_applied == len(journal.events)
        watching.set()
        watcher.join()
    assert max(seen) <= 2
