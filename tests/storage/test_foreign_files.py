"""Files that are not ours: refused before anything is written to them (issue 11).

Opening a file that is not a relaystore store, for writing or reading, raises
``SchemaMismatch(INVALID_METADATA)`` and leaves it byte for byte as it was, with the
same modification time and no ``-wal``, ``-shm``, ``-journal`` or ``.lock`` file beside
it. A missing or empty (0-byte) file is a new store: the writer creates the store in it,
a reader refuses it as not yet created (``NEEDS_MIGRATION``) and leaves it empty.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from relaystore.domain.errors import SchemaMismatch, SchemaMismatchReason, StoreError
from relaystore.storage.connection import open_reader, open_writer, recognise_store
from relaystore.storage.schema import SCHEMA_VERSION, SchemaState

Opener = Callable[[Path], object]
OPENERS = [pytest.param(open_writer, id="writer"), pytest.param(open_reader, id="reader")]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of ``folder``: its bytes and modification time (ns)."""
    return {
        path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.iterdir())
    }


def sqlite_file(path: Path, *statements: str, journal_mode: str = "delete") -> None:
    """A database another application made, closed cleanly (no sidecar files)."""
    connection = apsw.Connection(str(path))
    connection.pragma("journal_mode", journal_mode)
    with connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{path}{suffix}").exists()


def make_foreign_delete_mode(path: Path) -> None:
    sqlite_file(path, "CREATE TABLE foo(x)", "INSERT INTO foo VALUES ('keep me')")


def make_foreign_wal_mode(path: Path) -> None:
    sqlite_file(path, "CREATE TABLE foo(x)", "INSERT INTO foo VALUES (1)", journal_mode="wal")


def make_foreign_with_user_version(path: Path) -> None:
    sqlite_file(path, "CREATE TABLE foo(x)", "PRAGMA user_version = 7")


def make_foreign_with_a_view_only(path: Path) -> None:
    sqlite_file(path, "CREATE VIEW answer AS SELECT 42")


def make_random_bytes(path: Path) -> None:
    path.write_bytes(random.Random(11).randbytes(8192))


def make_text(path: Path) -> None:
    path.write_text("name,value\nregion,north\n" * 200)


def make_short_text(path: Path) -> None:
    path.write_text("hello")


def make_bare_sqlite_magic(path: Path) -> None:
    path.write_bytes(b"SQLite format 3\x00")  # shorter than a SQLite header


FOREIGN = {
    "sqlite-delete-mode-table-foo": (make_foreign_delete_mode, "another application"),
    "sqlite-wal-mode-table-foo": (make_foreign_wal_mode, "another application"),
    "sqlite-user-version-7": (make_foreign_with_user_version, "invalid compatibility metadata"),
    "sqlite-view-only": (make_foreign_with_a_view_only, "another application"),
    "random-bytes": (make_random_bytes, "not a SQLite database"),
    "text": (make_text, "not a SQLite database"),
    "short-text": (make_short_text, "not a SQLite database"),
    "bare-sqlite-magic": (make_bare_sqlite_magic, "not a SQLite database"),
}


@pytest.mark.parametrize(("make", "what"), FOREIGN.values(), ids=FOREIGN.keys())
@pytest.mark.parametrize("opener", OPENERS)
def test_a_file_that_is_not_a_store_is_refused_and_left_byte_for_byte_as_it_was(
    tmp_path: Path, make: Callable[[Path], None], what: str, opener: Opener
) -> None:
    path = tmp_path / "theirs.db"
    make(path)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # an mtime a rewrite would change
    before = snapshot(tmp_path)
    with pytest.raises(SchemaMismatch) as caught:
        opener(path)
    assert caught.value.reason is SchemaMismatchReason.INVALID_METADATA
    assert caught.value.path == str(path)
    assert what in str(caught.value)
    assert snapshot(tmp_path) == before  # same bytes, same mtime, no sidecar files


@pytest.mark.parametrize(("make", "what"), FOREIGN.values(), ids=FOREIGN.keys())
def test_recognising_a_foreign_file_reads_only(
    tmp_path: Path, make: Callable[[Path], None], what: str
) -> None:
    path = tmp_path / "theirs.db"
    make(path)
    before = snapshot(tmp_path)
    with pytest.raises(SchemaMismatch, match=what):
        recognise_store(path)
    assert snapshot(tmp_path) == before


def test_the_foreign_database_keeps_its_journal_mode_and_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    make_foreign_delete_mode(path)
    for opener in (open_writer, open_reader):
        with pytest.raises(SchemaMismatch):
            opener(path)
    connection = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert connection.pragma("journal_mode") == "delete"
        assert connection.execute("SELECT x FROM foo").get == "keep me"
    finally:
        connection.close()


def test_a_foreign_message_names_some_of_its_tables(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    sqlite_file(path, *(f"CREATE TABLE t{i}(x)" for i in range(6)))
    with pytest.raises(SchemaMismatch, match=r"'t0', 't1', 't2', \.\.\. but no relaystore schema"):
        open_writer(path)


# -- empty and missing files: new stores --------------------------------------------------


def test_an_empty_file_is_a_new_store_for_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    path.touch()
    assert recognise_store(path) == SchemaState(revision=0, minimum_compatible=None)
    with open_writer(path) as writer:
        assert writer.revision == SCHEMA_VERSION
    assert recognise_store(path).revision == SCHEMA_VERSION


def test_an_empty_file_is_refused_by_a_reader_as_not_created_yet_and_stays_empty(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    path.touch()
    before = snapshot(tmp_path)
    with pytest.raises(SchemaMismatch) as caught:
        open_reader(path)
    assert caught.value.reason is SchemaMismatchReason.NEEDS_MIGRATION
    assert snapshot(tmp_path) == before


def test_a_missing_file_is_a_new_store_and_recognising_it_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "store.sqlite3"
    assert recognise_store(path) == SchemaState(revision=0, minimum_compatible=None)
    assert not (tmp_path / "missing").exists()


def test_an_empty_sqlite_database_is_a_new_store(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    sqlite_file(path, "PRAGMA user_version = 0")
    with open_writer(path) as writer:
        assert writer.revision == SCHEMA_VERSION


# -- our own stores are still recognised, without leaving files behind ---------------------


def test_recognising_a_closed_store_leaves_no_sidecar_files(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    open_writer(path).close()
    before = snapshot(tmp_path)
    assert recognise_store(path).revision == SCHEMA_VERSION
    assert snapshot(tmp_path) == before


def test_a_live_store_is_recognised_through_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    with open_writer(path):
        # Created in the WAL: the main file may not hold the schema yet.
        assert recognise_store(path).revision == SCHEMA_VERSION
        reader = open_reader(path)
        reader.close()


def test_a_newer_incompatible_store_in_rollback_mode_is_refused_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite3"
    open_writer(path).close()
    connection = apsw.Connection(str(path))
    connection.pragma("journal_mode", "delete")  # e.g. a copy made by another tool
    with connection:
        future = SCHEMA_VERSION + 1
        connection.execute("INSERT INTO schema_migrations VALUES (?, 'later')", (future,))
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = ?", (future,)
        )
        connection.execute(f"PRAGMA user_version = {future}")
    connection.close()
    before = snapshot(tmp_path)
    for opener in (open_writer, open_reader):
        with pytest.raises(SchemaMismatch) as caught:
            opener(path)
        assert caught.value.reason is SchemaMismatchReason.INCOMPATIBLE
    assert snapshot(tmp_path) == before


def test_refusals_are_relaystore_errors_never_apsw_errors(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    # A valid header, a broken body: SQLite's own complaint comes out typed.
    header = bytearray(100)
    header[:16] = b"SQLite format 3\x00"
    path.write_bytes(bytes(header) + random.Random(5).randbytes(4096))
    before = snapshot(tmp_path)
    for opener in (open_writer, open_reader):
        with pytest.raises(StoreError) as caught:
            opener(path)
        assert not isinstance(caught.value, apsw.Error)
    assert snapshot(tmp_path) == before
