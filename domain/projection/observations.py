"""One handler per observation kind, and the table that routes an event to its handler.

A handler reads the session before the event through the
:class:`~relaystore.domain.projection.context.ProjectionContext` and writes the event's changes
into its mutation; observations without a handler change nothing but the activity time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ..elicitation.forms import ElicitationRequest
from ..materialized import (
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    PlanProposalBody,
    SystemBody,
    TerminalOutputRecord,
)
from ..outcomes import ProviderCost
from ..relay.events import RelayEvent, RelayLine
from ..relay.observations import (
    Closed,
    Closing,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ConfigurationUpdated,
    ElicitationRequested,
    ElicitationResolved,
    ElicitationsCleared,
    HarnessTurnSettled,
    HarnessTurnStarted,
    NativeAgent,
    Notice,
    PermissionAutoApproved,
    SessionConfigured,
    SessionFault,
    SessionOpened,
    SessionRestarted,
    SessionUpdate,
    TerminalOutput,
    UserShellOutput,
    WarningObservation,
)
from ..wire import JSON
from .commands import (
    command_completed,
    command_ended,
    command_queued,
    command_started,
)
from .context import (
    ProjectionContext,
    changed,
    new_item,
    push_system,
    push_system_with_id,
    set_configuration,
    upsert,
)
from .goal import GOAL_STATE_KEY, apply_goal_meta, goal_of
from .markers import (
    HARNESS_TURN_ITEM_PREFIX,
    HARNESS_TURN_TEXT,
    PLAN_REVIEW_ID_PREFIX,
    PLAN_REVIEW_MESSAGE_PREFIX,
    SESSION_RESTART_ITEM_PREFIX,
    SESSION_RESTART_TEXT,
    WORK_INTERRUPTED_ITEM_PREFIX,
)
from .streams import close_streams, project_plan, project_stream_chunk
from .text import normalize_session_title, user_shell_text
from .tools import (
    project_terminal_output,
    project_tool_call,
    project_tool_call_update,
)

__all__ = [
    "HANDLERS",
    "LINE_HANDLERS",
]
ObservationT = TypeVar("ObservationT")


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


def _plan_review_proposal(request: ElicitationRequest) -> str | None:
    if request.id.startswith(PLAN_REVIEW_ID_PREFIX) and request.message.startswith(
        PLAN_REVIEW_MESSAGE_PREFIX
    ):
        return request.message[len(PLAN_REVIEW_MESSAGE_PREFIX) :]
    return None


def _native_agent(ctx: ProjectionContext, _: NativeAgent) -> None:
    assert isinstance(ctx.event, RelayEvent)  # a NativeAgent observation was decoded
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
    project = _UPDATES.get(kind) if isinstance(kind, str) else None  # any JSON: no hash
    if project is not None:
        project(ctx, update)


def _agent_chunk(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    project_stream_chunk(ctx, update, agent=True)


def _thought_chunk(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    project_stream_chunk(ctx, update, agent=False)


def _plan(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    project_plan(ctx, {key: value for key, value in update.items() if key != "sessionUpdate"})


def _config_option_update(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    ctx.mutation.configuration = _configuration_values(ctx, update.get("configOptions"))


def _current_mode_update(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    mode = update.get("currentModeId")
    if isinstance(mode, str):
        set_configuration(ctx, "mode", mode)


def _on_usage(ctx: ProjectionContext, update: dict[str, JSON]) -> None:
    _usage_update(ctx, update.get("cost"))


def _session_info_update(ctx: ProjectionContext, update: Mapping[str, JSON]) -> None:
    meta = update.get("_meta")
    if isinstance(meta, dict):
        goal = goal_of(ctx, ctx.current.configuration)
        if apply_goal_meta(ctx, goal, meta):
            set_configuration(ctx, GOAL_STATE_KEY, goal.to_json())
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


_UPDATES: dict[str, Callable[[ProjectionContext, dict[str, JSON]], None]] = {
    "agent_message_chunk": _agent_chunk,
    "agent_thought_chunk": _thought_chunk,
    "tool_call": project_tool_call,
    "tool_call_update": project_tool_call_update,
    "plan": _plan,
    "config_option_update": _config_option_update,
    "current_mode_update": _current_mode_update,
    "session_info_update": _session_info_update,
    "usage_update": _on_usage,
}
"""How a ``session_update`` is projected, by its ``sessionUpdate`` kind (one lookup an
update; a kind not here changes nothing)."""


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


def _configuration_updated(ctx: ProjectionContext, observation: ConfigurationUpdated) -> None:
    set_configuration(ctx, observation.data.key, observation.data.value)


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


def _warning(ctx: ProjectionContext, observation: WarningObservation | SessionFault) -> None:
    # A fault is a line in the transcript; it never ends or rewrites a turn.
    push_system(ctx, f"warning: {observation.data.message}")


def _session_restarted(ctx: ProjectionContext, _: SessionRestarted) -> None:
    current, mutation, ordinal = ctx.current, ctx.mutation, ctx.event.ordinal
    if GOAL_STATE_KEY in current.configuration:
        goal = goal_of(ctx, current.configuration)
        goal.capability, goal.known, goal.execution = None, False, None
        set_configuration(ctx, GOAL_STATE_KEY, goal.to_json())
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
# retry_assessment_*, turn_assessment_updated, mailbox_events_delivered,
# mailbox_hook_lease_created and mailbox_hook_lease_returned (a delivery or a lease moves
# events between the mailbox and the agent; the transcript lists each event once, when it
# was queued: see domain.projection.mailbox).
HANDLERS: dict[type, Callable[[ProjectionContext, Any], None]] = dict(
    [
        _handler(NativeAgent, _native_agent),
        _handler(SessionOpened, _session_opened),
        _handler(SessionConfigured, _session_configured),
        _handler(SessionUpdate, _session_update),
        _handler(PermissionAutoApproved, _permission_auto_approved),
        _handler(ElicitationRequested, _elicitation_requested),
        _handler(ElicitationResolved, _elicitation_resolved),
        _handler(ElicitationsCleared, _elicitations_cleared),
        _handler(CommandQueued, command_queued),
        _handler(CommandStarted, command_started),
        _handler(CommandCompleted, command_completed),
        _handler(CommandRejected, command_ended),
        _handler(CommandInterrupted, command_ended),
        _handler(ConfigurationUpdated, _configuration_updated),
        _handler(UserShellOutput, _user_shell_output),
        _handler(TerminalOutput, _terminal_output),
        _handler(WarningObservation, _warning),
        _handler(SessionFault, _warning),
        _handler(SessionRestarted, _session_restarted),
        _handler(HarnessTurnStarted, _harness_turn_started),
        _handler(HarnessTurnSettled, _harness_turn_settled),
        _handler(Notice, _notice),
        _handler(Closing, _closing),
        _handler(Closed, _closed),
    ]
)

LINE_HANDLERS: dict[tuple[str, str], Callable[[ProjectionContext, RelayLine], None]] = {}
"""Kinds this build projects from a line's bytes, by ``(position, kind)`` as
:class:`~relaystore.domain.errors.UnknownRelayKind` names them (``("observation",
"future_kind")``): for a kind the wire types do not decode. Empty in this build; a line
of a kind neither decoded nor listed here leaves its session behind its log
(:class:`~relaystore.domain.materialized.ProjectionBehind`), and a build that lists it
(or decodes it) catches the session up."""
