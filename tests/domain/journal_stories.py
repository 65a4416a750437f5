"""Relay journals for projection tests: small builders of observations, and generated
journals (a hypothesis strategy of abstract steps turned into a valid journal).

A support module, not a test module: the projection scenarios, the in-place tests and
the actor-level replay tests import it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import strategies as st

from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.materialized import (
    MaterializedSession,
)
from relaystore.domain.outcomes import (
    OutcomeReason,
)
from relaystore.domain.projection import SessionProjection
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.relay import (
    ClearContextCommand,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    ConfigurationUpdated,
    ContextClearedOutcome,
    ElicitationRequested,
    ElicitationResolved,
    ElicitationsCleared,
    HarnessTurnSettled,
    HarnessTurnStarted,
    Notice,
    PromptCommand,
    PromptOutcome,
    RelayCommandKind,
    RelayEvent,
    RelayObservation,
    RunUserShellCommand,
    SessionFault,
    SessionRestarted,
    SessionUpdate,
    SteeredOutcome,
    TerminalOutput,
    UserShellOutcome,
    UserShellOutput,
    UserShellResult,
    UserShellStatus,
)
from relaystore.domain.wire import encode
from relaystore.testing import JournalBuilder


def prompt(command_id: str, text: str, at_ms: int = 1) -> CommandQueued:
    return CommandQueued.of(
        command_id=command_id,
        command=PromptCommand.of(prompt=[{"type": "text", "text": text}]),
        created_at_ms=at_ms,
    )


def start(command_id: str, at_ms: int = 2) -> CommandStarted:
    return CommandStarted.of(command_id=command_id, started_at_ms=at_ms)


def end(command_id: str, stop_reason: str = "end_turn") -> CommandCompleted:
    return CommandCompleted.of(
        command_id=command_id, outcome=PromptOutcome.of(stop_reason=stop_reason)
    )


def acp(session_update: str, /, **fields: Any) -> SessionUpdate:
    return SessionUpdate.of(update={"sessionUpdate": session_update, **fields})


def says(
    text: str, message_id: str | None = "m1", kind: str = "agent_message_chunk"
) -> SessionUpdate:
    fields: dict[str, Any] = {"content": {"type": "text", "text": text}}
    if message_id is not None:
        fields["messageId"] = message_id
    return acp(kind, **fields)


# --- generated journals --------------------------------------------------------------------

_ACTIONS = (
    "prompt",
    "start",
    "chunk",
    "thought",
    "tool",
    "tool_update",
    "terminal",
    "plan",
    "question",
    "answer",
    "clear_questions",
    "complete",
    "interrupt",
    "reject",
    "shell",
    "restart",
    "fault",
    "notice",
    "clear",
    "steer",
    "harness",
    "settle",
    "config",
)


def journal_observations(steps: list[tuple[str, int, str]]) -> list[RelayObservation]:
    """Turn abstract steps into observations that form a valid journal."""
    observations: list[RelayObservation] = []
    queue: list[str] = []
    running: str | None = None
    tools: list[str] = []
    for counter, (action, small, text) in enumerate(steps, start=1):
        message_id = None if small == 0 else f"m{small}"
        if action == "prompt":
            queue.append(f"p{counter}")
            observations.append(prompt(f"p{counter}", text or "go", at_ms=counter))
        elif action == "start" and running is None:
            if not queue:
                queue.append(f"p{counter}")
                observations.append(prompt(f"p{counter}", text or "go", at_ms=counter))
            running = queue.pop(0)
            observations.append(start(running, at_ms=counter))
        elif action == "chunk":
            observations.append(says(text, message_id))
        elif action == "thought":
            observations.append(says(text, message_id, kind="agent_thought_chunk"))
        elif action == "tool":
            call_id = f"c{counter}"
            tools.append(call_id)
            content = [{"type": "terminal", "terminalId": f"t{small}"}] if small % 2 else []
            observations.append(
                acp("tool_call", toolCallId=call_id, title=text or "tool", content=content)
            )
        elif action == "tool_update":
            call_id = tools[small % len(tools)] if tools and small else "unknown"
            status = ("pending", "in_progress", "completed", "failed")[small]
            observations.append(
                acp("tool_call_update", toolCallId=call_id, status=status, rawInput={"q": text})
            )
        elif action == "terminal":
            observations.append(
                TerminalOutput.of(
                    terminal_id=f"t{small}", output=text, exit_code=small, truncated=False
                )
            )
        elif action == "plan":
            observations.append(
                acp("plan", entries=[{"content": text, "priority": "low", "status": "pending"}])
            )
        elif action == "question":
            observations.append(
                ElicitationRequested.of(
                    request=ElicitationRequest(id=f"q{small}", message=text or "?", fields=[])
                )
            )
        elif action == "answer":
            observations.append(ElicitationResolved.of(elicitation_id=f"q{small}", action="accept"))
        elif action == "clear_questions":
            observations.append(ElicitationsCleared())
        elif action == "complete" and running is not None:
            stop = ("end_turn", "cancelled", "max_tokens", "awaiting_input")[small]
            observations.append(end(running, stop))
            running = None
        elif action == "interrupt" and running is not None:
            observations.append(
                CommandInterrupted.of(
                    reason=OutcomeReason.WORKER_RESTARTED,
                    command_id=running,
                    command=RelayCommandKind.PROMPT,
                    message=text,
                )
            )
            running = None
        elif action == "reject" and queue:
            observations.append(
                CommandRejected.of(
                    command_id=queue.pop(0), command=RelayCommandKind.PROMPT, message=text or "no"
                )
            )
        elif action == "shell":
            shell_id = f"sh{counter}"
            result = UserShellResult(
                command="ls",
                stdout=text,
                stderr="",
                exit_code=small,
                duration_ms=5,
                status=UserShellStatus.EXITED,
            )
            observations.extend(
                [
                    CommandQueued.of(
                        command_id=shell_id,
                        command=RunUserShellCommand.of(command="ls"),
                        created_at_ms=counter,
                    ),
                    start(shell_id, at_ms=counter),
                    UserShellOutput.of(
                        command_id=shell_id,
                        command="ls",
                        stdout=text,
                        stderr="",
                        stdout_truncated=False,
                        stderr_truncated=False,
                    ),
                    CommandCompleted.of(
                        command_id=shell_id,
                        command=RelayCommandKind.RUN_USER_SHELL,
                        outcome=UserShellOutcome.of(result=result),
                    ),
                ]
            )
        elif action == "restart":
            observations.append(SessionRestarted())
        elif action == "fault":
            observations.append(SessionFault.of(reason=OutcomeReason.RUNTIME_FAILURE, message=text))
        elif action == "notice":
            observations.append(Notice.of(message=text or "note"))
        elif action == "clear" and running is None:
            observations.extend(
                [
                    CommandQueued.of(
                        command_id=f"clear{counter}",
                        command=ClearContextCommand(),
                        created_at_ms=counter,
                    ),
                    CommandCompleted.of(
                        command_id=f"clear{counter}",
                        outcome=ContextClearedOutcome.of(native_session_id="n"),
                    ),
                ]
            )
        elif action == "steer" and running is not None and queue:
            target = queue.pop(0)
            observations.append(
                CommandCompleted.of(
                    command_id=f"s{counter}", outcome=SteeredOutcome.of(queued_command_id=target)
                )
            )
        elif action == "harness":
            observations.append(HarnessTurnStarted.of(started_at_ms=counter))
        elif action == "settle":
            observations.append(HarnessTurnSettled.of(origin=None, prompt_in_flight=small == 1))
        elif action == "config":
            observations.append(ConfigurationUpdated.of(key=f"k{small}", value=text))
    return observations


def build_events(observations: list[RelayObservation]) -> list[RelayEvent]:
    journal = JournalBuilder(start_ms=10_001, step_ms=1)
    return journal.extend(observations)


def replay(
    session: MaterializedSession, events: Iterable[RelayEvent]
) -> tuple[MaterializedSession, list[bytes]]:
    """``session`` (handed over) with ``events`` applied, and the feed they yield."""
    projection = SessionProjection(session)
    feed: list[bytes] = []
    for event in events:
        mutation = projection.apply(event)
        assert mutation is not None
        feed.extend(encode(api_event) for api_event in mutation.api_events)
    assert projection.index == TranscriptIndex.build(projection.session.transcript)
    return projection.session, feed


# Streaming and turns dominate real journals, so they are drawn more often.
_WEIGHTED = (
    *_ACTIONS,
    "chunk",
    "chunk",
    "chunk",
    "thought",
    "start",
    "start",
    "complete",
    "tool_update",
)
steps_strategy = st.lists(
    st.tuples(st.sampled_from(_WEIGHTED), st.integers(0, 3), st.text("ab c\n<>é", max_size=6)),
    min_size=1,
    max_size=80,
)
