"""The store's change log: one durable, ordered row per change to its source of truth.

Why. The API feed has a durable order of its own (``api_events.seq``); the rest of what
a session is rebuilt from did not: its record (``sessions``, its checkpoint, its open
checkpoint operation, its last published activity), its relay log pages and its seed or
history start change in place. To publish them exactly once and in commit order, the
store numbers each change as it commits: ``store_changes`` (schema revision
:data:`~relaystore.storage.schema.CHANGES_REVISION`), filled by triggers, so every
code path that writes those tables (the writer, a reprojection, a retention pass,
another build's writer of this revision) numbers its changes without knowing about it.

A session's activity is the exception: its record carries the last activity it
published, but a change of it alone is not numbered (since revision 16): the feed's
``activity_changed`` event carries the same value, so numbering it too cost every
such event a WAL page for nothing a replica lacked.

A row says *what* changed, not its value: ``('record', session)``, ``('log', session,
first_ordinal)`` or ``('start', session)``. The publisher reads each change's current
value in the same read snapshot as the row (:func:`load_changes`); a later change of the
same thing has a later number and is published with the value then, so applying the
changes in number order ends at the committed state. Log pages are written once and
never updated, so a ``log`` change's value is the page as it was committed (unless the
page was pruned or its session deleted before it was published: then it carries no
lines, and the session's later ``record`` change says whether it still exists).

Numbers are never reused (rows are never deleted; since revision 17 the rowid numbers
them, :mod:`.sequences`), so a publisher resumes after the last
number the stream holds. A store restored from a stream
(:mod:`relaystore.storage.replica`) keeps the numbers it restored, so it publishes on
as the same store. The migration to this revision numbers what the store already held
(every record, start and log page, session by session), so its first publish carries
its whole source of truth.

``replica_sources`` and ``replica_sessions`` belong to stores filled *from* a stream
(``relaystore restore``, ``relaystore mirror``): where each source store's messages
were applied up to (the stream sequence of its last commit marker), and which local
session holds which source session.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.replication import (
    ActivityRow,
    Change,
    ChangeRef,
    CheckpointRow,
    ContextRow,
    LogPageRow,
    OperationRow,
    RecordState,
    ReplicationRound,
    SeedRow,
    SessionRow,
    StartState,
    WorkspaceRow,
)
from .answers import load_answer_rows
from .paging import load_raw_api_events
from .subagents import load_subagent_row
from .transaction import transaction

__all__ = [
    "ACTIVITY_UNNUMBERED_DDL",
    "CHANGES_DDL",
    "REPLICA_DDL",
    "backfill_changes",
    "latest_change",
    "load_changes",
    "load_log_page",
    "load_replication_round",
    "load_record_state",
    "load_start_state",
]

_CHANGED = "INSERT INTO store_changes(kind, session_id{extra}) VALUES ('{kind}', {who}{value})"


def _trigger(name: str, when: str, table: str, kind: str, *, row: str = "NEW") -> str:
    extra, value = (", first_ordinal", f", {row}.first_ordinal") if kind == "log" else ("", "")
    insert = _CHANGED.format(extra=extra, kind=kind, who=f"{row}.session_id", value=value)
    return f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {when} ON {table} BEGIN {insert}; END;\n"


CHANGES_DDL = """
CREATE TABLE IF NOT EXISTS store_changes (
    change_seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK(kind IN ('record', 'log', 'start')),
    session_id TEXT NOT NULL,
    first_ordinal INTEGER CHECK((kind = 'log') = (first_ordinal IS NOT NULL))
) STRICT;
""" + "".join(
    _trigger(f"store_changes_{table}_{when.split()[0].lower()}", when, table, kind, row=row)
    for table, kind, whens in (
        ("sessions", "record", ("INSERT", "UPDATE", "DELETE")),
        ("session_checkpoints", "record", ("INSERT", "UPDATE", "DELETE")),
        ("checkpoint_operations", "record", ("INSERT", "UPDATE", "DELETE")),
        ("relay_log_pages", "log", ("INSERT",)),
        ("materialized_seeds", "start", ("INSERT", "UPDATE", "DELETE")),
        ("materialized_history_start", "start", ("INSERT", "UPDATE", "DELETE")),
    )
    for when in whens
    for row in ("OLD" if when == "DELETE" else "NEW",)
)
"""Revision 11's change log and the triggers that fill it (see the module doc; revision
17 rebuilds the table without ``AUTOINCREMENT``, :mod:`.sequences`); the
two on ``api_session_activity`` it had are gone since revision 16
(:data:`ACTIVITY_UNNUMBERED_DDL`)."""

ACTIVITY_UNNUMBERED_DDL = """
DROP TRIGGER IF EXISTS store_changes_api_session_activity_insert;
DROP TRIGGER IF EXISTS store_changes_api_session_activity_update;
"""
"""Revision 16: an activity change is carried by its ``activity_changed`` event alone."""

REPLICA_DDL = """
CREATE TABLE IF NOT EXISTS replica_sources (
    store_id TEXT NOT NULL CHECK(length(store_id) = 32 AND store_id NOT GLOB '*[^0-9a-f]*'),
    stream TEXT NOT NULL,
    scope TEXT NOT NULL,
    stream_seq INTEGER NOT NULL CHECK(stream_seq >= 0),
    PRIMARY KEY(store_id, stream, scope)
) STRICT;
CREATE TABLE IF NOT EXISTS replica_sessions (
    session_id TEXT PRIMARY KEY,
    store_id TEXT NOT NULL,
    source_session_id TEXT NOT NULL,
    UNIQUE(store_id, source_session_id)
) STRICT;
"""
"""Revision 10's bookkeeping of a store filled from a stream (see the module doc)."""


def backfill_changes(connection: apsw.Connection) -> None:
    """Number what the store holds already, session by session (inside the migration's
    transaction): its record, its start, then its log pages in ordinal order."""
    connection.execute(
        "INSERT INTO store_changes(kind, session_id, first_ordinal) "
        "SELECT kind, session_id, first_ordinal FROM ("
        " SELECT 'record' AS kind, session_id, NULL AS first_ordinal, 0 AS rank, 0 AS at"
        " FROM sessions"
        " UNION ALL SELECT 'start', session_id, NULL, 1, 0 FROM materialized_history_start"
        " UNION ALL SELECT 'log', session_id, first_ordinal, 2, first_ordinal"
        " FROM relay_log_pages"
        ") ORDER BY session_id, rank, at"
    )


def latest_change(connection: apsw.Connection) -> int:
    """The newest change number the store ever gave (0: none)."""
    # Never deleted, so the newest row is the newest number (:mod:`.sequences`).
    return int(
        connection.execute("SELECT coalesce(max(change_seq), 0) FROM store_changes").get or 0
    )


def load_changes(connection: apsw.Connection, after: int, limit: int) -> list[ChangeRef]:
    """The changes numbered after ``after``, oldest first, at most ``limit``, each with
    its workspace (from the session's context, which outlives the session)."""
    return [
        ChangeRef(
            change_seq=int(seq),
            kind=str(kind),
            session_id=str(session),
            workspace_id=str(workspace) if workspace is not None else "default",
            first_ordinal=None if first is None else int(first),
        )
        for seq, kind, session, first, workspace in connection.execute(
            "SELECT c.change_seq, c.kind, c.session_id, c.first_ordinal, x.workspace_id "
            "FROM store_changes c LEFT JOIN session_contexts x ON x.session_id = c.session_id "
            "WHERE c.change_seq > ? ORDER BY c.change_seq LIMIT ?",
            (after, limit),
        )
    ]


def _row(connection: apsw.Connection, kind: type[msgspec.Struct], sql: str, key: object) -> object:
    found = connection.execute(sql, (key,)).fetchone()
    return None if found is None else kind(*found)


def load_record_state(connection: apsw.Connection, session_id: str) -> RecordState:
    """The session's record as stored now: its row (None: deleted), context, workspace,
    checkpoint, open checkpoint operation, last published activity, sub-agent
    relation (:mod:`.subagents`' triggers number its changes as the child's) and
    recorded answers (:mod:`.answers`' triggers number theirs as the session's)."""
    context = _row(
        connection,
        ContextRow,
        "SELECT session_id, bundle_id, created_at, workspace_id FROM session_contexts "
        "WHERE session_id = ?",
        session_id,
    )
    workspace = None
    if isinstance(context, ContextRow):
        workspace = _row(
            connection,
            WorkspaceRow,
            "SELECT workspace_id, created_at FROM workspaces WHERE workspace_id = ?",
            context.workspace_id,
        )
    return RecordState(
        session_id=session_id,
        workspace=workspace,  # type: ignore[arg-type]
        context=context,  # type: ignore[arg-type]
        session=_row(  # type: ignore[arg-type]
            connection,
            SessionRow,
            "SELECT session_id, title, harness_kind, state, updated_at, "
            "viewed_through_event_ordinal, last_error, last_checkpoint_error, "
            "native_session_id, record_json FROM sessions WHERE session_id = ?",
            session_id,
        ),
        checkpoint=_row(  # type: ignore[arg-type]
            connection,
            CheckpointRow,
            "SELECT archive_path, sha256, created_at, event_frontier FROM session_checkpoints "
            "WHERE session_id = ?",
            session_id,
        ),
        operation=_row(  # type: ignore[arg-type]
            connection,
            OperationRow,
            "SELECT command_id, related_command_ids FROM checkpoint_operations "
            "WHERE session_id = ?",
            session_id,
        ),
        activity=_row(  # type: ignore[arg-type]
            connection,
            ActivityRow,
            "SELECT body FROM api_session_activity WHERE session_id = ?",
            session_id,
        ),
        subagent=load_subagent_row(connection, session_id),
        answers=load_answer_rows(connection, session_id),
    )


def load_start_state(connection: apsw.Connection, session_id: str) -> StartState:
    """Where the session's history starts now: its seed and its history start row."""
    seed = _row(
        connection,
        SeedRow,
        "SELECT start_ordinal, start_digest, queued_prompts_json FROM materialized_seeds "
        "WHERE session_id = ?",
        session_id,
    )
    start = connection.execute(
        "SELECT first_ordinal, source FROM materialized_history_start WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return StartState(
        session_id=session_id,
        seed=seed,  # type: ignore[arg-type]
        first_ordinal=None if start is None else int(start[0]),
        source=None if start is None else str(start[1]),
    )


def load_log_page(connection: apsw.Connection, session_id: str, first: int) -> LogPageRow | None:
    """The log page starting at ``first`` as stored (compressed), None when gone."""
    found = connection.execute(
        "SELECT last_ordinal, raw_bytes, lines FROM relay_log_pages "
        "WHERE session_id = ? AND first_ordinal = ?",
        (session_id, first),
    ).fetchone()
    if found is None:
        return None
    return LogPageRow(
        first_ordinal=first,
        last_ordinal=int(found[0]),
        raw_bytes=int(found[1]),
        lines=bytes(found[2]),
    )


def _stored_value(
    connection: apsw.Connection, ref: ChangeRef
) -> RecordState | StartState | LogPageRow | None:
    if ref.kind == "record":
        return load_record_state(connection, ref.session_id)
    if ref.kind == "start":
        return load_start_state(connection, ref.session_id)
    assert ref.first_ordinal is not None  # the table's CHECK
    return load_log_page(connection, ref.session_id, ref.first_ordinal)


def load_replication_round(
    connection: apsw.Connection, after_seq: int, after_change: int, limit: int
) -> ReplicationRound:
    """In one read snapshot: the changes after ``after_change`` with their values and
    the raw API events after ``after_seq``, at most ``limit`` of each (see
    :class:`~relaystore.domain.replication.ReplicationRound`)."""
    with transaction(connection, "read the changes to publish"):
        newest = latest_change(connection)
        refs = load_changes(connection, after_change, limit)
        changes = [Change(ref=ref, value=_stored_value(connection, ref)) for ref in refs]
        page = load_raw_api_events(connection, None, after_seq, limit)
    changes_done = not refs or refs[-1].change_seq >= newest
    events_done = not page.events or page.events[-1].seq >= page.latest_seq
    return ReplicationRound(
        changes=changes,
        events=page.events,
        next_after_seq=page.next_after_seq,
        latest_change=newest,
        latest_seq=page.latest_seq,
        complete=changes_done and events_done,
    )
