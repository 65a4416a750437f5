"""The checkpoint operation's state machine: when one may begin, how it ends, recovery.

A session has at most one open checkpoint operation, owned by one command; it ends once,
with one daemon-owned ``command_ended``. :mod:`relaystore.storage.checkpoints` reads the
operation row and the stored record, and writes what these functions decide.
"""

from __future__ import annotations

import msgspec

from .api_events import ApiCommandEnded
from .errors import InvalidInput, LifecycleConflict
from .outcomes import CommandOwner, CommandResultKind, OutcomeReason
from .sessions.records import SessionRecord, SessionState

__all__ = [
    "CHECKPOINT_COMMAND_KIND",
    "RECOVERED_CHECKPOINT_ERROR",
    "RECOVERED_CHECKPOINT_MESSAGE",
    "check_begin",
    "check_recorded_checkpoint",
    "checkpoint_ended",
    "failed_result",
    "recovered",
    "require_command_id",
]

CHECKPOINT_COMMAND_KIND = "checkpoint"
RECOVERED_CHECKPOINT_MESSAGE = "Checkpoint operation interrupted by controller restart"
"""The ``command_ended`` message of an operation failed by recovery."""
RECOVERED_CHECKPOINT_ERROR = (
    "checkpointing was interrupted by a controller restart; the target was left running"
)
"""The ``last_checkpoint_error`` recovery leaves on a session it returns to running."""


def require_command_id(command_id: str) -> None:
    """A checkpoint command id is never blank."""
    if not command_id.strip():
        raise InvalidInput("checkpoint command id is blank; pass the command's id")


def check_begin(
    session_id: str,
    stored_state: SessionState,
    open_operation: str | None,
    command_owns: str | None,
    command_id: str,
) -> None:
    """Raise :class:`LifecycleConflict` unless a checkpoint may begin: the session is in
    no lifecycle operation, has no open operation (``open_operation``: its command id),
    and ``command_id`` owns no other session's (``command_owns``: that session)."""
    if stored_state.is_lifecycle_operation:
        raise LifecycleConflict(
            f"session {session_id} is already in a lifecycle operation ({stored_state.value}); "
            "wait for it to finish before starting a checkpoint",
            session_id=session_id,
        )
    if open_operation is not None:
        raise LifecycleConflict(
            f"session {session_id} already has checkpoint operation {open_operation}; "
            "finish or recover it first",
            session_id=session_id,
        )
    if command_owns is not None:
        raise LifecycleConflict(
            f"command id {command_id} already owns the checkpoint operation of session "
            f"{command_owns}; use a new command id",
            session_id=session_id,
        )


def check_recorded_checkpoint(
    session_id: str,
    through_ordinal: int,
    applied_ordinal: int,
    stored_frontier: int | None,
    open_operation: str | None,
) -> None:
    """Whether an operator may record a checkpoint covering ``through_ordinal`` (see
    ``relaystore checkpoint``): the store applied that ordinal (``applied_ordinal``, the
    session's kept frontier), a checkpoint only moves forward (retention and pruning may
    have acted on the frontier ``stored_frontier`` already, so a lower one would hide
    what they did), and no checkpoint operation of the supervisor's is open (its
    command id ``open_operation``: that operation records its own checkpoint).

    Raises :class:`InvalidInput` or :class:`LifecycleConflict`."""
    if through_ordinal < 1:
        raise InvalidInput(
            f"a checkpoint covers ordinal 1 or more, not {through_ordinal}", session_id=session_id
        )
    if through_ordinal > applied_ordinal:
        raise InvalidInput(
            f"cannot record a checkpoint through ordinal {through_ordinal}: the store "
            f"applied the session only through ordinal {applied_ordinal}",
            session_id=session_id,
        )
    if stored_frontier is not None and through_ordinal < stored_frontier:
        raise InvalidInput(
            f"cannot record a checkpoint through ordinal {through_ordinal}: the session's "
            f"checkpoint covers ordinal {stored_frontier} already, and a checkpoint only "
            "moves forward",
            session_id=session_id,
        )
    if open_operation is not None:
        raise LifecycleConflict(
            f"session {session_id} has checkpoint operation {open_operation} open; it "
            "records its own checkpoint when it finishes",
            session_id=session_id,
        )


def failed_result(deferred: bool) -> tuple[CommandResultKind, OutcomeReason]:
    """How a checkpoint that did not succeed ends: deferred is ``rejected`` /
    ``checkpoint_deferred``, failed is ``failed`` / ``checkpoint_failed``."""
    if deferred:
        return CommandResultKind.REJECTED, OutcomeReason.CHECKPOINT_DEFERRED
    return CommandResultKind.FAILED, OutcomeReason.CHECKPOINT_FAILED


def checkpoint_ended(
    command_id: str,
    related_command_ids: list[str],
    outcome: CommandResultKind,
    reason: OutcomeReason | None = None,
    message: str | None = None,
) -> ApiCommandEnded:
    """The one ``command_ended`` an operation ends with (owner ``daemon``, kind
    ``checkpoint``, carrying the correlated barrier ids)."""
    return ApiCommandEnded.of(
        owner=CommandOwner.DAEMON,
        command_id=command_id,
        command_kind=CHECKPOINT_COMMAND_KIND,
        outcome=outcome,
        reason=reason,
        message=message,
        related_command_ids=related_command_ids,
    )


def recovered(stored: SessionRecord, updated_at: str) -> SessionRecord:
    """A session left ``checkpointing`` by a restart, returned to ``running`` with the
    recovery's time and :data:`RECOVERED_CHECKPOINT_ERROR` (``last_error`` untouched, so
    no fault)."""
    return msgspec.structs.replace(
        stored,
        state=SessionState.RUNNING,
        updated_at=updated_at,
        last_checkpoint_error=RECOVERED_CHECKPOINT_ERROR,
    )
