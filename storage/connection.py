"""Opening the store: the one writer connection and any number of read-only readers.

Guarantees:

* :func:`open_writer` holds an exclusive lock across processes for as long as the
  writer is open: a second writable open of the same file, from this process or any
  other, raises :class:`~relaystore.domain.errors.StoreLocked` at once, naming the
  process that holds it. The lock is an ``flock`` on the sidecar file ``<path>.lock``
  (kept on disk), released by :meth:`WriterConnection.close` or when the process ends.
  The holder writes one JSON line there, ``{"pid": N, "requests": false}``
  (:func:`~.write_lock.read_lock_holder`); ``requests`` turns true once its store takes
  maintenance requests (:meth:`WriterConnection.take_requests`). Only the ``flock``
  decides who holds the store: the line only names the holder.
* :func:`open_requester` opens a connection that writes nothing but maintenance
  requests (:mod:`relaystore.storage.requests`): no lock, no migration.
* A store file the writer creates is readable and writable by its owner only (0600);
  SQLite gives its ``-wal`` and ``-shm`` files the same mode. The lock file is 0600 too.
* The writer uses WAL, ``synchronous`` FULL unless told otherwise, foreign keys, a 5 s
  busy timeout and ``IMMEDIATE`` outermost transactions; it migrates the store on open.
* :func:`open_reader` opens read-only with ``query_only``, never migrates and never
  writes; a store behind this build raises ``SchemaMismatch(NEEDS_MIGRATION)``. Run as
  another user than the store's owner (and not root), it refuses rather than make the
  ``-wal`` and ``-shm`` files its writer could not write (:mod:`.ownership`); so does
  :func:`open_requester`.

Recognising a store before touching it. Both openers first decide, reading only, whether
the file is a relaystore store (see :func:`recognise_store`); a file that is not one
raises ``SchemaMismatch(INVALID_METADATA)`` and is left byte for byte as it was: no
journal-mode change, no ``-wal``, ``-shm`` or ``.lock`` file, no migration. A missing
file and an empty (0-byte) file are *new stores*: SQLite itself treats an empty file as
an empty database, so the writer creates the store in it, and a reader refuses it with
``SchemaMismatch(NEEDS_MIGRATION)`` like any store not yet created.

A clean close. :meth:`WriterConnection.close` runs ``PRAGMA wal_checkpoint(TRUNCATE)``
before closing, so every committed transaction is in the main database file and the
``-wal`` is empty (or gone): a copy of the ``.sqlite3`` file alone is complete. Readers
still reading block a ``TRUNCATE`` checkpoint, so close the readers first; when one
keeps its snapshot, the writer retries briefly, then logs a warning and closes anyway
(nothing is lost: the WAL still holds the rest, and the next open recovers it).

Read-only media. A WAL store normally needs its ``-shm`` (and ``-wal``) beside it, which
a read-only filesystem (a mounted snapshot, a backup) cannot create. When the folder is
not writable, or the shared open fails for that reason, and the ``-wal`` holds no
frames, a reader opens the file *immutable* (SQLite's ``immutable=1`` URI parameter; see
:func:`choose_read_mode`): no locks, no sidecar files, and SQLite assumes the file never
changes while it is open. **Such a reader is not meant to follow later commits**: it is
for media nobody writes (a writer needs a writable folder for its lock and WAL, so none
can run there); were the file changed anyway, it might miss or misread the changes, as
SQLite documents for ``immutable``. A store whose ``-wal`` still holds committed frames
cannot be read that way (the frames would be missed) and is refused with a
``StoreError`` naming the fix (copy the store with its ``-wal`` somewhere writable).

Each connection is configured by ``apsw.bestpractice.connection_*``; no global hook.

The lock file itself (taking, releasing, naming its holder) is :mod:`.write_lock`'s; the
schema a connection checks and migrates is :mod:`.schema`'s. This module opens and closes
connections and must not read or write the store's rows.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import urllib.parse
from collections.abc import Iterator
from types import TracebackType
from typing import Literal, Self

import apsw
import apsw.bestpractice

from ..domain.errors import InvalidInput, SchemaMismatch, StoreError
from .migrations import migrate_schema
from .ownership import check_reader_files
from .schema import (
    SCHEMA_VERSION,
    SchemaState,
    check_writer_schema,
    ensure_supported,
    not_a_store,
    read_schema_state,
)
from .transaction import store_error, transaction
from .write_lock import acquire_write_lock, release_write_lock, stamp_holder

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CLOSE_CHECKPOINT_ATTEMPTS",
    "SYNCHRONOUS_MODES",
    "FileSharing",
    "Synchronous",
    "WriterConnection",
    "choose_read_mode",
    "open_reader",
    "open_requester",
    "open_writer",
    "recognise_store",
    "truncate_wal",
]

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for a SQLite lock before giving up."""

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
SYNCHRONOUS_MODES: tuple[Synchronous, ...] = ("OFF", "NORMAL", "FULL", "EXTRA")

CLOSE_CHECKPOINT_ATTEMPTS = 5
"""How often closing the writer tries the ``TRUNCATE`` checkpoint before it gives up."""
_CLOSE_CHECKPOINT_BUSY_MS = 100
"""The busy timeout of each of those attempts (readers finishing their snapshot)."""

FileSharing = Literal["shared", "immutable"]
"""How a reader opens the file: ``shared`` (WAL, locks, sees later commits) or
``immutable`` (no locks, no sidecar files, a fixed picture of the file)."""

_SQLITE_MAGIC = b"SQLite format 3\x00"
_HEADER_BYTES = 100


class WriterConnection:
    """The store's only write connection, with the cross-process write lock it holds.

    ``connection`` is the apsw connection every storage function takes; its outermost
    ``with connection:`` begins ``IMMEDIATE``, nested ones are savepoints.
    ``revision`` is the highest schema revision this writer has seen (see
    :meth:`check_schema`).
    """

    def __init__(self, connection: apsw.Connection, path: str, lock_fd: int, revision: int):
        self.connection = connection
        self.path = path
        self.revision = revision
        self._verified_data_version: object = None
        self._lock_fd: int | None = lock_fd

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._lock_fd is None

    def take_requests(self) -> None:
        """Say in the lock file that this writer's store takes maintenance requests."""
        if self._lock_fd is not None:
            stamp_holder(self._lock_fd, requests=True)

    def check_schema(self) -> int:
        """Re-check the schema before a message, without writing (see ``check_writer_schema``).

        Raises ``SchemaMismatch``; on a refusal the highest revision seen is still kept.
        """
        # PRAGMA data_version changes only when another connection commits: while it
        # holds still, nobody else touched the store, so the last verdict stands. (apsw's
        # Connection.data_version(), a file control, also counts this connection's own
        # commits, so it never held still between two batches: every batch read the
        # schema again, 16 of a RecordActivities' 57 µs at synchronous=OFF.)
        data_version = self.connection.pragma("data_version")
        if data_version == self._verified_data_version:
            return self.revision
        try:
            self.revision = check_writer_schema(self.connection, self.revision)
        except SchemaMismatch as exc:
            self.revision = max(self.revision, exc.found)
            raise
        self._verified_data_version = data_version
        return self.revision

    @contextlib.contextmanager
    def transaction(self, action: str = "write to the store") -> Iterator[apsw.Connection]:
        """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction; operations inside nest."""
        with transaction(self.connection, action) as connection:
            yield connection

    def close(self) -> None:
        """Checkpoint the WAL into the main file, close, and release the lock.

        Harmless when already closed. The ``TRUNCATE`` checkpoint leaves every committed
        transaction in the main file and the ``-wal`` empty; when readers block it (see
        the module notes) it is retried briefly, then a warning is logged and the
        connection closes anyway.
        """
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        try:
            _checkpoint_for_close(self.connection, self.path)
            self.connection.close()
        except apsw.Error as exc:
            raise store_error(exc, "close the writer connection", None) from exc
        finally:
            release_write_lock(fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def open_writer(
    path: str | os.PathLike[str], *, synchronous: Synchronous | str = "FULL"
) -> WriterConnection:
    """Open (creating or migrating) the store at ``path`` for writing.

    Raises :class:`~relaystore.domain.errors.StoreLocked` when another writer holds the store,
    ``SchemaMismatch`` for a store this build must not touch or a file that is not a
    relaystore store (left untouched), and :class:`~relaystore.domain.errors.InvalidInput` for an
    unknown ``synchronous`` mode. A missing or empty (0-byte) file becomes a new store.
    """
    mode = str(synchronous).upper()
    if mode not in SYNCHRONOUS_MODES:
        raise InvalidInput(
            f"unknown synchronous mode {synchronous!r}; use one of {', '.join(SYNCHRONOUS_MODES)}"
        )
    where = os.path.abspath(os.fspath(path))
    # Decide before writing anything (directory, lock file, journal mode, schema).
    state = recognise_store(where)
    if state.revision >= SCHEMA_VERSION:  # an older store is migrated below
        ensure_supported(state, path=where)
    try:
        os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store's directory: {exc}", path=where) from exc
    fd = acquire_write_lock(where)
    connection: apsw.Connection | None = None
    try:
        _create_private(where)
        connection = apsw.Connection(
            where, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        )
        connection.transaction_mode = "IMMEDIATE"
        _configure_connection(connection)
        apsw.bestpractice.connection_wal(connection)
        connection.pragma("synchronous", mode)
        revision = migrate_schema(connection)
        if state.revision == 0:
            logger.info("created a relaystore store at revision %d: %s", revision, where)
        elif state.revision < revision:
            logger.info(
                "migrated the store from revision %d to %d: %s", state.revision, revision, where
            )
        if revision == SCHEMA_VERSION:  # a newer store is not ours to analyze
            apsw.bestpractice.connection_optimize(connection)
    except BaseException as exc:
        if connection is not None:
            connection.close()
        release_write_lock(fd)
        if isinstance(exc, apsw.Error):
            raise store_error(exc, "open the store for writing", None).located(path=where) from exc
        raise
    return WriterConnection(connection, where, fd, revision)


def open_reader(path: str | os.PathLike[str]) -> apsw.Connection:
    """Open the store at ``path`` read-only (``query_only``); never migrates, never writes.

    Raises ``SchemaMismatch`` (``NEEDS_MIGRATION`` for a store behind this build or an
    empty file; ``INVALID_METADATA`` for a file that is not a relaystore store, left
    untouched) and :class:`~relaystore.domain.errors.InvalidInput` when there is no file at
    ``path``. On read-only media the connection may be *immutable* (see
    :func:`choose_read_mode`): it then reads a fixed file, not meant to follow later
    commits.
    """
    where = os.path.abspath(os.fspath(path))
    if not os.path.isfile(where):
        raise InvalidInput(
            "no relaystore store here; open it for writing once to create it", path=where
        )
    writable = _directory_writable(where)
    check_reader_files(where, folder_writable=writable)  # before anything can make them
    ensure_supported(recognise_store(where), path=where)
    wal = _wal_bytes(where)
    mode = choose_read_mode(wal_bytes=wal, directory_writable=writable)
    try:
        connection = _connect_reader(where, mode)
    except apsw.Error as exc:
        fallback = choose_read_mode(wal_bytes=wal, directory_writable=True, failure=exc)
        if mode == "immutable" or fallback == "shared":
            raise _unreadable(exc, where, wal) from exc
        try:
            connection = _connect_reader(where, fallback)
        except apsw.Error as again:
            raise _unreadable(again, where, wal) from again
    try:
        connection.pragma("query_only", True)
        ensure_supported(read_schema_state(connection), path=where)
    except BaseException as exc:
        connection.close()
        if isinstance(exc, apsw.Error):
            raise store_error(exc, "open the store for reading", None).located(path=where) from exc
        raise
    return connection


def open_requester(path: str | os.PathLike[str]) -> apsw.Connection:
    """A connection to the store at ``path`` for :mod:`relaystore.storage.requests`:
    read-write, but it writes nothing except maintenance request rows (each one short
    ``IMMEDIATE`` transaction), takes no lock file and never migrates. Raises
    ``SchemaMismatch`` for a store this build does not read (one that needs migrating
    has no request table yet) and :class:`~relaystore.domain.errors.InvalidInput` when
    there is no file at ``path``."""
    where = os.path.abspath(os.fspath(path))
    if not os.path.isfile(where):
        raise InvalidInput(
            "no relaystore store here; open it for writing once to create it", path=where
        )
    check_reader_files(where, folder_writable=_directory_writable(where))
    ensure_supported(recognise_store(where), path=where)
    try:
        connection = apsw.Connection(where, flags=apsw.SQLITE_OPEN_READWRITE)
        connection.transaction_mode = "IMMEDIATE"
        _configure_connection(connection)
        connection.pragma("synchronous", "FULL")
    except apsw.Error as exc:
        raise store_error(exc, "open the store for a request", None).located(path=where) from exc
    return connection


def choose_read_mode(
    *, wal_bytes: int | None, directory_writable: bool, failure: BaseException | None = None
) -> FileSharing:
    """How a reader opens a store: the decision alone, from facts the caller gathered.

    ``wal_bytes`` is the size of the ``-wal`` file (``None`` when there is none),
    ``directory_writable`` whether the store's folder accepts new files (the ``-shm``
    and ``-wal``), ``failure`` the error a ``shared`` open raised, if one did.

    * ``-wal`` holding frames: ``shared`` always. An immutable open would silently miss
      committed transactions; if the shared open failed, the caller must refuse.
    * otherwise ``immutable`` when the folder is not writable, or the shared open failed
      because SQLite could not open or write its sidecar files (``CantOpenError``,
      ``ReadOnlyError``): the main file holds every commit.
    * otherwise ``shared``.
    """
    if wal_bytes:
        return "shared"
    if not directory_writable:
        return "immutable"
    if isinstance(failure, apsw.CantOpenError | apsw.ReadOnlyError):
        return "immutable"
    return "shared"


def recognise_store(path: str | os.PathLike[str]) -> SchemaState:
    """Decide, reading only, what the file at ``path`` is, before anything writes to it.

    Returns the store's :class:`~relaystore.storage.schema.SchemaState`; a missing or empty
    (0-byte) file is a new store, ``SchemaState(revision=0, minimum_compatible=None)``.
    Raises ``SchemaMismatch(INVALID_METADATA)`` for a file that is not a relaystore
    store: not a SQLite database, or a database of another application. Busy or failing
    files raise the ``StoreError`` of :func:`~relaystore.storage.transaction.store_error`.

    Nothing is created or changed: the SQLite header is read first; a database without
    a ``-wal`` is then read ``immutable`` (a WAL database opened any other way gets a
    ``-wal`` and ``-shm`` created beside it), or plainly read-only when it is in
    rollback-journal mode (takes SQLite's locks, creates no file) or has a ``-wal``
    (whose committed frames must be seen; its sidecar files already exist).
    """
    where = os.path.abspath(os.fspath(path))
    try:
        with open(where, "rb") as file:
            header = file.read(_HEADER_BYTES)
    except FileNotFoundError:
        return SchemaState(revision=0, minimum_compatible=None)
    except OSError as exc:
        raise StoreError(f"cannot read the store file: {exc}", path=where) from exc
    wal = _wal_bytes(where)
    if not header and wal is None:
        return SchemaState(revision=0, minimum_compatible=None)  # empty: a new store
    if header and (len(header) < _HEADER_BYTES or not header.startswith(_SQLITE_MAGIC)):
        raise not_a_store(where, "the file is not a SQLite database")
    in_wal_mode = not header or header[18] == 2  # a 0-byte file with a -wal: WAL
    mode: FileSharing = "immutable" if in_wal_mode and wal is None else "shared"
    try:
        connection = _connect_reader(where, mode, touch=False)
    except apsw.Error as exc:
        raise store_error(exc, "recognise the store", None).located(path=where) from exc
    try:
        return read_schema_state(connection)
    finally:
        connection.close()


def _connect_reader(where: str, mode: FileSharing, *, touch: bool = True) -> apsw.Connection:
    """A read-only connection; with ``touch`` it reads once, so opening the WAL fails here."""
    if mode == "immutable":
        uri = f"file:{urllib.parse.quote(where)}?immutable=1"
        connection = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    else:
        connection = apsw.Connection(where, flags=apsw.SQLITE_OPEN_READONLY)
    _configure_connection(connection)
    if touch:
        try:
            connection.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        except BaseException:
            connection.close()
            raise
    return connection


def _unreadable(exc: apsw.Error, where: str, wal: int | None) -> StoreError:
    error = store_error(exc, "open the store for reading", None)
    if wal:
        error.detail += (
            f"; its -wal still holds {wal} bytes of committed changes that a read-only "
            "open cannot use here (the folder is read-only?): copy the store together "
            "with its -wal to a writable folder, or close its writer cleanly first"
        )
    return error.located(path=where)


def _wal_bytes(where: str) -> int | None:
    """The size of the store's ``-wal`` file, ``None`` when there is none."""
    try:
        return os.stat(f"{where}-wal").st_size
    except OSError:
        return None


def _directory_writable(where: str) -> bool:
    """Whether new files (SQLite's ``-wal`` and ``-shm``) can be created beside the store.

    ``os.access`` also answers ``False`` on a read-only filesystem, even for root.
    """
    return os.access(os.path.dirname(where), os.W_OK | os.X_OK)


def _checkpoint_for_close(connection: apsw.Connection, path: str) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)``, retried briefly; True when it completed.

    Never raises: a checkpoint that cannot complete is logged, and closing goes on.
    """
    try:
        if truncate_wal(connection, _CLOSE_CHECKPOINT_BUSY_MS, CLOSE_CHECKPOINT_ATTEMPTS, 0.02):
            return True
    except apsw.Error as exc:
        error = store_error(exc, "checkpoint the WAL before closing", None)
        logger.warning(
            "%s: %s; the store's committed changes stay in its -wal until the next open",
            path,
            error.detail,
        )
        return False
    logger.warning(
        "%s: closing the writer could not checkpoint the WAL into the main file "
        "(a reader keeps an old snapshot; close readers before the writer); the store's "
        "committed changes stay in its -wal until the next open, so copy the -wal with it",
        path,
    )
    return False


def _configure_connection(connection: apsw.Connection) -> None:
    apsw.bestpractice.connection_busy_timeout(connection, BUSY_TIMEOUT_MS)
    apsw.bestpractice.connection_enable_foreign_keys(connection)
    apsw.bestpractice.connection_dqs(connection)


def _create_private(path: str) -> None:
    """Create the store file with mode 0600 if missing (SQLite copies it to -wal/-shm)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(f"cannot create the store file: {exc}", path=path) from exc
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def truncate_wal(
    connection: apsw.Connection, busy_ms: int, attempts: int, pause_seconds: float = 0.0
) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)``, tried ``attempts`` times, each waiting up to
    ``busy_ms`` for readers (and ``pause_seconds`` times the attempt's number after it);
    True when one completed. The usual busy timeout is restored after. A checkpoint that
    cannot complete changes nothing committed: the WAL keeps its frames. Raises apsw's
    error for the caller's boundary to map."""
    try:
        connection.set_busy_timeout(busy_ms)
        for attempt in range(attempts):
            row = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            busy, frames, copied = row if row is not None else (1, -1, -1)
            if busy == 0 and frames == copied:
                return True
            if pause_seconds:
                time.sleep(pause_seconds * (attempt + 1))
        return False
    finally:
        connection.set_busy_timeout(BUSY_TIMEOUT_MS)
