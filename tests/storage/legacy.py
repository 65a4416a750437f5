"""The legacy revision-1 store: a fixture builder for migration tests.

Revision 1 is the shape of the origin's pre-typed event era: the shared tables of
``storage/tables.sql``, no ``checkpoint_operations``, and two triggers that append an
``{"type":"error","data":{"message":..,"command_id":null}}`` event whenever
``sessions.last_error`` is inserted non-null or changes to a new non-null value. Bodies
written at this revision are in the old shape (``error``; ``turn_ended`` carrying a
``MaterializedTurnOutcome``). Opening such a store for writing migrates it to the
current revision (:mod:`relaystore.storage.schema`).

Nothing in the product writes revision 1, so this lives with the tests (it used to be
``relaystore.storage.legacy``): it builds the stores that real users upgrade from.
"""

from __future__ import annotations

import os

import apsw

from relaystore.storage.schema import create_store_schema

__all__ = ["LEGACY_SCHEMA_VERSION", "LEGACY_TRIGGERS_DDL", "create_legacy_store"]

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
