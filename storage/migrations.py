"""The migration ladder: the fresh baseline, and one step per revision up to the current.

:func:`migrate_schema` brings a store to :data:`~relaystore.storage.schema.SCHEMA_VERSION`:
an empty store gets the baseline (:func:`create_store_schema` plus every later addition,
so it matches a migrated store); an older store climbs one step per revision. Each step
is one ``BEGIN IMMEDIATE`` transaction that changes the schema, raises the floor when it
must, adds its ledger row and sets ``user_version``; a failure rolls the step back and
leaves the store exactly as it was. Step 2 rewrites legacy event bodies; step 4 widens
the ``sessions`` CHECKs in place; step 12 flattens the stored transcript items' text;
step 13 indexes that text for search; step 17 rebuilds the feed and the change log
without ``AUTOINCREMENT``.

What each revision means is :mod:`.schema`'s notes; the SQL is :mod:`.schema_ddl`'s.
Only the writer runs this: it must not be reached from a reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import apsw
import msgspec

from ..domain.api_events import ApiLegacyNotice, ApiTurnEnded
from ..domain.errors import InvalidInput, SchemaMismatchReason
from ..domain.outcomes import ApiTurnOutcome, MaterializedTurnOutcome
from ..domain.runtime import HarnessKind
from ..domain.sessions.records import SessionState
from ..domain.wire import decode_json
from .answers import ANSWERS_DDL
from .changes import ACTIVITY_UNNUMBERED_DDL, CHANGES_DDL, REPLICA_DDL, backfill_changes
from .events import encode_event_body
from .item_views import fill_item_views, fill_search_index
from .schema import (
    ACTIVITY_UNNUMBERED_REVISION,
    ANSWERS_REVISION,
    CHANGES_REVISION,
    COMPATIBILITY_FLOOR,
    FORWARD_REVISION,
    INDEX_FACTS_REVISION,
    ITEM_VIEW_REVISION,
    RELAY_LOG_REVISION,
    REQUESTS_REVISION,
    SCHEMA_VERSION,
    SEARCH_REVISION,
    SEQUENCES_REVISION,
    SUBAGENTS_REVISION,
    ensure_supported,
    read_schema_state,
    schema_mismatch,
)
from .schema_ddl import (
    ACCOUNTING_DDL,
    ACCOUNTING_TABLES,
    CHECKPOINT_OPERATIONS_DDL,
    FORWARD_DDL,
    HISTORY_START_DDL,
    INDEX_FACTS_DDL,
    ITEM_VIEW_DDL,
    MAINTENANCE_REQUESTS_DDL,
    NEW_STORE_ID,
    RELAY_LOG_DDL,
    SEARCH_DDL,
    STORE_IDENTITY_DDL,
    TRANSCRIPT_SEQ_INDEX_DDL,
    tables_ddl,
)
from .sequences import number_by_rowid
from .subagents import SUBAGENTS_DDL
from .transaction import store_error

__all__ = ["create_store_schema", "migrate_schema"]


def migrate_schema(connection: apsw.Connection) -> int:
    """Bring the store to :data:`SCHEMA_VERSION` and return the revision it is at.

    An empty store gets the baseline; an older store is migrated in place, one step per
    revision; a store
    at or above this build is left untouched (only checked). Raises ``SchemaMismatch``
    for a store this build must not touch, and :class:`~relaystore.domain.errors.InvalidInput`
    (store unchanged) when a legacy event body cannot be migrated.
    """
    state = read_schema_state(connection)
    if state.revision < SCHEMA_VERSION:
        if state.revision == 0:
            _create_baseline(connection)
        else:
            for revision in range(state.revision + 1, SCHEMA_VERSION + 1):
                _MIGRATIONS[revision](connection)
        state = read_schema_state(connection)
    ensure_supported(state, path=connection.filename or None)
    return state.revision


def create_store_schema(connection: apsw.Connection, revision: int, ddl: str) -> None:
    """Create the shared tables plus ``ddl`` in an empty store and stamp it ``revision``.

    The floor and the one ledger row are ``revision`` too (a fresh current store then
    lowers its floor to :data:`COMPATIBILITY_FLOOR`). Runs inside the caller's
    transaction; the current baseline passes :data:`CHECKPOINT_OPERATIONS_DDL` and
    :data:`HISTORY_START_DDL`, the legacy fixture its triggers.
    """
    connection.execute(tables_ddl())
    connection.execute(ddl)
    connection.execute(
        "INSERT INTO schema_compatibility(singleton, minimum_compatible_version) VALUES (1, ?)",
        (revision,),
    )
    _record_revision(connection, revision)


# -- steps ------------------------------------------------------------------------------


def _create_baseline(connection: apsw.Connection) -> None:
    with _step(connection, "create the relaystore schema"):
        if int(connection.pragma("user_version")) != 0:
            return  # another connection created it while we waited for the lock
        create_store_schema(
            connection,
            SCHEMA_VERSION,
            CHECKPOINT_OPERATIONS_DDL
            + HISTORY_START_DDL
            + STORE_IDENTITY_DDL
            + RELAY_LOG_DDL
            + FORWARD_DDL,
        )
        _widen_session_checks(connection)
        _keep_accounting(connection)
        connection.execute(INDEX_FACTS_DDL)
        connection.execute(MAINTENANCE_REQUESTS_DDL)
        connection.execute(CHANGES_DDL + REPLICA_DDL)
        connection.execute(ITEM_VIEW_DDL)
        connection.execute(SEARCH_DDL)
        connection.execute(SUBAGENTS_DDL)
        connection.execute(ANSWERS_DDL)
        number_by_rowid(connection)
        connection.execute(NEW_STORE_ID)
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = ? WHERE singleton = 1",
            (COMPATIBILITY_FLOOR,),
        )


def _migrate_to_typed_events(connection: apsw.Connection) -> None:
    """Revision 2: typed event bodies and checkpoint identities (the origin's 57)."""
    with _step(connection, "migrate the relaystore schema to revision 2"):
        if int(connection.pragma("user_version")) != 1:
            return
        connection.execute(
            "DROP TRIGGER IF EXISTS api_session_error_updated;"
            "DROP TRIGGER IF EXISTS api_session_error_inserted;"
        )
        connection.execute(CHECKPOINT_OPERATIONS_DDL)
        _migrate_event_outcomes(connection)
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = 2 WHERE singleton = 1"
        )
        _record_revision(connection, 2)


def _add_history_start(connection: apsw.Connection) -> None:
    """Revision 3: where a seeded or pruned session's history starts (additive)."""
    with _step(connection, "migrate the relaystore schema to revision 3"):
        if int(connection.pragma("user_version")) != 2:
            return
        connection.execute(HISTORY_START_DDL)
        _record_revision(connection, 3)


def _admit_current_session_kinds(connection: apsw.Connection) -> None:
    """Revision 4: the sessions CHECKs admit every harness kind and state (floor 4)."""
    with _step(connection, "migrate the relaystore schema to revision 4"):
        if int(connection.pragma("user_version")) != 3:
            return
        _widen_session_checks(connection)
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = 4 WHERE singleton = 1"
        )
        _record_revision(connection, 4)


def _add_relay_log(connection: apsw.Connection) -> None:
    """Revision 7: the relay log (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {RELAY_LOG_REVISION}"):
        if int(connection.pragma("user_version")) != RELAY_LOG_REVISION - 1:
            return
        connection.execute(RELAY_LOG_DDL)
        _record_revision(connection, RELAY_LOG_REVISION)


def _add_forward_tables(connection: apsw.Connection) -> None:
    """Revision 8: sessions behind their log, seeded starts (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {FORWARD_REVISION}"):
        if int(connection.pragma("user_version")) != FORWARD_REVISION - 1:
            return
        connection.execute(FORWARD_DDL)
        _record_revision(connection, FORWARD_REVISION)


def _add_index_facts(connection: apsw.Connection) -> None:
    """Revision 9: transcript items' index facts (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {INDEX_FACTS_REVISION}"):
        if int(connection.pragma("user_version")) != INDEX_FACTS_REVISION - 1:
            return
        connection.execute(INDEX_FACTS_DDL)
        _record_revision(connection, INDEX_FACTS_REVISION)


def _add_maintenance_requests(connection: apsw.Connection) -> None:
    """Revision 10: maintenance requests (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {REQUESTS_REVISION}"):
        if int(connection.pragma("user_version")) != REQUESTS_REVISION - 1:
            return
        connection.execute(MAINTENANCE_REQUESTS_DDL)
        _record_revision(connection, REQUESTS_REVISION)


def _add_changes(connection: apsw.Connection) -> None:
    """Revision 11: the change log, numbered from what the store holds (additive)."""
    with _step(connection, f"migrate the relaystore schema to revision {CHANGES_REVISION}"):
        if int(connection.pragma("user_version")) != CHANGES_REVISION - 1:
            return
        connection.execute(CHANGES_DDL + REPLICA_DDL)
        backfill_changes(connection)
        _record_revision(connection, CHANGES_REVISION)


def _add_item_views(connection: apsw.Connection) -> None:
    """Revision 12: transcript items' role and text, filled for every stored item
    (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {ITEM_VIEW_REVISION}"):
        if int(connection.pragma("user_version")) != ITEM_VIEW_REVISION - 1:
            return
        connection.execute(ITEM_VIEW_DDL)
        fill_item_views(connection)
        _record_revision(connection, ITEM_VIEW_REVISION)


def _add_search_index(connection: apsw.Connection) -> None:
    """Revision 13: the full-text search index of transcript text, filled for every item
    whose text is known (additive; see the module doc)."""
    with _step(connection, f"migrate the relaystore schema to revision {SEARCH_REVISION}"):
        if int(connection.pragma("user_version")) != SEARCH_REVISION - 1:
            return
        connection.execute(SEARCH_DDL)
        fill_search_index(connection)
        _record_revision(connection, SEARCH_REVISION)


def _add_subagents(connection: apsw.Connection) -> None:
    """Revision 14: sub-agent relations (additive; none recorded yet)."""
    with _step(connection, f"migrate the relaystore schema to revision {SUBAGENTS_REVISION}"):
        if int(connection.pragma("user_version")) != SUBAGENTS_REVISION - 1:
            return
        connection.execute(SUBAGENTS_DDL)
        _record_revision(connection, SUBAGENTS_REVISION)


def _add_answers(connection: apsw.Connection) -> None:
    """Revision 15: recorded answers to questions (additive; none recorded yet)."""
    with _step(connection, f"migrate the relaystore schema to revision {ANSWERS_REVISION}"):
        if int(connection.pragma("user_version")) != ANSWERS_REVISION - 1:
            return
        connection.execute(ANSWERS_DDL)
        _record_revision(connection, ANSWERS_REVISION)


def _stop_numbering_activity(connection: apsw.Connection) -> None:
    """Revision 16: no change numbered for an activity change (its event carries it)."""
    revision = ACTIVITY_UNNUMBERED_REVISION
    with _step(connection, f"migrate the relaystore schema to revision {revision}"):
        if int(connection.pragma("user_version")) != revision - 1:
            return
        connection.execute(ACTIVITY_UNNUMBERED_DDL)
        _record_revision(connection, revision)


def _number_by_rowid(connection: apsw.Connection) -> None:
    """Revision 17: the feed and the changes numbered by the rowid (floor 17)."""
    with _step(connection, f"migrate the relaystore schema to revision {SEQUENCES_REVISION}"):
        if int(connection.pragma("user_version")) != SEQUENCES_REVISION - 1:
            return
        number_by_rowid(connection)
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = ? WHERE singleton = 1",
            (SEQUENCES_REVISION,),
        )
        _record_revision(connection, SEQUENCES_REVISION)


_SESSION_CHECKS = (
    ("harness_kind", tuple(kind.value for kind in HarnessKind)),
    ("state", tuple(state.value for state in SessionState)),
)
"""The ``sessions`` columns whose CHECK lists the domain's enum values, and those values."""


def _session_checks(sql: str) -> str | None:
    """``sql`` (the ``sessions`` table's definition) with each enum CHECK listing exactly
    the values of :data:`_SESSION_CHECKS`; None when a CHECK is not there to rewrite."""
    for column, values in _SESSION_CHECKS:
        listed = ",".join(f"'{value}'" for value in values)
        sql, found = re.subn(
            rf"CHECK\(\s*{column} IN \([^)]*\)\s*\)", f"CHECK({column} IN ({listed}))", sql
        )
        if found != 1:
            return None
    return sql


def _widen_session_checks(connection: apsw.Connection) -> None:
    """Rewrite the ``sessions`` table's CHECKs in place, inside the caller's transaction.

    Widening a CHECK changes no stored row, so SQLite's procedure for such changes
    applies: the definition in ``sqlite_schema`` is rewritten under ``writable_schema``
    and ``schema_version`` is bumped so every connection re-reads it. The file's
    integrity is checked before the caller commits.
    """
    row = connection.execute(
        "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'sessions'"
    ).fetchone()
    sql = "" if row is None else str(row[0])
    widened = _session_checks(sql)
    if widened is None:  # not the table relaystore created: refuse, leave it as it was
        raise schema_mismatch(
            SchemaMismatchReason.INVALID_METADATA,
            int(connection.pragma("user_version")),
            connection.filename or None,
        )
    if widened == sql:
        return
    version = int(connection.pragma("schema_version"))
    connection.pragma("writable_schema", True)
    try:
        connection.execute(
            "UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = 'sessions'",
            (widened,),
        )
        connection.pragma("schema_version", version + 1)
    finally:
        connection.pragma("writable_schema", False)
    problems = [str(row[0]) for row in connection.execute("PRAGMA integrity_check")]
    if problems != ["ok"]:
        raise InvalidInput(
            "the store's integrity check failed while widening the sessions constraints: "
            + "; ".join(problems[:3]),
            path=connection.filename or None,
        )


def _keep_accounting(connection: apsw.Connection) -> None:
    """Rebuild the two usage tables to reference ``session_contexts`` (rows kept) and add
    the transcript seq index, inside the caller's transaction. The baseline runs it too,
    so a fresh store and a migrated one have the same definitions."""
    for table in ACCOUNTING_TABLES:
        connection.execute(ACCOUNTING_DDL[table])
    connection.execute(TRANSCRIPT_SEQ_INDEX_DDL)


def _accounting_outlives_sessions(connection: apsw.Connection) -> None:
    """Revision 5: usage outlives its session; transcript pages have their index."""
    with _step(connection, "migrate the relaystore schema to revision 5"):
        if int(connection.pragma("user_version")) != 4:
            return
        _keep_accounting(connection)
        _record_revision(connection, 5)


def _add_store_identity(connection: apsw.Connection) -> None:
    """Revision 6: the store's id, generated here once (additive: the floor stays)."""
    with _step(connection, "migrate the relaystore schema to revision 6"):
        if int(connection.pragma("user_version")) != 5:
            return
        connection.execute(STORE_IDENTITY_DDL)
        connection.execute(NEW_STORE_ID)
        _record_revision(connection, 6)


_MIGRATIONS: dict[int, Callable[[apsw.Connection], None]] = {
    2: _migrate_to_typed_events,
    3: _add_history_start,
    4: _admit_current_session_kinds,
    5: _accounting_outlives_sessions,
    6: _add_store_identity,
    RELAY_LOG_REVISION: _add_relay_log,
    FORWARD_REVISION: _add_forward_tables,
    INDEX_FACTS_REVISION: _add_index_facts,
    REQUESTS_REVISION: _add_maintenance_requests,
    CHANGES_REVISION: _add_changes,
    ITEM_VIEW_REVISION: _add_item_views,
    SEARCH_REVISION: _add_search_index,
    SUBAGENTS_REVISION: _add_subagents,
    ANSWERS_REVISION: _add_answers,
    ACTIVITY_UNNUMBERED_REVISION: _stop_numbering_activity,
    SEQUENCES_REVISION: _number_by_rowid,
}


class _LegacyErrorData(msgspec.Struct, kw_only=True):
    message: str
    command_id: str | None = None


class _LegacyErrorBody(msgspec.Struct, kw_only=True):
    data: _LegacyErrorData


class _LegacyTurnData(msgspec.Struct, kw_only=True):
    turn: MaterializedTurnOutcome


class _LegacyTurnEndedBody(msgspec.Struct, kw_only=True):
    data: _LegacyTurnData


def _migrate_event_outcomes(connection: apsw.Connection) -> None:
    """Rewrite ``error`` and old ``turn_ended`` bodies in place (seq and times untouched)."""
    rows = connection.execute(
        "SELECT seq, session_id, json_extract(body, '$.type'), body FROM api_events"
        " WHERE json_extract(body, '$.type') IN ('error', 'turn_ended') ORDER BY seq"
    ).fetchall()
    updates: list[tuple[str, apsw.SQLiteValue]] = []
    for seq, session_id, kind, body in rows:
        try:
            if kind == "error":
                error = decode_json(str(body), _LegacyErrorBody, what="legacy error event").data
                event: ApiLegacyNotice | ApiTurnEnded = ApiLegacyNotice.of(
                    original_type="error", message=error.message, command_id=error.command_id
                )
            else:
                turn = decode_json(str(body), _LegacyTurnEndedBody, what="legacy turn_ended event")
                event = ApiTurnEnded.of(turn=ApiTurnOutcome.from_materialized(turn.data.turn))
        except InvalidInput as exc:
            raise InvalidInput(
                f"API event seq {seq} cannot be migrated to schema revision 2 ({exc.detail}); "
                "the store was left unchanged at revision 1; repair or delete that row "
                "with a revision-1 tool, then open the store again",
                session_id=str(session_id),
                path=connection.filename or None,
            ) from exc
        updates.append((encode_event_body(event), seq))
    connection.executemany("UPDATE api_events SET body = ? WHERE seq = ?", updates)


def _record_revision(connection: apsw.Connection, revision: int) -> None:
    connection.execute(
        "INSERT INTO schema_migrations(version, applied_at)"
        " VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
        (revision,),
    )
    connection.execute(f"PRAGMA user_version = {int(revision)}")


@contextmanager
def _step(connection: apsw.Connection, action: str) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; any failure rolls the whole step back."""
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
            connection.execute("COMMIT")
        finally:
            if connection.in_transaction:  # the step or its COMMIT failed
                connection.execute("ROLLBACK")
    except apsw.Error as exc:
        raise store_error(exc, action, connection) from exc
