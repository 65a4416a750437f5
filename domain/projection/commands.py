"""The command lifecycle: a command queued, started, completed, rejected or interrupted.

Prompt commands open and end turns and move through the prompt queue; configuration
changes, user shell commands, context clears, closes and checkpoint coordination each
leave their own trace.
"""

from __future__ import annotations

from typing import Any

from ..api_events import MaterializedTurn
from ..materialized import (
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedQueuedPrompt,
    SetConfigEntry,
    SetConfigKind,
    SystemBody,
    UserBody,
)
from ..outcomes import (
    MaterializedTurnOutcome,
    PromptCompletion,
    TurnOutcomeCompleted,
    TurnOutcomeInterrupted,
    TurnOutcomeRejected,
    classify_prompt_completion,
    expected_cancellation,
)
from ..relay.commands import (
    ClearContextCommand,
    CloseCommand,
    ContinueAuthorizedWorkCommand,
    DeliverMailboxEventCommand,
    HandbackReminderCommand,
    MailboxWakeCommand,
    PromptCommand,
    RelayCommand,
    RelayCommandKind,
    ResumeAfterQuotaCommand,
    RunUserShellCommand,
    SetConfigCommand,
)
from ..relay.observations import (
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandQueuedData,
    CommandRejected,
    CommandStarted,
)
from ..relay.outcomes import (
    CancelledOutcome,
    ClosedOutcome,
    ConfiguredOutcome,
    ContextClearedOutcome,
    PromptOutcome,
    QueueChangedOutcome,
    SteeredOutcome,
    UserShellOutcome,
)
from ..wire import JSON
from .context import (
    ProjectionContext,
    changed,
    new_item,
    push_system,
    push_system_with_id,
    set_configuration,
    upsert,
)
from .goal import GOAL_STATE_KEY, Goal, goal_of, goal_running
from .mailbox import mailbox_event_queued
from .markers import (
    CONTEXT_BOUNDARY_PREFIX,
    CONTEXT_BOUNDARY_TEXT,
    CONTINUATION_PROMPT,
    HANDBACK_REMINDER_TEXT,
    HARNESS_TURN_ITEM_PREFIX,
    HARNESS_TURN_OUTCOME_PREFIX,
    TURN_INTERRUPTED_ITEM_PREFIX,
    TURN_INTERRUPTED_TEXT,
    WORK_INTERRUPTED_ITEM_PREFIX,
)
from .streams import close_streams
from .text import (
    config_command_text,
    materialized_content_text,
    provisional_session_title,
    resolved_title,
    user_shell_result_text,
    user_shell_text,
)

__all__ = ["command_completed", "command_ended", "command_queued", "command_started"]

_COORDINATION_KINDS = frozenset(
    {
        RelayCommandKind.BEGIN_CHECKPOINT,
        RelayCommandKind.COMPLETE_CHECKPOINT,
        RelayCommandKind.RELEASE_CHECKPOINT,
        RelayCommandKind.ADVANCE_RECOVERY_FLOOR,
    }
)


_CONFIGURATIONS = frozenset({RelayCommandKind.SET_CONFIG, RelayCommandKind.RESTORE_EXECUTION_MODE})
"""Kinds whose refusal is a configuration result (a client waits for either answer)."""


def _without(
    queue: list[MaterializedQueuedPrompt], command_id: str
) -> list[MaterializedQueuedPrompt]:
    return [entry for entry in queue if entry.command_id != command_id]


def _enqueue(
    ctx: ProjectionContext,
    data: CommandQueuedData,
    content: list[JSON],
    kind: SetConfigKind | None = None,
) -> None:
    """Queue (or re-queue, at the end) the command ``data`` names."""
    entry = MaterializedQueuedPrompt(
        command_id=data.command_id,
        kind=kind,
        content=content,
        queued_at_ms=data.created_at_ms,
        accepted_ordinal=ctx.event.ordinal,
    )
    ctx.mutation.queued_prompts = [*_without(ctx.current.queued_prompts, data.command_id), entry]


def _belongs_to(turn: MaterializedTurn | None, command_id: str) -> MaterializedTurn | None:
    if turn is None or (turn.command_id != command_id and turn.steered_into != command_id):
        return None
    return turn


def _relabel_shell(
    ctx: ProjectionContext, command_id: str, at_ms: int, status: str, suffix: str = ""
) -> None:
    """Move the line ``shell:{command_id}`` from queued or running to ``status``."""
    shell = ctx.get(f"shell:{command_id}")
    if shell is None:
        return
    fields: dict[str, Any] = {}
    if isinstance(shell.body, SystemBody):
        text = shell.body.text
        for old in ("Shell · queued", "Shell · running"):
            text = text.replace(old, f"Shell · {status}", 1)
        fields["body"] = SystemBody(text=text + suffix)
    upsert(ctx, changed(shell, at_ms, **fields))


_PROMPT_BEARING = (
    PromptCommand,
    HandbackReminderCommand,
    MailboxWakeCommand,
    ContinueAuthorizedWorkCommand,
    ResumeAfterQuotaCommand,
)
"""Commands that carry a prompt: each is queued as a prompt and opens a turn."""


def _prompt_content(command: RelayCommand) -> list[JSON]:
    """What a prompt-bearing command's queue entry (and user line) holds.

    A wake carries no visible content: the agent gets the rendered mailbox events, the
    transcript only the external-events lines written when each event was queued.
    """
    if isinstance(command, PromptCommand):
        return list(command.data.prompt)
    if isinstance(command, HandbackReminderCommand):
        return [{"type": "text", "text": HANDBACK_REMINDER_TEXT}]
    if isinstance(command, MailboxWakeCommand):
        return []
    return [{"type": "text", "text": CONTINUATION_PROMPT}]


def command_queued(ctx: ProjectionContext, observation: CommandQueued) -> None:
    data, current, mutation = observation.data, ctx.current, ctx.mutation
    command = data.command
    if isinstance(command, ClearContextCommand):
        mutation.execution = ExecutionRunning(started_at_ms=data.created_at_ms)
        push_system(ctx, "Clearing context…")
    elif isinstance(command, _PROMPT_BEARING):
        if isinstance(command, ContinueAuthorizedWorkCommand):
            push_system(
                ctx, f"Continuing requested work automatically · {command.data.attempt} of 3"
            )
        wake = isinstance(command, MailboxWakeCommand)
        content = _prompt_content(command)
        if current.session_title is None and not wake:
            title = resolved_title(current, ctx.prompts()) or provisional_session_title(
                materialized_content_text(content)
            )
            if title is not None:
                mutation.session_title = title
        _enqueue(ctx, data, content)
    elif isinstance(command, SetConfigCommand):
        key, value = command.data.key, command.data.value
        _enqueue(
            ctx,
            data,
            [{"type": "text", "text": config_command_text(key, value)}],
            SetConfigKind(set_config=SetConfigEntry(key=key, value=value)),
        )
    elif isinstance(command, RunUserShellCommand):
        text = user_shell_text(command.data.command, "queued", "", "", False, False)
        body = SystemBody(text=text)
        upsert(ctx, new_item(ctx, f"shell:{data.command_id}", body, at_ms=data.created_at_ms))
    elif isinstance(command, DeliverMailboxEventCommand):
        mailbox_event_queued(ctx, command.data.event)
    elif isinstance(command, CloseCommand):
        close_streams(ctx)
        mutation.execution = ExecutionClosing()
    # Relay-local records (install_prompt_context, seed_assessment_context, a notice)
    # and restore_execution_mode leave nothing when queued.


def command_started(ctx: ProjectionContext, observation: CommandStarted) -> None:
    data, current, mutation = observation.data, ctx.current, ctx.mutation
    command_id = data.command_id
    queue = current.queued_prompts
    for offset, entry in enumerate(queue):
        if entry.command_id != command_id:
            continue
        mutation.queued_prompts = [*queue[:offset], *queue[offset + 1 :]]
        # A configuration change applies between turns: never a turn of its own.
        if entry.kind is None:
            close_streams(ctx)
            body = UserBody(content=entry.content)
            upsert(ctx, new_item(ctx, f"user:{command_id}", body, at_ms=data.started_at_ms))
            mutation.execution = ExecutionRunning(started_at_ms=data.started_at_ms)
            mutation.active_turn = MaterializedTurn(
                command_id=command_id,
                accepted_ordinal=entry.accepted_ordinal,
                turn_start_position=ctx.event.ordinal,
                started_at_ms=data.started_at_ms,
            )
        break
    _relabel_shell(ctx, command_id, data.started_at_ms, "running")


def command_completed(ctx: ProjectionContext, observation: CommandCompleted) -> None:
    data, current, mutation, event = observation.data, ctx.current, ctx.mutation, ctx.event
    command_id, outcome = data.command_id, data.outcome
    queue = _without(current.queued_prompts, command_id)
    if isinstance(outcome, ContextClearedOutcome):
        mutation.clear_turn_outcome = True
        close_streams(ctx)
        mutation.execution = ExecutionIdle()
        mutation.active_turn = None
        mutation.pending_elicitations = []
        previous = goal_of(ctx, current.configuration)
        set_configuration(
            ctx, GOAL_STATE_KEY, Goal(capability=previous.capability, known=True).to_json()
        )
        push_system_with_id(ctx, f"{CONTEXT_BOUNDARY_PREFIX}{command_id}", CONTEXT_BOUNDARY_TEXT)
    elif isinstance(outcome, PromptOutcome):
        prompt = outcome.data
        if not goal_running(ctx):
            close_streams(ctx)
            mutation.execution = ExecutionIdle()
        # A cancelled reply stops mid-sentence; mark where it ended.
        if classify_prompt_completion(prompt.stop_reason) is PromptCompletion.CANCELLED:
            push_system_with_id(
                ctx, f"{TURN_INTERRUPTED_ITEM_PREFIX}{command_id}", TURN_INTERRUPTED_TEXT
            )
        active = _belongs_to(current.active_turn, command_id)
        mutation.last_turn_outcome = MaterializedTurnOutcome(
            diagnostic=prompt.diagnostic,
            usage=prompt.usage,
            command_id=command_id,
            accepted_ordinal=None if active is None else active.accepted_ordinal,
            turn_start_position=None if active is None else active.turn_start_position,
            completed_ordinal=event.ordinal,
            completed_at_ms=event.recorded_at_ms,
            outcome=TurnOutcomeCompleted(stop_reason=prompt.stop_reason),
        )
        mutation.active_turn = None
    elif isinstance(outcome, UserShellOutcome):
        shell = ctx.get(f"shell:{command_id}")
        if shell is not None:
            text = user_shell_result_text(outcome.data.result)
            upsert(ctx, changed(shell, event.recorded_at_ms, body=SystemBody(text=text)))
    elif isinstance(outcome, ClosedOutcome):
        close_streams(ctx)
        mutation.execution = ExecutionClosed()
    elif isinstance(outcome, QueueChangedOutcome):
        removed = set(outcome.data.removed_command_ids)
        queue = [entry for entry in queue if entry.command_id not in removed]
    elif isinstance(outcome, SteeredOutcome):
        queue = _steer(ctx, queue, outcome.data.queued_command_id)
    elif isinstance(outcome, ConfiguredOutcome):
        mutation.config_results.append((command_id, None))
    elif isinstance(outcome, CancelledOutcome) and data.command in _TURN_CANCELS:
        _end_cancelled_harness_turn(ctx, command_id)
    # Other outcomes (a returned steer keeps its queue entry) change nothing here.
    if queue != current.queued_prompts:
        mutation.queued_prompts = queue


_TURN_CANCELS = frozenset({RelayCommandKind.CANCEL_TURN, RelayCommandKind.CANCEL})


def _end_cancelled_harness_turn(ctx: ProjectionContext, cancel_id: str) -> None:
    """A cancel that stopped a turn the harness started on its own ends that turn.

    Only while no prompt of ours runs (its own completion ends its turn), the session is
    running, and the newest ``harness-turn:`` line has no outcome yet (a second stop of
    the same turn changes nothing). The turn's outcome is a completion with stop reason
    ``Cancelled`` under the id ``harness-turn-{position}``, with no acceptance ordinal;
    the line ``Interrupted`` is keyed on the cancel. Execution stays running until the
    harness settles the turn.
    """
    current = ctx.current
    if current.active_turn is not None or not isinstance(current.execution, ExecutionRunning):
        return
    transcript = ctx.transcript
    start = next(
        (
            transcript[offset].position
            for offset in range(len(transcript) - 1, -1, -1)
            if transcript.stable_id(offset).startswith(HARNESS_TURN_ITEM_PREFIX)
        ),
        None,
    )
    if start is None:
        return
    turn_id = f"{HARNESS_TURN_OUTCOME_PREFIX}{start}"
    last = current.last_turn_outcome
    if last is not None and last.command_id == turn_id:
        return
    event = ctx.event
    push_system_with_id(ctx, f"{TURN_INTERRUPTED_ITEM_PREFIX}{cancel_id}", TURN_INTERRUPTED_TEXT)
    ctx.mutation.last_turn_outcome = MaterializedTurnOutcome(
        command_id=turn_id,
        accepted_ordinal=None,
        turn_start_position=start,
        completed_ordinal=event.ordinal,
        completed_at_ms=event.recorded_at_ms,
        outcome=TurnOutcomeCompleted(stop_reason="Cancelled"),
    )


def _steer(
    ctx: ProjectionContext, queue: list[MaterializedQueuedPrompt], queued_id: str
) -> list[MaterializedQueuedPrompt]:
    # The running turn becomes the steered prompt's turn; the original prompt stays in
    # flight and its completion ends the turn.
    offset = next((i for i, entry in enumerate(queue) if entry.command_id == queued_id), None)
    if offset is None:
        raise ctx.error(f"steered prompt {queued_id!r} is missing from the materialized queue")
    entry = queue[offset]
    if entry.kind is not None:
        raise ctx.error(f"steered queue entry {queued_id!r} is not a prompt")
    old = ctx.current.active_turn
    event = ctx.event
    ctx.mutation.active_turn = MaterializedTurn(
        command_id=queued_id,
        accepted_ordinal=entry.accepted_ordinal,
        turn_start_position=event.ordinal,
        started_at_ms=event.recorded_at_ms,
        steered_into=None if old is None else old.steered_into or old.command_id,
    )
    close_streams(ctx)
    upsert(ctx, new_item(ctx, f"user:{queued_id}", UserBody(content=entry.content)))
    return [*queue[:offset], *queue[offset + 1 :]]


def command_ended(
    ctx: ProjectionContext, observation: CommandRejected | CommandInterrupted
) -> None:
    data, current, mutation, event = observation.data, ctx.current, ctx.mutation, ctx.event
    command_id, kind, message, reason = data.command_id, data.command, data.message, data.reason
    rejected = isinstance(observation, CommandRejected)
    if kind is RelayCommandKind.CLEAR_CONTEXT:
        mutation.execution = ExecutionIdle()
    if kind in _CONFIGURATIONS:
        mutation.config_results.append((command_id, message))
    started = ctx.get(f"user:{command_id}") is not None
    queued = next(
        (entry for entry in current.queued_prompts if entry.command_id == command_id), None
    )
    if queued is not None:
        mutation.queued_prompts = _without(current.queued_prompts, command_id)
    if started and not goal_running(ctx):
        close_streams(ctx)
        mutation.execution = ExecutionIdle()
    if kind is RelayCommandKind.PROMPT:
        # A prompt that never started has its acceptance ordinal on the queue entry.
        active = _belongs_to(current.active_turn, command_id)
        accepted = active.accepted_ordinal if active is not None else None
        if accepted is None and queued is not None:
            accepted = queued.accepted_ordinal
        ended: TurnOutcomeRejected | TurnOutcomeInterrupted
        if rejected:
            ended = TurnOutcomeRejected(message=message, reason=reason)
        else:
            ended = TurnOutcomeInterrupted(message=message, reason=reason)
        mutation.last_turn_outcome = MaterializedTurnOutcome(
            command_id=command_id,
            accepted_ordinal=accepted,
            turn_start_position=None if active is None else active.turn_start_position,
            completed_ordinal=event.ordinal,
            completed_at_ms=event.recorded_at_ms,
            outcome=ended,
        )
        if active is not None:
            mutation.active_turn = None
    if kind is RelayCommandKind.CLOSE and isinstance(current.execution, ExecutionClosing):
        mutation.execution = ExecutionIdle()
    if kind is RelayCommandKind.RUN_USER_SHELL:
        _relabel_shell(ctx, command_id, event.recorded_at_ms, "interrupted", f"\nerror: {message}")
    elif started and not rejected:
        push_system_with_id(
            ctx, f"{WORK_INTERRUPTED_ITEM_PREFIX}{event.ordinal}", f"Work interrupted: {message}"
        )
    elif kind not in _COORDINATION_KINDS or (
        reason is not None and not expected_cancellation(reason)
    ):
        # Expected coordination cleanup stays in the journal and the API feed only.
        push_system(ctx, message)
