"""Keeping a store: an online backup, and compaction after deletes.

Guarantees:

* :func:`backup_store` copies a consistent snapshot with SQLite's online backup API
  from any connection to the store (a reader is enough), while a writer keeps
  committing. The copy is written beside the destination and renamed into place only
  after it verified (``integrity_check`` and this build's schema check), so the
  destination is either absent or a complete store that opens and resumes. The copy is
  a single file (rollback journal mode): nothing it needs lives in a ``-wal``.
* :func:`vacuum_store` rewrites the store without its free pages; it runs outside any
  transaction, on the writer connection, and needs no other connection to be reading.
"""

from __future__ import annotations

import contextlib
import os

import apsw

from relaystore.domain.errors import InvalidInput, StoreError
from relaystore.domain.reports import BackupReport, VacuumReport
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.schema import ensure_supported, read_schema_state
from relaystore.storage.transaction import store_error

__all__ = ["backup_store", "vacuum_store"]

_PAGES_PER_STEP = 1024


def backup_store(source: apsw.Connection, destination: str | os.PathLike[str]) -> BackupReport:
    """Copy the store behind ``source`` to ``destination`` (which must not exist)."""
    try:
        target = os.path.abspath(os.fspath(destination))
        target.encode("utf-8")  # SQLite takes UTF-8 names: a lone surrogate names no file
        if "\x00" in target:
            raise ValueError("embedded null byte")
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the backup destination is not a usable file name: {exc}") from exc
    if os.path.lexists(target):
        raise InvalidInput("the backup destination exists already; name a new file", path=target)
    partial = target + ".partial"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(partial)
    try:
        try:
            copy = apsw.Connection(partial)
        except apsw.CantOpenError as exc:
            raise InvalidInput(
                f"cannot create the backup there (does its folder exist?): {exc}", path=target
            ) from exc
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
        os.chmod(partial, 0o600)
        os.replace(partial, target)
    except apsw.Error as exc:
        raise store_error(exc, "back up the store", source) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
    return BackupReport(path=target, pages=pages, latest_seq=latest, schema_revision=state.revision)


def vacuum_store(connection: apsw.Connection) -> VacuumReport:
    """Rebuild the store without free pages (outside any transaction)."""
    try:
        before = int(connection.execute("PRAGMA page_count").get)
        connection.execute("VACUUM")
        after = int(connection.execute("PRAGMA page_count").get)
    except apsw.Error as exc:
        raise store_error(exc, "compact the store", connection) from exc
    return VacuumReport(pages_before=before, pages_after=after)
