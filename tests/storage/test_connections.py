"""Connections: the cross-process write lock, file permissions, pragmas, read-only readers,
transactions and the mapping of apsw errors."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import pytest

import relaystore.storage.connection as connection_module
from relaystore.domain.errors import (
    InvalidInput,
    SchemaMismatch,
    StoreError,
    StoreLocked,
    UnknownSession,
)
from relaystore.storage.connection import BUSY_TIMEOUT_MS, open_reader, open_writer
from relaystore.storage.events import insert_api_event
from relaystore.storage.ownership import makes_foreign_files
from relaystore.storage.paging import load_api_events, load_latest_seq
from relaystore.storage.sessions import delete_session, load_session, save_session
from relaystore.storage.transaction import transaction
from relaystore.storage.write_lock import lock_path
from relaystore.testing import example_session
from tests.storage.builders import count_rows, running_session, turn_started

# -- the write lock ----------------------------------------------------------------------


def test_a_second_writer_in_the_same_process_is_refused_at_once(store_path: Path) -> None:
    with open_writer(store_path):
        with pytest.raises(StoreLocked, match="already open for writing") as caught:
            open_writer(store_path)
        assert caught.value.path == str(store_path)


def test_closing_the_writer_releases_the_lock_and_closing_twice_is_harmless(
    store_path: Path,
) -> None:
    writer = open_writer(store_path)
    writer.close()
    writer.close()
    assert writer.closed
    open_writer(store_path).close()


def test_a_file_that_is_not_a_database_is_refused_before_taking_the_lock(
    store_path: Path,
) -> None:
    store_path.write_bytes(b"this is not a database, it is a long enough text file" * 100)
    with pytest.raises(SchemaMismatch, match="not a SQLite database"):
        open_writer(store_path)
    assert not Path(lock_path(store_path)).exists()  # see test_foreign_files.py
    store_path.unlink()
    open_writer(store_path).close()


def test_a_failed_open_releases_the_lock(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_migration(connection: apsw.Connection) -> int:
        raise apsw.IOError("disk I/O error")

    monkeypatch.setattr(connection_module, "migrate_schema", failing_migration)
    with pytest.raises(StoreError, match="open the store for writing") as caught:
        open_writer(store_path)
    assert not isinstance(caught.value, apsw.Error)
    monkeypatch.undo()
    open_writer(store_path).close()


HOLD = textwrap.dedent(
    """
    import sys
    from relaystore.storage.connection import open_writer
    from relaystore.domain.errors import StoreLocked
    try:
        writer = open_writer(sys.argv[1])
    except StoreLocked:
        print("locked", flush=True)
        sys.exit(0)
    print("holding", flush=True)
    sys.stdin.readline()
    writer.close()
    """
)


def spawn_holder(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


@pytest.mark.integration
def test_a_writer_in_another_process_locks_this_one_out_until_it_closes(store_path: Path) -> None:
    with spawn_holder(store_path) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline().strip() == "holding"
        with pytest.raises(StoreLocked):
            open_writer(store_path)
        child.stdin.write("release\n")
        child.stdin.flush()
        assert child.wait(timeout=30) == 0
    open_writer(store_path).close()


@pytest.mark.integration
def test_this_writer_locks_out_a_writer_in_another_process(store_path: Path) -> None:
    with open_writer(store_path), spawn_holder(store_path) as child:
        output, _ = child.communicate(timeout=30)
    assert output.strip() == "locked"


def test_a_reader_needs_no_lock_while_the_writer_is_open(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session())
        reader = open_reader(store_path)
        assert load_session(reader, "session-1") == example_session()
        reader.close()


# -- files and pragmas -------------------------------------------------------------------


def test_the_store_its_wal_shm_and_lock_files_are_private_to_the_owner(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session())
        files = [
            store_path,
            Path(f"{store_path}-wal"),
            Path(f"{store_path}-shm"),
            Path(lock_path(store_path)),
        ]
        modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in files}
    assert modes == {path.name: 0o600 for path in files}


def test_the_writer_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "store.sqlite3"
    open_writer(path).close()
    assert path.is_file()


def test_the_writer_uses_wal_full_sync_foreign_keys_and_a_five_second_busy_timeout(
    store_path: Path,
) -> None:
    with open_writer(store_path) as writer:
        connection = writer.connection
        assert connection.pragma("journal_mode") == "wal"
        assert connection.pragma("synchronous") == 2  # FULL
        assert connection.pragma("foreign_keys") == 1
        assert connection.pragma("busy_timeout") == BUSY_TIMEOUT_MS == 5000
        assert connection.transaction_mode == "IMMEDIATE"


@pytest.mark.parametrize(("mode", "value"), [("off", 0), ("NORMAL", 1), ("FULL", 2), ("extra", 3)])
def test_the_writer_synchronous_mode_is_configurable(
    store_path: Path, mode: str, value: int
) -> None:
    with open_writer(store_path, synchronous=mode) as writer:
        assert writer.connection.pragma("synchronous") == value


def test_an_unknown_synchronous_mode_is_refused_before_touching_the_file(store_path: Path) -> None:
    with pytest.raises(InvalidInput, match="unknown synchronous mode 'SOMETIMES'"):
        open_writer(store_path, synchronous="SOMETIMES")
    assert not store_path.exists()


def test_a_reader_is_read_only_and_query_only(store_path: Path) -> None:
    open_writer(store_path).close()
    reader = open_reader(store_path)
    try:
        assert reader.pragma("query_only") == 1
        assert reader.pragma("foreign_keys") == 1
        assert reader.readonly("main")
        with pytest.raises(InvalidInput, match="read-only"):
            save_session(reader, example_session())
    finally:
        reader.close()


def test_a_reader_of_a_missing_store_creates_nothing(store_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no relaystore store here"):
        open_reader(store_path)
    assert not store_path.exists()


def test_a_reader_sees_only_committed_writes(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session())
        reader = open_reader(store_path)
        with writer.transaction():
            insert_api_event(writer.connection, "session-1", 1, turn_started())
            assert load_latest_seq(reader) == 0
        assert load_latest_seq(reader) == 1
        reader.close()


# -- transactions ------------------------------------------------------------------------


def test_operations_nest_inside_one_writer_transaction_and_commit_together(
    store_path: Path,
) -> None:
    with open_writer(store_path) as writer:

        def abandoned() -> None:
            with writer.transaction():
                save_session(writer.connection, example_session())
                insert_api_event(writer.connection, "session-1", 1, turn_started())
                raise RuntimeError("the caller gives up")

        with pytest.raises(RuntimeError, match="gives up"):
            abandoned()
        assert load_session(writer.connection, "session-1") is None
        assert load_latest_seq(writer.connection) == 0
        with writer.transaction():
            save_session(writer.connection, example_session())
            insert_api_event(writer.connection, "session-1", 1, turn_started())
        assert load_latest_seq(writer.connection) == 1


def test_a_failed_operation_inside_a_transaction_undoes_only_itself(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        connection = writer.connection
        connection.execute("BEGIN IMMEDIATE")
        save_session(connection, example_session())
        with pytest.raises(UnknownSession):
            insert_api_event(connection, "missing", 1, turn_started())
        insert_api_event(connection, "session-1", 1, turn_started())
        connection.execute("COMMIT")
        assert [event.seq for event in load_api_events(connection, None, 0, 10).events] == [1]


MAPPED = {
    "constraint": (apsw.ConstraintError, InvalidInput),
    "busy": (apsw.BusyError, StoreLocked),
    "locked": (apsw.LockedError, StoreLocked),
    "not a database": (apsw.NotADBError, InvalidInput),
    "read-only": (apsw.ReadOnlyError, InvalidInput),
    "I/O": (apsw.IOError, StoreError),
    "full disk": (apsw.FullError, StoreError),
    "corrupt": (apsw.CorruptError, InvalidInput),
}


@pytest.mark.parametrize(("raised", "expected"), MAPPED.values(), ids=MAPPED.keys())
def test_converts_apsw_errors_raised_in_transactions(
    store_path: Path, raised: type[apsw.Error], expected: type[StoreError]
) -> None:
    with open_writer(store_path) as writer:
        with pytest.raises(StoreError) as caught, transaction(writer.connection, "do the thing"):
            raise raised("injected")
        assert type(caught.value) is expected
        assert isinstance(caught.value.__cause__, raised)
        assert "do the thing" in str(caught.value)


def test_a_storage_failure_mid_operation_writes_nothing(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        connection = writer.connection

        def fail_on_event_insert(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if sql.startswith("INSERT INTO api_events"):
                raise apsw.FullError("database or disk is full")
            return True

        record = running_session()
        record.last_error = "provisioning failed"
        connection.exec_trace = fail_on_event_insert
        with pytest.raises(StoreError, match="FullError") as caught:
            save_session(connection, record)
        connection.exec_trace = None
        assert not isinstance(caught.value.__cause__, StoreError)
        assert load_session(connection, "session-1") is None
        for table in ("sessions", "session_contexts", "materialized_sessions", "api_events"):
            assert count_rows(connection, table) == 0


def test_no_apsw_error_escapes_a_closed_connection(store_path: Path) -> None:
    writer = open_writer(store_path)
    connection = writer.connection
    writer.close()
    with pytest.raises(StoreError):
        delete_session(connection, "session-1")


def test_lock_path_is_a_sidecar_of_the_store(tmp_path: Path) -> None:
    assert lock_path(tmp_path / "x.sqlite3") == os.path.join(str(tmp_path), "x.sqlite3.lock")


@pytest.mark.parametrize(
    ("user", "missing", "folder_writable", "refused"),
    [
        (1001, 2, True, True),  # another user would make both files
        (1001, 1, True, True),  # or one
        (1001, 0, True, False),  # both there (the writer has the store open): nothing made
        (1001, 2, False, False),  # a folder it cannot write: opened immutable, nothing made
        (1000, 2, True, False),  # the owner
        (0, 2, True, False),  # root: SQLite gives the files to the store's owner
    ],
)
def test_a_reader_never_makes_side_files_its_writer_cannot_write(
    user: int, missing: int, folder_writable: bool, refused: bool
) -> None:
    assert (
        makes_foreign_files(user=user, owner=1000, missing=missing, folder_writable=folder_writable)
        is refused
    )
