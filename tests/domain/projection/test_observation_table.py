"""One table row per observation kind: the API events it yields and what it changes."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from relaystore.domain.api_events import (
    MaterializedTurn,
)
from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.materialized import (
    UNCHANGED,
    AgentBody,
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedSession,
    MaterializedSessionMutation,
    PlanProposalBody,
    SetConfigKind,
    SystemBody,
    TerminalOutputBody,
    ToolBody,
    UserBody,
)
from relaystore.domain.outcomes import (
    CommandResultKind,
    OutcomeReason,
    TokenUsage,
    TurnOutcomeCompleted,
    TurnOutcomeInterrupted,
    TurnOutcomeRejected,
    UsageScope,
)
from relaystore.domain.projection import GOAL_STATE_KEY
from relaystore.domain.projection.integrity import (
    check_session,
)
from relaystore.domain.projection.markers import CONTEXT_BOUNDARY_PREFIX, CONTINUATION_PROMPT
from relaystore.domain.relay import (
    RELAY_EVENT_GENESIS_DIGEST,
    AgentInitialized,
    BeginCheckpointCommand,
    CancelledOutcome,
    CheckpointCompletedOutcome,
    CheckpointReady,
    CheckpointReleasedOutcome,
    ClearContextCommand,
    CloseCommand,
    Closed,
    ClosedOutcome,
    Closing,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    ConfigurationUpdated,
    ConfiguredOutcome,
    ContextClearedOutcome,
    ContinueAuthorizedWorkCommand,
    ElicitationRequested,
    ElicitationResolved,
    ElicitationsCleared,
    GoalControlledOutcome,
    HarnessTurnSettled,
    HarnessTurnStarted,
    MailboxDeliveryPath,
    MailboxEvent,
    MailboxEventsDelivered,
    MailboxHookLease,
    MailboxHookLeaseCreated,
    MailboxHookLeaseReturned,
    MailboxHookLeaseReturnReason,
    NativeAgent,
    Notice,
    NoticeRecordedOutcome,
    PermissionAutoApproved,
    QueueChangedOutcome,
    RecoveryFloorAdvancedOutcome,
    RelayCommandKind,
    RelayCursor,
    RelayObservation,
    ResumeAfterQuotaCommand,
    RetryAssessmentResolved,
    RetryAssessmentStarted,
    SessionConfigured,
    SessionFault,
    SessionModesConfigured,
    SessionModeSetOutcome,
    SessionOpened,
    SessionRestarted,
    SessionUpdate,
    SetConfigCommand,
    SteeredOutcome,
    SteeringReturnedOutcome,
    SteeringUnconfirmed,
    TurnAssessmentUpdated,
    UserShellCancelledOutcome,
    UserShellOutcome,
    UserShellOutput,
    UserShellStatus,
    WarningObservation,
)
from relaystore.domain.wire import encode
from tests.domain.projection.support import (
    GOAL,
    SET_CONFIG,
    SHELL,
    STREAMING,
    TERMINAL,
    TOOL,
    Journal,
    command_ended,
    completed,
    finished,
    input_required,
    input_resolved,
    item,
    kinds,
    legacy_notice,
    question,
    queued,
    refused,
    shell_result,
    started,
    system_texts,
    text_of,
    turn,
    turn_ended,
    update,
)

# --- one table row per observation ---------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """An observation after ``setup``: the API events it yields and what it changes."""

    id: str
    observation: RelayObservation
    api: list[str]
    check: Callable[[MaterializedSession, MaterializedSessionMutation, MaterializedSession], None]
    setup: list[Any] = field(default_factory=list)
    command_id: str | None = None


def only_frontier_moves(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.transcript == []
    assert mutation.execution is None
    assert mutation.configuration is None
    assert mutation.queued_prompts is None
    assert mutation.pending_elicitations is None
    assert mutation.active_turn is UNCHANGED
    assert mutation.last_turn_outcome is None
    assert (
        msgspec.structs.replace(
            after,
            applied_event_ordinal=before.applied_event_ordinal,
            applied_event_digest=before.applied_event_digest,
            last_activity_at_ms=before.last_activity_at_ms,
        )
        == before
    )


def native_agent_is_kept_for_storage(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.native_agent is not None
    assert mutation.native_agent.ordinal == after.applied_event_ordinal
    assert after.transcript == before.transcript


def resumed_open_clears_questions_quietly(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert before.pending_elicitations != []
    assert after.pending_elicitations == []
    assert mutation.transcript == []
    assert input_resolved(mutation.api_events[0]).action == "cleared"


def fresh_open_says_so(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert text_of(after, f"system:{after.applied_event_ordinal}") == "harness session started"


def configured_replaces_values_and_keeps_goal(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.configuration == {
        "model": "astra",
        GOAL_STATE_KEY: before.configuration[GOAL_STATE_KEY],
    }


def permission_line(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert system_texts(after) == ["permission auto-approved: Allow always (allow-always)"]


def question_pending(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.pending_elicitations == [question()]
    assert input_required(mutation.api_events[0]).turn_id is None


def question_replaced_in_place(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert [request.message for request in after.pending_elicitations] == ["Second wording"]


def plan_review_becomes_a_proposal_item(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    proposal = item(after, f"plan-proposal:{after.applied_event_ordinal}").body
    assert proposal == PlanProposalBody(proposal_id="plan-review-1", plan="1. read\n2. write")
    agent = item(after, "agent:m1").body
    assert isinstance(agent, AgentBody)
    assert agent.streaming is False


def resolved_question_gone(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.pending_elicitations == []
    assert input_resolved(mutation.api_events[0]).action == "decline"


def all_questions_cleared(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.pending_elicitations == []
    assert [input_resolved(event).elicitation_id for event in mutation.api_events] == ["q-a", "q-b"]


def prompt_queued_with_title(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    (entry,) = after.queued_prompts
    assert (entry.command_id, entry.kind, entry.queued_at_ms) == ("prompt-1", None, 1)
    assert entry.accepted_ordinal == after.applied_event_ordinal
    assert entry.content == [{"type": "text", "text": "Fix  the\nbuild"}]
    assert after.session_title == "Fix the build"


def continuation_queued_with_notice(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    (entry,) = after.queued_prompts
    assert entry.content == [{"type": "text", "text": CONTINUATION_PROMPT}]
    assert system_texts(after) == ["Continuing requested work automatically · 2 of 3"]


def resume_queued_quietly(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    (entry,) = after.queued_prompts
    assert (entry.command_id, entry.kind) == ("resume-1", None)
    assert after.transcript == []


def set_config_queued_as_composer_text(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    (entry,) = after.queued_prompts
    assert isinstance(entry.kind, SetConfigKind)
    assert (entry.kind.set_config.key, entry.kind.set_config.value) == ("model", "astra")
    assert entry.content == [{"type": "text", "text": "/model astra"}]
    assert after.session_title is None


def fast_mode_is_slash_fast(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.queued_prompts[0].content == [{"type": "text", "text": "/fast"}]


def shell_queued_line(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    shell = item(after, "shell:sh-1")
    assert shell.body == SystemBody(text="Shell · queued\n$ ls -la")
    assert (shell.created_at_ms, shell.position) == (5, after.applied_event_ordinal)


def clearing_context_runs(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionRunning(started_at_ms=7)
    assert system_texts(after) == ["Clearing context…"]


def close_closes_streams(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionClosing()
    body = item(after, "agent:m1").body
    assert isinstance(body, AgentBody)
    assert body.streaming is False


def prompt_start_opens_a_turn(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.queued_prompts == []
    assert after.active_turn == MaterializedTurn(
        command_id="prompt-1", accepted_ordinal=1, turn_start_position=2, started_at_ms=2
    )
    assert after.execution == ExecutionRunning(started_at_ms=2)
    user = item(after, "user:prompt-1")
    assert (user.position, user.created_at_ms, user.last_changed_at_ms) == (2, 2, 2)
    assert user.body == UserBody(content=[{"type": "text", "text": "do it"}])


def set_config_start_only_leaves_the_queue(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.queued_prompts == []
    assert after.active_turn is None
    assert after.transcript == []


def shell_start_runs(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    shell = item(after, "shell:sh-1")
    assert shell.body == SystemBody(text="Shell · running\n$ ls -la")
    assert shell.last_changed_at_ms == 9


def context_cleared_resets_the_conversation(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.clear_turn_outcome is True
    assert before.last_turn_outcome is not None
    assert after.last_turn_outcome is None
    assert after.execution == ExecutionIdle()
    assert after.active_turn is None
    assert after.pending_elicitations == []
    boundary = item(after, f"{CONTEXT_BOUNDARY_PREFIX}clear-1")
    assert boundary.body == SystemBody(text="Context cleared — a new conversation starts here.")
    assert after.configuration[GOAL_STATE_KEY] == {
        "known": True,
        "snapshot": None,
        "execution": None,
        "answered_resume": None,
        "pending_resume": None,
        "decision": None,
    }


def prompt_completion_ends_the_turn(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.active_turn is None
    assert after.execution == ExecutionIdle()
    assert after.last_turn_outcome is not None
    assert after.last_turn_outcome.outcome == TurnOutcomeCompleted(stop_reason="end_turn")
    assert after.last_turn_outcome.usage is not None


def awaiting_input_requires_unstructured_input(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    required = input_required(mutation.api_events[0])
    assert (required.request, required.turn_id) == (None, 1)
    assert b'"request"' not in encode(required)


def shell_result_line_and_command_ended(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert text_of(after, "shell:sh-1") == "Shell · failed (exit 2) · 12 ms\n$ ls\n\nstdout:\na\n"
    ended = command_ended(mutation.api_events[0])
    assert (ended.outcome, ended.reason, ended.command_kind) == (
        CommandResultKind.FAILED,
        OutcomeReason.NONZERO_EXIT,
        "run_user_shell",
    )
    assert ended.message == "Shell ended with status Exited, exit code Some(2), signal None"


def configured_reports_success(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.config_results == [("cfg-1", None)]
    assert after.queued_prompts == []
    assert command_ended(mutation.api_events[0]).outcome is CommandResultKind.SUCCEEDED


def succeeded_without_transcript(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.transcript == []
    assert command_ended(mutation.api_events[-1]).outcome is CommandResultKind.SUCCEEDED


def steered_moves_the_turn(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.active_turn is not None
    assert (after.active_turn.command_id, after.active_turn.steered_into) == (
        "prompt-2",
        "prompt-1",
    )
    assert after.queued_prompts == []
    assert item(after, "user:prompt-2").position == after.applied_event_ordinal


def returned_steer_keeps_the_queue(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert [entry.command_id for entry in after.queued_prompts] == ["prompt-2"]
    assert after.active_turn == before.active_turn


def closed_outcome_closes(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionClosed()


def queue_changed_drops_removed(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert [entry.command_id for entry in after.queued_prompts] == ["prompt-3"]


def barrier_ends_first(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    barrier, complete = (command_ended(event) for event in mutation.api_events)
    assert (barrier.command_id, barrier.command_kind, barrier.outcome) == (
        "begin-1",
        "begin_checkpoint",
        CommandResultKind.SUCCEEDED,
    )
    assert (complete.command_id, complete.command_kind) == ("complete-1", "complete_checkpoint")


def legacy_completion_is_silent(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.api_events == []


def rejected_unstarted_prompt_ends_with_queue_ordinal(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    outcome = after.last_turn_outcome
    assert outcome is not None
    assert (outcome.accepted_ordinal, outcome.turn_start_position) == (1, None)
    assert outcome.outcome == TurnOutcomeRejected(message="transport failed")
    assert after.queued_prompts == []
    assert system_texts(after) == ["transport failed"]
    assert turn_ended(mutation.api_events[0]).outcome.reason is OutcomeReason.LEGACY_UNCLASSIFIED


def interrupted_started_prompt_marks_the_work(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    ordinal = after.applied_event_ordinal
    assert text_of(after, f"system:work-interrupted:{ordinal}") == "Work interrupted: stopped"
    assert after.active_turn is None
    assert after.execution == ExecutionIdle()
    assert after.last_turn_outcome is not None
    assert after.last_turn_outcome.outcome == TurnOutcomeInterrupted(
        message="stopped", reason=OutcomeReason.WORKER_RESTARTED
    )


def unclassified_refusal_is_a_legacy_notice(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    notice = legacy_notice(mutation.api_events[0])
    assert (notice.original_type, notice.message, notice.command_id) == (
        "error",
        "nope",
        "cancel-1",
    )
    assert system_texts(after) == ["nope"]


def admission_refusal_is_rejected(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert command_ended(mutation.api_events[0]).outcome is CommandResultKind.REJECTED


def refused_set_config_reports_the_error(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.config_results == [("cfg-1", "unknown model")]
    assert after.queued_prompts == []


def refused_clear_context_goes_idle(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert before.execution == ExecutionRunning(started_at_ms=7)
    assert after.execution == ExecutionIdle()


def refused_close_reopens(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert before.execution == ExecutionClosing()
    assert after.execution == ExecutionIdle()


def interrupted_shell_says_why(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert text_of(after, "shell:sh-1") == "Shell · interrupted\n$ ls -la\nerror: worker restarted"


def shell_output_rewrites_the_line(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert text_of(after, "shell:sh-1") == (
        "Shell · running\n$ ls -la\n\nstdout:\nout"
        "\n[output continues; final tail will be shown on completion]\n\nstderr:\nerr"
    )


def configuration_value_set(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.configuration == {"model": "astra", "effort": "high"}


def warning_line(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert system_texts(after) == ["warning: disk almost full"]


def restart_while_running_interrupts_the_work(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    ordinal = after.applied_event_ordinal
    assert text_of(after, f"system:session-restarted:{ordinal}") == "[session restarted]"
    assert (
        text_of(after, f"system:work-interrupted:{ordinal}")
        == "Work interrupted by session restart"
    )
    assert after.execution == ExecutionIdle()
    assert after.active_turn == before.active_turn
    body = item(after, "agent:m1").body
    assert isinstance(body, AgentBody)
    assert body.streaming is False


def restart_while_idle_only_marks(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert system_texts(after) == ["[session restarted]"]
    assert mutation.configuration is None


def restart_forgets_goal_capability_and_execution(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    goal = after.configuration[GOAL_STATE_KEY]
    assert "capability" not in goal
    assert (goal["known"], goal["execution"]) == (False, None)
    assert goal["snapshot"] == before.configuration[GOAL_STATE_KEY]["snapshot"]


def terminal_output_parks(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    parked = item(after, "terminal:t1").body
    assert isinstance(parked, TerminalOutputBody)
    assert (parked.record.output, parked.record.exit_code) == ("done\n", 0)


def terminal_output_attaches(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    body = item(after, "tool:call-1").body
    assert isinstance(body, ToolBody)
    assert [record.output for record in body.terminal_outputs] == ["done\n"]
    assert body.terminal_refs == ["t1"]
    assert all(not entry.stable_id.startswith("terminal:") for entry in after.transcript)


def notice_line_keyed_on_command(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert text_of(after, "system:notice:note-1") == "Checkout moved"


def repeated_notice_is_skipped(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.transcript == []
    assert system_texts(after) == ["Checkout moved"]


def harness_turn_runs(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert (
        text_of(after, f"harness-turn:{after.applied_event_ordinal}")
        == "Agent continued on its own"
    )
    assert after.execution == ExecutionRunning(started_at_ms=42)


def harness_turn_ignored_during_a_turn(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert mutation.transcript == []
    assert mutation.execution is None


def settled_goes_idle(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionIdle()


def settled_with_prompt_in_flight_keeps_running(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionRunning(started_at_ms=42)
    assert mutation.transcript == []


def closing_state(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionClosing()


def closed_state(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert after.execution == ExecutionClosed()


_USAGE = TokenUsage(scope=UsageScope.TURN, total_tokens=3, input_tokens=2, output_tokens=1)

_MAILBOX = MailboxEvent(
    key="github:pr:1:comment:2", source="github", wake=False, text="Looks good.", created_at_ms=1
)


CASES = [
    Case(
        "steering_unconfirmed",
        SteeringUnconfirmed.of(command_id="s", message="m"),
        [],
        only_frontier_moves,
    ),
    Case(
        "native_agent",
        NativeAgent.of(event={"kind": "replay_begin"}),
        [],
        native_agent_is_kept_for_storage,
    ),
    Case(
        "agent_initialized_without_runtime",
        AgentInitialized.of(protocol_version=1, capabilities={}),
        [],
        only_frontier_moves,
    ),
    Case(
        "session_opened_resumed",
        SessionOpened.of(native_session_id="n", resumed=True),
        ["input_resolved"],
        resumed_open_clears_questions_quietly,
        setup=[ElicitationRequested.of(request=question())],
    ),
    Case(
        "session_opened_fresh",
        SessionOpened.of(native_session_id="n", resumed=False),
        [],
        fresh_open_says_so,
    ),
    Case(
        "session_configured",
        SessionConfigured.of(
            config_options=[
                {"id": "model", "name": "Model", "type": "select", "currentValue": "astra"},
                {"id": GOAL_STATE_KEY, "currentValue": "spoofed"},
                {"id": "no-value"},
            ]
        ),
        [],
        configured_replaces_values_and_keeps_goal,
        setup=[
            ConfigurationUpdated.of(key="obsolete", value="x"),
            update(
                "session_info_update", _meta={"goal": {"objective": "finish", "status": "active"}}
            ),
        ],
    ),
    Case(
        "session_modes_configured",
        SessionModesConfigured.of(modes={"currentModeId": "ask"}),
        [],
        only_frontier_moves,
    ),
    Case(
        "permission_auto_approved",
        PermissionAutoApproved.of(option_id="allow-always", option_name="Allow always"),
        [],
        permission_line,
    ),
    Case(
        "elicitation_requested",
        ElicitationRequested.of(request=question()),
        ["input_required"],
        question_pending,
    ),
    Case(
        "elicitation_requested_again_replaces",
        ElicitationRequested.of(
            request=ElicitationRequest(id="q", message="Second wording", fields=[])
        ),
        ["input_required"],
        question_replaced_in_place,
        setup=[
            ElicitationRequested.of(request=ElicitationRequest(id="q", message="First", fields=[]))
        ],
    ),
    Case(
        "elicitation_requested_plan_review",
        ElicitationRequested.of(
            request=ElicitationRequest(
                id="plan-review-1",
                message="Review the agent's plan:\n\n1. read\n2. write",
                fields=[],
            )
        ),
        ["input_required"],
        plan_review_becomes_a_proposal_item,
        setup=STREAMING,
    ),
    Case(
        "elicitation_resolved",
        ElicitationResolved.of(elicitation_id="question-1", action="decline"),
        ["input_resolved"],
        resolved_question_gone,
        setup=[ElicitationRequested.of(request=question())],
    ),
    Case(
        "elicitations_cleared",
        ElicitationsCleared(),
        ["input_resolved", "input_resolved"],
        all_questions_cleared,
        setup=[
            ElicitationRequested.of(request=question("q-a")),
            ElicitationRequested.of(request=question("q-b")),
        ],
    ),
    Case(
        "command_queued_prompt", queued("prompt-1", "Fix  the\nbuild"), [], prompt_queued_with_title
    ),
    Case(
        "command_queued_continue_authorized_work",
        CommandQueued.of(
            command_id="auto-1",
            command=ContinueAuthorizedWorkCommand.of(
                expected=RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST),
                user_command_id="prompt-0",
                completed_command_id="prompt-0",
                attempt=2,
            ),
            created_at_ms=1,
        ),
        [],
        continuation_queued_with_notice,
    ),
    Case(
        "command_queued_resume_after_quota",
        CommandQueued.of(
            command_id="resume-1",
            command=ResumeAfterQuotaCommand.of(
                expected=RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST),
                completed_command_id="prompt-0",
            ),
            created_at_ms=1,
        ),
        [],
        resume_queued_quietly,
    ),
    Case("command_queued_set_config", SET_CONFIG, [], set_config_queued_as_composer_text),
    Case(
        "command_queued_fast_mode",
        CommandQueued.of(
            command_id="cfg-2",
            command=SetConfigCommand.of(key="fast-mode", value="on"),
            created_at_ms=3,
        ),
        [],
        fast_mode_is_slash_fast,
    ),
    Case("command_queued_run_user_shell", SHELL, [], shell_queued_line),
    Case(
        "command_queued_clear_context",
        CommandQueued.of(command_id="clear-1", command=ClearContextCommand(), created_at_ms=7),
        [],
        clearing_context_runs,
    ),
    Case(
        "command_queued_close",
        CommandQueued.of(
            command_id="close-1",
            command=CloseCommand.of(
                barrier_command_id="b",
                expected=RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST),
            ),
            created_at_ms=7,
        ),
        [],
        close_closes_streams,
        setup=STREAMING,
    ),
    Case(
        "command_queued_begin_checkpoint",
        CommandQueued.of(
            command_id="b-1", command=BeginCheckpointCommand.of(reason=None), created_at_ms=7
        ),
        [],
        only_frontier_moves,
    ),
    Case(
        "command_started_prompt",
        started("prompt-1"),
        ["turn_started"],
        prompt_start_opens_a_turn,
        setup=[queued("prompt-1", "do it")],
    ),
    Case(
        "command_started_set_config",
        started("cfg-1"),
        [],
        set_config_start_only_leaves_the_queue,
        setup=[SET_CONFIG],
    ),
    Case("command_started_shell", started("sh-1", at_ms=9), [], shell_start_runs, setup=[SHELL]),
    Case("command_started_unknown", started("nobody"), [], only_frontier_moves),
    Case(
        "command_completed_context_cleared",
        completed(
            "clear-1",
            ContextClearedOutcome.of(native_session_id="n2"),
            RelayCommandKind.CLEAR_CONTEXT,
        ),
        ["command_ended", "input_resolved"],
        context_cleared_resets_the_conversation,
        setup=[*turn(), ElicitationRequested.of(request=question())],
    ),
    Case(
        "command_completed_prompt",
        finished(usage=_USAGE),
        ["turn_ended"],
        prompt_completion_ends_the_turn,
        setup=STREAMING,
    ),
    Case(
        "command_completed_prompt_awaiting_input",
        finished(stop_reason="awaiting_input"),
        ["input_required", "turn_ended"],
        awaiting_input_requires_unstructured_input,
        setup=STREAMING,
    ),
    Case(
        "command_completed_user_shell",
        completed(
            "sh-1",
            UserShellOutcome.of(result=shell_result(UserShellStatus.EXITED, exit_code=2)),
            RelayCommandKind.RUN_USER_SHELL,
        ),
        ["command_ended"],
        shell_result_line_and_command_ended,
        setup=[SHELL],
    ),
    Case(
        "command_completed_configured",
        completed("cfg-1", ConfiguredOutcome(), RelayCommandKind.SET_CONFIG),
        ["command_ended"],
        configured_reports_success,
        setup=[SET_CONFIG],
    ),
    Case(
        "command_completed_goal_controlled",
        completed("g-1", GoalControlledOutcome(), RelayCommandKind.GOAL_CONTROL),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_session_mode_set",
        completed("m-1", SessionModeSetOutcome(), RelayCommandKind.SET_SESSION_MODE),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_cancelled",
        completed("c-1", CancelledOutcome(), RelayCommandKind.CANCEL_TURN),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_user_shell_cancelled",
        completed("x-1", UserShellCancelledOutcome(), RelayCommandKind.CANCEL_USER_SHELL),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_notice_recorded",
        completed("n-1", NoticeRecordedOutcome(), RelayCommandKind.RECORD_NOTICE),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_recovery_floor_advanced",
        completed("f-1", RecoveryFloorAdvancedOutcome(), RelayCommandKind.ADVANCE_RECOVERY_FLOOR),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_checkpoint_released",
        completed("r-1", CheckpointReleasedOutcome(), RelayCommandKind.RELEASE_CHECKPOINT),
        ["command_ended"],
        succeeded_without_transcript,
    ),
    Case(
        "command_completed_checkpoint_with_barrier",
        completed(
            "complete-1",
            CheckpointCompletedOutcome(),
            RelayCommandKind.COMPLETE_CHECKPOINT,
            barrier="begin-1",
        ),
        ["command_ended", "command_ended"],
        barrier_ends_first,
    ),
    Case(
        "command_completed_without_kind",
        completed("old-1", CheckpointCompletedOutcome()),
        [],
        legacy_completion_is_silent,
    ),
    Case(
        "command_completed_steered",
        completed(
            "steer-1", SteeredOutcome.of(queued_command_id="prompt-2"), RelayCommandKind.STEER
        ),
        ["turn_started", "command_ended"],
        steered_moves_the_turn,
        setup=[queued("prompt-1", "a"), started("prompt-1"), queued("prompt-2", "b")],
    ),
    Case(
        "command_completed_steering_returned",
        completed(
            "steer-1",
            SteeringReturnedOutcome.of(queued_command_id="prompt-2"),
            RelayCommandKind.STEER,
        ),
        ["command_ended"],
        returned_steer_keeps_the_queue,
        setup=[queued("prompt-1", "a"), started("prompt-1"), queued("prompt-2", "b")],
    ),
    Case(
        "command_completed_closed",
        completed("close-1", ClosedOutcome(), RelayCommandKind.CLOSE),
        ["command_ended"],
        closed_outcome_closes,
    ),
    Case(
        "command_completed_queue_changed",
        completed(
            "clear-q",
            QueueChangedOutcome.of(removed_command_ids=["prompt-1", "prompt-2"]),
            RelayCommandKind.CLEAR_QUEUED_PROMPTS,
        ),
        ["command_ended"],
        queue_changed_drops_removed,
        setup=[queued("prompt-1"), queued("prompt-2"), queued("prompt-3")],
    ),
    Case(
        "retry_assessment_started",
        RetryAssessmentStarted.of(command_id="p", evidence={}),
        [],
        only_frontier_moves,
    ),
    Case(
        "retry_assessment_resolved",
        RetryAssessmentResolved.of(command_id="p", assessment_ordinal=1, retryable=True),
        [],
        only_frontier_moves,
    ),
    Case(
        "turn_assessment_updated", TurnAssessmentUpdated.of(assessment={}), [], only_frontier_moves
    ),
    Case(
        "checkpoint_ready", CheckpointReady.of(command_id="b", through=3), [], only_frontier_moves
    ),
    Case(
        "command_rejected_unstarted_prompt",
        refused(CommandRejected, "prompt-1", RelayCommandKind.PROMPT, "transport failed"),
        ["turn_ended"],
        rejected_unstarted_prompt_ends_with_queue_ordinal,
        setup=[queued("prompt-1", "go")],
    ),
    Case(
        "command_interrupted_started_prompt",
        refused(
            CommandInterrupted,
            "prompt-1",
            RelayCommandKind.PROMPT,
            "stopped",
            OutcomeReason.WORKER_RESTARTED,
        ),
        ["turn_ended"],
        interrupted_started_prompt_marks_the_work,
        setup=STREAMING,
    ),
    Case(
        "command_rejected_unclassified",
        refused(CommandRejected, "cancel-1", RelayCommandKind.CANCEL, "nope"),
        ["legacy_notice"],
        unclassified_refusal_is_a_legacy_notice,
    ),
    Case(
        "command_rejected_admission",
        refused(
            CommandRejected,
            "steer-1",
            RelayCommandKind.STEER,
            "busy",
            OutcomeReason.ADMISSION_REJECTED,
        ),
        ["command_ended"],
        admission_refusal_is_rejected,
    ),
    Case(
        "command_rejected_set_config",
        refused(
            CommandRejected,
            "cfg-1",
            RelayCommandKind.SET_CONFIG,
            "unknown model",
            OutcomeReason.COMMAND_FAILED,
        ),
        ["command_ended"],
        refused_set_config_reports_the_error,
        setup=[SET_CONFIG],
    ),
    Case(
        "command_rejected_clear_context",
        refused(
            CommandRejected,
            "clear-1",
            RelayCommandKind.CLEAR_CONTEXT,
            "busy",
            OutcomeReason.COMMAND_FAILED,
        ),
        ["command_ended"],
        refused_clear_context_goes_idle,
        setup=[
            CommandQueued.of(command_id="clear-1", command=ClearContextCommand(), created_at_ms=7)
        ],
    ),
    Case(
        "command_rejected_close_while_closing",
        refused(
            CommandRejected, "close-1", RelayCommandKind.CLOSE, "busy", OutcomeReason.COMMAND_FAILED
        ),
        ["command_ended"],
        refused_close_reopens,
        setup=[Closing()],
    ),
    Case(
        "command_interrupted_user_shell",
        refused(
            CommandInterrupted,
            "sh-1",
            RelayCommandKind.RUN_USER_SHELL,
            "worker restarted",
            OutcomeReason.WORKER_RESTARTED,
        ),
        ["command_ended"],
        interrupted_shell_says_why,
        setup=[SHELL, started("sh-1")],
    ),
    Case(
        "user_shell_output",
        UserShellOutput.of(
            command_id="sh-1",
            command="ls -la",
            stdout="out",
            stderr="err",
            stdout_truncated=True,
            stderr_truncated=False,
        ),
        [],
        shell_output_rewrites_the_line,
        setup=[SHELL, started("sh-1")],
    ),
    Case(
        "configuration_updated",
        ConfigurationUpdated.of(key="effort", value="high"),
        [],
        configuration_value_set,
        setup=[ConfigurationUpdated.of(key="model", value="astra")],
    ),
    Case(
        "session_fault",
        SessionFault.of(reason=OutcomeReason.RUNTIME_FAILURE, message="disk almost full"),
        ["session_fault"],
        warning_line,
    ),
    Case("warning", WarningObservation.of(message="disk almost full"), [], warning_line),
    Case(
        "session_restarted_running",
        SessionRestarted(),
        [],
        restart_while_running_interrupts_the_work,
        setup=STREAMING,
    ),
    Case("session_restarted_idle", SessionRestarted(), [], restart_while_idle_only_marks),
    Case(
        "session_restarted_with_goal",
        SessionRestarted(),
        [],
        restart_forgets_goal_capability_and_execution,
        setup=[
            update(
                "session_info_update",
                _meta={
                    "mjGoalCapability": GOAL["capability"],
                    "goal": GOAL["snapshot"],
                    "execution": GOAL["execution"],
                },
            )
        ],
    ),
    Case("terminal_output_parked", TERMINAL, [], terminal_output_parks),
    Case("terminal_output_attached", TERMINAL, [], terminal_output_attaches, setup=[TOOL]),
    Case(
        "notice",
        Notice.of(message="Checkout moved"),
        [],
        notice_line_keyed_on_command,
        command_id="note-1",
    ),
    Case(
        "notice_repeated",
        Notice.of(message="Checkout moved again"),
        [],
        repeated_notice_is_skipped,
        setup=[Notice.of(message="Checkout moved")],
        command_id="note-1",
    ),
    Case("harness_turn_started", HarnessTurnStarted.of(started_at_ms=42), [], harness_turn_runs),
    Case(
        "harness_turn_started_in_a_turn",
        HarnessTurnStarted.of(started_at_ms=42),
        [],
        harness_turn_ignored_during_a_turn,
        setup=STREAMING,
    ),
    Case(
        "harness_turn_settled",
        HarnessTurnSettled.of(origin="native"),
        [],
        settled_goes_idle,
        setup=[HarnessTurnStarted.of(started_at_ms=42)],
    ),
    Case(
        "harness_turn_settled_prompt_in_flight",
        HarnessTurnSettled.of(origin="native", prompt_in_flight=True),
        [],
        settled_with_prompt_in_flight_keeps_running,
        setup=[HarnessTurnStarted.of(started_at_ms=42)],
    ),
    Case("closing", Closing(), [], closing_state),
    Case("closed", Closed(), [], closed_state),
    Case(
        "mailbox_hook_lease_created",
        MailboxHookLeaseCreated.of(
            lease=MailboxHookLease(
                lease_id="lease-1", events=[_MAILBOX], hook_event="PostToolUse", expires_at_ms=9
            )
        ),
        [],
        only_frontier_moves,
    ),
    Case(
        "mailbox_hook_lease_returned",
        MailboxHookLeaseReturned.of(
            lease_id="lease-1", reason=MailboxHookLeaseReturnReason.TIMEOUT
        ),
        [],
        only_frontier_moves,
    ),
    Case(
        "mailbox_events_delivered",
        MailboxEventsDelivered.of(
            event_keys=[_MAILBOX.key],
            path=MailboxDeliveryPath.TOOL_HOOK,
            hook_event="PostToolUse",
            events=[_MAILBOX],
            lease_id="lease-1",
        ),
        [],
        only_frontier_moves,  # each event's line was written when it was queued
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_each_observation_changes_what_it_should_and_yields_its_api_events(case: Case) -> None:
    journal = Journal()
    for observation in case.setup:
        journal.add(
            observation, command_id=case.command_id if isinstance(observation, Notice) else None
        )
    before = journal.projection.snapshot()
    before_bytes = encode(before)
    mutation = journal.add(case.observation, at_ms=150, command_id=case.command_id)

    assert kinds(mutation) == case.api
    assert mutation.last_activity_at_ms == 150
    assert journal.session.applied_event_ordinal == before.applied_event_ordinal + 1
    assert encode(before) == before_bytes, "applying an event must not change a snapshot"
    case.check(before, mutation, journal.session)
    check_session(journal.session)


def test_every_observation_type_has_a_table_row() -> None:
    covered = {type(case.observation) for case in CASES} | {SessionUpdate, AgentInitialized}
    assert covered == set(typing.get_args(RelayObservation))
