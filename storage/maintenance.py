"""Keeping a store: an online backup, and compaction after deletes.

Guarantees:

* :func:`backup_store` copies a consistent snapshot with SQLite's online backup API
  from any connection to the store (a reader is enough), while a writer keeps
  committing. The copy is written to a private temporary file beside the destination
  (a fresh name, created ``O_EXCL`` and 0600 before its first byte, so a backup killed
  midway leaves nothing other users can read) and linked into place only after it
  verified (``integrity_check`` and this build's schema check), never over a file that
  appeared meanwhile: the destination is either absent or a complete store that opens
  and resumes. A failed backup removes its temporary file and the sidecars SQLite gave
  it, and nothing else (a ``DEST.partial`` of someone else's is left alone). A
  destination that names a sidecar of the live store (``-journal``, ``-wal``, ``-shm``,
  its ``.lock``) is refused, whether or not that file exists. The copy is a single file
  (rollback journal mode): nothing it needs lives in a ``-wal``.
* :func:`vacuum_store` rewrites the store without its free pages; it runs outside any
  transaction, on the writer connection, and needs no other connection to be reading.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile

import apsw

from ..domain.errors import InvalidInput, StoreError
from ..domain.reports import BackupReport, VacuumReport
from .connection import truncate_wal
from .paging import load_latest_seq
from .schema import ensure_supported, read_schema_state
from .transaction import store_error
from .write_lock import lock_path

__all__ = [
    "VACUUM_CHECKPOINT_ATTEMPTS",
    "VACUUM_CHECKPOINT_BUSY_MS",
    "backup_store",
    "vacuum_store",
]

_PAGES_PER_STEP = 1024
_NAME_ATTEMPTS = 8
_SQLITE_SIDECARS = (("-journal", "rollback journal"), ("-wal", "WAL"), ("-shm", "WAL index"))
"""The files SQLite keeps beside a database: suffix, and what each is."""


def backup_store(source: apsw.Connection, destination: str | os.PathLike[str]) -> BackupReport:
    """Copy the store behind ``source`` to ``destination`` (which must not exist)."""
    try:
        target = os.path.abspath(os.fspath(destination))
        target.encode("utf-8")  # SQLite takes UTF-8 names: a lone surrogate names no file
        if "\x00" in target:
            raise ValueError("embedded null byte")
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the backup destination is not a usable file name: {exc}") from exc
    _refuse_sidecar(target, source.filename)
    if os.path.lexists(target):
        raise InvalidInput("the backup destination exists already; name a new file", path=target)
    copy_path, ours = _private_copy(target)
    try:
        try:
            copy = apsw.Connection(copy_path)
            try:
                with copy.backup("main", source, "main") as backup:
                    while not backup.done:
                        backup.step(_PAGES_PER_STEP)
                copy.execute("PRAGMA journal_mode = DELETE")
                pages = int(copy.execute("PRAGMA page_count").get)
                verdict = copy.execute("PRAGMA integrity_check").get
                if verdict != "ok":
                    raise StoreError(f"the backup copy failed its integrity check: {verdict}")
                state = read_schema_state(copy)
                ensure_supported(state, path=target)
                latest = load_latest_seq(copy)
            finally:
                copy.close()
        except apsw.Error as exc:
            if isinstance(exc, apsw.FullError) or _is_write_error(exc):
                raise StoreError(
                    "cannot write the backup copy: its disk is full or the file would pass "
                    f"a size limit ({type(exc).__name__}: {exc})",
                    path=target,
                ) from exc
            raise store_error(exc, "back up the store", source) from exc
        try:
            _publish_copy(copy_path, target)
        except OSError as exc:
            raise StoreError(
                f"cannot give the backup copy its name: {exc.strerror or exc}", path=target
            ) from exc
    finally:
        for path in ours:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return BackupReport(path=target, pages=pages, latest_seq=latest, schema_revision=state.revision)


def _is_write_error(exc: apsw.Error) -> bool:
    """Whether SQLite failed writing or syncing a file (EFBIG or ENOSPC, for a copy)."""
    code: object = getattr(exc, "extendedresult", None)
    return code in (apsw.SQLITE_IOERR_WRITE, apsw.SQLITE_IOERR_FSYNC, apsw.SQLITE_IOERR_TRUNCATE)


def _refuse_sidecar(target: str, store: str) -> None:
    """Refuse ``target`` when it names one of the live store's sidecar files.

    SQLite would take a database there for the store's hot journal (or its WAL), and the
    store would fail until it is removed; refused whether or not the file exists, and
    whatever spelling (a symlinked folder, ``..``) the destination takes.
    """
    where = os.path.realpath(target)
    for kind, path in _sidecars(store):
        if where == path:
            raise InvalidInput(
                f"the backup destination is a sidecar file of the live store (its {kind}); "
                "a copy there would break the store: name another file",
                path=target,
            )


def _sidecars(store: str) -> list[tuple[str, str]]:
    """The store's sidecar files: SQLite's and relaystore's write lock."""
    real = os.path.realpath(store)
    found = [(kind, real + suffix) for suffix, kind in _SQLITE_SIDECARS]
    return [*found, ("write lock", os.path.realpath(lock_path(store)))]


def _private_copy(target: str) -> tuple[str, list[str]]:
    """Create the copy's private file beside ``target``: a fresh name, 0600 from its first
    byte (``O_EXCL``), and return it with every file this backup may leave (the copy and
    the sidecars SQLite gives it, which inherit its mode). A sidecar that exists already
    is someone else's: it is not ours to remove, and a new name is tried."""
    folder, name = os.path.split(target)
    for _ in range(_NAME_ATTEMPTS):
        try:
            fd, path = tempfile.mkstemp(prefix=f"{name}.", suffix=".partial", dir=folder)
        except FileNotFoundError as exc:
            raise InvalidInput(
                f"cannot create the backup there (does its folder exist?): {exc.strerror}",
                path=target,
            ) from exc
        except OSError as exc:
            raise InvalidInput(
                f"cannot create the backup there: {exc.strerror or exc}", path=target
            ) from exc
        os.close(fd)
        sidecars = [path + suffix for suffix, _ in _SQLITE_SIDECARS]
        if not any(os.path.lexists(sidecar) for sidecar in sidecars):
            return path, [path, *sidecars]
        os.unlink(path)
    raise InvalidInput("cannot find a free name for the backup's temporary copy", path=target)


def _publish_copy(copy: str, target: str) -> None:
    """Give the verified copy its name, never replacing a file that appeared meanwhile."""
    try:
        os.link(copy, target)
    except FileExistsError as exc:
        raise InvalidInput(
            "the backup destination exists already; name a new file", path=target
        ) from exc
    except OSError as exc:  # a file system without hard links: check, then rename
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.lexists(target):
            raise InvalidInput(
                "the backup destination exists already; name a new file", path=target
            ) from exc
        os.rename(copy, target)
    folder = os.open(os.path.dirname(target), os.O_RDONLY)
    try:
        os.fsync(folder)  # the new name survives a crash
    finally:
        os.close(folder)


def vacuum_store(connection: apsw.Connection) -> VacuumReport:
    """Rebuild the store without free pages (outside any transaction), then checkpoint
    the rebuilt pages into the main file and truncate the ``-wal`` (a ``VACUUM`` writes
    the whole store into the WAL, which would otherwise keep that size until the writer
    closes): :data:`VACUUM_CHECKPOINT_ATTEMPTS` tries, each waiting up to
    :data:`VACUUM_CHECKPOINT_BUSY_MS` for readers to leave the snapshots that hold it.
    ``wal_truncated`` says whether it was."""
    try:
        before = int(connection.execute("PRAGMA page_count").get)
        connection.execute("VACUUM")
        after = int(connection.execute("PRAGMA page_count").get)
        page_size = int(connection.execute("PRAGMA page_size").get)
    except apsw.Error as exc:
        raise store_error(exc, "compact the store", connection) from exc
    return VacuumReport(
        pages_before=before,
        pages_after=after,
        page_size=page_size,
        wal_truncated=_truncate_wal(connection),
    )


VACUUM_CHECKPOINT_ATTEMPTS = 5
"""How often ``vacuum`` tries the ``TRUNCATE`` checkpoint that gives the WAL back."""
VACUUM_CHECKPOINT_BUSY_MS = 200
"""How long each try waits for readers (its busy timeout; the usual one is restored)."""


def _truncate_wal(connection: apsw.Connection) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)``, tried a few times; True when it completed (or
    the store keeps no WAL). A checkpoint that cannot complete changes nothing committed:
    the WAL keeps its frames, and the next checkpoint copies them."""
    if str(connection.execute("PRAGMA journal_mode").get).lower() != "wal":
        return True
    try:
        return truncate_wal(connection, VACUUM_CHECKPOINT_BUSY_MS, VACUUM_CHECKPOINT_ATTEMPTS)
    except apsw.BusyError:
        return False
    except apsw.Error as exc:
        raise store_error(exc, "checkpoint the store after compacting it", connection) from exc
