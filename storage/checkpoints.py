"""Checkpoint operations: one in flight per session, owned by one command, ended once.

Guarantees:

* A session has at most one open checkpoint operation and a command id owns at most
  one (``checkpoint_operations``: primary key on the session, unique command id).
* Finishing an operation appends exactly one ``command_ended`` event (owner
  ``daemon``, kind ``"checkpoint"``, carrying the correlated barrier command ids) and
  deletes the row in the same transaction, so its identity is consumed once; a second
  finish, or a finish by a command that does not own the session, writes nothing.
* Every operation is one transaction (a savepoint inside the caller's); a refusal
  writes nothing.
"""

from __future__ import annotations

import apsw

from ..domain.checkpoints import (
    CHECKPOINT_COMMAND_KIND,
    RECOVERED_CHECKPOINT_ERROR,
    RECOVERED_CHECKPOINT_MESSAGE,
    check_begin,
    check_recorded_checkpoint,
    checkpoint_ended,
    failed_result,
    recovered,
    require_command_id,
)
from ..domain.errors import InvalidInput, LifecycleConflict, UnknownSession
from ..domain.outcomes import CommandResultKind, OutcomeReason
from ..domain.sessions.records import CheckpointMetadata, SessionRecord
from ..domain.wire import decode_json
from .events import insert_api_event
from .materialized import load_frontier
from .sessions import (
    current_time_ms,
    load_session,
    merge_lifecycle_fields,
    replace_checkpoint,
    update_lifecycle_fields,
)
from .transaction import transaction

__all__ = [
    "CHECKPOINT_COMMAND_KIND",
    "RECOVERED_CHECKPOINT_ERROR",
    "RECOVERED_CHECKPOINT_MESSAGE",
    "begin_checkpoint",
    "correlate_checkpoint_barrier",
    "finish_failed_checkpoint",
    "record_checkpoint",
    "recover_interrupted_checkpoints",
    "save_requested_checkpoint",
]


def begin_checkpoint(
    connection: apsw.Connection,
    session: SessionRecord,
    command_id: str,
    *,
    now_ms: int | None = None,
) -> None:
    """Open the session's checkpoint operation, owned by ``command_id``, and save ``session``'s
    lifecycle fields (callers pass ``state=checkpointing``). Appends no event.

    Raises :class:`~relaystore.domain.errors.LifecycleConflict` when the stored session is already
    checkpointing, closing or destroying, already has an operation, or ``command_id``
    already owns another session's operation; :class:`~relaystore.domain.errors.UnknownSession`
    when the session does not exist.
    """
    session.validate()
    require_command_id(command_id)
    with transaction(connection, f"begin checkpoint {command_id} of session {session.id}"):
        stored = load_session(connection, session.id)
        if stored is None:
            raise UnknownSession(session.id)
        current = connection.execute(
            "SELECT command_id FROM checkpoint_operations WHERE session_id = ?", (session.id,)
        ).fetchone()
        other = connection.execute(
            "SELECT session_id FROM checkpoint_operations WHERE command_id = ?", (command_id,)
        ).fetchone()
        check_begin(
            session.id,
            stored.state,
            None if current is None else str(current[0]),
            None if other is None else str(other[0]),
            command_id,
        )
        connection.execute(
            "INSERT INTO checkpoint_operations(session_id, command_id) VALUES (?, ?)",
            (session.id, command_id),
        )
        merge_lifecycle_fields(connection, stored, session, now_ms=now_ms)


def save_requested_checkpoint(
    connection: apsw.Connection,
    session: SessionRecord,
    command_id: str,
    *,
    now_ms: int | None = None,
) -> None:
    """Finish the owned operation successfully: save the lifecycle fields, the native
    session id and the new checkpoint, and append ``command_ended`` ``succeeded``.

    Raises :class:`~relaystore.domain.errors.LifecycleConflict` when ``command_id`` does not own
    the session's operation (nothing written) and :class:`~relaystore.domain.errors.InvalidInput`
    when ``session`` has no checkpoint metadata.
    """
    session.validate()
    with transaction(connection, f"save checkpoint {command_id} of session {session.id}"):
        related = _owned_operation(connection, session.id, command_id)
        if related is None:
            raise LifecycleConflict(
                f"checkpoint operation {command_id} no longer owns session {session.id}; "
                "its result was not saved",
                session_id=session.id,
            )
        if session.checkpoint is None:
            raise InvalidInput(
                "successful checkpoint has no archive metadata; set the record's checkpoint",
                session_id=session.id,
            )
        update_lifecycle_fields(
            connection, session, now_ms=now_ms, also=("native_session_id", "checkpoint")
        )
        _finish(
            connection, session.id, command_id, related, CommandResultKind.SUCCEEDED, now_ms=now_ms
        )


def finish_failed_checkpoint(
    connection: apsw.Connection,
    session: SessionRecord,
    command_id: str,
    deferred: bool,
    message: str,
    *,
    now_ms: int | None = None,
) -> None:
    """Finish the owned operation as failed (``failed``/``checkpoint_failed``) or deferred
    (``rejected``/``checkpoint_deferred``), saving the lifecycle fields; the stored
    checkpoint is kept.

    When ``command_id`` does not own the session's operation (already finished, or a
    stale owner) this is a silent no-op: it writes nothing.
    """
    session.validate()
    with transaction(connection, f"finish checkpoint {command_id} of session {session.id}"):
        related = _owned_operation(connection, session.id, command_id)
        if related is None:
            return
        update_lifecycle_fields(connection, session, now_ms=now_ms)
        outcome, reason = failed_result(deferred)
        _finish(connection, session.id, command_id, related, outcome, reason, message, now_ms)


def correlate_checkpoint_barrier(
    connection: apsw.Connection, session_id: str, operation_id: str, command_id: str
) -> None:
    """Record barrier ``command_id`` as related to checkpoint ``operation_id`` of the session.

    Its ``command_ended`` will list it in ``related_command_ids``. A silent no-op when
    ``operation_id`` does not own the session's operation.
    """
    with transaction(connection, f"correlate barrier {command_id} with {operation_id}"):
        connection.execute(
            "UPDATE checkpoint_operations"
            " SET related_command_ids = json_insert(related_command_ids, '$[#]', ?)"
            " WHERE session_id = ? AND command_id = ?",
            (command_id, session_id, operation_id),
        )


def recover_interrupted_checkpoints(
    connection: apsw.Connection, updated_at: str, *, now_ms: int | None = None
) -> int:
    """Fail every open checkpoint after a restart; return how many sessions were recovered.

    Every open operation ends with ``command_ended`` outcome ``failed``, reason
    ``controller_restarted`` and message :data:`RECOVERED_CHECKPOINT_MESSAGE` (its
    related ids carried over). Then every session still ``checkpointing`` returns to
    ``running`` with ``updated_at`` and ``last_checkpoint_error`` =
    :data:`RECOVERED_CHECKPOINT_ERROR`; the count of those sessions is returned.
    ``last_error`` is untouched, so no ``session_fault`` is appended. Running it again
    finds nothing and returns 0. Raises InvalidInput for a blank ``updated_at``.
    """
    if not updated_at.strip():
        raise InvalidInput("checkpoint recovery timestamp is empty; pass an RFC 3339 time")
    with transaction(connection, "recover interrupted checkpoints"):
        operations = connection.execute(
            "SELECT session_id, command_id, related_command_ids FROM checkpoint_operations"
            " ORDER BY session_id"
        ).fetchall()
        for session_id, command_id, related in operations:
            _finish(
                connection,
                str(session_id),
                str(command_id),
                str(related),
                CommandResultKind.FAILED,
                OutcomeReason.CONTROLLER_RESTARTED,
                RECOVERED_CHECKPOINT_MESSAGE,
                now_ms,
            )
        interrupted = connection.execute(
            "SELECT session_id FROM sessions WHERE state = 'checkpointing' ORDER BY session_id"
        ).fetchall()
        for (session_id,) in interrupted:
            stored = load_session(connection, str(session_id))
            assert stored is not None
            merge_lifecycle_fields(connection, stored, recovered(stored, updated_at), now_ms=now_ms)
    return len(interrupted)


def _owned_operation(connection: apsw.Connection, session_id: str, command_id: str) -> str | None:
    """The related ids (JSON) of the session's operation if ``command_id`` owns it, else None."""
    row = connection.execute(
        "SELECT related_command_ids FROM checkpoint_operations"
        " WHERE session_id = ? AND command_id = ?",
        (session_id, command_id),
    ).fetchone()
    return None if row is None else str(row[0])


def _finish(
    connection: apsw.Connection,
    session_id: str,
    command_id: str,
    related: str,
    outcome: CommandResultKind,
    reason: OutcomeReason | None = None,
    message: str | None = None,
    now_ms: int | None = None,
) -> None:
    """Append the operation's one ``command_ended`` and consume its row."""
    related_ids = decode_json(
        related, list[str], what="related command ids of a checkpoint operation"
    )
    event = checkpoint_ended(command_id, related_ids, outcome, reason, message)
    insert_api_event(connection, session_id, current_time_ms(now_ms), event)
    connection.execute("DELETE FROM checkpoint_operations WHERE session_id = ?", (session_id,))


def record_checkpoint(
    connection: apsw.Connection, session_id: str, checkpoint: CheckpointMetadata
) -> CheckpointMetadata | None:
    """Record ``checkpoint`` as the session's verified checkpoint (``relaystore
    checkpoint``); returns the one it replaces. One transaction, no API event (the
    origin's ``replace_checkpoint`` appends none). Refused by
    :func:`~relaystore.domain.checkpoints.check_recorded_checkpoint`, and with
    :class:`UnknownSession` for a session the store lacks or has no projection of."""
    checkpoint.validate()
    with transaction(connection, f"record a checkpoint of session {session_id}"):
        stored = load_session(connection, session_id)
        frontier = load_frontier(connection, session_id)
        if stored is None or frontier is None:
            raise UnknownSession(session_id)
        operation = connection.execute(
            "SELECT command_id FROM checkpoint_operations WHERE session_id = ?", (session_id,)
        ).fetchone()
        check_recorded_checkpoint(
            session_id,
            checkpoint.event_frontier,
            frontier.ordinal,
            None if stored.checkpoint is None else stored.checkpoint.event_frontier,
            None if operation is None else str(operation[0]),
        )
        replace_checkpoint(connection, session_id, checkpoint)
    return stored.checkpoint
