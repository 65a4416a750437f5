"""Relay-event projection: each observation's mutation and API events, chain and integrity rules."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest

from relaystore.domain.api_events import (
    ApiCommandEnded,
    ApiEventData,
    ApiInputRequired,
    ApiInputResolved,
    ApiLegacyNotice,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnEnded,
    InputRequiredData,
    InputResolvedData,
    LegacyNoticeData,
    MaterializedTurn,
    SessionFaultEventData,
)
from relaystore.domain.elicitation import ElicitationRequest
from relaystore.domain.errors import ChainFault, ProjectionError, RelayChainError
from relaystore.domain.materialized import (
    UNCHANGED,
    AgentBody,
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedSession,
    MaterializedSessionMutation,
    PlanBody,
    PlanProposalBody,
    SetConfigKind,
    SystemBody,
    TerminalOutputBody,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
    UserBody,
)
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    OutcomeReason,
    ProviderCost,
    TokenUsage,
    TurnDiagnostic,
    TurnOutcomeCompleted,
    TurnOutcomeInterrupted,
    TurnOutcomeRejected,
    TurnResultKind,
    UsageScope,
)
from relaystore.domain.projection import GOAL_STATE_KEY, SessionProjection, derive_api_events
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.projection.integrity import (
    check_mutation,
    check_session,
    check_transcript_changes,
)
from relaystore.domain.projection.markers import CONTEXT_BOUNDARY_PREFIX, CONTINUATION_PROMPT
from relaystore.domain.projection.streams import merge_content_chunk
from relaystore.domain.projection.text import (
    materialized_content_text,
    provisional_session_title,
    sanitize_terminal_text,
    strip_hidden_prompt_context,
    user_shell_result_text,
)
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
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
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
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
    PromptCommand,
    PromptOutcome,
    QueueChangedOutcome,
    RecoveryFloorAdvancedOutcome,
    RelayCommandKind,
    RelayCursor,
    RelayEvent,
    RelayObservation,
    ResumeAfterQuotaCommand,
    RetryAssessmentResolved,
    RetryAssessmentStarted,
    RunUserShellCommand,
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
    TerminalOutput,
    TurnAssessmentUpdated,
    UserShellCancelledOutcome,
    UserShellOutcome,
    UserShellOutput,
    UserShellResult,
    UserShellStatus,
    WarningObservation,
)
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
    RuntimeReceipt,
)
from relaystore.domain.wire import encode

# --- helpers -------------------------------------------------------------------------------


class Journal:
    """A session's projection and the relay chain it applied; each ``add`` applies one event."""

    def __init__(self, session_id: str = "session-1", *, chained: bool = False) -> None:
        self.projection = SessionProjection(MaterializedSession.empty(session_id))
        self.chained = chained
        self.api_events: list[ApiEventData] = []

    @property
    def session(self) -> MaterializedSession:
        return self.projection.session

    @session.setter
    def session(self, session: MaterializedSession) -> None:
        self.projection = SessionProjection(session)

    def next_event(
        self, observation: RelayObservation, *, at_ms: int = 100, command_id: str | None = None
    ) -> RelayEvent:
        session = self.session
        if self.chained:
            return RelayEvent.create(
                format=RELAY_EVENT_FORMAT_V1,
                ordinal=session.applied_event_ordinal + 1,
                previous_digest=session.applied_event_digest,
                recorded_at_ms=at_ms,
                command_id=command_id,
                observation=observation,
            )
        return RelayEvent.create(
            ordinal=session.applied_event_ordinal + 1,
            recorded_at_ms=at_ms,
            command_id=command_id,
            observation=observation,
        )

    def add(
        self, observation: RelayObservation, *, at_ms: int = 100, command_id: str | None = None
    ) -> MaterializedSessionMutation:
        event = self.next_event(observation, at_ms=at_ms, command_id=command_id)
        mutation = self.projection.apply(event)
        assert mutation is not None
        self.api_events.extend(mutation.api_events)
        return mutation

    def run(self, observations: Iterable[Any]) -> None:
        for observation in observations:
            self.add(observation)

    @property
    def kinds(self) -> list[str]:
        return [event.kind for event in self.api_events]


def kinds(mutation: MaterializedSessionMutation) -> list[str]:
    return [event.kind for event in mutation.api_events]


def turn_ended(event: ApiEventData) -> ApiTurnOutcome:
    assert isinstance(event, ApiTurnEnded)
    return event.data.turn


def command_ended(event: ApiEventData) -> CommandResult:
    assert isinstance(event, ApiCommandEnded)
    return event.data


def input_required(event: ApiEventData) -> InputRequiredData:
    assert isinstance(event, ApiInputRequired)
    return event.data


def input_resolved(event: ApiEventData) -> InputResolvedData:
    assert isinstance(event, ApiInputResolved)
    return event.data


def session_fault(event: ApiEventData) -> SessionFaultEventData:
    assert isinstance(event, ApiSessionFault)
    return event.data


def legacy_notice(event: ApiEventData) -> LegacyNoticeData:
    assert isinstance(event, ApiLegacyNotice)
    return event.data


def runtime_receipt(event: ApiEventData) -> RuntimeReceipt:
    assert isinstance(event, ApiRuntimeResolved)
    return event.data.receipt


def item(session: MaterializedSession, stable_id: str) -> TranscriptItem:
    found = [entry for entry in session.transcript if entry.stable_id == stable_id]
    assert len(found) == 1, f"{stable_id} not in {[e.stable_id for e in session.transcript]}"
    return found[0]


def system_texts(session: MaterializedSession) -> list[str]:
    return [entry.body.text for entry in session.transcript if isinstance(entry.body, SystemBody)]


def text_of(session: MaterializedSession, stable_id: str) -> str:
    body = item(session, stable_id).body
    assert isinstance(body, SystemBody)
    return body.text


def queued(command_id: str = "prompt-1", text: str | None = None, at_ms: int = 1) -> CommandQueued:
    prompt = [] if text is None else [{"type": "text", "text": text}]
    return CommandQueued.of(
        command_id=command_id, command=PromptCommand.of(prompt=prompt), created_at_ms=at_ms
    )


def started(command_id: str = "prompt-1", at_ms: int = 2) -> CommandStarted:
    return CommandStarted.of(command_id=command_id, started_at_ms=at_ms)


def finished(
    command_id: str = "prompt-1",
    stop_reason: str = "end_turn",
    *,
    command: RelayCommandKind | None = None,
    diagnostic: TurnDiagnostic | None = None,
    usage: TokenUsage | None = None,
) -> CommandCompleted:
    outcome = PromptOutcome.of(stop_reason=stop_reason, diagnostic=diagnostic, usage=usage)
    return CommandCompleted.of(command_id=command_id, command=command, outcome=outcome)


def completed(
    command_id: str,
    outcome: Any,
    command: RelayCommandKind | None = None,
    barrier: str | None = None,
) -> CommandCompleted:
    return CommandCompleted.of(
        barrier_command_id=barrier, command=command, command_id=command_id, outcome=outcome
    )


def turn() -> list[RelayObservation]:
    """The origin's seed ``turn()``: queued, started, completed with end_turn."""
    return [queued(), started(), finished()]


def update(session_update: str, /, **fields: Any) -> SessionUpdate:
    return SessionUpdate.of(update={"sessionUpdate": session_update, **fields})


def chunk(
    text: str, message_id: str | None = None, kind: str = "agent_message_chunk"
) -> SessionUpdate:
    fields: dict[str, Any] = {"content": {"type": "text", "text": text}}
    if message_id is not None:
        fields["messageId"] = message_id
    return update(kind, **fields)


def refused(
    observation: type[CommandRejected] | type[CommandInterrupted],
    command_id: str,
    kind: RelayCommandKind,
    message: str,
    reason: OutcomeReason | None = None,
) -> CommandRejected | CommandInterrupted:
    return observation.of(reason=reason, command_id=command_id, command=kind, message=message)


def question(request_id: str = "question-1") -> ElicitationRequest:
    return ElicitationRequest.from_acp_params(
        request_id,
        {
            "mode": "form",
            "sessionId": "session-1",
            "message": "Which directory?",
            "requestedSchema": {
                "type": "object",
                "properties": {"directory": {"type": "string"}},
                "required": ["directory"],
            },
        },
    )


def runtime(version: str) -> RuntimeIdentity:
    identity = RuntimeIdentity(
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="provider", version=version)],
    )
    identity.refresh_id()
    return identity


def shell_result(status: UserShellStatus, **fields: Any) -> UserShellResult:
    values: dict[str, Any] = {"command": "ls", "stdout": "a\n", "stderr": "", "duration_ms": 12}
    values.update(fields)
    return UserShellResult(status=status, **values)


def agent_running(journal: Journal, command_id: str = "prompt-1") -> None:
    journal.run([queued(command_id, "do it"), started(command_id)])


# --- the origin's seed facts ---------------------------------------------------------------


def test_seed_turn_yields_exactly_turn_started_then_turn_ended() -> None:
    journal = Journal(chained=True)
    journal.run(turn())

    assert journal.session.applied_event_digest == (
        "a6aff09e636ffa8e59dcb3548acbeebddd663a1a0f75068cbe781d5ec9c7ac2a"
    )
    assert journal.kinds == ["turn_started", "turn_ended"]
    started_event, ended_event = journal.api_events
    assert encode(started_event.data) == (
        b'{"turn":{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,'
        b'"started_at_ms":2}}'
    )
    assert encode(ended_event.data) == (
        b'{"turn":{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,'
        b'"completed_ordinal":3,"completed_at_ms":100,'
        b'"outcome":{"kind":"completed","stop_reason":"end_turn"}}}'
    )
    assert journal.session.active_turn is None
    assert journal.session.execution == ExecutionIdle()
    outcome = journal.session.last_turn_outcome
    assert outcome is not None
    assert (outcome.accepted_ordinal, outcome.turn_start_position) == (1, 2)


def test_seed_question_inside_a_turn_is_required_then_resolved_with_its_turn_id() -> None:
    request = question()
    journal = Journal(chained=True)
    observations = turn()
    observations[2:2] = [
        ElicitationRequested.of(request=request),
        ElicitationResolved.of(elicitation_id=request.id, action="accept"),
    ]
    journal.run(observations)

    assert journal.kinds == ["turn_started", "input_required", "input_resolved", "turn_ended"]
    required, resolved = (
        input_required(journal.api_events[1]),
        input_resolved(journal.api_events[2]),
    )
    assert required.request == request
    assert required.turn_id == 1
    assert (resolved.elicitation_id, resolved.turn_id, resolved.action) == (
        "question-1",
        1,
        "accept",
    )
    assert journal.session.pending_elicitations == []
    assert journal.session.active_turn is None
    assert journal.session.last_turn_outcome is not None
    assert journal.session.last_turn_outcome.accepted_ordinal == 1


def test_seed_checkpoint_cleanup_ends_commands_without_ending_the_turn() -> None:
    journal = Journal(chained=True)
    journal.run(turn()[:2])
    for command_id, reason in [
        ("arbitrary-one", OutcomeReason.CONTROLLER_DISCONNECTED),
        ("arbitrary-two", OutcomeReason.OWNER_LOST_ON_RESTART),
    ]:
        journal.add(
            refused(
                CommandInterrupted,
                command_id,
                RelayCommandKind.BEGIN_CHECKPOINT,
                "diagnostic wording is not a contract",
                reason,
            )
        )
    journal.add(
        refused(
            CommandRejected,
            "arbitrary-three",
            RelayCommandKind.COMPLETE_CHECKPOINT,
            "Cannot save recovery floor",
            OutcomeReason.COMMAND_FAILED,
        )
    )

    session = journal.session
    assert session.active_turn is not None
    assert session.last_turn_outcome is None
    assert not any("diagnostic wording" in text for text in system_texts(session))
    assert any("Cannot save recovery floor" in text for text in system_texts(session))

    journal.add(turn()[2])
    assert journal.kinds == [
        "turn_started",
        "command_ended",
        "command_ended",
        "command_ended",
        "turn_ended",
    ]
    for event in journal.api_events[1:3]:
        result = command_ended(event)
        assert result.outcome is CommandResultKind.CANCELLED
        assert result.command_kind == "begin_checkpoint"
        assert result.owner is CommandOwner.WORKER
    failed = command_ended(journal.api_events[3])
    assert (failed.outcome, failed.reason, failed.command_kind) == (
        CommandResultKind.FAILED,
        OutcomeReason.COMMAND_FAILED,
        "complete_checkpoint",
    )
    assert failed.message == "Cannot save recovery floor"
    assert turn_ended(journal.api_events[4]).outcome.kind is TurnResultKind.COMPLETED


@pytest.mark.parametrize(
    ("terminal", "kind", "reason"),
    [
        (
            finished(stop_reason="Cancelled", command=RelayCommandKind.PROMPT),
            TurnResultKind.CANCELLED,
            OutcomeReason.REQUESTED_CANCELLATION,
        ),
        (
            finished(stop_reason="QuotaLimit", command=RelayCommandKind.PROMPT),
            TurnResultKind.FAILED,
            OutcomeReason.QUOTA_LIMIT,
        ),
        (
            finished(stop_reason="provider_error"),
            TurnResultKind.FAILED,
            OutcomeReason.UNRECOGNIZED_STOP_REASON,
        ),
        (
            refused(
                CommandRejected,
                "prompt-1",
                RelayCommandKind.PROMPT,
                "unavailable",
                OutcomeReason.ADMISSION_REJECTED,
            ),
            TurnResultKind.REJECTED,
            OutcomeReason.ADMISSION_REJECTED,
        ),
        (
            refused(
                CommandInterrupted,
                "prompt-1",
                RelayCommandKind.PROMPT,
                "runtime stopped",
                OutcomeReason.RUNTIME_STOPPED,
            ),
            TurnResultKind.INTERRUPTED,
            OutcomeReason.RUNTIME_STOPPED,
        ),
    ],
    ids=["cancelled", "quota-limit", "provider-error", "admission-rejected", "runtime-stopped"],
)
def test_seed_prompt_endings_are_one_semantic_turn_ended_and_nothing_else(
    terminal: RelayObservation, kind: TurnResultKind, reason: OutcomeReason
) -> None:
    journal = Journal(chained=True)
    journal.run([*turn()[:2], terminal])

    assert journal.kinds == ["turn_started", "turn_ended"]
    ended = turn_ended(journal.api_events[1])
    assert ended.command_id == "prompt-1"
    assert ended.accepted_ordinal == 1
    assert (ended.outcome.kind, ended.outcome.reason) == (kind, reason)


def test_seed_provider_error_keeps_its_stop_reason_and_message() -> None:
    journal = Journal()
    journal.run([*turn()[:2], finished(stop_reason="provider_error")])

    outcome = turn_ended(journal.api_events[-1]).outcome
    assert (outcome.message, outcome.stop_reason) == ("provider_error", "provider_error")


def test_a_diagnostic_turns_an_unknown_stop_reason_into_a_provider_failure() -> None:
    journal = Journal()
    diagnostic = TurnDiagnostic(message="model overloaded", code="529")
    journal.run([*turn()[:2], finished(stop_reason="provider_error", diagnostic=diagnostic)])

    ended = turn_ended(journal.api_events[-1])
    assert ended.outcome.reason is OutcomeReason.PROVIDER_FAILURE
    assert ended.outcome.message == "model overloaded"
    assert ended.diagnostic == diagnostic


def test_seed_session_fault_after_a_completed_turn_leaves_that_turn_alone() -> None:
    journal = Journal(chained=True)
    journal.run(turn())
    outcome = journal.session.last_turn_outcome
    mutation = journal.add(
        SessionFault.of(reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited"),
        command_id="cmd-9",
    )

    assert journal.kinds == ["turn_started", "turn_ended", "session_fault"]
    fault = session_fault(mutation.api_events[0])
    assert (fault.reason, fault.message, fault.command_id) == (
        OutcomeReason.RUNTIME_UNAVAILABLE,
        "runtime exited",
        "cmd-9",
    )
    assert mutation.last_turn_outcome is None
    assert journal.session.last_turn_outcome == outcome
    assert system_texts(journal.session)[-1] == "warning: runtime exited"


def test_seed_runtime_receipts_carry_the_event_ordinal_and_time() -> None:
    journal = Journal(chained=True)
    journal.add(
        AgentInitialized.of(protocol_version=1, capabilities={}, runtime=runtime("first")),
        at_ms=111,
    )
    journal.add(SessionRestarted())
    journal.add(
        AgentInitialized.of(protocol_version=1, capabilities={}, runtime=runtime("second")),
        at_ms=333,
    )

    receipts = [runtime_receipt(event) for event in journal.api_events]
    assert [event.kind for event in journal.api_events] == ["runtime_resolved", "runtime_resolved"]
    assert [(r.event_ordinal, r.observed_at_ms) for r in receipts] == [(1, 111), (3, 333)]
    assert receipts[0].id == (
        "mj-runtime-v1:55e085ff68b9b6b8e189583b12475fb6e2dde6f5f3d27e88979ed826b0174bdc"
    )
    assert receipts[0].id != receipts[1].id


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


_STREAMING: list[RelayObservation] = [
    queued("prompt-1", "do it"),
    started("prompt-1"),
    chunk("hi", "m1"),
]
_GOAL = {
    "capability": {"version": 1, "controlMethod": "_session/goal", "actions": ["pause"]},
    "known": True,
    "snapshot": {"objective": "finish", "status": "active"},
    "execution": {"version": 1, "status": "idle"},
    "answered_resume": None,
    "pending_resume": None,
    "decision": None,
}
_SHELL = CommandQueued.of(
    command_id="sh-1", command=RunUserShellCommand.of(command="ls -la"), created_at_ms=5
)
_SET_CONFIG = CommandQueued.of(
    command_id="cfg-1", command=SetConfigCommand.of(key="model", value="astra"), created_at_ms=3
)
_TOOL = update(
    "tool_call",
    toolCallId="call-1",
    title="Run",
    kind="execute",
    content=[{"type": "terminal", "terminalId": "t1"}],
)
_TERMINAL = TerminalOutput.of(terminal_id="t1", output="done\n", exit_code=0, truncated=False)
_USAGE = TokenUsage(scope=UsageScope.TURN, total_tokens=3, input_tokens=2, output_tokens=1)

_MAILBOX = MailboxEvent(
    key="github:pr:1:comment:2", source="github", wake=False, text="Looks good.", created_at_ms=1
)


def mailbox_delivery_line(
    before: MaterializedSession, mutation: MaterializedSessionMutation, after: MaterializedSession
) -> None:
    assert system_texts(after) == [
        "Delivered 1 mailbox event by tool hook (PostToolUse): github — Looks good."
    ]


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
        setup=_STREAMING,
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
    Case("command_queued_set_config", _SET_CONFIG, [], set_config_queued_as_composer_text),
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
    Case("command_queued_run_user_shell", _SHELL, [], shell_queued_line),
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
        setup=_STREAMING,
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
        setup=[_SET_CONFIG],
    ),
    Case("command_started_shell", started("sh-1", at_ms=9), [], shell_start_runs, setup=[_SHELL]),
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
        setup=_STREAMING,
    ),
    Case(
        "command_completed_prompt_awaiting_input",
        finished(stop_reason="awaiting_input"),
        ["input_required", "turn_ended"],
        awaiting_input_requires_unstructured_input,
        setup=_STREAMING,
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
        setup=[_SHELL],
    ),
    Case(
        "command_completed_configured",
        completed("cfg-1", ConfiguredOutcome(), RelayCommandKind.SET_CONFIG),
        ["command_ended"],
        configured_reports_success,
        setup=[_SET_CONFIG],
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
        setup=_STREAMING,
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
        setup=[_SET_CONFIG],
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
        setup=[_SHELL, started("sh-1")],
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
        setup=[_SHELL, started("sh-1")],
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
        setup=_STREAMING,
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
                    "mjGoalCapability": _GOAL["capability"],
                    "goal": _GOAL["snapshot"],
                    "execution": _GOAL["execution"],
                },
            )
        ],
    ),
    Case("terminal_output_parked", _TERMINAL, [], terminal_output_parks),
    Case("terminal_output_attached", _TERMINAL, [], terminal_output_attaches, setup=[_TOOL]),
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
        setup=_STREAMING,
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
        mailbox_delivery_line,
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


# --- session_update ------------------------------------------------------------------------


def agent_body(session: MaterializedSession, stable_id: str) -> AgentBody:
    body = item(session, stable_id).body
    assert isinstance(body, AgentBody)
    return body


def test_agent_chunks_with_one_message_id_merge_into_one_streaming_item() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    journal.add(chunk(" there", "m1"), at_ms=120)

    agent = item(journal.session, "agent:m1")
    assert agent.body == AgentBody(
        chunks=[{"content": {"type": "text", "text": "hi there"}, "messageId": "m1"}],
        streaming=True,
    )
    assert agent.latest_content_event_ordinal == 4
    assert (agent.position, agent.last_changed_at_ms) == (3, 120)


def test_chunks_without_message_id_continue_the_newest_open_stream() -> None:
    journal = Journal()
    journal.run([*_STREAMING[:2], chunk("one"), chunk(" two")])

    assert [entry.stable_id for entry in journal.session.transcript] == ["user:prompt-1", "agent:3"]
    assert agent_body(journal.session, "agent:3").chunks[0]["content"]["text"] == "one two"


def test_chunks_that_differ_in_more_than_text_stay_apart() -> None:
    merged = merge_content_chunk(
        [{"content": {"type": "text", "text": "a"}, "messageId": "m"}],
        {
            "content": {"type": "text", "text": "b", "annotations": {"priority": 1}},
            "messageId": "m",
        },
    )
    assert len(merged) == 2
    image = merge_content_chunk(
        merged, {"content": {"type": "image", "data": "", "mimeType": "x"}, "messageId": "m"}
    )
    assert len(image) == 3


def test_merging_a_chunk_never_changes_the_chunks_it_was_given() -> None:
    first: dict[str, Any] = {"content": {"type": "text", "text": "a"}}
    chunks = [first]
    merged = merge_content_chunk(chunks, {"content": {"type": "text", "text": "b"}})
    assert merged == [{"content": {"type": "text", "text": "ab"}}]
    assert chunks == [{"content": {"type": "text", "text": "a"}}]
    assert first["content"] == {"type": "text", "text": "a"}


def test_a_thought_closes_the_open_agent_stream_and_opens_its_own() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    journal.add(chunk("hmm", "t1", kind="agent_thought_chunk"))

    assert agent_body(journal.session, "agent:m1").streaming is False
    thought = item(journal.session, "thought:t1")
    assert thought.body == ThoughtBody(
        chunks=[{"content": {"type": "text", "text": "hmm"}, "messageId": "t1"}], streaming=True
    )
    assert thought.latest_content_event_ordinal is None


def test_idle_chunks_without_message_id_join_the_last_item_and_stay_closed() -> None:
    journal = Journal()
    journal.run([*turn(), chunk("late"), chunk(" reply")])

    last = journal.session.transcript[-1]
    assert last.stable_id == "agent:4"
    assert last.body == AgentBody(
        chunks=[{"content": {"type": "text", "text": "late reply"}}], streaming=False
    )
    assert last.latest_content_event_ordinal == 5


def test_an_idle_chunk_after_another_kind_starts_a_new_item() -> None:
    journal = Journal()
    journal.run(
        [*turn(), chunk("late"), chunk("thinking", kind="agent_thought_chunk"), chunk("more")]
    )

    ids = [entry.stable_id for entry in journal.session.transcript]
    assert ids == ["user:prompt-1", "agent:4", "thought:5", "agent:6"]


def test_a_message_id_naming_another_kind_of_item_is_a_projection_error() -> None:
    journal = Journal()
    journal.run(_STREAMING[:2])
    impostor = TranscriptItem(
        stable_id="agent:m",
        position=1,
        latest_content_event_ordinal=None,
        created_at_ms=1,
        last_changed_at_ms=1,
        body=SystemBody(text="not an agent message"),
    )
    session = msgspec.structs.replace(
        journal.session, transcript=[*journal.session.transcript, impostor]
    )
    event = journal.next_event(chunk("z", "m"))
    projection = SessionProjection(session)
    with pytest.raises(ProjectionError, match="agent:m") as caught:
        projection.apply(event)
    assert (caught.value.session_id, caught.value.ordinal) == ("session-1", 3)


def test_close_streams_finishes_agent_streams_before_thought_streams() -> None:
    journal = Journal()
    journal.run([*_STREAMING, chunk("t", "t1", kind="agent_thought_chunk"), chunk("again", "m1")])
    assert agent_body(journal.session, "agent:m1").streaming is True
    mutation = journal.add(finished())
    closed = [
        change.item.stable_id
        for change in mutation.transcript
        if isinstance(change, TranscriptUpsert)
    ]
    assert closed == ["agent:m1"]
    journal2 = Journal()
    journal2.run([*_STREAMING, chunk("t", "t1", kind="agent_thought_chunk")])
    session = journal2.session
    reopened = msgspec.structs.replace(
        item(session, "agent:m1"),
        body=AgentBody(chunks=agent_body(session, "agent:m1").chunks, streaming=True),
    )
    session = msgspec.structs.replace(
        session, transcript=[session.transcript[0], reopened, session.transcript[2]]
    )
    mutation = SessionProjection(session).apply(journal2.next_event(finished()))
    assert mutation is not None
    closed = [
        change.item.stable_id
        for change in mutation.transcript
        if isinstance(change, TranscriptUpsert)
    ]
    assert closed == ["agent:m1", "thought:t1"]


def test_user_message_chunks_are_not_projected() -> None:
    journal = Journal()
    mutation = journal.add(chunk("echo", kind="user_message_chunk"))
    assert mutation.transcript == []


def test_tool_call_creates_an_item_with_the_acp_call_without_defaults() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    journal.add(
        update(
            "tool_call",
            toolCallId="c1",
            title="Read",
            kind="other",
            status="pending",
            content=[],
            rawInput=None,
        )
    )

    tool = item(journal.session, "tool:c1")
    assert tool.body == ToolBody(call={"toolCallId": "c1", "title": "Read"})
    assert agent_body(journal.session, "agent:m1").streaming is False


def test_a_resent_tool_call_keeps_position_and_creation_time() -> None:
    journal = Journal()
    journal.add(update("tool_call", toolCallId="c1", title="Read", status="in_progress"), at_ms=100)
    journal.add(chunk("between"))
    journal.add(
        update("tool_call", toolCallId="c1", title="Read file", status="completed"), at_ms=300
    )

    tool = item(journal.session, "tool:c1")
    assert (tool.position, tool.created_at_ms, tool.last_changed_at_ms) == (1, 100, 300)
    assert tool.body == ToolBody(
        call={"toolCallId": "c1", "title": "Read file", "status": "completed"}
    )


def test_tool_call_update_merges_only_the_fields_it_carries() -> None:
    journal = Journal()
    journal.add(
        update(
            "tool_call", toolCallId="c1", title="Bash", kind="execute", rawInput={"command": "ls"}
        )
    )
    journal.add(
        update(
            "tool_call_update",
            toolCallId="c1",
            status="completed",
            title=None,
            rawOutput={"ok": True},
        )
    )

    assert item(journal.session, "tool:c1").body == ToolBody(
        call={
            "toolCallId": "c1",
            "title": "Bash",
            "kind": "execute",
            "status": "completed",
            "rawInput": {"command": "ls"},
            "rawOutput": {"ok": True},
        }
    )


def test_a_tool_update_for_an_unknown_call_changes_nothing_and_keeps_streams_open() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    mutation = journal.add(update("tool_call_update", toolCallId="never-seen", status="completed"))

    assert mutation.transcript == []
    assert agent_body(journal.session, "agent:m1").streaming is True


def test_a_cached_presentation_survives_only_while_its_inputs_do() -> None:
    journal = Journal()
    journal.add(update("tool_call", toolCallId="c1", title="Bash", kind="execute"))
    tool = item(journal.session, "tool:c1")
    presentation = {"summary": "ls", "source": "ls", "source_kind": "title", "tool_kind": "execute"}
    with_presentation = msgspec.structs.replace(
        tool, body=msgspec.structs.replace(tool.body, presentation=presentation)
    )
    journal.session = msgspec.structs.replace(journal.session, transcript=[with_presentation])

    journal.add(update("tool_call_update", toolCallId="c1", status="in_progress"))
    body = item(journal.session, "tool:c1").body
    assert isinstance(body, ToolBody)
    assert body.presentation == presentation
    journal.add(update("tool_call_update", toolCallId="c1", title="Bash: ls -la"))
    body = item(journal.session, "tool:c1").body
    assert isinstance(body, ToolBody)
    assert body.presentation is None


def test_a_plan_is_replaced_within_its_turn_and_started_anew_in_the_next() -> None:
    journal = Journal()
    journal.run(_STREAMING[:2])
    journal.add(update("plan", entries=[{"content": "a", "priority": "high", "status": "pending"}]))
    journal.add(
        update("plan", entries=[{"content": "a", "priority": "high", "status": "completed"}])
    )
    journal.run([finished(), queued("prompt-2", "next"), started("prompt-2")])
    journal.add(update("plan", entries=[]))

    plans = [entry for entry in journal.session.transcript if isinstance(entry.body, PlanBody)]
    assert [entry.stable_id for entry in plans] == ["plan:3", "plan:8"]
    assert plans[0].body == PlanBody(
        plan={"entries": [{"content": "a", "priority": "high", "status": "completed"}]}
    )


def test_mode_and_config_option_updates_set_configuration() -> None:
    journal = Journal()
    journal.add(update("current_mode_update", currentModeId="architect"))
    assert journal.session.configuration == {"mode": "architect"}
    journal.add(
        update("config_option_update", configOptions=[{"id": "model", "currentValue": "m2"}])
    )
    assert journal.session.configuration == {"model": "m2"}


def test_session_info_title_sets_normalizes_and_clears_the_title() -> None:
    journal = Journal()
    journal.add(update("session_info_update", title="  <mj-context>x</mj-context>  Fix   it "))
    assert journal.session.session_title == "Fix it"
    mutation = journal.add(update("session_info_update"))
    assert mutation.session_title is UNCHANGED
    journal.add(update("session_info_update", title=None))
    assert journal.session.session_title is None


def test_a_harness_title_is_not_replaced_by_a_prompt_title() -> None:
    journal = Journal()
    journal.add(update("session_info_update", title="Harness title"))
    journal.add(queued("prompt-1", "Something else"))
    assert journal.session.session_title == "Harness title"


def test_goal_meta_is_projected_and_a_running_goal_keeps_the_session_running() -> None:
    journal = Journal()
    journal.add(
        update(
            "session_info_update",
            _meta={
                "goal": {"objective": "finish", "status": "active", "createdAt": 1},
                "execution": {"version": 1, "status": "running", "turnId": "t1"},
            },
        )
    )
    goal = journal.session.configuration[GOAL_STATE_KEY]
    assert (goal["known"], goal["execution"]["status"]) == (True, "running")

    journal.run([queued("prompt-1", "go"), started("prompt-1"), finished()])
    assert journal.session.execution == ExecutionRunning(started_at_ms=2)
    assert journal.session.active_turn is None

    journal.add(
        update(
            "session_info_update",
            _meta={"execution": {"version": 1, "status": "idle", "turnId": "old"}},
        )
    )
    assert journal.session.configuration[GOAL_STATE_KEY]["execution"]["status"] == "running"
    journal.add(
        update(
            "session_info_update",
            _meta={"execution": {"version": 1, "status": "idle", "turnId": "t1"}},
        )
    )
    assert journal.session.configuration[GOAL_STATE_KEY]["execution"]["status"] == "idle"


def test_goal_meta_under_the_air_extension_and_null_clears_the_goal() -> None:
    journal = Journal()
    journal.add(
        update(
            "session_info_update",
            _meta={"jetbrains": {"air": {"goal": {"objective": "o", "status": "active"}}}},
        )
    )
    assert journal.session.configuration[GOAL_STATE_KEY]["snapshot"] == {
        "objective": "o",
        "status": "active",
    }
    journal.add(update("session_info_update", _meta={"goal": None}))
    assert journal.session.configuration[GOAL_STATE_KEY]["snapshot"] is None


def test_an_unsupported_goal_execution_state_is_a_projection_error() -> None:
    journal = Journal()
    event = journal.next_event(
        update("session_info_update", _meta={"execution": {"version": 2, "status": "running"}})
    )
    with pytest.raises(ProjectionError, match="execution state"):
        journal.projection.apply(event)


def test_a_usage_update_records_the_sessions_provider_cost_and_nothing_else() -> None:
    journal = Journal()
    mutation = journal.add(
        SessionUpdate.of(
            update={
                "sessionUpdate": "usage_update",
                "used": 1,
                "size": 2,
                "cost": {"amount": 0.5, "currency": "USD"},
            }
        )
    )
    assert mutation.transcript == []
    assert mutation.configuration is None
    assert mutation.provider_cost == ProviderCost(
        amount=0.5, currency="USD", observed_at_ms=mutation.last_activity_at_ms
    )
    without_cost = journal.add(
        SessionUpdate.of(update={"sessionUpdate": "usage_update", "used": 3, "size": 4})
    )
    assert without_cost.provider_cost is None


def test_available_commands_updates_change_nothing() -> None:
    journal = Journal()
    mutation = journal.add(
        SessionUpdate.of(
            update={"sessionUpdate": "available_commands_update", "availableCommands": []}
        )
    )
    assert mutation.transcript == []
    assert mutation.configuration is None
    assert mutation.provider_cost is None


# --- terminals -----------------------------------------------------------------------------


def test_parked_terminal_output_moves_into_the_tool_call_that_names_it() -> None:
    journal = Journal()
    journal.add(_TERMINAL)
    mutation = journal.add(_TOOL)

    assert TranscriptRemove("terminal:t1") in mutation.transcript
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]
    body = item(journal.session, "tool:call-1").body
    assert isinstance(body, ToolBody)
    assert [(record.terminal_id, record.output) for record in body.terminal_outputs] == [
        ("t1", "done\n")
    ]


def test_a_raw_result_claims_its_one_parked_terminal() -> None:
    journal = Journal()
    journal.add(TerminalOutput.of(terminal_id="t9", output="hi\n", exit_code=0, truncated=False))
    journal.add(update("tool_call", toolCallId="k1", title="Bash", kind="execute"))
    journal.add(
        update(
            "tool_call_update",
            toolCallId="k1",
            status="completed",
            rawOutput={"exit_code": 0, "output": list(b"hi\n")},
        )
    )

    body = item(journal.session, "tool:k1").body
    assert isinstance(body, ToolBody)
    assert body.terminal_refs == ["t9"]
    assert [record.output for record in body.terminal_outputs] == ["hi\n"]
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:k1"]


def test_identical_raw_results_leave_the_output_parked() -> None:
    journal = Journal()
    for terminal_id in ("t1", "t2"):
        journal.add(
            TerminalOutput.of(terminal_id=terminal_id, output="same", exit_code=0, truncated=False)
        )
    journal.add(
        update(
            "tool_call",
            toolCallId="k1",
            title="Bash",
            status="completed",
            rawOutput={"exit_code": 0, "output": "same"},
        )
    )
    assert {entry.stable_id for entry in journal.session.transcript} == {
        "terminal:t1",
        "terminal:t2",
        "tool:k1",
    }


def fallback_call(terminal_id: str) -> SessionUpdate:
    return update(
        "tool_call",
        toolCallId=f"hel-terminal:{terminal_id}",
        title="cargo test",
        kind="execute",
        status="in_progress",
        content=[{"type": "terminal", "terminalId": terminal_id}],
        _meta={"hel.dev/fallback-terminal": True},
    )


def test_terminal_exit_completes_the_interim_fallback_call() -> None:
    journal = Journal()
    journal.add(fallback_call("t1"))
    journal.add(TerminalOutput.of(terminal_id="t1", output="boom", exit_code=1, truncated=False))

    body = item(journal.session, "tool:hel-terminal:t1").body
    assert isinstance(body, ToolBody)
    assert body.call["status"] == "failed"


def test_a_real_tool_call_replaces_the_fallback_and_adopts_its_start() -> None:
    journal = Journal()
    journal.add(fallback_call("t1"), at_ms=50)
    journal.add(
        TerminalOutput.of(terminal_id="t1", output="ok", exit_code=0, truncated=False), at_ms=60
    )
    journal.add(_TOOL, at_ms=70)

    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]
    tool = item(journal.session, "tool:call-1")
    assert (tool.position, tool.created_at_ms) == (1, 50)
    assert isinstance(tool.body, ToolBody)
    assert [record.output for record in tool.body.terminal_outputs] == ["ok"]


def test_a_fallback_call_for_a_terminal_a_real_tool_owns_is_dropped() -> None:
    journal = Journal()
    journal.add(_TOOL)
    mutation = journal.add(fallback_call("t1"))
    assert [change for change in mutation.transcript if isinstance(change, TranscriptUpsert)] == []
    assert [entry.stable_id for entry in journal.session.transcript] == ["tool:call-1"]


# --- shell result text ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fields", "first_line"),
    [
        (UserShellStatus.EXITED, {"exit_code": 0}, "Shell · done · 12 ms"),
        (UserShellStatus.EXITED, {}, "Shell · finished · 12 ms"),
        (UserShellStatus.EXITED, {"exit_code": 3}, "Shell · failed (exit 3) · 12 ms"),
        (UserShellStatus.SIGNALED, {"signal": "SIGKILL"}, "Shell · signaled (SIGKILL) · 12 ms"),
        (UserShellStatus.SIGNALED, {}, "Shell · signaled (unknown signal) · 12 ms"),
        (UserShellStatus.TIMED_OUT, {}, "Shell · timed out · 12 ms"),
        (UserShellStatus.CANCELLED, {}, "Shell · cancelled · 12 ms"),
        (UserShellStatus.INTERRUPTED, {}, "Shell · interrupted · 12 ms"),
        (UserShellStatus.FAILED, {"error": "spawn failed"}, "Shell · failed · 12 ms"),
    ],
)
def test_shell_result_lines_name_how_the_command_ended(
    status: UserShellStatus, fields: dict[str, Any], first_line: str
) -> None:
    text = user_shell_result_text(shell_result(status, **fields))
    assert text.splitlines()[0] == first_line
    assert text.endswith("\n\nerror: spawn failed") == ("error" in fields)


@pytest.mark.parametrize(
    ("status", "fields", "outcome", "reason"),
    [
        (UserShellStatus.EXITED, {"exit_code": 0}, CommandResultKind.SUCCEEDED, None),
        (
            UserShellStatus.SIGNALED,
            {"signal": "SIGTERM"},
            CommandResultKind.FAILED,
            OutcomeReason.SIGNALED,
        ),
        (UserShellStatus.TIMED_OUT, {}, CommandResultKind.FAILED, OutcomeReason.TIMED_OUT),
        (
            UserShellStatus.CANCELLED,
            {},
            CommandResultKind.CANCELLED,
            OutcomeReason.REQUESTED_CANCELLATION,
        ),
        (UserShellStatus.INTERRUPTED, {}, CommandResultKind.FAILED, OutcomeReason.WORKER_RESTARTED),
        (
            UserShellStatus.FAILED,
            {"error": "spawn failed"},
            CommandResultKind.FAILED,
            OutcomeReason.COMMAND_FAILED,
        ),
    ],
)
def test_shell_completions_map_their_status_to_a_command_result(
    status: UserShellStatus,
    fields: dict[str, Any],
    outcome: CommandResultKind,
    reason: OutcomeReason | None,
) -> None:
    journal = Journal()
    mutation = journal.add(
        completed(
            "sh-1",
            UserShellOutcome.of(result=shell_result(status, **fields)),
            RelayCommandKind.RUN_USER_SHELL,
        )
    )
    ended = command_ended(mutation.api_events[0])
    assert (ended.outcome, ended.reason) == (outcome, reason)
    if status is UserShellStatus.FAILED:
        assert ended.message == "spawn failed"
    if reason is None:
        assert ended.message is None


# --- chain strictness and integrity --------------------------------------------------------


def test_a_redelivered_event_is_already_applied_and_changes_nothing() -> None:
    journal = Journal()
    event = journal.next_event(queued())
    assert journal.projection.apply(event) is not None
    before = encode(journal.session)

    assert journal.projection.apply(event) is None
    assert encode(journal.session) == before
    other = msgspec.structs.replace(event, digest="3" * 64)
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(other)
    assert caught.value.fault is ChainFault.FORK
    assert caught.value.session_id == "session-1"
    assert encode(journal.session) == before


def test_a_gap_a_fork_and_a_forged_digest_are_refused_and_change_nothing() -> None:
    journal = Journal(chained=True)
    journal.add(queued())
    before = encode(journal.session)
    ahead = RelayEvent.create(ordinal=3, recorded_at_ms=1, observation=started())
    with pytest.raises(RelayChainError, match="expected ordinal 2, found 3"):
        journal.projection.apply(ahead)

    fork = RelayEvent.create(
        format=RELAY_EVENT_FORMAT_V1,
        ordinal=2,
        previous_digest="1" * 64,
        recorded_at_ms=1,
        observation=started(),
    )
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(fork)
    assert caught.value.fault is ChainFault.FORK

    forged = msgspec.structs.replace(journal.next_event(started()), digest="2" * 64)
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(forged)
    assert caught.value.fault is ChainFault.BAD_DIGEST
    assert encode(journal.session) == before


def test_errors_name_the_session_id_given_by_the_caller() -> None:
    projection = SessionProjection(MaterializedSession.empty("session-1"), session_id="other-name")
    event = RelayEvent.create(ordinal=2, recorded_at_ms=1, observation=started())
    with pytest.raises(RelayChainError) as caught:
        projection.apply(event)
    assert caught.value.session_id == "other-name"


def test_apply_changes_the_projection_in_place_and_a_snapshot_stays_as_it_was() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    transcript = journal.projection.transcript
    before = journal.session
    snapshot = journal.projection.snapshot()
    snapshot_bytes = encode(snapshot)
    event = journal.next_event(chunk(" more", "m1"))
    mutation = journal.projection.apply(event)

    assert mutation is not None
    assert journal.projection.transcript is transcript  # changed in place, never copied
    session = journal.session
    assert (session.applied_event_ordinal, session.applied_event_digest) == (
        event.ordinal,
        event.digest,
    )
    assert journal.projection.frontier == RelayCursor(ordinal=event.ordinal, digest=event.digest)
    assert encode(snapshot) == snapshot_bytes
    assert snapshot.transcript == before.transcript != session.transcript
    assert kinds(mutation) == []


def integrity_case(journal: Journal, replacement: TranscriptItem) -> ProjectionError:
    """The rules :class:`SessionProjection` checks, run on a hand-made mutation."""
    ordinal = journal.session.applied_event_ordinal + 1
    mutation = MaterializedSessionMutation(transcript=[TranscriptUpsert(replacement)])
    items = {entry.stable_id: entry for entry in journal.session.transcript}

    def check() -> None:
        check_mutation(mutation, session_id="session-1", ordinal=ordinal)
        check_transcript_changes(mutation, items.get, session_id="session-1", ordinal=ordinal)

    with pytest.raises(ProjectionError) as caught:
        check()
    return caught.value


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"position": 1}, "immutable identity"),
        ({"created_at_ms": 1}, "immutable identity"),
        ({"last_changed_at_ms": 250}, "changed timestamp backwards"),
        ({"latest_content_event_ordinal": 4}, "latest content ordinal backwards"),
    ],
)
def test_integrity_rules_refuse_rewriting_an_items_history(
    fields: dict[str, Any], words: str
) -> None:
    journal = Journal()
    journal.run(_STREAMING)
    journal.add(chunk(" again", "m1"), at_ms=200)
    journal.add(chunk("!", "m1"), at_ms=300)
    agent = item(journal.session, "agent:m1")
    assert (agent.position, agent.latest_content_event_ordinal, agent.last_changed_at_ms) == (
        3,
        5,
        300,
    )

    error = integrity_case(journal, msgspec.structs.replace(agent, **fields))
    assert words in str(error)
    assert "'agent:m1'" in str(error)
    assert (error.session_id, error.ordinal) == ("session-1", 6)


def test_an_agent_item_losing_its_latest_content_ordinal_is_refused() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    agent = item(journal.session, "agent:m1")
    error = integrity_case(
        journal, msgspec.structs.replace(agent, latest_content_event_ordinal=None)
    )
    assert "agent:m1" in str(error)


def test_an_item_from_the_future_is_refused() -> None:
    journal = Journal()
    future = TranscriptItem(
        stable_id="system:99",
        position=99,
        latest_content_event_ordinal=None,
        created_at_ms=1,
        last_changed_at_ms=1,
        body=SystemBody(text="x"),
    )
    error = integrity_case(journal, future)
    assert "position 99" in str(error)
    assert error.ordinal == 1


def test_a_later_change_of_an_item_removed_earlier_in_the_event_starts_it_anew() -> None:
    journal = Journal()
    journal.run(_STREAMING)
    agent = item(journal.session, "agent:m1")
    ordinal = journal.session.applied_event_ordinal + 1
    moved = msgspec.structs.replace(agent, position=ordinal, latest_content_event_ordinal=ordinal)
    mutation = MaterializedSessionMutation(
        transcript=[TranscriptRemove("agent:m1"), TranscriptUpsert(moved)]
    )
    items = {entry.stable_id: entry for entry in journal.session.transcript}
    check_transcript_changes(mutation, items.get, session_id="session-1", ordinal=ordinal)


def test_a_refused_event_changes_nothing_and_the_projection_stays_usable() -> None:
    journal = Journal()
    journal.run([*_STREAMING, queued("prompt-2")])
    before = encode(journal.session)
    index = TranscriptIndex.build(journal.session.transcript)
    refused_events = [
        journal.next_event(
            completed(
                "steer-1", SteeredOutcome.of(queued_command_id="ghost"), RelayCommandKind.STEER
            )
        ),
        journal.next_event(
            update("session_info_update", _meta={"execution": {"version": 2, "status": "x"}})
        ),
    ]
    for event in refused_events:
        with pytest.raises(ProjectionError):
            journal.projection.apply(event)
        assert encode(journal.session) == before
        assert journal.projection.index == index
    journal.add(chunk(" fine", "m1"))
    assert agent_body(journal.session, "agent:m1").chunks[0]["content"]["text"] == "hi fine"


def test_last_activity_never_moves_back_and_a_claimed_terminal_item_is_removed() -> None:
    journal = Journal()
    journal.add(WarningObservation.of(message="a"), at_ms=500)
    journal.add(WarningObservation.of(message="b"), at_ms=400)
    assert journal.session.last_activity_at_ms == 500
    journal.add(TerminalOutput.of(terminal_id="t9", output="x", exit_code=0, truncated=False))
    assert item(journal.session, "terminal:t9") is not None
    mutation = journal.add(
        update(
            "tool_call",
            toolCallId="c9",
            title="x",
            content=[{"type": "terminal", "terminalId": "t9"}],
        )
    )
    assert TranscriptRemove("terminal:t9") in mutation.transcript
    assert [entry.stable_id for entry in journal.session.transcript] == [
        "system:1",
        "system:2",
        "tool:c9",
    ]
    assert journal.projection.index == TranscriptIndex.build(journal.session.transcript)


def test_steering_into_a_prompt_missing_from_the_queue_is_a_projection_error() -> None:
    journal = Journal()
    journal.run([queued("prompt-1"), started("prompt-1")])
    event = journal.next_event(
        completed("steer-1", SteeredOutcome.of(queued_command_id="ghost"), RelayCommandKind.STEER)
    )
    with pytest.raises(ProjectionError, match="'ghost' is missing from the materialized queue"):
        journal.projection.apply(event)


def test_steering_into_a_config_change_is_a_projection_error() -> None:
    journal = Journal()
    journal.run([queued("prompt-1"), started("prompt-1"), _SET_CONFIG])
    event = journal.next_event(completed("steer-1", SteeredOutcome.of(queued_command_id="cfg-1")))
    with pytest.raises(ProjectionError, match="not a prompt"):
        journal.projection.apply(event)


# --- derive_api_events directly -------------------------------------------------------------


def test_a_turn_that_is_already_active_is_not_started_again() -> None:
    session = MaterializedSession.empty("s")
    active = MaterializedTurn(
        command_id="p", accepted_ordinal=1, turn_start_position=2, started_at_ms=2
    )
    session = msgspec.structs.replace(session, active_turn=active)
    event = RelayEvent.create(
        ordinal=1, recorded_at_ms=1, observation=WarningObservation.of(message="x")
    )
    assert derive_api_events(session, event, MaterializedSessionMutation(active_turn=active)) == []
    other = msgspec.structs.replace(active, command_id="q")
    assert [
        e.kind
        for e in derive_api_events(session, event, MaterializedSessionMutation(active_turn=other))
    ] == ["turn_started"]


def test_a_refused_prompt_never_yields_command_ended_or_legacy_notice() -> None:
    journal = Journal()
    for reason in (None, OutcomeReason.RUNTIME_STOPPED):
        journal.add(queued("p"))
        mutation = journal.add(refused(CommandRejected, "p", RelayCommandKind.PROMPT, "no", reason))
        assert kinds(mutation) == ["turn_ended"]


# --- text helpers --------------------------------------------------------------------------


def test_provisional_titles_are_bounded_and_cut_at_a_word() -> None:
    assert provisional_session_title("  fix\tthe   build ") == "fix the build"
    long = "word " * 30
    title = provisional_session_title(long)
    assert title is not None
    assert len(title) <= 64
    assert title.endswith("word…")
    assert provisional_session_title("   ") is None


def test_hidden_context_is_stripped_and_an_unterminated_block_hides_everything() -> None:
    assert strip_hidden_prompt_context("<mj-context>secret</mj-context> hello") == "hello"
    assert (
        strip_hidden_prompt_context("<hel-a>x</hel-a><user_shell_command>ls</user_shell_command>hi")
        == "hi"
    )
    assert strip_hidden_prompt_context("<mj-context>secret and more") == ""
    assert strip_hidden_prompt_context("<mj-context") == ""
    assert strip_hidden_prompt_context("<b>bold</b>") == "<b>bold</b>"
    assert strip_hidden_prompt_context("<mj-Upper>x</mj-Upper>y") == "<mj-Upper>x</mj-Upper>y"


def test_terminal_escapes_are_removed_from_text() -> None:
    assert sanitize_terminal_text("\x1b[31mred\x1b[0m\r\nline\rnext\x07") == "red\nline\nnext"
    assert sanitize_terminal_text("\x1b]0;title\x07visible") == "visible"
    assert sanitize_terminal_text("a\x1b(Bb\tc") == "ab\tc"
    assert sanitize_terminal_text("\x1b]unterminated\nrest") == "\nrest"


def test_content_text_reads_every_block_kind() -> None:
    text = materialized_content_text(
        [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "", "mimeType": "image/png"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///a.rs"},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///c", "blob": "AAAA"}},
            "plain",
            {"type": "text", "text": ""},
        ]
    )
    assert text.split("\n") == [
        "hello",
        "[image]",
        "[a.rs](file:///a.rs)",
        "body",
        "[embedded resource: file:///c]",
        "plain",
    ]


# --- the index stays equal to a fresh one ---------------------------------------------------


def test_the_incremental_index_equals_an_index_built_from_scratch() -> None:
    journal = Journal()
    observations: list[RelayObservation] = [
        *_STREAMING,
        chunk("t", "t1", kind="agent_thought_chunk"),
        _TOOL,
        update("plan", entries=[]),
        _TERMINAL,
        fallback_call("t2"),
        TerminalOutput.of(terminal_id="t2", output="x", exit_code=0, truncated=False),
        update(
            "tool_call",
            toolCallId="c9",
            title="x",
            content=[{"type": "terminal", "terminalId": "t2"}],
        ),
        finished(),
    ]
    for observation in observations:
        journal.add(observation)
        assert journal.projection.index == TranscriptIndex.build(journal.session.transcript)


def test_resume_after_quota_runs_as_a_turn_with_the_continuation_text() -> None:
    journal = Journal()
    journal.add(
        CommandQueued.of(
            command_id="resume-1",
            command=ResumeAfterQuotaCommand.of(
                expected=RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST),
                completed_command_id="prompt-0",
            ),
            created_at_ms=1,
        )
    )
    journal.add(started("resume-1"))
    journal.add(finished("resume-1"))

    assert journal.kinds == ["turn_started", "turn_ended"]
    assert turn_ended(journal.api_events[1]).accepted_ordinal == 1
    assert item(journal.session, "user:resume-1").body == UserBody(
        content=[{"type": "text", "text": CONTINUATION_PROMPT}]
    )
    assert journal.session.session_title == provisional_session_title(CONTINUATION_PROMPT)
