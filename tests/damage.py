"""Damaging a store as an operator or a disk can: what the damaged-store tests share."""

from __future__ import annotations

from pathlib import Path

import apsw


def overwrite_body(db: apsw.Connection, seq: int, body: str) -> None:
    """Edit an event's body as an operator's ``sqlite3`` shell can, past the table's CHECK."""
    db.execute("PRAGMA ignore_check_constraints = ON")
    db.execute("UPDATE api_events SET body = ? WHERE seq = ?", (body, seq))
    db.execute("PRAGMA ignore_check_constraints = OFF")


def break_api_events_table(path: Path) -> None:
    """Overwrite the root page header of ``api_events`` in the closed store at ``path``.

    The schema still reads; every read of the events table then meets SQLite's
    "database disk image is malformed".
    """
    connection = apsw.Connection(str(path))
    try:
        root = connection.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'api_events'"
        ).get
        page_size = connection.execute("PRAGMA page_size").get
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()
    assert isinstance(root, int)
    assert isinstance(page_size, int)
    with path.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\x07" * 8)  # not a b-tree page type
