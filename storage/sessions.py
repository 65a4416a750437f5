"""Session records: saving, lifecycle updates, deletion, loading, and session faults.

How a record is stored: ``session_contexts`` holds the session's bundle and workspace
(and outlives the session); ``sessions`` holds a few queryable columns plus the whole
record as JSON (``record_json``, without the checkpoint); ``session_checkpoints`` holds
the checkpoint. The columns and the JSON are written together from one merged record,
so they always agree, and :func:`load_session` returns exactly the record saved (with
``viewed_through_event_ordinal`` never lower than before).

Guarantees:

* Every operation validates its record first (:class:`~relaystore.domain.errors.InvalidInput`,
  nothing written) and is one transaction (a savepoint inside the caller's).
* A session keeps its bundle and workspace for ever, even across deletion.
* ``viewed_through_event_ordinal`` never decreases.
* A ``session_fault`` (``lifecycle_failed``) is appended in the same transaction
  exactly when ``last_error`` becomes a new non-null value; a re-save of the same error
  or a cleared error appends nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import apsw
import msgspec

from ..domain.errors import InvalidInput, UnknownSession
from ..domain.lifecycle import (
    keep_viewed,
    lifecycle_fault,
    merge_lifecycle,
)
from ..domain.sessions.records import CheckpointMetadata, SessionRecord, State
from ..domain.wire import decode_json, encode
from .events import insert_api_event
from .transaction import transaction

__all__ = [
    "current_time_ms",
    "delete_session",
    "load_checkpoint_frontier",
    "load_session",
    "load_state",
    "merge_lifecycle_fields",
    "replace_checkpoint",
    "save_lifecycle_session",
    "save_session",
    "update_lifecycle_fields",
]

_UPSERT = """
INSERT INTO sessions(session_id, title, harness_kind, state, updated_at,
    viewed_through_event_ordinal, last_error, last_checkpoint_error, native_session_id,
    record_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(session_id) DO UPDATE SET
    title = excluded.title,
    harness_kind = excluded.harness_kind,
    state = excluded.state,
    updated_at = excluded.updated_at,
    viewed_through_event_ordinal = excluded.viewed_through_event_ordinal,
    last_error = excluded.last_error,
    last_checkpoint_error = excluded.last_checkpoint_error,
    native_session_id = excluded.native_session_id,
    record_json = excluded.record_json
"""

_SELECT = """
SELECT s.session_id, s.record_json, c.archive_path, c.sha256, c.created_at, c.event_frontier
FROM sessions s LEFT JOIN session_checkpoints c ON c.session_id = s.session_id
"""

# A sessions row exists only under its context (foreign key), so one lookup of the
# context also tells what the session row last stored; viewed_through_event_ordinal is
# NOT NULL, so NULL there means there is no session row. (Scalar subqueries: SQLite
# runs this shape several times faster than the equivalent LEFT JOIN.)
_STORED_CONTEXT = """
SELECT bundle_id, workspace_id,
    (SELECT last_error FROM sessions WHERE session_id = ?1),
    (SELECT viewed_through_event_ordinal FROM sessions WHERE session_id = ?1)
FROM session_contexts WHERE session_id = ?1
"""


def current_time_ms(now_ms: int | None = None) -> int:
    """``now_ms`` if given, else the wall clock in Unix milliseconds."""
    if now_ms is not None:
        return now_ms
    return time.time_ns() // 1_000_000


def save_session(
    connection: apsw.Connection, record: SessionRecord, *, now_ms: int | None = None
) -> None:
    """Create or fully replace a session record (one transaction).

    Creates the session's context (and registers its workspace) on first save, and its
    empty materialized projection. Raises :class:`~relaystore.domain.errors.InvalidInput` for an
    invalid record, or one whose bundle or workspace differs from the stored context.
    """
    record.validate()
    with transaction(connection, f"save session {record.id}"):
        row = connection.execute(_STORED_CONTEXT, (record.id,)).fetchone()
        if row is None:
            _create_context(connection, record)
            previous_error, viewed = None, None
        else:
            bundle, workspace, previous_error, viewed = row
            if bundle != record.bundle_id:
                raise InvalidInput(
                    f"was already associated with bundle {bundle}, not {record.bundle_id}; "
                    "a session id keeps its bundle, so save this record under a new id",
                    session_id=record.id,
                )
            if workspace != record.workspace_id:
                raise InvalidInput(
                    f"belongs to workspace {workspace}, not {record.workspace_id}; "
                    "a session id keeps its workspace, so save this record under a new id",
                    session_id=record.id,
                )
        _write(connection, record, previous_error, viewed or 0, now_ms)
        if viewed is None:  # new session row; its projection row is deleted with it
            connection.execute(
                "INSERT INTO materialized_sessions(session_id) VALUES (?)"
                " ON CONFLICT(session_id) DO NOTHING",
                (record.id,),
            )


def save_lifecycle_session(
    connection: apsw.Connection, record: SessionRecord, *, now_ms: int | None = None
) -> None:
    """Update only the lifecycle-owned fields (:data:`LIFECYCLE_FIELDS`) of a session.

    Raises :class:`~relaystore.domain.errors.UnknownSession` when the session does not exist (a
    deleted session is never revived) and InvalidInput for an invalid record.
    """
    record.validate()
    update_lifecycle_fields(connection, record, now_ms=now_ms)


def update_lifecycle_fields(
    connection: apsw.Connection,
    record: SessionRecord,
    *,
    now_ms: int | None = None,
    also: Iterable[str] = (),
) -> None:
    """Merge :data:`LIFECYCLE_FIELDS` (and the fields named in ``also``) into the stored record.

    Does not validate ``record`` (callers do). Emits the ``session_fault`` transition.
    Raises :class:`~relaystore.domain.errors.UnknownSession` when the session does not exist.
    """
    with transaction(connection, f"update the lifecycle of session {record.id}"):
        stored = _load(connection, record.id)
        if stored is None:
            raise UnknownSession(record.id)
        merge_lifecycle_fields(connection, stored, record, now_ms=now_ms, also=also)


def merge_lifecycle_fields(
    connection: apsw.Connection,
    stored: SessionRecord,
    record: SessionRecord,
    *,
    now_ms: int | None = None,
    also: Iterable[str] = (),
) -> None:
    """:func:`update_lifecycle_fields` for a caller that already loaded ``stored``.

    ``stored`` must be the session's record as loaded inside the caller's open
    transaction; ``record`` is not validated.
    """
    merged = merge_lifecycle(stored, record, also)
    _write(
        connection,
        merged,
        stored.last_error,
        stored.viewed_through_event_ordinal,
        now_ms,
        write_checkpoint=merged.checkpoint != stored.checkpoint,
    )


def delete_session(connection: apsw.Connection, session_id: str) -> None:
    """Delete a session with its events, activity, checkpoint operation and projection.

    Its context (bundle, workspace) and the event sequence's high-water mark stay, so
    cursors keep working. Deleting an unknown session does nothing.
    """
    with transaction(connection, f"delete session {session_id}"):
        connection.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))


def load_session(connection: apsw.Connection, session_id: str) -> SessionRecord | None:
    """The stored record of ``session_id``, or ``None``."""
    with transaction(connection, f"load session {session_id}"):
        return _load(connection, session_id)


def load_state(connection: apsw.Connection) -> State:
    """Every stored session record, keyed and ordered by id (one snapshot)."""
    with transaction(connection, "load the session state"):
        rows = connection.execute(_SELECT + " ORDER BY s.session_id").fetchall()
    return State(sessions={str(row[0]): _record(row) for row in rows})


def _load(connection: apsw.Connection, session_id: str) -> SessionRecord | None:
    row = connection.execute(_SELECT + " WHERE s.session_id = ?", (session_id,)).fetchone()
    return None if row is None else _record(row)


def _create_context(connection: apsw.Connection, record: SessionRecord) -> None:
    connection.execute(
        "INSERT INTO workspaces(workspace_id, created_at)"
        " VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
        " ON CONFLICT(workspace_id) DO NOTHING",
        (record.workspace_id,),
    )
    connection.execute(
        "INSERT INTO session_contexts(session_id, bundle_id, created_at, workspace_id)"
        " VALUES (?, ?, ?, ?)",
        (record.id, record.bundle_id, record.created_at, record.workspace_id),
    )


def _write(
    connection: apsw.Connection,
    record: SessionRecord,
    previous_error: object,
    previous_viewed: int,
    now_ms: int | None,
    *,
    write_checkpoint: bool = True,
) -> None:
    """Store ``record`` over the stored row and append its ``session_fault`` transition.

    ``viewed_through_event_ordinal`` is kept at ``previous_viewed`` when the record's is
    lower. ``write_checkpoint=False`` leaves ``session_checkpoints`` as it is (the
    caller knows the checkpoint did not change).
    """
    record = keep_viewed(record, previous_viewed)
    body = encode(msgspec.structs.replace(record, checkpoint=None)).decode()
    connection.execute(
        _UPSERT,
        (
            record.id,
            record.title,
            record.harness_kind.value,
            record.state.value,
            record.updated_at,
            record.viewed_through_event_ordinal,
            record.last_error,
            record.last_checkpoint_error,
            record.native_session_id,
            body,
        ),
    )
    if write_checkpoint:
        replace_checkpoint(connection, record.id, record.checkpoint)
    fault = lifecycle_fault(previous_error, record)
    if fault is not None:
        insert_api_event(connection, record.id, current_time_ms(now_ms), fault)


def load_checkpoint_frontier(connection: apsw.Connection, session_id: str) -> int | None:
    """The event frontier of the session's verified checkpoint (None: it has none): what
    retention and pruning may act on, at or below it."""
    row = connection.execute(
        "SELECT event_frontier FROM session_checkpoints WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def replace_checkpoint(
    connection: apsw.Connection, session_id: str, checkpoint: CheckpointMetadata | None
) -> None:
    """Replace the session's checkpoint row by ``checkpoint`` (None: delete it), inside
    the caller's transaction (the origin's ``replace_checkpoint``)."""
    if checkpoint is None:
        connection.execute("DELETE FROM session_checkpoints WHERE session_id = ?", (session_id,))
        return
    connection.execute(
        "INSERT OR REPLACE INTO session_checkpoints(session_id, archive_path, sha256, created_at,"
        " event_frontier) VALUES (?, ?, ?, ?, ?)",
        (
            session_id,
            checkpoint.archive_path,
            checkpoint.sha256,
            checkpoint.created_at,
            checkpoint.event_frontier,
        ),
    )


def _record(row: apsw.SQLiteValues) -> SessionRecord:
    session_id, body, archive_path, sha256, created_at, event_frontier = row
    try:
        record = decode_json(str(body), SessionRecord, what="stored session record")
    except InvalidInput as exc:
        raise InvalidInput(
            f"{exc.detail}; the store may have been written by another tool",
            session_id=str(session_id),
        ) from exc
    if archive_path is None:
        return record
    checkpoint = CheckpointMetadata(
        archive_path=str(archive_path),
        sha256=str(sha256),
        created_at=str(created_at),
        event_frontier=int(event_frontier),  # type: ignore[arg-type]
    )
    return msgspec.structs.replace(record, checkpoint=checkpoint)
