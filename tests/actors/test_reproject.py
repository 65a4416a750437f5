"""Reproject: a session rebuilt from its relay log with the current rules.

A journal is replayed by an "old build" (a projection rule patched in the product's
handler table), then reprojected by the current build: the projection is the one the
current rules give, and the feed only grew (every committed event kept, with its seq and
body; the missing ones appended with fresh seqs). A second reprojection changes nothing;
a session whose log does not hold its history is refused.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from relaystore.actors import projector
from relaystore.actors.cli import main
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiEvent
from relaystore.domain.errors import RelayLogUnavailable
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    Reproject,
    SaveSession,
)
from relaystore.domain.projection.observations import HANDLERS
from relaystore.domain.projection.rebuild import Rebuilt, ReprojectReport
from relaystore.domain.relay import CommandCompleted
from relaystore.domain.relay.log import StoredRelayLog
from relaystore.domain.wire import encode
from relaystore.testing import example_session
from tests.actors.journal_factory import conversation, write_journal

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-rp"
TIMEOUT = 30.0


def _feed(store: EventStore) -> list[ApiEvent]:
    return store.ask(LoadApiEvents(after_seq=0, limit=1000)).events


def _body(event: ApiEvent) -> tuple[str, bytes]:
    return event.type, bytes(event.data)


def _replay(db: Path, journal: Path, **options: Any) -> None:
    with EventStore.open(db, synchronous="OFF", **options) as store:
        replay_source(store, resolve_source(journal, session_id=SESSION))


def test_reproject_applies_the_current_rules_and_only_appends_to_the_feed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = conversation(300)
    journal = write_journal(tmp_path / "j.jsonl", events)
    expected_db = tmp_path / "expected.sqlite3"
    _replay(expected_db, journal)  # what the current rules give
    with EventStore.open(expected_db, read_only=True, readers=1) as store:
        expected = store.ask(LoadMaterializedSession(session_id=SESSION))
        expected_feed = Counter(_body(e) for e in _feed(store))

    db = tmp_path / "store.sqlite3"
    with monkeypatch.context() as old_build:  # an old build ignored command completions
        old_build.setitem(HANDLERS, CommandCompleted, lambda ctx, observation: None)
        _replay(db, journal, projection="thread")  # the patch reaches this interpreter only
    with EventStore.open(db, synchronous="OFF") as store:
        before = _feed(store)
        old = store.ask(LoadMaterializedSession(session_id=SESSION))
        assert old is not None
        assert old != expected

        report = store.ask(Reproject(session_id=SESSION))

        after = _feed(store)
        rebuilt = store.ask(LoadMaterializedSession(session_id=SESSION))
        again = store.ask(Reproject(session_id=SESSION))
        assert _feed(store) == after  # the same rules derive nothing new
        # The store keeps projecting the session's events after a reprojection.
        more = conversation(310)[300:]
        store.ask(ObserveRelayEvents(session_id=SESSION, events=more))

    assert encode(rebuilt) == encode(expected)
    assert after[: len(before)] == before  # nothing rewritten or deleted
    appended = after[len(before) :]
    assert appended
    assert min(e.seq for e in appended) > max(e.seq for e in before)
    # Appended: exactly what the current rules derive that the old feed lacked.
    assert Counter(_body(e) for e in appended) == expected_feed - Counter(map(_body, before))
    kinds: dict[str, int] = {}
    for e in appended:
        kinds[e.type] = kinds.get(e.type, 0) + 1
    assert report.appended_by_kind == kinds
    assert report.first_appended_seq == appended[0].seq
    assert report.events_reprojected == 300
    assert report.first_changed_position is not None
    assert (again.appended_by_kind, again.first_changed_position) == ({}, None)


def test_a_session_whose_log_misses_its_history_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = write_journal(tmp_path / "j.jsonl", conversation(200))
    db = tmp_path / "store.sqlite3"
    _replay(db, journal, relay_log=False)
    with EventStore.open(db, synchronous="OFF") as store:
        before = store.ask(LoadMaterializedSession(session_id=SESSION))
        with pytest.raises(RelayLogUnavailable, match="relay log is empty"):
            store.ask(Reproject(session_id=SESSION))
        assert store.ask(LoadMaterializedSession(session_id=SESSION)) == before

    assert main(["--db", str(db), "reproject"]) == 1
    assert "cannot reproject session session-rp" in capsys.readouterr().err


def test_the_reproject_command_reports_each_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = write_journal(tmp_path / "j.jsonl", conversation(150))
    db = tmp_path / "store.sqlite3"
    _replay(db, journal)

    assert main(["--db", str(db), "reproject", SESSION]) == 0

    out = capsys.readouterr().out
    assert out.strip() == (
        f"reprojected {SESSION}: 150 events; API events appended: none; "
        "first changed transcript position: none"
    )


def test_the_store_keeps_serving_while_a_session_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = write_journal(tmp_path / "j.jsonl", conversation(150))
    db = tmp_path / "store.sqlite3"
    _replay(db, journal)
    entered, release = threading.Event(), threading.Event()
    real = projector.rebuild

    def slow_rebuild(stored: StoredRelayLog) -> Rebuilt:
        entered.set()
        assert release.wait(TIMEOUT)
        return real(stored)

    monkeypatch.setattr(projector, "rebuild", slow_rebuild)
    replies: list[ReprojectReport] = []
    # The rebuild is slowed in this interpreter: the projectors' thread path.
    with EventStore.open(db, synchronous="OFF", projection="thread") as store:
        worker = threading.Thread(
            target=lambda: replies.append(store.ask(Reproject(session_id=SESSION)))
        )
        worker.start()
        assert entered.wait(TIMEOUT)
        # Mid-rebuild: the writer commits another session's work, readers answer.
        store.ask(SaveSession(record=example_session("another")), timeout=TIMEOUT)
        other = ObserveRelayEvents(session_id="another", events=conversation(20))
        assert store.ask(other, timeout=TIMEOUT).applied == 20
        assert not replies
        release.set()
        worker.join(TIMEOUT)
    assert replies[0].events_reprojected == 150
