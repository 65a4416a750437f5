"""Helpers the projection tests share (a support module, not a test module)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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
    SessionFaultEventData,
)
from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.materialized import (
    AgentBody,
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    TranscriptItem,
)
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    CommandResult,
    OutcomeReason,
    TokenUsage,
    TurnDiagnostic,
)
from relaystore.domain.projection import SessionProjection
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_FORMAT_V2,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCommandKind,
    RelayEvent,
    RelayObservation,
    RunUserShellCommand,
    SessionUpdate,
    SetConfigCommand,
    TerminalOutput,
    UserShellResult,
    UserShellStatus,
)
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
    RuntimeReceipt,
)
from relaystore.testing import JournalBuilder


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
        journal = JournalBuilder(
            format=RELAY_EVENT_FORMAT_V1 if self.chained else RELAY_EVENT_FORMAT_V2,
            after=self.session.frontier,
        )
        return journal.add(observation, command_id=command_id, at_ms=at_ms)

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
    return parse_acp_request(
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


STREAMING: list[RelayObservation] = [
    queued("prompt-1", "do it"),
    started("prompt-1"),
    chunk("hi", "m1"),
]
GOAL = {
    "capability": {"version": 1, "controlMethod": "_session/goal", "actions": ["pause"]},
    "known": True,
    "snapshot": {"objective": "finish", "status": "active"},
    "execution": {"version": 1, "status": "idle"},
    "answered_resume": None,
    "pending_resume": None,
    "decision": None,
}
SHELL = CommandQueued.of(
    command_id="sh-1", command=RunUserShellCommand.of(command="ls -la"), created_at_ms=5
)
SET_CONFIG = CommandQueued.of(
    command_id="cfg-1", command=SetConfigCommand.of(key="model", value="astra"), created_at_ms=3
)
TOOL = update(
    "tool_call",
    toolCallId="call-1",
    title="Run",
    kind="execute",
    content=[{"type": "terminal", "terminalId": "t1"}],
)
TERMINAL = TerminalOutput.of(terminal_id="t1", output="done\n", exit_code=0, truncated=False)


def agent_body(session: MaterializedSession, stable_id: str) -> AgentBody:
    body = item(session, stable_id).body
    assert isinstance(body, AgentBody)
    return body


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
