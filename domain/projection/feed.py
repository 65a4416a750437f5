"""The API events one projected relay event yields, in the origin's order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..api_events import (
    ApiCommandEnded,
    ApiEventData,
    ApiInputRequired,
    ApiInputResolved,
    ApiLegacyNotice,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
)
from ..materialized import MaterializedSession, MaterializedSessionMutation
from ..outcomes import (
    ApiTurnOutcome,
    CommandResult,
    CommandResultKind,
    OutcomeReason,
    TurnResultKind,
    expected_cancellation,
)
from ..relay.commands import RelayCommandKind
from ..relay.events import RelayEvent, RelayLine
from ..relay.observations import (
    AgentInitialized,
    CommandCompleted,
    CommandEndedData,
    CommandInterrupted,
    CommandRejected,
    ElicitationResolved,
    SessionFault,
)
from ..relay.outcomes import RelayCommandOutcome, UserShellOutcome
from ..relay.payloads import UserShellStatus
from ..runtime import RuntimeReceipt

__all__ = [
    "derive_api_events",
]
_SHELL_REASONS = {
    UserShellStatus.SIGNALED: OutcomeReason.SIGNALED,
    UserShellStatus.TIMED_OUT: OutcomeReason.TIMED_OUT,
    UserShellStatus.CANCELLED: OutcomeReason.REQUESTED_CANCELLATION,
    UserShellStatus.INTERRUPTED: OutcomeReason.WORKER_RESTARTED,
    UserShellStatus.FAILED: OutcomeReason.COMMAND_FAILED,
}


def _debug_option(value: object) -> str:
    # The origin words this message with Rust's Debug format; it is not a contract.
    if value is None:
        return "None"
    return f'Some("{value}")' if isinstance(value, str) else f"Some({value})"


def _completed_result(
    command_id: str, kind: RelayCommandKind, outcome: RelayCommandOutcome
) -> CommandResult:
    reason: OutcomeReason | None = None
    message: str | None = None
    if isinstance(outcome, UserShellOutcome):
        shell = outcome.data.result
        if shell.status is UserShellStatus.EXITED:
            reason = None if shell.exit_code == 0 else OutcomeReason.NONZERO_EXIT
        else:
            reason = _SHELL_REASONS[shell.status]
        if reason is not None:
            status = "".join(part.title() for part in shell.status.value.split("_"))
            message = shell.error or (
                f"Shell ended with status {status}, exit code {_debug_option(shell.exit_code)}, "
                f"signal {_debug_option(shell.signal)}"
            )
    if reason is None:
        result_kind = CommandResultKind.SUCCEEDED
    elif expected_cancellation(reason):
        result_kind = CommandResultKind.CANCELLED
    else:
        result_kind = CommandResultKind.FAILED
    return CommandResult.worker(command_id, kind.value, result_kind, reason, message)


def _refused_result(data: CommandEndedData) -> ApiEventData:
    reason = data.reason
    if reason is None or reason is OutcomeReason.LEGACY_UNCLASSIFIED:
        return ApiLegacyNotice.of(
            original_type="error", message=data.message, command_id=data.command_id
        )
    if expected_cancellation(reason):
        outcome = CommandResultKind.CANCELLED
    elif reason is OutcomeReason.ADMISSION_REJECTED:
        outcome = CommandResultKind.REJECTED
    else:
        outcome = CommandResultKind.FAILED
    return ApiCommandEnded(
        data=CommandResult.worker(
            data.command_id, data.command.value, outcome, reason, data.message
        )
    )


def _runtime_resolved(
    event: RelayEvent | RelayLine, observation: Any, events: list[ApiEventData]
) -> None:
    identity = observation.data.runtime
    if identity is not None:
        receipt = RuntimeReceipt.observed(
            identity, ordinal=event.ordinal, at_ms=event.recorded_at_ms
        )
        events.append(ApiRuntimeResolved.of(receipt=receipt))


def _refused(event: RelayEvent | RelayLine, observation: Any, events: list[ApiEventData]) -> None:
    if observation.data.command is not RelayCommandKind.PROMPT:
        events.append(_refused_result(observation.data))


def _completed(event: RelayEvent | RelayLine, observation: Any, events: list[ApiEventData]) -> None:
    data = observation.data
    if data.command is not None and data.command is not RelayCommandKind.PROMPT:
        if data.barrier_command_id is not None:
            barrier = CommandResult.worker(
                data.barrier_command_id,
                RelayCommandKind.BEGIN_CHECKPOINT.value,
                CommandResultKind.SUCCEEDED,
                None,
                None,
            )
            events.append(ApiCommandEnded(data=barrier))
        events.append(
            ApiCommandEnded(data=_completed_result(data.command_id, data.command, data.outcome))
        )


def _session_fault(
    event: RelayEvent | RelayLine, observation: Any, events: list[ApiEventData]
) -> None:
    events.append(
        ApiSessionFault.of(
            reason=observation.data.reason,
            message=observation.data.message,
            command_id=event.command_id,
        )
    )


_BY_OBSERVATION: dict[type, Callable[[RelayEvent | RelayLine, Any, list[ApiEventData]], None]] = {
    AgentInitialized: _runtime_resolved,
    CommandRejected: _refused,
    CommandInterrupted: _refused,
    CommandCompleted: _completed,
    SessionFault: _session_fault,
}
"""Step 2 of :func:`derive_api_events`: what an observation of each type yields, looked
up by its exact type (the observation types are final), one lookup an event."""


def derive_api_events(
    current: MaterializedSession,
    event: RelayEvent | RelayLine,
    mutation: MaterializedSessionMutation,
) -> list[ApiEventData]:
    """The API events one projected relay event yields, in the origin's order.

    1. ``turn_started`` when the mutation starts a turn other than the current one;
    2. by observation: ``runtime_resolved``; ``command_ended`` (or ``legacy_notice``
       for an unclassified refusal) for non-prompt commands; ``session_fault``;
    3. ``input_required`` (no request) for a turn awaiting input, then ``turn_ended``;
    4. ``input_required`` for each new question and ``input_resolved`` for each one gone,
       with the turn that was active before the event.
    Prompt commands never yield ``command_ended``: their end is ``turn_ended``.
    """
    events: list[ApiEventData] = []
    turn = mutation.active_turn
    if isinstance(turn, MaterializedTurn) and current.active_turn != turn:
        events.append(ApiTurnStarted.of(turn=turn))
    observation = event.observation if isinstance(event, RelayEvent) else None
    by_kind = _BY_OBSERVATION.get(type(observation))
    if by_kind is not None:  # most observations (streamed updates) yield nothing here
        by_kind(event, observation, events)
    ended = mutation.last_turn_outcome
    if ended is not None:
        outcome = ApiTurnOutcome.from_materialized(ended)
        if outcome.outcome.kind is TurnResultKind.INPUT_REQUIRED:
            events.append(ApiInputRequired.of(request=None, turn_id=ended.accepted_ordinal))
        events.append(ApiTurnEnded.of(turn=outcome))
    pending = mutation.pending_elicitations
    if pending is not None:
        turn_id = None if current.active_turn is None else current.active_turn.accepted_ordinal
        before = current.pending_elicitations
        for request in pending:
            if request not in before:
                events.append(ApiInputRequired.of(request=request, turn_id=turn_id))
        remaining = {request.id for request in pending}
        action = (
            observation.data.action if isinstance(observation, ElicitationResolved) else "cleared"
        )
        for request in before:
            if request.id not in remaining:
                events.append(
                    ApiInputResolved.of(elicitation_id=request.id, turn_id=turn_id, action=action)
                )
    return events
