"""Opening the store: the one writer connection and any number of read-only readers.

Guarantees:

* :func:`open_writer` holds an exclusive lock across processes for as long as the
  writer is open: a second writable open of the same file, from this process or any
  other, raises :class:`~domain.errors.StoreLocked` at once. The lock is an ``flock``
  on the sidecar file ``<path>.lock`` (kept on disk; only the lock matters), released by
  :meth:`WriterConnection.close` or when the process ends.
* A store file the writer creates is readable and writable by its owner only (0600);
  SQLite gives its ``-wal`` and ``-shm`` files the same mode. The lock file is 0600 too.
* The writer uses WAL, ``synchronous`` FULL unless told otherwise, foreign keys, a 5 s
  busy timeout and ``IMMEDIATE`` outermost transactions; it migrates the store on open.
* :func:`open_reader` opens read-only with ``query_only``, never migrates and never
  writes; a store behind this build raises ``SchemaMismatch(NEEDS_MIGRATION)``.

Each connection is configured with ``apsw.bestpractice.connection_*`` functions; no
global hook is installed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from types import TracebackType
from typing import Literal, Self

import apsw
import apsw.bestpractice

from relaystore.domain.errors import InvalidInput, SchemaMismatch, StoreError, StoreLocked
from relaystore.storage.schema import (
    SCHEMA_VERSION,
    check_writer_schema,
    ensure_supported,
    migrate_schema,
    read_schema_state,
)
from relaystore.storage.transaction import store_error, transaction

__all__ = [
    "BUSY_TIMEOUT_MS",
    "SYNCHRONOUS_MODES",
    "Synchronous",
    "WriterConnection",
    "lock_path",
    "open_reader",
    "open_writer",
]

BUSY_TIMEOUT_MS = 5000
"""How long a connection waits for a SQLite lock before giving up."""

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
SYNCHRONOUS_MODES: tuple[Synchronous, ...] = ("OFF", "NORMAL", "FULL", "EXTRA")


def lock_path(path: str | os.PathLike[str]) -> str:
    """The sidecar file whose ``flock`` marks the store as open for writing."""
    return os.path.abspath(os.fspath(path)) + ".lock"


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

    def check_schema(self) -> int:
        """Re-check the schema before a message, without writing (see ``check_writer_schema``).

        Raises ``SchemaMismatch``; on a refusal the highest revision seen is still kept.
        """
        # data_version changes only when another connection commits: while it holds
        # still, nobody else touched the store, so the last verdict stands.
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
        """Close the connection and release the lock; harmless when already closed."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        try:
            self.connection.close()
        except apsw.Error as exc:
            raise store_error(exc, "close the writer connection", None) from exc
        finally:
            _release(fd)

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

    Raises :class:`~domain.errors.StoreLocked` when another writer holds the store,
    ``SchemaMismatch`` for a store this build must not touch, and
    :class:`~domain.errors.InvalidInput` for an unknown ``synchronous`` mode or a file
    that is not a store.
    """
    mode = str(synchronous).upper()
    if mode not in SYNCHRONOUS_MODES:
        raise InvalidInput(
            f"unknown synchronous mode {synchronous!r}; use one of {', '.join(SYNCHRONOUS_MODES)}"
        )
    where = os.path.abspath(os.fspath(path))
    try:
        os.makedirs(os.path.dirname(where), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the store's directory: {exc}", path=where) from exc
    fd = _acquire(where)
    connection: apsw.Connection | None = None
    try:
        _create_private(where)
        connection = apsw.Connection(
            where, flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
        )
        connection.transaction_mode = "IMMEDIATE"
        _configure(connection)
        apsw.bestpractice.connection_wal(connection)
        connection.pragma("synchronous", mode)
        revision = migrate_schema(connection)
        if revision == SCHEMA_VERSION:  # a newer store is not ours to analyze
            apsw.bestpractice.connection_optimize(connection)
    except BaseException as exc:
        if connection is not None:
            connection.close()
        _release(fd)
        if isinstance(exc, apsw.Error):
            raise store_error(exc, "open the store for writing", None).located(path=where) from exc
        raise
    return WriterConnection(connection, where, fd, revision)


def open_reader(path: str | os.PathLike[str]) -> apsw.Connection:
    """Open the store at ``path`` read-only (``query_only``); never migrates.

    Raises ``SchemaMismatch`` (``NEEDS_MIGRATION`` for a store behind this build) and
    :class:`~domain.errors.InvalidInput` when there is no store at ``path``.
    """
    where = os.path.abspath(os.fspath(path))
    if not os.path.isfile(where):
        raise InvalidInput(
            "no relaystore store here; open it for writing once to create it", path=where
        )
    connection: apsw.Connection | None = None
    try:
        connection = apsw.Connection(where, flags=apsw.SQLITE_OPEN_READONLY)
        _configure(connection)
        connection.pragma("query_only", True)
        ensure_supported(read_schema_state(connection), path=where)
    except BaseException as exc:
        if connection is not None:
            connection.close()
        if isinstance(exc, apsw.Error):
            raise store_error(exc, "open the store for reading", None).located(path=where) from exc
        raise
    return connection


def _configure(connection: apsw.Connection) -> None:
    apsw.bestpractice.connection_busy_timeout(connection, BUSY_TIMEOUT_MS)
    apsw.bestpractice.connection_enable_foreign_keys(connection)
    apsw.bestpractice.connection_dqs(connection)


def _acquire(path: str) -> int:
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the write lock file {lock}: {exc}", path=path) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise StoreLocked(
            "the store is already open for writing (by this or another process); "
            f"close that writer first, or open this one read-only (lock file {lock})",
            path=path,
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot lock {lock}: {exc}", path=path) from exc
    return fd


def _release(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
