"""Keeping a live store: online backups, compaction after deletes, metrics."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import apsw
import pytest

from relaystore import (
    ApiActivityState,
    DeleteSession,
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadState,
    RecordActivities,
    SaveSession,
)
from relaystore.domain.messages import BackupStore, CompactStore
from relaystore.testing import example_session


def activity(n: int, session_id: str = "session-1") -> RecordActivities:
    return RecordActivities(
        activities=[
            (
                session_id,
                ApiActivityState(
                    state=f"state-{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
                ),
            )
        ],
        recorded_at_ms=n,
    )


def test_a_backup_taken_while_the_writer_commits_opens_verifies_and_resumes(
    tmp_path: Path,
) -> None:
    with EventStore.open(tmp_path / "live.sqlite3") as store:
        store.ask(SaveSession(record=example_session()))
        stop = threading.Event()

        def write() -> None:
            n = 0
            while not stop.is_set():
                store.ask(activity(n))
                n += 1

        writer = threading.Thread(target=write)
        writer.start()
        try:
            store.wait_for(50, timeout=10)
            report = store.ask(BackupStore(destination=str(tmp_path / "copy.sqlite3")))
        finally:
            stop.set()
            writer.join()
        assert report.latest_seq >= 50
    copy = tmp_path / "copy.sqlite3"
    assert not Path(f"{copy}-wal").exists()  # a single file
    assert oct(os.stat(copy).st_mode & 0o777) == "0o600"
    with EventStore.open(copy) as restored:  # opens, and the writer resumes
        events = restored.ask(LoadApiEvents(after_seq=0, limit=1000)).events
        assert [e.seq for e in events] == list(range(1, report.latest_seq + 1))
        restored.ask(activity(10**6))
        assert restored.latest_seq == report.latest_seq + 1


def test_a_backup_refuses_an_existing_destination_and_leaves_it(tmp_path: Path) -> None:
    existing = tmp_path / "taken.sqlite3"
    existing.write_bytes(b"precious")
    with (
        EventStore.open(tmp_path / "live.sqlite3") as store,
        pytest.raises(InvalidInput, match="exists already"),
    ):
        store.ask(BackupStore(destination=str(existing)))
    assert existing.read_bytes() == b"precious"


def test_compaction_reclaims_the_pages_deletes_left(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    with EventStore.open(path) as store:
        for index in range(20):
            session_id = f"s-{index}"
            store.ask(SaveSession(record=example_session(session_id)))
            for n in range(200):
                store.ask(activity(n, session_id))
        for index in range(20):
            store.ask(DeleteSession(session_id=f"s-{index}"))
        freelist = _pragma(path, "freelist_count")
        assert freelist > 0
        report = store.ask(CompactStore())
        assert report.pages_after < report.pages_before
        assert store.ask(LoadState()).sessions == {}
    assert _pragma(path, "freelist_count") == 0


def _pragma(path: Path, name: str) -> int:
    connection = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        value = connection.execute(f"PRAGMA {name}").get
        assert isinstance(value, int)
        return value
    finally:
        connection.close()


def test_metrics_count_commits_events_and_followers(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        empty = store.metrics()
        assert (empty.commits, empty.api_events_written, empty.followers) == (0, 0, 0)
        store.ask(SaveSession(record=example_session()))
        for n in range(10):
            store.ask(activity(n))
        follower = store.follow(timeout=5)
        next(follower)
        figures = store.metrics()
        assert figures.commits >= 2
        assert figures.messages_written == 11
        assert figures.api_events_written == 10
        assert figures.latest_seq == 10
        assert figures.followers == 1
        assert figures.commit_latency_p99_ms >= figures.commit_latency_p50_ms > 0
        assert figures.batch_size_max >= 1
        follower.close()
        assert store.metrics().followers == 0


def test_open_migrate_close_and_replay_log_at_info_under_relaystore(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from relaystore.actors.journal import resolve_source
    from relaystore.actors.replay import replay_source
    from relaystore.testing import JournalBuilder

    journal = JournalBuilder()
    journal.prompt_turn("hello")
    root = journal.write_worker_root(tmp_path / "root", "s-1")
    caplog.set_level(logging.INFO, logger="relaystore")
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        replay_source(store, resolve_source(root))
    messages = [(r.name, r.getMessage()) for r in caplog.records if r.levelno == logging.INFO]
    assert all(name.startswith("relaystore.") for name, _ in messages)
    text = "\n".join(message for _, message in messages)
    assert "created a relaystore store" in text
    assert "opened" in text
    assert "replayed" in text
    assert "into session s-1" in text
    assert "closed" in text


@pytest.mark.parametrize(
    ("destination", "words"),
    [
        ("a\x00b", "not a usable file name"),
        ("\udcff.sqlite3", "not a usable file name"),
        ("nowhere/copy.sqlite3", "does its folder exist"),
    ],
)
def test_a_backup_to_an_unusable_destination_is_refused_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, destination: str, words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with (
        EventStore.open(tmp_path / "live.sqlite3") as store,
        pytest.raises(InvalidInput, match=words),
    ):
        store.ask(BackupStore(destination=destination))
    written = [path.name for path in tmp_path.iterdir() if not path.name.startswith("live.")]
    assert written == []
