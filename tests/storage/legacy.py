"""Stores of older revisions: fixture builders for migration tests.

Revision 1 is the shape of the origin's pre-typed event era: the shared tables of
``storage/tables.sql``, no ``checkpoint_operations``, and two triggers that append an
``{"type":"error","data":{"message":..,"command_id":null}}`` event whenever
``sessions.last_error`` is inserted non-null or changes to a new non-null value. Bodies
written at this revision are in the old shape (``error``; ``turn_ended`` carrying a
``MaterializedTurnOutcome``). Opening such a store for writing migrates it to the
current revision (:mod:`relaystore.storage.schema`).

Nothing in the product writes revision 1, so this lives with the tests (it used to be
``relaystore.storage.legacy``): it builds the stores that real users upgrade from.

Revision 2 (typed bodies, ``checkpoint_operations``, no ``materialized_history_start``)
is the previous current revision; :func:`create_revision_2_store` builds one by stepping
a fresh store back (:func:`step_back_to_revision_2`), which is exact because revision 3
only adds that table.
"""

from __future__ import annotations

import os
import re

import apsw

from relaystore.storage.changes import CHANGES_DDL
from relaystore.storage.connection import open_writer
from relaystore.storage.migrations import create_store_schema
from relaystore.storage.schema_ddl import ACCOUNTING_TABLES, tables_ddl
from relaystore.storage.sequences import LATEST_SEQ

__all__ = [
    "LEGACY_SCHEMA_VERSION",
    "LEGACY_TRIGGERS_DDL",
    "create_legacy_store",
    "create_revision_2_store",
    "step_back_to_revision_2",
    "step_back_to_revision_4",
    "step_back_to_revision_5",
    "step_back_to_revision_11",
    "step_back_to_revision_12",
    "step_back_to_revision_13",
]

LEGACY_SCHEMA_VERSION = 1

LEGACY_TRIGGERS_DDL = """
CREATE TRIGGER api_session_error_updated
AFTER UPDATE OF last_error ON sessions
WHEN NEW.last_error IS NOT NULL AND NEW.last_error IS NOT OLD.last_error
BEGIN
    INSERT INTO api_events(session_id, recorded_at_ms, body)
    VALUES (NEW.session_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
    json_object('type', 'error', 'data', json_object('message', NEW.last_error, 'command_id', NULL)));
END;

CREATE TRIGGER api_session_error_inserted
AFTER INSERT ON sessions WHEN NEW.last_error IS NOT NULL
BEGIN
    INSERT INTO api_events(session_id, recorded_at_ms, body)
    VALUES (NEW.session_id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
    json_object('type', 'error', 'data', json_object('message', NEW.last_error, 'command_id', NULL)));
END;
"""
"""The revision-1 triggers that revision 2 drops (the store now emits ``session_fault``)."""


def create_legacy_store(path: str | os.PathLike[str]) -> None:
    """Create an empty revision-1 store at ``path`` (WAL, floor 1, ledger row 1).

    The file must not hold a store already. Fill it through a plain apsw connection
    (the ``sessions`` operations work on revision 1 too), then open it with
    :func:`relaystore.storage.connection.open_writer` to migrate it.
    """
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("journal_mode", "wal")
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) != 0:
                msg = f"{os.fspath(path)} already holds a store"
                raise FileExistsError(msg)
            create_store_schema(connection, LEGACY_SCHEMA_VERSION, LEGACY_TRIGGERS_DDL)
    finally:
        connection.close()


def create_revision_2_store(path: str | os.PathLike[str]) -> None:
    """Create an empty revision-2 store at ``path`` (floor 2, ledger row 2).

    The file must not hold a store already. A fresh store stepped back with
    :func:`step_back_to_revision_2`; open it with
    :func:`relaystore.storage.connection.open_writer` to migrate it.
    """
    if os.path.exists(path) and os.path.getsize(path) > 0:
        msg = f"{os.fspath(path)} already holds a store"
        raise FileExistsError(msg)
    open_writer(path).close()
    step_back_to_revision_2(path)


def create_revision_3_store(path: str | os.PathLike[str]) -> None:
    """Create an empty revision-3 store at ``path`` (floor 2, ledger row 3)."""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        msg = f"{os.fspath(path)} already holds a store"
        raise FileExistsError(msg)
    open_writer(path).close()
    step_back_to_revision_3(path)


def _baseline_sessions_sql() -> str:
    """The ``sessions`` definition every revision up to 3 created (``tables.sql``)."""
    found = re.search(r"CREATE TABLE sessions \(.*?\) STRICT", tables_ddl(), re.DOTALL)
    assert found is not None
    return found.group(0)


def _baseline_table_sql(table: str) -> str:
    """The definition of ``table`` (and its indexes) in ``tables.sql``."""
    found = re.search(rf"CREATE TABLE {table} \(.*?\n\);", tables_ddl(), re.DOTALL)
    assert found is not None
    indexes = re.findall(rf"CREATE INDEX \w+ ON {table}\(.*?\);", tables_ddl())
    return "\n".join([found.group(0), *indexes])


ACTIVITY_TRIGGERS = """
CREATE TRIGGER store_changes_api_session_activity_insert AFTER INSERT ON api_session_activity
BEGIN INSERT INTO store_changes(kind, session_id) VALUES ('record', NEW.session_id); END;
CREATE TRIGGER store_changes_api_session_activity_update AFTER UPDATE ON api_session_activity
BEGIN INSERT INTO store_changes(kind, session_id) VALUES ('record', NEW.session_id); END;
"""
"""The two triggers revisions 11 to 15 numbered an activity change with, as they wrote them."""


def _autoincrement_ddl() -> str:
    """``api_events`` (with its index) and ``store_changes`` as revisions up to 16 defined
    them: ``AUTOINCREMENT``."""
    feed = re.search(r"CREATE TABLE api_events \(.*?\) STRICT;", tables_ddl(), re.DOTALL)
    index = re.search(r"CREATE INDEX api_events_session ON .*?;", tables_ddl())
    changes = re.search(
        r"CREATE TABLE IF NOT EXISTS store_changes \(.*?\) STRICT;", CHANGES_DDL, re.DOTALL
    )
    assert feed is not None
    assert index is not None
    assert changes is not None
    return "\n".join((feed.group(0), index.group(0), changes.group(0)))


def step_back_to_revision_16(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-16 build wrote: rebuild
    ``api_events`` and ``store_changes`` with ``AUTOINCREMENT`` (rows and seqs kept; the
    sequence's values the newest seq, or the high-water mark when higher, and the newest
    change), drop ``api_events_high_water`` with its trigger (revision 17), set the floor
    back to 4, turn the ledger's rows above 16 into row 16 and set ``user_version`` to
    16. A store at 16 or below is left alone."""
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 16:
                return
            high_water = connection.execute(LATEST_SEQ).get
            connection.pragma("legacy_alter_table", True)
            connection.execute(
                "DROP TRIGGER api_events_high_water_kept; DROP TABLE api_events_high_water;"
                "ALTER TABLE api_events RENAME TO api_events_rowid;"
                "ALTER TABLE store_changes RENAME TO store_changes_rowid;"
                "DROP INDEX api_events_session;"
                + _autoincrement_ddl()
                + "INSERT INTO api_events SELECT * FROM api_events_rowid ORDER BY seq;"
                "INSERT INTO store_changes SELECT * FROM store_changes_rowid ORDER BY change_seq;"
                "DROP TABLE api_events_rowid; DROP TABLE store_changes_rowid;"
            )
            connection.pragma("legacy_alter_table", False)
            connection.execute(
                "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'api_events'",
                (high_water,),
            )
            connection.execute(
                "INSERT INTO sqlite_sequence(name, seq) SELECT 'api_events', ?1 WHERE ?1 > 0"
                " AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'api_events')",
                (high_water,),
            )
            connection.execute(
                "UPDATE schema_compatibility SET minimum_compatible_version = 4;"
                "DELETE FROM schema_migrations WHERE version > 16;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (16, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 16;"
            )
    finally:
        connection.close()


def step_back_to_revision_15(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-15 build wrote (after
    :func:`step_back_to_revision_16`): put back
    the two triggers that numbered an activity change (revision 16 dropped them), turn
    the ledger's rows above 15 into row 15 and set ``user_version`` to 15. A store at 15
    or below is left alone."""
    step_back_to_revision_16(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        with connection:
            if int(connection.pragma("user_version")) <= 15:
                return
            connection.execute(
                ACTIVITY_TRIGGERS + "DELETE FROM schema_migrations WHERE version > 15;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (15, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 15;"
            )
    finally:
        connection.close()


def step_back_to_revision_14(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-14 build wrote (after
    :func:`step_back_to_revision_15`): drop ``elicitation_answers`` with its triggers
    (revision 15), turn the ledger's rows above 14 into row 14 and set ``user_version``
    to 14. A store at 14 or below is left alone."""
    step_back_to_revision_15(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        with connection:
            if int(connection.pragma("user_version")) <= 14:
                return
            connection.execute(
                "DROP TABLE elicitation_answers;"
                "DELETE FROM schema_migrations WHERE version > 14;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (14, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 14;"
            )
    finally:
        connection.close()


def step_back_to_revision_13(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-13 build wrote (after
    :func:`step_back_to_revision_14`): drop ``subagent_sessions`` with its index and
    triggers (revision 14), turn the ledger's rows above 13 into row 13 and set
    ``user_version`` to 13. A store at 13 or below is left alone."""
    step_back_to_revision_14(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        with connection:
            if int(connection.pragma("user_version")) <= 13:
                return
            connection.execute(
                "DROP TABLE subagent_sessions;"
                "DELETE FROM schema_migrations WHERE version > 13;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (13, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 13;"
            )
    finally:
        connection.close()


def step_back_to_revision_12(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-12 build wrote (after
    :func:`step_back_to_revision_13`): drop the search index (revision 13: its three
    triggers, the FTS5 table, its content view and ``transcript_search_keys``), turn the
    ledger's rows above 12 into row 12 and set ``user_version`` to 12. A store at 12 or
    below is left alone."""
    step_back_to_revision_13(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 12:
                return
            connection.execute(
                "DROP TRIGGER transcript_search_added;"
                "DROP TRIGGER transcript_search_changed;"
                "DROP TRIGGER transcript_search_removed;"
                "DROP TABLE transcript_search;"
                "DROP VIEW transcript_search_text;"
                "DROP TABLE transcript_search_keys;"
                "DELETE FROM schema_migrations WHERE version > 12;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (12, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 12;"
            )
    finally:
        connection.close()


def step_back_to_revision_11(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-11 build wrote (after
    :func:`step_back_to_revision_12`): drop the trigger ``materialized_transcript_view_stale`` and the columns
    ``view_role``, ``view_text`` and ``view_writes`` (revision 12), turn the ledger's rows
    above 11 into row 11 and set ``user_version`` to 11. A store at 11 or below is left
    alone."""
    step_back_to_revision_12(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 11:
                return
            connection.execute(
                "DROP TRIGGER IF EXISTS materialized_transcript_view_stale;"
                "ALTER TABLE materialized_transcript_items DROP COLUMN view_role;"
                "ALTER TABLE materialized_transcript_items DROP COLUMN view_text;"
                "ALTER TABLE materialized_transcript_items DROP COLUMN view_writes;"
                "DELETE FROM schema_migrations WHERE version > 11;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (11, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 11;"
            )
    finally:
        connection.close()


def step_back_to_revision_9(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-9 build wrote (after
    :func:`step_back_to_revision_11`): drop ``maintenance_requests`` (revision 10), ``store_changes`` with its
    triggers and the ``replica_*`` tables (revision 11), turn the ledger's rows above 9
    into row 9 and set ``user_version`` to 9. A store at 9 or below is left alone."""
    step_back_to_revision_11(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 9:
                return
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'trigger' "
                "AND name LIKE 'store_changes_%'"
            ).fetchall():
                connection.execute(f"DROP TRIGGER {name}")
            connection.execute(
                "DROP TABLE IF EXISTS maintenance_requests;"
                "DROP TABLE store_changes; DROP TABLE replica_sources; DROP TABLE replica_sessions;"
                "DELETE FROM sqlite_sequence WHERE name = 'store_changes';"
                "DELETE FROM schema_migrations WHERE version > 9;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (9, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 9;"
            )
    finally:
        connection.close()


def step_back_to_revision_8(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-8 build wrote (after
    :func:`step_back_to_revision_9`): drop the trigger
    ``materialized_transcript_facts_stale`` and the column ``index_facts``, turn the
    ledger's rows above 8 into row 8 and set ``user_version`` to 8. A store at 8 or
    below is left alone."""
    step_back_to_revision_9(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 8:
                return
            connection.execute(
                "DROP TRIGGER IF EXISTS materialized_transcript_facts_stale;"
                "ALTER TABLE materialized_transcript_items DROP COLUMN index_facts;"
                "DELETE FROM schema_migrations WHERE version > 8;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (8, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 8;"
            )
    finally:
        connection.close()


def step_back_to_revision_7(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-7 build wrote (after
    :func:`step_back_to_revision_8`): drop ``projection_behind`` and
    ``materialized_seeds``, turn the ledger's rows above 7 into row 7 and set
    ``user_version`` to 7. A store at 7 or below is left alone."""
    step_back_to_revision_8(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 7:
                return
            connection.execute(
                "DROP TABLE IF EXISTS projection_behind;"
                "DROP TABLE IF EXISTS materialized_seeds;"
                "DELETE FROM schema_migrations WHERE version > 7;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (7, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 7;"
            )
    finally:
        connection.close()


def step_back_to_revision_6(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-6 build wrote (after
    :func:`step_back_to_revision_7`): drop ``relay_log_pages``, turn the ledger's row 7
    into row 6 and set ``user_version`` to 6. A store at 6 or below is left alone."""
    step_back_to_revision_7(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 6:
                return
            connection.execute(
                "DROP TABLE IF EXISTS relay_log_pages;"
                "DELETE FROM schema_migrations WHERE version > 6;"
                "INSERT OR IGNORE INTO schema_migrations(version, applied_at)"
                " VALUES (6, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 6;"
            )
    finally:
        connection.close()


def step_back_to_revision_5(path: str | os.PathLike[str]) -> None:
    """Turn the revision-6 store at ``path`` into what a revision-5 build wrote
    (after :func:`step_back_to_revision_6`).

    In one transaction through a plain connection: drop ``store_identity``, turn the
    ledger's single row 6 into row 5 and set ``user_version`` to 5. A store already at
    revision 5 or below is left alone.
    """
    step_back_to_revision_6(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) <= 5:
                return
            connection.execute(
                "DROP TABLE store_identity;"
                "DELETE FROM schema_migrations WHERE version = 6;"
                "INSERT INTO schema_migrations(version, applied_at)"
                " VALUES (5, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 5;"
            )
    finally:
        connection.close()


def step_back_to_revision_4(path: str | os.PathLike[str]) -> None:
    """Turn the revision-5 store at ``path`` into what a revision-4 build wrote
    (after :func:`step_back_to_revision_5`).

    In one transaction through a plain connection: give the usage tables back their
    ``tables.sql`` definitions (cascading from ``materialized_sessions``; every row is
    kept, so each must still have its projection), drop ``materialized_transcript_seq``,
    turn the ledger's single row 5 into row 4 and set ``user_version`` to 4. A store
    already at revision 4 is left alone.
    """
    step_back_to_revision_5(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            if int(connection.pragma("user_version")) == 4:
                return
            for table in ACCOUNTING_TABLES:
                connection.execute(
                    f"CREATE TEMP TABLE kept AS SELECT * FROM {table}; DROP TABLE {table};"
                    f"{_baseline_table_sql(table)}"
                    f"INSERT INTO {table} SELECT * FROM temp.kept; DROP TABLE temp.kept;"
                )
            connection.execute(
                "DROP INDEX materialized_transcript_seq;"
                "DELETE FROM schema_migrations WHERE version = 5;"
                "INSERT INTO schema_migrations(version, applied_at)"
                " VALUES (4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 4;"
            )
    finally:
        connection.close()


def step_back_to_revision_3(path: str | os.PathLike[str]) -> None:
    """Turn the revision-4 store at ``path`` into what a revision-3 build wrote.

    In one transaction through a plain connection: give ``sessions`` back the baseline
    CHECK lists (without ``opencode`` and ``startup-cleanup``; every stored row must fit
    them), turn the ledger's single row 4 into row 3, lower the floor to 2 and set
    ``user_version`` to 3 (after :func:`step_back_to_revision_4`).
    """
    step_back_to_revision_4(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            version = int(connection.pragma("schema_version"))
            connection.pragma("writable_schema", True)
            connection.execute(
                "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = 'sessions'",
                (_baseline_sessions_sql(),),
            )
            connection.pragma("schema_version", version + 1)
            connection.pragma("writable_schema", False)
            connection.execute(
                "DELETE FROM schema_migrations WHERE version = 4;"
                "INSERT INTO schema_migrations(version, applied_at)"
                " VALUES (3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "UPDATE schema_compatibility SET minimum_compatible_version = 2;"
                "PRAGMA user_version = 3;"
            )
    finally:
        connection.close()


def step_back_to_revision_2(path: str | os.PathLike[str]) -> None:
    """Turn the current store at ``path`` into what a revision-2 build wrote.

    :func:`step_back_to_revision_3`, then in one transaction through a plain connection:
    drop ``materialized_history_start``, turn the ledger's single row 3 into row 2 and set
    ``user_version`` to 2. Every row of the shared tables stays as it is.
    """
    step_back_to_revision_3(path)
    connection = apsw.Connection(os.fspath(path))
    try:
        connection.pragma("foreign_keys", "ON")
        with connection:
            connection.execute(
                "DROP TABLE materialized_history_start;"
                "DELETE FROM schema_migrations WHERE version = 3;"
                "INSERT INTO schema_migrations(version, applied_at)"
                " VALUES (2, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));"
                "PRAGMA user_version = 2;"
            )
    finally:
        connection.close()
