"""A clean close: the writer checkpoints the WAL into the main file (issue 11).

A copy of the ``.sqlite3`` file alone must hold every committed row, whether the
readers closed before the writer (the facade's order) or are still open, idle; a
reader that keeps a snapshot open only costs a logged warning, never an error.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import apsw
import pytest

from relaystore.storage.connection import WriterConnection, open_reader, open_writer
from relaystore.storage.events import insert_api_event
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.sessions import save_session
from relaystore.testing import example_session
from tests.storage.builders import turn_started

EVENTS = 300


def fill(writer: WriterConnection) -> None:
    """One session and ``EVENTS`` API events, each in its own committed transaction."""
    save_session(writer.connection, example_session())
    for _ in range(EVENTS):
        with writer.transaction():
            insert_api_event(writer.connection, "session-1", 1, turn_started())


def wal_size(store_path: Path) -> int:
    wal = Path(f"{store_path}-wal")
    return wal.stat().st_size if wal.exists() else 0


def copy_main_file_alone(store_path: Path, tmp_path: Path) -> Path:
    """Copy only the ``.sqlite3`` file (no ``-wal``, no ``-shm``) into another folder."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(parents=True)
    copy = elsewhere / "copy.sqlite3"
    shutil.copyfile(store_path, copy)
    return copy


def committed_in(copy: Path) -> tuple[int, int]:
    """(sessions, latest seq) of a copied file, read without relaystore's openers."""
    connection = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        sessions = connection.execute("SELECT count(*) FROM sessions").get
        latest = load_latest_seq(connection)
    finally:
        connection.close()
    assert isinstance(sessions, int)
    return sessions, latest


@pytest.mark.parametrize("readers", ["closed first", "still open, idle"])
def test_after_a_clean_close_the_main_file_alone_holds_every_commit(
    store_path: Path, tmp_path: Path, readers: str
) -> None:
    writer = open_writer(store_path)
    reader = open_reader(store_path)
    fill(writer)
    assert load_latest_seq(reader) == EVENTS  # the reader took (and ended) snapshots
    if readers == "closed first":
        reader.close()
    writer.close()  # with a reader still open, the writer is not the last connection
    try:
        assert wal_size(store_path) == 0  # the WAL is empty or gone
        copy = copy_main_file_alone(store_path, tmp_path)
        assert committed_in(copy) == (1, EVENTS)
    finally:
        reader.close()
    # the reader, closed last, read-only, changed nothing: the main file is still complete
    assert wal_size(store_path) == 0
    assert committed_in(copy_main_file_alone(store_path, tmp_path / "again")) == (1, EVENTS)


def test_a_store_reopened_after_a_clean_close_has_everything(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        fill(writer)
    with open_writer(store_path) as writer:
        assert load_latest_seq(writer.connection) == EVENTS


def test_a_reader_holding_a_snapshot_costs_a_warning_not_an_error_and_loses_nothing(
    store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = open_writer(store_path)
    save_session(writer.connection, example_session())
    reader = open_reader(store_path)
    reader.execute("BEGIN")
    assert load_latest_seq(reader) == 0  # the snapshot is taken and kept
    with writer.transaction():
        insert_api_event(writer.connection, "session-1", 1, turn_started())
    with caplog.at_level(logging.WARNING, logger="relaystore.storage.connection"):
        writer.close()
    assert writer.closed
    assert "could not checkpoint the WAL" in caplog.text
    assert "close readers before the writer" in caplog.text
    reader.execute("COMMIT")
    reader.close()
    # Nothing was lost: the next writer finds the commit and its clean close completes.
    with open_writer(store_path) as again:
        assert load_latest_seq(again.connection) == 1
    assert wal_size(store_path) == 0
    assert committed_in(copy_main_file_alone(store_path, tmp_path)) == (1, 1)


def test_a_failing_checkpoint_is_logged_and_the_writer_still_closes_and_unlocks(
    store_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = open_writer(store_path)
    save_session(writer.connection, example_session())

    def refuse_checkpoints(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
        if "wal_checkpoint" in sql:
            raise apsw.IOError("disk I/O error")
        return True

    writer.connection.exec_trace = refuse_checkpoints
    with caplog.at_level(logging.WARNING, logger="relaystore.storage.connection"):
        writer.close()
    assert writer.closed
    assert "checkpoint the WAL before closing" in caplog.text
    with open_writer(store_path) as again:  # the lock was released
        assert again.connection.execute("SELECT count(*) FROM sessions").get == 1
