"""Whole sessions through the projection: what a reader of the transcript and the feed sees."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.api_events import (
    ApiCommandEnded,
    ApiEventData,
    ApiInputRequired,
    ApiInputResolved,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
)
from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.materialized import (
    AgentBody,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
)
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    CommandResult,
    CommandResultKind,
    OutcomeReason,
    TurnResultKind,
)
from relaystore.domain.projection import GOAL_STATE_KEY, SessionProjection
from relaystore.domain.projection.integrity import check_session
from relaystore.domain.projection.markers import CONTEXT_BOUNDARY_PREFIX
from relaystore.domain.relay import (
    BeginCheckpointCommand,
    CancelledOutcome,
    CancelTurnCommand,
    CheckpointCompletedOutcome,
    CheckpointReady,
    ClearContextCommand,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CompleteCheckpointCommand,
    ConfigurationUpdated,
    ConfiguredOutcome,
    ContextClearedOutcome,
    ElicitationRequested,
    ElicitationResolved,
    RelayCommandKind,
    RelayEvent,
    RelayObservation,
    RunUserShellCommand,
    SessionOpened,
    SessionRestarted,
    SetConfigCommand,
    SteerCommand,
    SteeredOutcome,
    TerminalOutput,
    UserShellOutcome,
    UserShellOutput,
    UserShellResult,
    UserShellStatus,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.journal_stories import (
    acp,
    build_events,
    end,
    journal_observations,
    prompt,
    replay,
    says,
    start,
    steps_strategy,
)
from tests.paths import REAL_EXCERPT

FIXTURE = REAL_EXCERPT


class Session:
    """Feeds observations through a :class:`SessionProjection`, keeping the feed it yields."""

    def __init__(self, session_id: str = "session-1") -> None:
        self.projection = SessionProjection(MaterializedSession.empty(session_id))
        self.feed: list[ApiEventData] = []

    @property
    def state(self) -> MaterializedSession:
        return self.projection.session

    def apply(self, event: RelayEvent) -> MaterializedSessionMutation:
        mutation = self.projection.apply(event)
        assert mutation is not None
        self.feed.extend(mutation.api_events)
        return mutation

    def observe(
        self, observation: RelayObservation, *, at_ms: int = 1_000, command_id: str | None = None
    ) -> list[str]:
        event = RelayEvent.create(
            ordinal=self.state.applied_event_ordinal + 1,
            recorded_at_ms=at_ms,
            command_id=command_id,
            observation=observation,
        )
        mutation = self.apply(event)
        return [api_event.kind for api_event in mutation.api_events]

    def observe_all(self, observations: Iterable[Any], *, at_ms: int = 1_000) -> list[str]:
        kinds: list[str] = []
        for offset, observation in enumerate(observations):
            kinds.extend(self.observe(observation, at_ms=at_ms + offset))
        return kinds

    def ids(self) -> list[str]:
        return [item.stable_id for item in self.state.transcript]

    def item(self, stable_id: str) -> TranscriptItem:
        (found,) = [item for item in self.state.transcript if item.stable_id == stable_id]
        return found

    def text(self, stable_id: str) -> str:
        body = self.item(stable_id).body
        assert isinstance(body, SystemBody)
        return body.text


def turn_ended(event: ApiEventData) -> ApiTurnOutcome:
    assert isinstance(event, ApiTurnEnded)
    return event.data.turn


def turn_started(event: ApiEventData) -> MaterializedTurn:
    assert isinstance(event, ApiTurnStarted)
    return event.data.turn


def command_ended(event: ApiEventData) -> CommandResult:
    assert isinstance(event, ApiCommandEnded)
    return event.data


def chunks_text(item: TranscriptItem) -> str:
    assert isinstance(item.body, AgentBody | ThoughtBody)
    return "".join(chunk["content"]["text"] for chunk in item.body.chunks)


# --- scenarios -----------------------------------------------------------------------------


def test_a_prompt_with_tool_calls_and_streamed_output_reads_as_one_turn() -> None:
    session = Session()
    kinds = session.observe_all(
        [
            prompt("p1", "List the files please"),
            start("p1"),
            says("Let me ", "th1", kind="agent_thought_chunk"),
            says("look.", "th1", kind="agent_thought_chunk"),
            says("I will "),
            says("run ls."),
            acp(
                "tool_call",
                toolCallId="c1",
                title="ls",
                kind="execute",
                status="pending",
                content=[{"type": "terminal", "terminalId": "term-1"}],
            ),
            acp("tool_call_update", toolCallId="c1", status="in_progress"),
            TerminalOutput.of(
                terminal_id="term-1", output="a.txt\nb.txt\n", exit_code=0, truncated=False
            ),
            acp("tool_call_update", toolCallId="c1", status="completed"),
            says("Two files.", "m2"),
            end("p1"),
        ]
    )

    assert kinds == ["turn_started", "turn_ended"]
    assert session.ids() == ["user:p1", "thought:th1", "agent:m1", "tool:c1", "agent:m2"]
    assert session.state.session_title == "List the files please"
    assert chunks_text(session.item("thought:th1")) == "Let me look."
    assert chunks_text(session.item("agent:m1")) == "I will run ls."
    tool = session.item("tool:c1").body
    assert isinstance(tool, ToolBody)
    assert tool.call["status"] == "completed"
    assert [(r.terminal_id, r.output) for r in tool.terminal_outputs] == [
        ("term-1", "a.txt\nb.txt\n")
    ]
    streaming = [
        item.body.streaming
        for item in session.state.transcript
        if isinstance(item.body, AgentBody | ThoughtBody)
    ]
    assert streaming == [False, False, False]
    assert session.item("agent:m2").latest_content_event_ordinal == 11
    assert session.state.execution == ExecutionIdle()
    ended = turn_ended(session.feed[-1])
    assert (ended.command_id, ended.accepted_ordinal, ended.turn_start_position) == ("p1", 1, 2)
    assert ended.outcome.kind is TurnResultKind.COMPLETED
    check_session(session.state)


def test_a_question_and_its_answer_are_tied_to_the_turn_that_asked() -> None:
    session = Session()
    session.observe_all([prompt("p1", "Deploy"), start("p1")])
    question = ElicitationRequest(id="q1", message="Which environment?", fields=[])

    assert session.observe(ElicitationRequested.of(request=question)) == ["input_required"]
    assert session.state.pending_elicitations == [question]
    assert session.observe(ElicitationResolved.of(elicitation_id="q1", action="accept")) == [
        "input_resolved"
    ]
    assert session.observe(end("p1")) == ["turn_ended"]

    required, resolved = session.feed[1], session.feed[2]
    assert isinstance(required, ApiInputRequired)
    assert isinstance(resolved, ApiInputResolved)
    assert (required.data.request, required.data.turn_id) == (question, 1)
    assert (resolved.data.turn_id, resolved.data.action) == (1, "accept")

    # A question left open when the harness session reopens is cleared, outside any turn.
    session.observe(
        ElicitationRequested.of(
            request=ElicitationRequest(id="q2", message="Still there?", fields=[])
        )
    )
    assert session.observe(SessionOpened.of(native_session_id="n2", resumed=True)) == [
        "input_resolved"
    ]
    cleared = session.feed[-1]
    assert isinstance(cleared, ApiInputResolved)
    assert (cleared.data.elicitation_id, cleared.data.turn_id, cleared.data.action) == (
        "q2",
        None,
        "cleared",
    )
    assert session.state.pending_elicitations == []


def test_steering_moves_the_running_turn_to_the_queued_prompt() -> None:
    session = Session()
    session.observe_all([prompt("p1", "Build it"), start("p1"), says("Building")])
    session.observe(prompt("p2", "Also add tests", at_ms=5))
    session.observe(
        CommandQueued.of(
            command_id="steer-1",
            command=SteerCommand.of(active_prompt_id="p1", queued_prompt_id="p2"),
            created_at_ms=6,
        )
    )
    kinds = session.observe(
        CommandCompleted.of(
            command_id="steer-1",
            command=RelayCommandKind.STEER,
            outcome=SteeredOutcome.of(queued_command_id="p2"),
        ),
        at_ms=2_000,
    )

    assert kinds == ["turn_started", "command_ended"]
    steered = turn_started(session.feed[1])
    assert (steered.command_id, steered.accepted_ordinal, steered.steered_into) == ("p2", 4, "p1")
    assert (steered.turn_start_position, steered.started_at_ms) == (6, 2_000)
    assert session.state.queued_prompts == []
    assert session.ids() == ["user:p1", "agent:m1", "user:p2"]
    body = session.item("agent:m1").body
    assert isinstance(body, AgentBody)
    assert body.streaming is False

    assert session.observe(end("p1")) == ["turn_ended"]
    ended = turn_ended(session.feed[-1])
    assert (ended.command_id, ended.accepted_ordinal, ended.turn_start_position) == ("p1", 4, 6)
    assert session.state.active_turn is None


def test_a_shell_command_is_one_line_that_follows_its_progress() -> None:
    session = Session()
    session.observe(
        CommandQueued.of(
            command_id="sh1", command=RunUserShellCommand.of(command="make"), created_at_ms=900
        )
    )
    assert session.text("shell:sh1") == "Shell · queued\n$ make"
    session.observe(start("sh1", at_ms=950))
    assert session.text("shell:sh1") == "Shell · running\n$ make"
    session.observe(
        UserShellOutput.of(
            command_id="sh1",
            command="make",
            stdout="cc main.c",
            stderr="",
            stdout_truncated=False,
            stderr_truncated=False,
        )
    )
    assert session.text("shell:sh1") == "Shell · running\n$ make\n\nstdout:\ncc main.c"
    result = UserShellResult(
        command="make",
        stdout="cc main.c\n",
        stderr="",
        exit_code=0,
        duration_ms=1234,
        status=UserShellStatus.EXITED,
    )
    kinds = session.observe(
        CommandCompleted.of(
            command_id="sh1",
            command=RelayCommandKind.RUN_USER_SHELL,
            outcome=UserShellOutcome.of(result=result),
        )
    )

    assert kinds == ["command_ended"]
    assert session.text("shell:sh1") == "Shell · done · 1234 ms\n$ make\n\nstdout:\ncc main.c\n"
    assert command_ended(session.feed[-1]).outcome is CommandResultKind.SUCCEEDED
    shell = session.item("shell:sh1")
    assert (shell.position, shell.created_at_ms) == (1, 900)
    assert session.state.active_turn is None
    assert session.feed[0].kind == "command_ended"


def test_a_cancelled_turn_ends_cancelled_and_marks_where_the_reply_stopped() -> None:
    session = Session()
    session.observe_all([prompt("p1", "Write a novel"), start("p1"), says("Once upon")])
    session.observe(
        CommandQueued.of(command_id="cancel-1", command=CancelTurnCommand(), created_at_ms=7)
    )
    assert session.observe(
        CommandCompleted.of(
            command_id="cancel-1", command=RelayCommandKind.CANCEL_TURN, outcome=CancelledOutcome()
        )
    ) == ["command_ended"]
    assert session.state.active_turn is not None

    assert session.observe(end("p1", stop_reason="cancelled")) == ["turn_ended"]
    ended = turn_ended(session.feed[-1])
    assert (ended.outcome.kind, ended.outcome.reason) == (
        TurnResultKind.CANCELLED,
        OutcomeReason.REQUESTED_CANCELLATION,
    )
    assert session.ids()[-1] == "system:turn-interrupted:p1"
    assert session.text("system:turn-interrupted:p1") == "Interrupted"
    body = session.item("agent:m1").body
    assert isinstance(body, AgentBody)
    assert body.streaming is False
    assert session.state.execution == ExecutionIdle()


def test_a_context_clear_starts_a_new_conversation() -> None:
    session = Session()
    session.observe_all([prompt("p1", "First topic"), start("p1"), says("Answer"), end("p1")])
    session.observe(
        ElicitationRequested.of(request=ElicitationRequest(id="q1", message="More?", fields=[]))
    )
    session.observe(
        CommandQueued.of(command_id="clear-1", command=ClearContextCommand(), created_at_ms=3_000)
    )
    assert session.state.execution == ExecutionRunning(started_at_ms=3_000)
    assert session.text("system:6") == "Clearing context…"

    kinds = session.observe(
        CommandCompleted.of(
            command_id="clear-1",
            command=RelayCommandKind.CLEAR_CONTEXT,
            outcome=ContextClearedOutcome.of(native_session_id="native-2"),
        )
    )

    assert kinds == ["command_ended", "input_resolved"]
    state = session.state
    assert state.last_turn_outcome is None
    assert state.pending_elicitations == []
    assert state.execution == ExecutionIdle()
    assert session.ids()[-1] == f"{CONTEXT_BOUNDARY_PREFIX}clear-1"
    assert session.ids()[-1] == "system:context-cleared:clear-1"
    assert state.configuration[GOAL_STATE_KEY]["known"] is True
    # The next prompt starts a fresh turn; the session keeps its first title.
    assert session.observe_all([prompt("p2", "Second topic"), start("p2")]) == ["turn_started"]
    assert state.session_title == "First topic"


def test_a_restart_in_the_middle_of_a_turn_interrupts_the_work_then_the_turn() -> None:
    session = Session()
    session.observe_all(
        [
            prompt("p1", "Long job"),
            start("p1"),
            says("Working"),
            acp("tool_call", toolCallId="c1", title="x"),
        ]
    )
    session.observe(says("still", "m2"))
    restarted_at = session.state.applied_event_ordinal + 1

    assert session.observe(SessionRestarted()) == []
    assert session.ids()[-2:] == [
        f"system:session-restarted:{restarted_at}",
        f"system:work-interrupted:{restarted_at}",
    ]
    assert session.state.execution == ExecutionIdle()
    assert session.state.active_turn is not None
    assert all(
        not item.body.streaming
        for item in session.state.transcript
        if isinstance(item.body, AgentBody)
    )

    kinds = session.observe(
        CommandInterrupted.of(
            reason=OutcomeReason.WORKER_RESTARTED,
            command_id="p1",
            command=RelayCommandKind.PROMPT,
            message="worker restarted",
        )
    )
    assert kinds == ["turn_ended"]
    ended = turn_ended(session.feed[-1])
    assert (ended.outcome.kind, ended.outcome.reason, ended.outcome.message) == (
        TurnResultKind.INTERRUPTED,
        OutcomeReason.WORKER_RESTARTED,
        "worker restarted",
    )
    after = session.state
    assert after.active_turn is None
    assert (
        session.text(f"system:work-interrupted:{restarted_at + 1}")
        == "Work interrupted: worker restarted"
    )


def test_a_checkpoint_barrier_ends_its_commands_and_leaves_the_turn_running() -> None:
    session = Session()
    session.observe_all([prompt("p1", "Refactor"), start("p1")])
    session.observe(
        CommandQueued.of(
            command_id="begin-1",
            command=BeginCheckpointCommand.of(reason="scheduled"),
            created_at_ms=5,
        )
    )
    session.observe(CheckpointReady.of(command_id="begin-1", through=3))
    session.observe(
        CommandQueued.of(
            command_id="complete-1",
            command=CompleteCheckpointCommand.of(barrier_command_id="begin-1"),
            created_at_ms=6,
        )
    )
    kinds = session.observe(
        CommandCompleted.of(
            barrier_command_id="begin-1",
            command=RelayCommandKind.COMPLETE_CHECKPOINT,
            command_id="complete-1",
            outcome=CheckpointCompletedOutcome(),
        )
    )

    assert kinds == ["command_ended", "command_ended"]
    barrier, completed = (command_ended(event) for event in session.feed[-2:])
    assert (barrier.command_id, barrier.command_kind, barrier.outcome) == (
        "begin-1",
        "begin_checkpoint",
        CommandResultKind.SUCCEEDED,
    )
    assert (completed.command_id, completed.command_kind) == ("complete-1", "complete_checkpoint")
    assert session.state.active_turn is not None
    assert session.state.execution == ExecutionRunning(started_at_ms=2)
    assert session.ids() == ["user:p1"]
    assert session.observe(end("p1")) == ["turn_ended"]


def test_a_configuration_change_waits_in_the_queue_and_reports_its_result() -> None:
    session = Session()
    session.observe(
        CommandQueued.of(
            command_id="cfg-1",
            command=SetConfigCommand.of(key="model", value="m2"),
            created_at_ms=1,
        )
    )
    assert [entry.command_id for entry in session.state.queued_prompts] == ["cfg-1"]
    assert session.observe(start("cfg-1")) == []
    session.observe(ConfigurationUpdated.of(key="model", value="m2"))
    assert session.observe(
        CommandCompleted.of(
            command_id="cfg-1", command=RelayCommandKind.SET_CONFIG, outcome=ConfiguredOutcome()
        )
    ) == ["command_ended"]
    assert session.state.configuration == {"model": "m2"}
    assert session.state.transcript == []


def test_the_real_kimi_excerpt_projects_into_one_tool_call_and_one_pending_question() -> None:
    session = Session()
    lines = FIXTURE.read_bytes().splitlines()
    for ordinal, line in enumerate(lines, start=1):
        original = decode_relay_event(line)
        event = RelayEvent.create(
            ordinal=ordinal,
            recorded_at_ms=original.recorded_at_ms,
            observation=original.observation,
        )
        session.apply(event)

    (tool,) = session.state.transcript
    assert tool.stable_id == "tool:0:tool_e1qsMMuvHL3sGrvLgCU9U6Ml"
    assert (tool.position, tool.created_at_ms, tool.last_changed_at_ms) == (
        1,
        1790276489400,
        1790276489743,
    )
    assert isinstance(tool.body, ToolBody)
    assert tool.body.call == {
        "toolCallId": "0:tool_e1qsMMuvHL3sGrvLgCU9U6Ml",
        "title": "Bash",
        "kind": "execute",
        "status": "in_progress",
        "content": [
            {
                "type": "content",
                "content": {
                    "type": "text",
                    "text": '{"command": "git status --short && git ls-files && ls -a"}',
                },
            }
        ],
    }
    (pending,) = session.state.pending_elicitations
    assert pending.id == "tool-permission-1"
    assert [event.kind for event in session.feed] == ["input_required"]
    check_session(session.state)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, split=st.integers(0, 10_000))
def test_a_generated_journal_projects_the_same_however_it_is_split(
    steps: list[tuple[str, int, str]], split: int
) -> None:
    events = build_events(journal_observations(steps))
    # Through the journal's own wire form, as storage would hand the events over.
    events = [decode_relay_event(encode_relay_event(event)) for event in events]
    whole, feed = replay(MaterializedSession.empty("session-1"), events)
    again, feed_again = replay(MaterializedSession.empty("session-1"), events)
    assert encode(again) == encode(whole)
    assert feed_again == feed

    cut = split % (len(events) + 1)
    head, head_feed = replay(MaterializedSession.empty("session-1"), events[:cut])
    restored = decode_json(encode(head), MaterializedSession)
    assert restored == head
    tail, tail_feed = replay(restored, events[cut:])
    assert encode(tail) == encode(whole)
    assert head_feed + tail_feed == feed

    check_session(whole)
    assert whole.applied_event_ordinal == len(events)
