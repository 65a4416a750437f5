"""The live set of projectors stays bounded, and a stopped one resumes from the store."""

from __future__ import annotations

import threading
from pathlib import Path

from relaystore import EventStore, LoadMaterializedSession, ObserveRelayEvents, SaveSession
from relaystore.testing import JournalBuilder, example_session


def _journal(turns: int) -> JournalBuilder:
    journal = JournalBuilder()
    for turn in range(turns):
        journal.prompt_turn(f"question {turn}")
    return journal


def test_projectors_past_the_limit_stop_and_resume_from_the_store(tmp_path: Path) -> None:
    sessions = [f"s-{n}" for n in range(12)]
    journals = {session_id: _journal(3) for session_id in sessions}
    with EventStore.open(tmp_path / "store.sqlite3", max_projectors=4) as store:
        for session_id in sessions:
            store.ask(SaveSession(record=example_session(session_id)))
        threads_before = threading.active_count()
        for round_ in range(3):  # round robin: every session's projector is evicted in turn
            for session_id in sessions:
                events = journals[session_id].events
                third = len(events) // 3
                chunk = events[round_ * third : (round_ + 1) * third if round_ < 2 else None]
                report = store.ask(ObserveRelayEvents(session_id=session_id, events=chunk))
                assert report.applied == len(chunk)
                assert store.metrics().live_projectors <= 4
        assert threading.active_count() <= threads_before + 4
        for session_id in sessions:
            stored = store.ask(LoadMaterializedSession(session_id=session_id))
            assert stored is not None
            assert stored.frontier == journals[session_id].frontier
            again = store.ask(
                ObserveRelayEvents(session_id=session_id, events=journals[session_id].events)
            )
            assert (again.applied, again.already_applied) == (0, len(journals[session_id].events))


def test_an_idle_projector_is_stopped(tmp_path: Path) -> None:
    journal = _journal(1)
    with EventStore.open(tmp_path / "store.sqlite3", projector_idle_seconds=0.05) as store:
        for session_id in ("a", "b"):
            store.ask(SaveSession(record=example_session(session_id)))
        store.ask(ObserveRelayEvents(session_id="a", events=journal.events))
        threading.Event().wait(0.1)
        store.ask(ObserveRelayEvents(session_id="b", events=journal.events))  # sweeps "a"
        assert store.metrics().live_projectors == 1
        report = store.ask(ObserveRelayEvents(session_id="a", events=journal.events))
        assert report.already_applied == len(journal.events)
