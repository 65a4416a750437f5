"""The store's schema: revisions, the fresh baseline, the migration ladder and its checks.

Revisions (relaystore's own numbering):

1. *Legacy.* Event bodies of the origin's pre-typed era: ``error`` events, written by
   triggers whenever ``sessions.last_error`` becomes a new non-null value, and
   ``turn_ended`` bodies carrying the old ``MaterializedTurnOutcome``. No
   ``checkpoint_operations``. `tests/storage/legacy.py` builds one for tests.
2. Typed bodies: ``error`` became ``legacy_notice`` and ``turn_ended`` carries an
   ``ApiTurnOutcome``; the triggers are gone (the store emits ``session_fault`` itself);
   one ``checkpoint_operations`` row per session.
3. ``materialized_history_start``: where a session's history starts when it does not
   start at ordinal 1 (a seeded or pruned journal). Additive, so the floor stays 2: a
   revision-2 build may still read and write it.
4. The ``sessions`` CHECK constraints admit every
   harness kind and session state the domain knows (the origin's steps 68 and 74 added
   ``startup-cleanup`` and ``opencode``). The constraints only widen, so the step rewrites
   the table's definition in place (SQLite's documented procedure for a change that
   leaves the stored rows as they are) and checks the file's integrity before it commits.
   It raises the floor to 4: a revision-3 build cannot decode a record with a new kind or
   state, and would refuse that session's record (or, where it lists sessions, fail).
5. Accounting outlives its session (the origin's
   step 67): ``session_turn_usage`` and ``session_provider_cost`` reference
   ``session_contexts`` (which a deleted session leaves behind) instead of cascading
   from ``materialized_sessions``, so deleting a session keeps its usage readable. And
   the index ``materialized_transcript_seq`` (session, seq, stable id) lets a transcript
   page walk from its cursor. Both tables keep their columns, so a revision-4 build still
   reads and writes them: the floor stays.
6. ``store_identity``: the store's id, 32 random
   lowercase hex digits generated once, when the store is created or migrated to this
   revision (a backup copies it, ``VACUUM`` keeps it); only ``relaystore
   new-store-id`` writes it again, for a restored backup that forked from what was
   published under its id: what names the store in a feed shared by many stores.
   Additive, so the floor stays 4.
7. ``relay_log_pages`` (:data:`RELAY_LOG_DDL`): the
   relay log, one compressed row per committed projection page. Additive, so the floor
   stays: an older build writes pages without log rows, which the log's coverage check
   reports as a hole (that session can then not be reprojected), and changes nothing
   else. The step's number is :data:`RELAY_LOG_REVISION`, the one place to renumber it.
8. ``projection_behind`` (:data:`FORWARD_DDL`): the
   sessions whose projection stopped at a line of a kind the build did not know, with
   the last line kept in the log after it; and ``materialized_seeds``: a seeded
   session's starting cursor and queued prompts, so it can be rebuilt from its log.
   Additive, so the floor stays. An older build reads a behind session's frontier as
   the last line *projected* (``materialized_sessions`` keeps that), so it refuses the
   unknown line again and every line after it as a gap: it can never project past the
   unknown line, nor out of order.
9. ``materialized_transcript_items.index_facts``
   (:data:`INDEX_FACTS_DDL`): what the transcript index files about each item
   (:class:`~relaystore.domain.projection.index.ItemFacts`), written with its body as
   ``"<ordinal>:<facts>"``, so a projector reloading a long session reads the facts and
   the newest items instead of decoding every body. NULL means unknown (decode the
   body): what an older build's insert leaves, and what the trigger
   ``materialized_transcript_facts_stale`` sets when an update changes the body but not
   the facts (an older build's, or a retention pass's); this build's ordinal prefix
   makes each of its writes differ from the value before. Additive, so the floor stays;
   existing items start unknown.
10. ``maintenance_requests``
   (:data:`MAINTENANCE_REQUESTS_DDL`): the maintenance a command asks of the process
   that holds the store for writing (:mod:`relaystore.storage.requests`). Additive, so
   the floor stays: an older build's writer never answers a request, and the command
   that made it withdraws it when its time runs out.
11. *Current* (:data:`SCHEMA_VERSION`). ``store_changes`` and its triggers
   (:data:`~relaystore.storage.changes.CHANGES_DDL`): every change to a session's
   record, start or relay log numbered in commit order, what ``relaystore publish``
   sends besides the feed (the step numbers what the store already holds); and
   ``replica_sources``/``replica_sessions`` (:data:`~relaystore.storage.changes.REPLICA_DDL`)
   for a store filled from a stream. Additive, so the floor stays: an older build's
   writes still fire the triggers (they live in the file).

Where the revision lives, always consistent in a valid store: ``PRAGMA user_version``;
the ``schema_migrations`` ledger, whose maximum equals ``user_version``; and the single
row of ``schema_compatibility``, whose ``minimum_compatible_version`` (the *floor*) is
the oldest build revision that may read and write the store (``1 <= floor <=
revision``). A fresh store is created directly at the current revision with one ledger
row and floor 2. Each migration step is one ``BEGIN IMMEDIATE`` transaction that changes the
schema, raises the floor, adds its ledger row and sets ``user_version``; a failure
rolls the step back and leaves the store exactly as it was.

A newer store is never changed: it stays usable while its floor admits this build,
and is refused with ``SchemaMismatch(INCOMPATIBLE)`` otherwise.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources

import apsw
import msgspec

from ..domain.api_events import ApiLegacyNotice, ApiTurnEnded
from ..domain.errors import InvalidInput, SchemaMismatch, SchemaMismatchReason
from ..domain.outcomes import ApiTurnOutcome, MaterializedTurnOutcome
from ..domain.runtime import HarnessKind
from ..domain.sessions import SessionState
from ..domain.wire import decode_json
from .changes import CHANGES_DDL, REPLICA_DDL, backfill_changes
from .events import encode_event_body
from .transaction import store_error, transaction

__all__ = [
    "ACCOUNTING_TABLES",
    "CHANGES_REVISION",
    "CHECKPOINT_OPERATIONS_DDL",
    "COMPATIBILITY_FLOOR",
    "HISTORY_START_DDL",
    "RELAY_LOG_DDL",
    "RELAY_LOG_REVISION",
    "FORWARD_DDL",
    "FORWARD_REVISION",
    "INDEX_FACTS_DDL",
    "INDEX_FACTS_REVISION",
    "MAINTENANCE_REQUESTS_DDL",
    "REQUESTS_REVISION",
    "SCHEMA_VERSION",
    "STORE_IDENTITY_DDL",
    "SchemaState",
    "TRANSCRIPT_SEQ_INDEX_DDL",
    "check_writer_schema",
    "create_store_schema",
    "ensure_supported",
    "migrate_schema",
    "not_a_store",
    "read_schema_state",
    "read_store_id",
    "renew_store_id",
    "tables_ddl",
]

RELAY_LOG_REVISION = 7
"""The revision that adds the relay log (renumber here only)."""

FORWARD_REVISION = 8
"""The revision that keeps what forward compatibility needs (renumber here only)."""

INDEX_FACTS_REVISION = 9
"""The revision that keeps each transcript item's index facts (renumber here only)."""

REQUESTS_REVISION = 10
"""The revision that adds maintenance requests (renumber here only)."""

CHANGES_REVISION = 11
"""The revision that numbers changes to the source of truth (renumber here only)."""

SCHEMA_VERSION = CHANGES_REVISION
"""The revision this build reads and writes."""

COMPATIBILITY_FLOOR = 4
"""The oldest build revision that may read and write a store this build creates."""

CHECKPOINT_OPERATIONS_DDL = """
CREATE TABLE IF NOT EXISTS checkpoint_operations (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    command_id TEXT NOT NULL UNIQUE CHECK(length(trim(command_id)) > 0),
    related_command_ids TEXT NOT NULL DEFAULT '[]'
        CHECK(json_valid(related_command_ids) AND json_type(related_command_ids) = 'array')
) STRICT;
"""
"""At most one in-flight checkpoint operation per session; a command id owns at most one."""

HISTORY_START_DDL = """
CREATE TABLE IF NOT EXISTS materialized_history_start (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    first_ordinal INTEGER NOT NULL CHECK(first_ordinal > 1),
    source TEXT NOT NULL CHECK(source IN ('seed', 'first_event'))
) STRICT;
"""
"""Where a session's history starts, for the sessions that do not start at ordinal 1."""

RELAY_LOG_DDL = """
CREATE TABLE IF NOT EXISTS relay_log_pages (
    session_id TEXT NOT NULL
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    first_ordinal INTEGER NOT NULL CHECK(first_ordinal >= 1),
    last_ordinal INTEGER NOT NULL CHECK(last_ordinal >= first_ordinal),
    raw_bytes INTEGER NOT NULL CHECK(raw_bytes >= 0),
    lines BLOB NOT NULL,
    PRIMARY KEY(session_id, first_ordinal)
) STRICT;
"""
"""The relay log: each committed page's journal lines, newline-joined, zlib-compressed
(:mod:`relaystore.domain.relay_log`); ``raw_bytes`` is their uncompressed size."""

FORWARD_DDL = """
CREATE TABLE IF NOT EXISTS projection_behind (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL CHECK(ordinal >= 1),
    kind TEXT NOT NULL,
    position TEXT NOT NULL,
    path TEXT NOT NULL,
    kept_ordinal INTEGER NOT NULL CHECK(kept_ordinal >= ordinal),
    kept_digest TEXT NOT NULL CHECK(length(kept_digest) = 64)
) STRICT;
CREATE TABLE IF NOT EXISTS materialized_seeds (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    start_ordinal INTEGER NOT NULL CHECK(start_ordinal >= 1),
    start_digest TEXT NOT NULL CHECK(length(start_digest) = 64),
    queued_prompts_json TEXT NOT NULL
        CHECK(json_valid(queued_prompts_json) AND json_type(queued_prompts_json) = 'array')
) STRICT;
"""
"""Revision 8: a session behind its log (:class:`~relaystore.domain.materialized.ProjectionBehind`),
and a seeded session's start (the cursor it continues from and its queued prompts)."""


INDEX_FACTS_DDL = """
ALTER TABLE materialized_transcript_items ADD COLUMN index_facts TEXT;
CREATE TRIGGER IF NOT EXISTS materialized_transcript_facts_stale
AFTER UPDATE OF body_json ON materialized_transcript_items
WHEN NEW.index_facts IS OLD.index_facts
BEGIN
    UPDATE materialized_transcript_items SET index_facts = NULL
    WHERE session_id = NEW.session_id AND stable_id = NEW.stable_id;
END;
"""
"""Revision 9: each item's index facts, forgotten when its body changes without them."""

MAINTENANCE_REQUESTS_DDL = """
CREATE TABLE IF NOT EXISTS maintenance_requests (
    request_id TEXT PRIMARY KEY CHECK(length(request_id) BETWEEN 1 AND 64),
    kind TEXT NOT NULL CHECK(length(kind) > 0),
    request_json TEXT NOT NULL CHECK(json_valid(request_json)),
    state TEXT NOT NULL CHECK(state IN ('pending', 'running', 'done', 'failed')),
    requested_at_ms INTEGER NOT NULL,
    requester_pid INTEGER NOT NULL,
    taken_by_pid INTEGER,
    answered_at_ms INTEGER,
    answer_json TEXT CHECK(answer_json IS NULL OR json_valid(answer_json))
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS maintenance_requests_open
    ON maintenance_requests(request_json) WHERE state IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS maintenance_requests_state
    ON maintenance_requests(state, requested_at_ms);
"""
"""Revision 10: maintenance requests for the store's writer; one open request per
distinct request (a command run again joins it)."""


@functools.cache
def tables_ddl() -> str:
    """The DDL of the tables every revision shares (``storage/tables.sql``)."""
    return resources.files("relaystore.storage").joinpath("tables.sql").read_text(encoding="utf-8")


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


@dataclass(frozen=True, slots=True)
class SchemaState:
    """A store's revision and compatibility floor, read in one snapshot.

    ``minimum_compatible`` is ``None`` only for an empty store (revision 0).
    """

    revision: int
    minimum_compatible: int | None


def read_schema_state(connection: apsw.Connection) -> SchemaState:
    """Read the revision and floor, checking that the metadata is consistent.

    Raises ``SchemaMismatch(INVALID_METADATA)`` when a table is missing, the floor table
    does not hold exactly one row, the ledger maximum differs from ``user_version``, the
    floor is outside ``1..=revision``, or a revision-0 file already holds tables, views,
    indexes or triggers (it is not a relaystore store, see :func:`not_a_store`). A busy
    or failing file raises a plain ``StoreError``: that is no evidence about the schema.

    Reads only, so it is also how a file is recognised before anything is written to it
    (``storage.connection.recognise_store``).
    """
    path = connection.filename or None
    with transaction(connection, "read the relaystore schema revision"):
        revision = int(connection.pragma("user_version"))
        if revision == 0:
            names = [
                str(name)
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'"
                    " ORDER BY type = 'table' DESC, rowid LIMIT 4"
                )
            ]
            if names:
                shown = ", ".join(repr(name) for name in names[:3])
                more = ", ..." if len(names) > 3 else ""
                raise not_a_store(
                    path,
                    "the file is a SQLite database of another application (it holds "
                    f"{shown}{more} but no relaystore schema)",
                )
            return SchemaState(revision=0, minimum_compatible=None)
        try:
            row = connection.execute(
                "SELECT (SELECT count(*) FROM schema_compatibility),"
                " (SELECT min(singleton) FROM schema_compatibility),"
                " (SELECT min(minimum_compatible_version) FROM schema_compatibility),"
                " (SELECT max(version) FROM schema_migrations)"
            ).fetchone()
        except apsw.SQLError as exc:  # missing table or column: structural
            raise _mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path) from exc
    assert row is not None
    count, singleton, floor, ledger = row
    if not (
        count == 1
        and singleton == 1
        and isinstance(floor, int)
        and ledger == revision
        and 1 <= floor <= revision
    ):
        raise _mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path)
    return SchemaState(revision=revision, minimum_compatible=floor)


def ensure_supported(state: SchemaState, *, path: str | None = None) -> None:
    """Raise ``SchemaMismatch`` unless this build may read and write a store in ``state``.

    Behind this build: ``NEEDS_MIGRATION``. Otherwise the floor decides: at or below
    :data:`SCHEMA_VERSION` is fine (this admits compatible newer stores), above it is
    ``INCOMPATIBLE``; no floor at all is ``INVALID_METADATA``.
    """
    if state.revision < SCHEMA_VERSION:
        raise _mismatch(SchemaMismatchReason.NEEDS_MIGRATION, state.revision, path)
    if state.minimum_compatible is None:
        raise _mismatch(SchemaMismatchReason.INVALID_METADATA, state.revision, path)
    if state.minimum_compatible > SCHEMA_VERSION:
        raise _mismatch(
            SchemaMismatchReason.INCOMPATIBLE, state.revision, path, state.minimum_compatible
        )


def check_writer_schema(connection: apsw.Connection, observed_revision: int) -> int:
    """The writer's check before every message; returns the revision to remember.

    Reads only. Raises ``SchemaMismatch(ROLLBACK)`` (``minimum`` = ``observed_revision``)
    when the store's revision is lower than one this writer saw before, and whatever
    :func:`ensure_supported` raises otherwise. After a refusal the writer should
    remember ``max(observed_revision, error.found)`` and keep checking later messages.
    """
    path = connection.filename or None
    state = read_schema_state(connection)
    if state.revision < observed_revision:
        raise _mismatch(SchemaMismatchReason.ROLLBACK, state.revision, path, observed_revision)
    ensure_supported(state, path=path)
    return state.revision


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
        connection.execute(_NEW_STORE_ID)
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
        raise _mismatch(
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


ACCOUNTING_TABLES = ("session_turn_usage", "session_provider_cost")
_ACCOUNTING_DDL = {
    "session_turn_usage": """
CREATE TABLE session_turn_usage_next (
    session_id TEXT NOT NULL REFERENCES session_contexts(session_id),
    command_id TEXT NOT NULL,
    completed_ordinal INTEGER NOT NULL,
    turn_start_position INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY(session_id, command_id)
);
INSERT INTO session_turn_usage_next(session_id, command_id, completed_ordinal,
    turn_start_position, body)
SELECT session_id, command_id, completed_ordinal, turn_start_position, body
FROM session_turn_usage;
DROP TABLE session_turn_usage;
ALTER TABLE session_turn_usage_next RENAME TO session_turn_usage;
CREATE INDEX session_turn_usage_order ON session_turn_usage(session_id, completed_ordinal);
""",
    "session_provider_cost": """
CREATE TABLE session_provider_cost_next (
    session_id TEXT PRIMARY KEY REFERENCES session_contexts(session_id),
    body TEXT NOT NULL
);
INSERT INTO session_provider_cost_next(session_id, body)
SELECT session_id, body FROM session_provider_cost;
DROP TABLE session_provider_cost;
ALTER TABLE session_provider_cost_next RENAME TO session_provider_cost;
""",
}
TRANSCRIPT_SEQ_INDEX_DDL = """
CREATE INDEX IF NOT EXISTS materialized_transcript_seq ON materialized_transcript_items(
    session_id, COALESCE(latest_content_event_ordinal, position), stable_id);
"""
"""Transcript pages walk items by (session, seq, stable id); the expression must read
exactly as the one in ``storage/reads.py``."""


def _keep_accounting(connection: apsw.Connection) -> None:
    """Rebuild the two usage tables to reference ``session_contexts`` (rows kept) and add
    the transcript seq index, inside the caller's transaction. The baseline runs it too,
    so a fresh store and a migrated one have the same definitions."""
    for table in ACCOUNTING_TABLES:
        connection.execute(_ACCOUNTING_DDL[table])
    connection.execute(TRANSCRIPT_SEQ_INDEX_DDL)


def _accounting_outlives_sessions(connection: apsw.Connection) -> None:
    """Revision 5: usage outlives its session; transcript pages have their index."""
    with _step(connection, "migrate the relaystore schema to revision 5"):
        if int(connection.pragma("user_version")) != 4:
            return
        _keep_accounting(connection)
        _record_revision(connection, 5)


STORE_IDENTITY_DDL = """
CREATE TABLE IF NOT EXISTS store_identity (
    singleton INTEGER PRIMARY KEY CHECK(singleton = 1),
    store_id TEXT NOT NULL
        CHECK(length(store_id) = 32 AND store_id NOT GLOB '*[^0-9a-f]*')
) STRICT;
"""
"""The store's id (one row, written once; see revision 6)."""

_RANDOM_STORE_ID = "lower(hex(randomblob(16)))"
"""A fresh store id: 32 random lowercase hex digits."""

_NEW_STORE_ID = (
    f"INSERT INTO store_identity(singleton, store_id) VALUES (1, {_RANDOM_STORE_ID})"
    " ON CONFLICT(singleton) DO NOTHING"
)


def _add_store_identity(connection: apsw.Connection) -> None:
    """Revision 6: the store's id, generated here once (additive: the floor stays)."""
    with _step(connection, "migrate the relaystore schema to revision 6"):
        if int(connection.pragma("user_version")) != 5:
            return
        connection.execute(STORE_IDENTITY_DDL)
        connection.execute(_NEW_STORE_ID)
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
}


def read_store_id(connection: apsw.Connection) -> str:
    """The store's id (revision 6 and later), read in its own read transaction.

    Raises ``SchemaMismatch(INVALID_METADATA)`` when the ``store_identity`` row is
    missing or malformed: every store this build reads or writes has one.
    """
    path = connection.filename or None
    with transaction(connection, "read the store id"):
        try:
            value = connection.execute(
                "SELECT store_id FROM store_identity WHERE singleton = 1"
            ).get
        except apsw.SQLError as exc:  # no such table: not a revision-6 store
            revision = int(connection.pragma("user_version"))
            raise _mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path) from exc
    if not isinstance(value, str) or len(value) != 32:
        revision = int(connection.pragma("user_version"))
        raise _mismatch(SchemaMismatchReason.INVALID_METADATA, revision, path)
    return value


def renew_store_id(connection: apsw.Connection) -> tuple[str, str]:
    """Give the store a fresh random id, on the writer connection; ``(old, new)``.

    The one write of ``store_identity`` after it was made: for a store restored from a
    backup that forked from what was published under its id
    (:mod:`relaystore.domain.publishing`), so that it publishes as a new store.
    """
    old = read_store_id(connection)
    with transaction(connection, "give the store a new id"):
        connection.execute(
            f"UPDATE store_identity SET store_id = {_RANDOM_STORE_ID} WHERE singleton = 1"
        )
    return old, read_store_id(connection)


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


def not_a_store(path: str | None, why: str) -> SchemaMismatch:
    """``SchemaMismatch(INVALID_METADATA)`` (``found`` 0) for a file that is not a store.

    ``why`` says what the file is instead; the message adds that it was left untouched.
    """
    error = _mismatch(SchemaMismatchReason.INVALID_METADATA, 0, path)
    error.detail = (
        f"{why}; it is not a relaystore store, so relaystore refuses to open it and left "
        "it unchanged; give the path of a relaystore store, or of a new file"
    )
    located = error.located()
    assert isinstance(located, SchemaMismatch)
    return located


def _mismatch(
    reason: SchemaMismatchReason, found: int, path: str | None, minimum: int | None = None
) -> SchemaMismatch:
    return SchemaMismatch(reason, found=found, supported=SCHEMA_VERSION, minimum=minimum, path=path)
