"""Relay-event projection: one relay event in, one session mutation and its API events out.

:func:`project_relay_event` reads the session *after* every earlier event and returns
the change the next event makes (:class:`MaterializedSessionMutation`), including the
API events it yields, in the origin's order. :func:`apply_committed_projection_event`
folds that change into a **new** session once it is durable. Both check the relay chain
strictly: the event must be the one right after the session's frontier, so an event
delivered twice raises :class:`RelayChainError` instead of being applied twice
(idempotent re-delivery is the durable page's job, not this one's).

:func:`project_and_apply` does both at once. A new session costs a copy of the
transcript list, so a long session's replay would grow quadratically;
:func:`project_in_place` instead changes the session itself (its transcript list and
that list's cached :class:`~domain.transcript.TranscriptIndex`), at a cost that does
not grow with the transcript. Both ways share one implementation (the new session
is a copy changed in place) and give the same result; every rule is checked before
anything changes.

Decisions where the origin is unclear (each is tested):

* The line a context clear leaves is ``system:context-cleared:{command_id}``
  (:data:`domain.transcript.CONTEXT_BOUNDARY_PREFIX`).
* ``resume_after_quota`` is queued like ``continue_authorized_work`` (a prompt with
  the worker's continuation text, without the "Continuing…" line): it is a prompt
  command, so its start opens a turn and its completion ends that turn.
* Replacing the adapter configuration (``session_configured``, ``config_option_update``)
  keeps the projected goal state; an adapter option named ``mj_goal_state`` is ignored.
* Tool presentations are not derived here: a cached presentation is kept only while the
  inputs it summarizes (title, kind, raw input and output) are unchanged.
* In memory, ``clear_turn_outcome`` clears the last outcome before a new one is written,
  as the durable flush does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from relaystore.domain.api_events import (
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
from relaystore.domain.digests import validate_relay_event
from relaystore.domain.elicitation import ElicitationRequest
from relaystore.domain.errors import InvalidInput, ProjectionError
from relaystore.domain.materialized import (
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedQueuedPrompt,
    MaterializedSession,
    MaterializedSessionMutation,
    PlanProposalBody,
    SetConfigEntry,
    SetConfigKind,
    SystemBody,
    TerminalOutputRecord,
    TranscriptItem,
    TranscriptRemove,
    UserBody,
    _Unset,
)
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    CommandResult,
    CommandResultKind,
    MaterializedTurnOutcome,
    OutcomeReason,
    PromptCompletion,
    ProviderCost,
    TurnOutcomeCompleted,
    TurnOutcomeInterrupted,
    TurnOutcomeRejected,
    TurnResultKind,
    classify_prompt_completion,
    expected_cancellation,
)
from relaystore.domain.relay import (
    AgentInitialized,
    ClearContextCommand,
    CloseCommand,
    Closed,
    ClosedOutcome,
    Closing,
    CommandCompleted,
    CommandEndedData,
    CommandInterrupted,
    CommandQueued,
    CommandQueuedData,
    CommandRejected,
    CommandStarted,
    ConfigurationUpdated,
    ConfiguredOutcome,
    ContextClearedOutcome,
    ContinueAuthorizedWorkCommand,
    ElicitationRequested,
    ElicitationResolved,
    ElicitationsCleared,
    HarnessTurnSettled,
    HarnessTurnStarted,
    NativeAgent,
    Notice,
    PermissionAutoApproved,
    PromptCommand,
    PromptOutcome,
    QueueChangedOutcome,
    RelayCommandKind,
    RelayCommandOutcome,
    RelayEvent,
    ResumeAfterQuotaCommand,
    RunUserShellCommand,
    SessionConfigured,
    SessionFault,
    SessionOpened,
    SessionRestarted,
    SessionUpdate,
    SetConfigCommand,
    SteeredOutcome,
    TerminalOutput,
    UserShellOutcome,
    UserShellOutput,
    UserShellStatus,
    Warning,
)
from relaystore.domain.runtime import RuntimeReceipt
from relaystore.domain.transcript import (
    CONTEXT_BOUNDARY_PREFIX,
    CONTEXT_BOUNDARY_TEXT,
    CONTINUATION_PROMPT,
    HARNESS_TURN_ITEM_PREFIX,
    HARNESS_TURN_TEXT,
    PLAN_REVIEW_ID_PREFIX,
    PLAN_REVIEW_MESSAGE_PREFIX,
    SESSION_RESTART_ITEM_PREFIX,
    SESSION_RESTART_TEXT,
    TURN_INTERRUPTED_ITEM_PREFIX,
    TURN_INTERRUPTED_TEXT,
    WORK_INTERRUPTED_ITEM_PREFIX,
    ProjectionContext,
    TranscriptIndex,
    changed,
    close_streams,
    config_command_text,
    index_for,
    index_for_copy,
    materialized_content_text,
    new_item,
    normalize_session_title,
    project_plan,
    project_stream_chunk,
    project_terminal_output,
    project_tool_call,
    project_tool_call_update,
    provisional_session_title,
    push_system,
    push_system_with_id,
    resolved_title,
    upsert,
    user_shell_result_text,
    user_shell_text,
)
from relaystore.domain.wire import JSON

__all__ = [
    "GOAL_STATE_KEY",
    "apply_committed_projection_event",
    "derive_api_events",
    "project_and_apply",
    "project_in_place",
    "project_relay_event",
]

GOAL_STATE_KEY = "mj_goal_state"
"""Configuration key holding the projected goal state (wire data)."""

_COORDINATION_KINDS = frozenset(
    {
        RelayCommandKind.BEGIN_CHECKPOINT,
        RelayCommandKind.COMPLETE_CHECKPOINT,
        RelayCommandKind.RELEASE_CHECKPOINT,
        RelayCommandKind.ADVANCE_RECOVERY_FLOOR,
    }
)

ObservationT = TypeVar("ObservationT")

# -- public entry points --------------------------------------------------------------


def project_relay_event(
    current: MaterializedSession, event: RelayEvent, *, session_id: str | None = None
) -> MaterializedSessionMutation:
    """The mutation ``event`` makes to ``current``, with its API events.

    ``current`` must be the session after every earlier event; it is not changed.
    ``session_id`` names the session in errors (default: ``current.session_id``).
    Raises :class:`RelayChainError` when ``event`` does not directly follow the
    frontier (a gap, a re-delivery, a fork of a format 1 chain) or fails its digest,
    and :class:`ProjectionError` when the event contradicts the projection.
    """
    sid = session_id or current.session_id
    validate_relay_event(current.frontier, event, session_id=sid)
    return _project(current, event, sid, index_for(current.transcript))


def apply_committed_projection_event(
    current: MaterializedSession, event: RelayEvent, mutation: MaterializedSessionMutation
) -> MaterializedSession:
    """A new session: ``current`` with ``mutation`` applied and its frontier at ``event``.

    ``current`` is left untouched (unchanged parts are shared, never copied deeply).
    The chain is checked again, then the integrity rules: a transcript item keeps its
    position and creation time, its change time and latest content ordinal never move
    back. A broken rule raises :class:`ProjectionError` naming session, ordinal and item.
    """
    validate_relay_event(current.frontier, event, session_id=current.session_id)
    return _apply(current, event, mutation, index_for(current.transcript))


def project_and_apply(
    current: MaterializedSession, event: RelayEvent, *, session_id: str | None = None
) -> tuple[MaterializedSession, MaterializedSessionMutation]:
    """Project ``event`` and apply its mutation: a new session, and the mutation.

    The chain is checked once (digest included), as :func:`project_relay_event` does.
    ``current`` is left untouched, which costs a copy of the transcript list; see
    :func:`project_in_place` for a session the caller owns alone.
    """
    sid = session_id or current.session_id
    validate_relay_event(current.frontier, event, session_id=sid)
    index = index_for(current.transcript)
    mutation = _project(current, event, sid, index)
    return _apply(current, event, mutation, index), mutation


def project_in_place(
    session: MaterializedSession, event: RelayEvent, *, session_id: str | None = None
) -> MaterializedSessionMutation:
    """Project ``event`` and apply its mutation to ``session`` itself; return the mutation.

    The result equals :func:`project_and_apply`'s, but ``session``'s transcript list and
    that list's cached index change in place, so the cost does not grow with the
    transcript. The caller must own ``session`` and its transcript list alone (no other
    session, thread or reader may hold them). Every rule is checked before anything
    changes: an event that raises leaves ``session`` exactly as it was.
    """
    sid = session_id or session.session_id
    validate_relay_event(session.frontier, event, session_id=sid)
    index = index_for(session.transcript)
    mutation = _project(session, event, sid, index)
    _apply_in_place(session, event, mutation, index)
    return mutation


def _project(
    current: MaterializedSession, event: RelayEvent, sid: str, index: TranscriptIndex
) -> MaterializedSessionMutation:
    """The mutation of ``event``; ``index`` is the index of ``current.transcript``."""
    mutation = MaterializedSessionMutation(last_activity_at_ms=event.recorded_at_ms)
    ctx = ProjectionContext(
        current=current,
        index=index,
        event=event,
        mutation=mutation,
        session_id=sid,
    )
    handler = _HANDLERS.get(type(event.observation))
    if handler is not None:
        handler(ctx, event.observation)
    mutation.api_events = derive_api_events(current, event, mutation)
    return mutation


# -- goal state -----------------------------------------------------------------------


@dataclass(slots=True)
class _Goal:
    """The projected goal state (``configuration["mj_goal_state"]``); values stay raw JSON."""

    capability: JSON = None
    known: bool = False
    snapshot: JSON = None
    execution: JSON = None
    answered_resume: str | None = None
    pending_resume: str | None = None
    decision: JSON = None

    def running(self) -> bool:
        return isinstance(self.execution, dict) and self.execution.get("status") == "running"

    def to_json(self) -> dict[str, JSON]:
        value: dict[str, JSON] = {}
        if self.capability is not None:
            value["capability"] = self.capability
        value.update(
            known=self.known,
            snapshot=self.snapshot,
            execution=self.execution,
            answered_resume=self.answered_resume,
            pending_resume=self.pending_resume,
            decision=self.decision,
        )
        return value


def _goal(ctx: ProjectionContext, configuration: Mapping[str, JSON]) -> _Goal:
    value = configuration.get(GOAL_STATE_KEY)
    if value is None:
        return _Goal()
    if not isinstance(value, dict):
        raise ctx.error(f"configuration[{GOAL_STATE_KEY!r}] is not a goal state object")
    goal = _Goal(
        capability=value.get("capability"),
        known=value.get("known", False) is True,
        snapshot=_goal_snapshot(ctx, value.get("snapshot")),
        execution=value.get("execution"),
        decision=value.get("decision"),
    )
    for key in ("answered_resume", "pending_resume"):
        text = value.get(key)
        if text is not None and not isinstance(text, str):
            raise ctx.error(f"goal state field {key!r} is not a string")
        setattr(goal, key, text)
    return goal


def _goal_snapshot(ctx: ProjectionContext, value: JSON) -> JSON:
    if value is None:
        return None
    if not (
        isinstance(value, dict)
        and isinstance(value.get("objective"), str)
        and isinstance(value.get("status"), str)
    ):
        raise ctx.error("goal snapshot needs string 'objective' and 'status' fields")
    return value


def _same_goal(left: JSON, right: JSON) -> bool:
    return (
        isinstance(left, dict)
        and isinstance(right, dict)
        and left.get("objective") == right.get("objective")
        and left.get("createdAt") == right.get("createdAt")
    )


def _decision_outdated(snapshot: JSON, decision: dict[str, JSON], was_active: bool) -> bool:
    """A decision lapses when its goal is gone or ended, or a resume is paused again later."""
    status = snapshot.get("status") if isinstance(snapshot, dict) else None
    if not _same_goal(snapshot, decision.get("goal")) or status not in ("active", "paused"):
        return True
    if decision.get("resume") is not True or status != "paused":
        return False
    # _same_goal held, so both the snapshot and the decision's goal are objects.
    new_at, old_at = snapshot.get("updatedAt"), decision["goal"].get("updatedAt")
    return was_active or (type(new_at) is int and type(old_at) is int and new_at > old_at)


_MISSING = object()


def _goal_meta(meta: Mapping[str, JSON]) -> Any:
    if "goal" in meta:
        return meta["goal"]
    jetbrains = meta.get("jetbrains")
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    if isinstance(air, dict) and "goal" in air:
        return air["goal"]
    return _MISSING


def _apply_goal_meta(ctx: ProjectionContext, goal: _Goal, meta: Mapping[str, JSON]) -> bool:
    """Fold a session_info_update's ``_meta`` into ``goal``; True when anything changed."""
    changed_any = False
    if "mjGoalCapability" in meta:
        goal.capability = meta["mjGoalCapability"]
        changed_any = True
    snapshot = _goal_meta(meta)
    if snapshot is not _MISSING:
        was_active = isinstance(goal.snapshot, dict) and goal.snapshot.get("status") == "active"
        goal.snapshot = _goal_snapshot(ctx, snapshot)
        if isinstance(goal.decision, dict) and _decision_outdated(
            goal.snapshot, goal.decision, was_active
        ):
            goal.decision = None
        goal.known = True
        changed_any = True
    if "execution" in meta:
        execution = meta["execution"]
        if not (
            isinstance(execution, dict)
            and execution.get("version") == 1
            and execution.get("status") in ("running", "idle")
        ):
            raise ctx.error(f"unsupported ACP execution state {execution!r}")
        old = goal.execution if isinstance(goal.execution, dict) else {}
        old_revision, new_revision = old.get("revision"), execution.get("revision")
        if (
            isinstance(old_revision, int)
            and isinstance(new_revision, int)
            and new_revision < old_revision
        ):
            return changed_any
        old_turn, new_turn = old.get("turnId"), execution.get("turnId")
        # An old completion that arrives after a newer native turn started is ignored.
        if (
            execution["status"] == "running"
            or not goal.running()
            or old_turn is None
            or new_turn is None
            or old_turn == new_turn
        ):
            goal.execution = execution
        changed_any = True
    pending = meta.get("mjGoalResumePending")
    if isinstance(pending, str):
        goal.pending_resume = pending
        changed_any = True
    answered = meta.get("mjGoalResumeAnswered")
    if isinstance(answered, str):
        goal.answered_resume = answered
        goal.pending_resume = None
        changed_any = True
    if "mjGoalDecision" in meta:
        goal.decision = meta["mjGoalDecision"]
        changed_any = True
    return changed_any


def _goal_running(ctx: ProjectionContext) -> bool:
    return _goal(ctx, ctx.current.configuration).running()


def _set_configuration(ctx: ProjectionContext, key: str, value: JSON) -> None:
    """The mutation's configuration: the current one with ``key`` set to ``value``."""
    configuration = dict(ctx.current.configuration)
    configuration[key] = value
    ctx.mutation.configuration = configuration


# -- small helpers --------------------------------------------------------------------


def _configuration_values(ctx: ProjectionContext, options: JSON) -> dict[str, JSON]:
    """Adapter options as ``{id: currentValue}``, keeping the projected goal state."""
    values: dict[str, JSON] = {}
    for option in options if isinstance(options, list) else ():
        if not isinstance(option, dict) or not isinstance(option.get("id"), str):
            continue
        if option["id"] == GOAL_STATE_KEY:
            continue
        if "currentValue" in option:
            values[option["id"]] = option["currentValue"]
        elif "current_value" in option:
            values[option["id"]] = option["current_value"]
    goal = ctx.current.configuration.get(GOAL_STATE_KEY)
    if goal is not None:
        values[GOAL_STATE_KEY] = goal
    return values


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


def _plan_review_proposal(request: ElicitationRequest) -> str | None:
    if request.id.startswith(PLAN_REVIEW_ID_PREFIX) and request.message.startswith(
        PLAN_REVIEW_MESSAGE_PREFIX
    ):
        return request.message[len(PLAN_REVIEW_MESSAGE_PREFIX) :]
    return None


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


# -- observations ---------------------------------------------------------------------


def _native_agent(ctx: ProjectionContext, _: NativeAgent) -> None:
    ctx.mutation.native_agent = ctx.event


def _session_opened(ctx: ProjectionContext, observation: SessionOpened) -> None:
    ctx.mutation.pending_elicitations = []
    if not observation.data.resumed:
        push_system(ctx, "harness session started")


def _session_configured(ctx: ProjectionContext, observation: SessionConfigured) -> None:
    ctx.mutation.configuration = _configuration_values(ctx, observation.data.config_options)


def _session_update(ctx: ProjectionContext, observation: SessionUpdate) -> None:
    update = observation.data.update
    if not isinstance(update, dict):
        return
    kind = update.get("sessionUpdate")
    if kind == "agent_message_chunk":
        project_stream_chunk(ctx, update, agent=True)
    elif kind == "agent_thought_chunk":
        project_stream_chunk(ctx, update, agent=False)
    elif kind == "tool_call":
        project_tool_call(ctx, update)
    elif kind == "tool_call_update":
        project_tool_call_update(ctx, update)
    elif kind == "plan":
        project_plan(ctx, {key: value for key, value in update.items() if key != "sessionUpdate"})
    elif kind == "config_option_update":
        ctx.mutation.configuration = _configuration_values(ctx, update.get("configOptions"))
    elif kind == "current_mode_update":
        mode = update.get("currentModeId")
        if isinstance(mode, str):
            _set_configuration(ctx, "mode", mode)
    elif kind == "session_info_update":
        _session_info_update(ctx, update)
    elif kind == "usage_update":
        _usage_update(ctx, update.get("cost"))
    # user_message_chunk: the command_started user item is the canonical user message.


def _session_info_update(ctx: ProjectionContext, update: Mapping[str, JSON]) -> None:
    meta = update.get("_meta")
    if isinstance(meta, dict):
        goal = _goal(ctx, ctx.current.configuration)
        if _apply_goal_meta(ctx, goal, meta):
            _set_configuration(ctx, GOAL_STATE_KEY, goal.to_json())
    if "title" in update:
        title = update["title"]
        if title is None:
            ctx.mutation.session_title = None
        elif isinstance(title, str):
            ctx.mutation.session_title = normalize_session_title(title)


def _usage_update(ctx: ProjectionContext, cost: JSON) -> None:
    """A usage update with a cost records the provider's cumulative session cost."""
    if not isinstance(cost, dict):
        return
    amount, currency = cost.get("amount"), cost.get("currency")
    if (
        isinstance(amount, int | float)
        and not isinstance(amount, bool)
        and isinstance(currency, str)
    ):
        ctx.mutation.provider_cost = ProviderCost(
            amount=float(amount), currency=currency, observed_at_ms=ctx.event.recorded_at_ms
        )


def _permission_auto_approved(ctx: ProjectionContext, observation: PermissionAutoApproved) -> None:
    data = observation.data
    push_system(ctx, f"permission auto-approved: {data.option_name} ({data.option_id})")


def _elicitation_requested(ctx: ProjectionContext, observation: ElicitationRequested) -> None:
    request = observation.data.request
    pending = [
        existing for existing in ctx.current.pending_elicitations if existing.id != request.id
    ]
    pending.append(request)
    ctx.mutation.pending_elicitations = pending
    plan = _plan_review_proposal(request)
    if plan is not None:
        close_streams(ctx)
        body = PlanProposalBody(proposal_id=request.id, plan=plan)
        upsert(ctx, new_item(ctx, f"plan-proposal:{ctx.event.ordinal}", body))


def _elicitation_resolved(ctx: ProjectionContext, observation: ElicitationResolved) -> None:
    gone = observation.data.elicitation_id
    ctx.mutation.pending_elicitations = [
        request for request in ctx.current.pending_elicitations if request.id != gone
    ]


def _elicitations_cleared(ctx: ProjectionContext, _: ElicitationsCleared) -> None:
    ctx.mutation.pending_elicitations = []


def _command_queued(ctx: ProjectionContext, observation: CommandQueued) -> None:
    data, current, mutation = observation.data, ctx.current, ctx.mutation
    command = data.command
    if isinstance(command, ClearContextCommand):
        mutation.execution = ExecutionRunning(started_at_ms=data.created_at_ms)
        push_system(ctx, "Clearing context…")
    elif isinstance(
        command, PromptCommand | ContinueAuthorizedWorkCommand | ResumeAfterQuotaCommand
    ):
        if isinstance(command, ContinueAuthorizedWorkCommand):
            push_system(
                ctx, f"Continuing requested work automatically · {command.data.attempt} of 3"
            )
        if isinstance(command, PromptCommand):
            content = list(command.data.prompt)
        else:
            content = [{"type": "text", "text": CONTINUATION_PROMPT}]
        if current.session_title is None:
            title = resolved_title(current) or provisional_session_title(
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
    elif isinstance(command, CloseCommand):
        close_streams(ctx)
        mutation.execution = ExecutionClosing()


def _command_started(ctx: ProjectionContext, observation: CommandStarted) -> None:
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


def _command_completed(ctx: ProjectionContext, observation: CommandCompleted) -> None:
    data, current, mutation, event = observation.data, ctx.current, ctx.mutation, ctx.event
    command_id, outcome = data.command_id, data.outcome
    queue = _without(current.queued_prompts, command_id)
    if isinstance(outcome, ContextClearedOutcome):
        mutation.clear_turn_outcome = True
        close_streams(ctx)
        mutation.execution = ExecutionIdle()
        mutation.active_turn = None
        mutation.pending_elicitations = []
        previous = _goal(ctx, current.configuration)
        _set_configuration(
            ctx, GOAL_STATE_KEY, _Goal(capability=previous.capability, known=True).to_json()
        )
        push_system_with_id(ctx, f"{CONTEXT_BOUNDARY_PREFIX}{command_id}", CONTEXT_BOUNDARY_TEXT)
    elif isinstance(outcome, PromptOutcome):
        prompt = outcome.data
        if not _goal_running(ctx):
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
    # Other outcomes (a returned steer keeps its queue entry) change nothing here.
    if queue != current.queued_prompts:
        mutation.queued_prompts = queue


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


def _command_ended(
    ctx: ProjectionContext, observation: CommandRejected | CommandInterrupted
) -> None:
    data, current, mutation, event = observation.data, ctx.current, ctx.mutation, ctx.event
    command_id, kind, message, reason = data.command_id, data.command, data.message, data.reason
    rejected = isinstance(observation, CommandRejected)
    if kind is RelayCommandKind.CLEAR_CONTEXT:
        mutation.execution = ExecutionIdle()
    if kind is RelayCommandKind.SET_CONFIG:
        mutation.config_results.append((command_id, message))
    started = ctx.get(f"user:{command_id}") is not None
    queued = next(
        (entry for entry in current.queued_prompts if entry.command_id == command_id), None
    )
    if queued is not None:
        mutation.queued_prompts = _without(current.queued_prompts, command_id)
    if started and not _goal_running(ctx):
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


def _configuration_updated(ctx: ProjectionContext, observation: ConfigurationUpdated) -> None:
    _set_configuration(ctx, observation.data.key, observation.data.value)


def _user_shell_output(ctx: ProjectionContext, observation: UserShellOutput) -> None:
    data = observation.data
    shell = ctx.get(f"shell:{data.command_id}")
    if shell is None:
        return
    text = user_shell_text(
        data.command,
        "running",
        data.stdout,
        data.stderr,
        data.stdout_truncated,
        data.stderr_truncated,
    )
    upsert(ctx, changed(shell, ctx.event.recorded_at_ms, body=SystemBody(text=text)))


def _terminal_output(ctx: ProjectionContext, observation: TerminalOutput) -> None:
    data = observation.data
    record = TerminalOutputRecord(
        terminal_id=data.terminal_id,
        output=data.output,
        truncated=data.truncated,
        exit_code=data.exit_code,
        signal=data.signal,
    )
    project_terminal_output(ctx, record)


def _warning(ctx: ProjectionContext, observation: Warning | SessionFault) -> None:
    # A fault is a line in the transcript; it never ends or rewrites a turn.
    push_system(ctx, f"warning: {observation.data.message}")


def _session_restarted(ctx: ProjectionContext, _: SessionRestarted) -> None:
    current, mutation, ordinal = ctx.current, ctx.mutation, ctx.event.ordinal
    if GOAL_STATE_KEY in current.configuration:
        goal = _goal(ctx, current.configuration)
        goal.capability, goal.known, goal.execution = None, False, None
        _set_configuration(ctx, GOAL_STATE_KEY, goal.to_json())
    push_system_with_id(ctx, f"{SESSION_RESTART_ITEM_PREFIX}{ordinal}", SESSION_RESTART_TEXT)
    # The active turn stays: the worker's restart recovery journals its interruption.
    if isinstance(current.execution, ExecutionRunning):
        push_system_with_id(
            ctx, f"{WORK_INTERRUPTED_ITEM_PREFIX}{ordinal}", "Work interrupted by session restart"
        )
        close_streams(ctx)
        mutation.execution = ExecutionIdle()


def _harness_turn_started(ctx: ProjectionContext, observation: HarnessTurnStarted) -> None:
    # A harness reports native turn starts for ordinary replies too; a user turn
    # already gives the boundary and the clock.
    if ctx.current.active_turn is not None:
        return
    body = SystemBody(text=HARNESS_TURN_TEXT)
    upsert(ctx, new_item(ctx, f"{HARNESS_TURN_ITEM_PREFIX}{ctx.event.ordinal}", body))
    ctx.mutation.execution = ExecutionRunning(started_at_ms=observation.data.started_at_ms)


def _harness_turn_settled(ctx: ProjectionContext, observation: HarnessTurnSettled) -> None:
    # A prompt dispatched mid-turn keeps the session running; its own result stops it.
    if not observation.data.prompt_in_flight:
        close_streams(ctx)
        ctx.mutation.execution = ExecutionIdle()


def _notice(ctx: ProjectionContext, observation: Notice) -> None:
    # Keyed on the command, so a notice re-recorded after a retry leaves one line.
    command_id = ctx.event.command_id
    stable_id = (
        f"system:notice:{command_id}" if command_id is not None else f"system:{ctx.event.ordinal}"
    )
    if ctx.get(stable_id) is None:
        push_system_with_id(ctx, stable_id, observation.data.message)


def _closing(ctx: ProjectionContext, _: Closing) -> None:
    close_streams(ctx)
    ctx.mutation.execution = ExecutionClosing()


def _closed(ctx: ProjectionContext, _: Closed) -> None:
    close_streams(ctx)
    ctx.mutation.execution = ExecutionClosed()


def _handler(
    kind: type[ObservationT], function: Callable[[ProjectionContext, ObservationT], None]
) -> tuple[type, Callable[[ProjectionContext, Any], None]]:
    return kind, function


# Observations missing here change nothing: agent_initialized (its receipt is an API
# event), session_modes_configured, steering_unconfirmed, checkpoint_ready,
# retry_assessment_*, turn_assessment_updated.
_HANDLERS: dict[type, Callable[[ProjectionContext, Any], None]] = dict(
    [
        _handler(NativeAgent, _native_agent),
        _handler(SessionOpened, _session_opened),
        _handler(SessionConfigured, _session_configured),
        _handler(SessionUpdate, _session_update),
        _handler(PermissionAutoApproved, _permission_auto_approved),
        _handler(ElicitationRequested, _elicitation_requested),
        _handler(ElicitationResolved, _elicitation_resolved),
        _handler(ElicitationsCleared, _elicitations_cleared),
        _handler(CommandQueued, _command_queued),
        _handler(CommandStarted, _command_started),
        _handler(CommandCompleted, _command_completed),
        _handler(CommandRejected, _command_ended),
        _handler(CommandInterrupted, _command_ended),
        _handler(ConfigurationUpdated, _configuration_updated),
        _handler(UserShellOutput, _user_shell_output),
        _handler(TerminalOutput, _terminal_output),
        _handler(Warning, _warning),
        _handler(SessionFault, _warning),
        _handler(SessionRestarted, _session_restarted),
        _handler(HarnessTurnStarted, _harness_turn_started),
        _handler(HarnessTurnSettled, _harness_turn_settled),
        _handler(Notice, _notice),
        _handler(Closing, _closing),
        _handler(Closed, _closed),
    ]
)


# -- API events -----------------------------------------------------------------------

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


def derive_api_events(
    current: MaterializedSession, event: RelayEvent, mutation: MaterializedSessionMutation
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
    observation = event.observation
    if isinstance(observation, AgentInitialized):
        identity = observation.data.runtime
        if identity is not None:
            receipt = RuntimeReceipt.observed(
                identity, ordinal=event.ordinal, at_ms=event.recorded_at_ms
            )
            events.append(ApiRuntimeResolved.of(receipt=receipt))
    elif isinstance(observation, CommandRejected | CommandInterrupted):
        if observation.data.command is not RelayCommandKind.PROMPT:
            events.append(_refused_result(observation.data))
    elif isinstance(observation, CommandCompleted):
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
    elif isinstance(observation, SessionFault):
        events.append(
            ApiSessionFault.of(
                reason=observation.data.reason,
                message=observation.data.message,
                command_id=event.command_id,
            )
        )
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


# -- apply ----------------------------------------------------------------------------


def _apply(
    current: MaterializedSession,
    event: RelayEvent,
    mutation: MaterializedSessionMutation,
    index: TranscriptIndex,
) -> MaterializedSession:
    """A new session: a shallow copy of ``current``, with ``mutation`` applied in place.

    ``index`` is the index of ``current.transcript``. Only a transcript the mutation
    changes is copied (with a fork of its index); the other parts of ``current`` are
    shared, and ``current`` is never changed.
    """
    _check_transcript(current, event, mutation, index)
    session = msgspec.structs.replace(current)
    if mutation.transcript:
        session.transcript = list(current.transcript)
        index = index_for_copy(current.transcript, session.transcript, index)
    _write(session, event, mutation, index)
    return session


def _apply_in_place(
    session: MaterializedSession,
    event: RelayEvent,
    mutation: MaterializedSessionMutation,
    index: TranscriptIndex,
) -> None:
    """Apply ``mutation`` to ``session`` itself and ``index``, its transcript's cached index.

    Every rule is checked before anything changes.
    """
    _check_transcript(session, event, mutation, index)
    _write(session, event, mutation, index)


def _write(
    session: MaterializedSession,
    event: RelayEvent,
    mutation: MaterializedSessionMutation,
    index: TranscriptIndex,
) -> None:
    """Apply a checked ``mutation`` to ``session``; ``index`` describes its transcript.

    Nothing here raises: :func:`_check_transcript` has already checked every rule.
    """
    _write_transcript(session.transcript, index, mutation)
    if mutation.execution is not None:
        session.execution = mutation.execution
    if not isinstance(mutation.session_title, _Unset):
        session.session_title = mutation.session_title
    if mutation.configuration is not None:
        session.configuration = mutation.configuration
    if mutation.queued_prompts is not None:
        session.queued_prompts = mutation.queued_prompts
    if mutation.pending_elicitations is not None:
        session.pending_elicitations = mutation.pending_elicitations
    if not isinstance(mutation.active_turn, _Unset):
        session.active_turn = mutation.active_turn
    if mutation.clear_turn_outcome:
        session.last_turn_outcome = None
    if mutation.last_turn_outcome is not None:
        session.last_turn_outcome = mutation.last_turn_outcome
    activity = mutation.last_activity_at_ms
    if activity is not None:
        previous = session.last_activity_at_ms
        session.last_activity_at_ms = activity if previous is None else max(previous, activity)
    session.applied_event_ordinal = event.ordinal
    session.applied_event_digest = event.digest


def _integrity(
    current: MaterializedSession, event: RelayEvent, stable_id: str, detail: str
) -> ProjectionError:
    return ProjectionError(
        f"transcript item {stable_id!r} {detail}",
        session_id=current.session_id,
        ordinal=event.ordinal,
    )


def _check_replacement(
    current: MaterializedSession, event: RelayEvent, existing: TranscriptItem, item: TranscriptItem
) -> None:
    stable_id = item.stable_id
    if existing.position != item.position or existing.created_at_ms != item.created_at_ms:
        raise _integrity(
            current,
            event,
            stable_id,
            f"changed immutable identity fields: position {existing.position} -> {item.position}, "
            f"created_at_ms {existing.created_at_ms} -> {item.created_at_ms}",
        )
    if item.last_changed_at_ms < existing.last_changed_at_ms:
        raise _integrity(
            current,
            event,
            stable_id,
            f"moved its changed timestamp backwards ({existing.last_changed_at_ms} -> "
            f"{item.last_changed_at_ms})",
        )
    before, after = existing.latest_content_event_ordinal, item.latest_content_event_ordinal
    if before is not None and (after is None or after < before):
        raise _integrity(
            current,
            event,
            stable_id,
            f"moved its latest content ordinal backwards ({before} -> {after})",
        )


def _check_transcript(
    current: MaterializedSession,
    event: RelayEvent,
    mutation: MaterializedSessionMutation,
    index: TranscriptIndex,
) -> None:
    """Check the transcript changes against ``current`` without changing anything.

    The changes apply in order, so each upsert is checked against the item its id holds
    after the changes before it (``touched``; None once removed), else in ``current``.
    """
    transcript, positions = current.transcript, index.positions
    touched: dict[str, TranscriptItem | None] = {}
    for change in mutation.transcript:
        if isinstance(change, TranscriptRemove):
            touched[change.stable_id] = None
            continue
        item = change.item
        stable_id = item.stable_id
        try:
            item.validate(event.ordinal)
        except InvalidInput as exc:
            raise _integrity(current, event, stable_id, f"is invalid: {exc}") from exc
        if stable_id in touched:
            existing = touched[stable_id]
        else:
            offset = positions.get(stable_id)
            existing = None if offset is None else transcript[offset]
        if existing is not None:
            _check_replacement(current, event, existing, item)
        touched[stable_id] = item


def _write_transcript(
    transcript: list[TranscriptItem], index: TranscriptIndex, mutation: MaterializedSessionMutation
) -> None:
    """Apply checked transcript changes to ``transcript`` and its ``index`` together.

    An upsert replaces the item at its id's offset or appends a new one; a removal
    deletes the item (a removed id upserted again later is appended anew).
    """
    positions = index.positions
    for change in mutation.transcript:
        if isinstance(change, TranscriptRemove):
            offset = positions.get(change.stable_id)
            if offset is not None:
                removed = transcript.pop(offset)
                index.remove(removed, offset, transcript)
                positions = index.positions
            continue
        item = change.item
        offset = positions.get(item.stable_id)
        if offset is None:
            transcript.append(item)
            index.append(item, len(transcript) - 1)
            positions = index.positions
        else:
            before = transcript[offset]
            transcript[offset] = item
            index.replace(before, item)
