"""The feed's seqs and the change numbers, numbered by the rowid (schema revision 17).

Why. Both tables were ``AUTOINCREMENT``, and SQLite rewrites that table's
``sqlite_sequence`` row at every insert: a WAL page more for every commit that appends
an API event or numbers a change (5.17 to 4.17 pages an activity event, 11.69 to 10.69
a relay event, ``python benchmarks/run.py --only wal``). What ``AUTOINCREMENT`` gave is
kept as follows:

* **API event seqs are never handed out again.** A plain rowid is ``max(seq) + 1``, so
  deleting the newest events (a session deleted) would give their seqs to the next
  events, and a feed reader past them would miss those. So the store keeps a
  high-water mark of its own, written only by such a deletion: the trigger
  ``api_events_high_water_kept`` records a deleted seq that was the newest
  (``api_events_high_water``, one row), and every insert names its seq as
  :data:`NEXT_SEQ`, one above both. ``latest_seq`` (:data:`LATEST_SEQ`) is the larger
  of the two, as it was the sequence's.
* **Change numbers need nothing.** ``store_changes`` rows are never deleted (a replica
  adopting a source's numbers replaces only rows its own transaction added), so
  ``max(change_seq) + 1`` never reuses a number a committed transaction handed out.

:func:`number_by_rowid` rebuilds both tables without ``AUTOINCREMENT`` (rows, seqs and
the high-water mark kept), in the caller's transaction: the migration to revision 17
and the baseline both run it, so a fresh store and a migrated one have the same
definitions. An older build would insert without a seq and read ``latest_seq`` from
``sqlite_sequence``, so revision 17 raises the floor to 17.
"""

from __future__ import annotations

import apsw

__all__ = [
    "LATEST_SEQ",
    "NEXT_SEQ",
    "RAISE_HIGH_WATER",
    "number_by_rowid",
]

_HIGH_WATER = "coalesce((SELECT seq FROM api_events_high_water), 0)"

LATEST_SEQ = f"SELECT max(coalesce((SELECT max(seq) FROM api_events), 0), {_HIGH_WATER})"
"""The newest API event seq ever committed (0: none yet), even when since deleted."""

NEXT_SEQ = f"({LATEST_SEQ}) + 1"
"""The seq the next API event takes (an SQL expression for an insert's ``VALUES``)."""

RAISE_HIGH_WATER = (
    "INSERT INTO api_events_high_water(singleton, seq) SELECT 1, ?1 "
    "WHERE ?1 > coalesce((SELECT max(seq) FROM api_events), 0) "
    "ON CONFLICT(singleton) DO UPDATE SET seq = max(seq, excluded.seq)"
)
"""Say seqs up to ``?1`` were handed out (a replica adopting its source's counter)."""

_DDL = """
CREATE TABLE api_events (
    seq INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    recorded_at_ms INTEGER NOT NULL,
    body TEXT NOT NULL CHECK(json_valid(body))
) STRICT;
CREATE TABLE api_events_high_water (
    singleton INTEGER PRIMARY KEY CHECK(singleton = 1),
    seq INTEGER NOT NULL CHECK(seq >= 1)
) STRICT;
CREATE TABLE store_changes (
    change_seq INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK(kind IN ('record', 'log', 'start')),
    session_id TEXT NOT NULL,
    first_ordinal INTEGER CHECK((kind = 'log') = (first_ordinal IS NOT NULL))
) STRICT;
INSERT INTO api_events(seq, session_id, recorded_at_ms, body)
    SELECT seq, session_id, recorded_at_ms, body FROM api_events_autoincrement ORDER BY seq;
INSERT INTO store_changes(change_seq, kind, session_id, first_ordinal)
    SELECT change_seq, kind, session_id, first_ordinal FROM store_changes_autoincrement
    ORDER BY change_seq;
DROP TABLE api_events_autoincrement;
DROP TABLE store_changes_autoincrement;
CREATE INDEX api_events_session ON api_events(session_id, seq);
CREATE TRIGGER api_events_high_water_kept AFTER DELETE ON api_events
WHEN OLD.seq > coalesce((SELECT max(seq) FROM api_events), 0)
BEGIN
    INSERT INTO api_events_high_water(singleton, seq) VALUES (1, OLD.seq)
    ON CONFLICT(singleton) DO UPDATE SET seq = max(seq, excluded.seq);
END;
"""


def number_by_rowid(connection: apsw.Connection) -> None:
    """Rebuild ``api_events`` and ``store_changes`` without ``AUTOINCREMENT``, inside the
    caller's transaction (see the module doc).

    The feed's sequence becomes its high-water mark. The change counter is dropped even
    where it stands above the newest change row (a store a 0.4 ``restore`` adopted: it
    removed the numbers its own triggers took and kept the counter): every number a
    committed transaction handed out is a row, since rows are never deleted, so a
    number above the newest row was never committed, let alone published."""
    events_counter = connection.execute(
        "SELECT seq FROM sqlite_sequence WHERE name = 'api_events'"
    ).get
    # The triggers that number changes insert into ``store_changes`` by name: with the
    # legacy rename their text is kept, so they name the rebuilt table.
    connection.pragma("legacy_alter_table", True)
    try:
        connection.execute(
            "ALTER TABLE api_events RENAME TO api_events_autoincrement;"
            "ALTER TABLE store_changes RENAME TO store_changes_autoincrement;"
        )
        connection.execute(_DDL)
    finally:
        connection.pragma("legacy_alter_table", False)
    connection.execute(RAISE_HIGH_WATER, (int(events_counter or 0),))
