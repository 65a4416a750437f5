"""Loading a session's materialized projection back from the store."""

from __future__ import annotations

from pathlib import Path

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import MaterializedTurn
from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.errors import ProjectionError
from relaystore.domain.materialized import (
    AgentBody,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    MaterializedQueuedPrompt,
    MaterializedSession,
    MaterializedSessionMutation,
    PlanBody,
    PlanProposalBody,
    SetConfigEntry,
    SetConfigKind,
    SystemBody,
    TerminalOutputBody,
    TerminalOutputRecord,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
    TranscriptUpsert,
    UserBody,
)
from relaystore.domain.outcomes import (
    MaterializedTurnOutcome,
    OutcomeReason,
    TurnOutcomeInterrupted,
)
from relaystore.domain.relay import RELAY_EVENT_GENESIS_DIGEST, RelayCursor
from relaystore.storage.connection import open_reader
from relaystore.storage.materialized import load_frontier, load_materialized_session
from relaystore.storage.projection import commit_page
from tests.storage.builders import event_digest as digest
from tests.storage.pages import add, new_page

SESSION = "session-1"


def apply(connection: apsw.Connection, mutations: list[MaterializedSessionMutation]) -> None:
    """Commit ``mutations`` as the next relay events, in one page."""
    page = new_page(connection)
    for mutation in mutations:
        add(page, mutation)
    commit_page(connection, SESSION, page)


def item(
    stable_id: str, position: int, body: object, *, latest: int | None = None, at: int = 0
) -> TranscriptItem:
    return TranscriptItem(
        stable_id=stable_id,
        position=position,
        latest_content_event_ordinal=latest,
        created_at_ms=1000 + position,
        last_changed_at_ms=1000 + position + at,
        body=body,  # type: ignore[arg-type]
    )


QUESTION = msgspec.json.decode(
    b'{"id":"q1","message":"Which branch?","title":"Branch","fields":'
    b'[{"id":"branch","title":"Branch","required":true,"kind":"text","default":"main"}]}',
    type=ElicitationRequest,
)


def test_a_session_without_a_projection_row_loads_as_none(store: apsw.Connection) -> None:
    assert load_materialized_session(store, "unknown") is None
    assert load_frontier(store, "unknown") is None


def test_a_saved_session_starts_with_an_empty_projection_at_genesis(store: apsw.Connection) -> None:
    assert load_materialized_session(store, SESSION) == MaterializedSession.empty(SESSION)
    assert load_frontier(store, SESSION) == RelayCursor(
        ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST
    )


def test_a_rich_projection_round_trips_through_pages(
    store: apsw.Connection, store_path: Path
) -> None:
    user = item("user:1", 1, UserBody(content=[{"type": "text", "text": "hello"}]))
    thought = item(
        "thought:m1",
        2,
        ThoughtBody(chunks=[{"content": {"type": "text", "text": "hmm"}}], streaming=True),
    )
    agent_v1 = item(
        "agent:m1",
        2,
        AgentBody(chunks=[{"content": {"type": "text", "text": "Hi"}}], streaming=True),
        latest=2,
    )
    agent_v2 = item(
        "agent:m1",
        2,
        AgentBody(
            chunks=[
                {"messageId": "m1", "content": {"type": "text", "text": "Hi there"}},
                {"content": {"type": "image", "data": "AA=="}},
            ]
        ),
        latest=4,
        at=2,
    )
    record = TerminalOutputRecord(terminal_id="term-1", output="ok\n", exit_code=0)
    tool = item(
        "tool:t1",
        3,
        ToolBody(
            call={
                "toolCallId": "t1",
                "title": "Run tests",
                "status": "completed",
                "rawInput": {"cmd": ["pytest", "-q"]},
            },
            terminal_outputs=[record],
            terminal_refs=["term-1"],
            presentation={"summary": "pytest -q"},
        ),
    )
    terminal = item(
        "terminal:term-2",
        3,
        TerminalOutputBody(
            record=TerminalOutputRecord(
                terminal_id="term-2", output="", truncated=True, signal="SIGKILL"
            )
        ),
    )
    plan = item("plan", 4, PlanBody(plan={"entries": [{"content": "step", "status": "pending"}]}))
    proposal = item("plan-review:1", 5, PlanProposalBody(proposal_id="1", plan="# Plan"))
    notice = item("system:6", 6, SystemBody(text="Session restarted ✓ — «ünïcode»"))
    queue = [
        MaterializedQueuedPrompt(
            command_id="prompt-2",
            content=[{"type": "text", "text": "next"}],
            queued_at_ms=7,
            accepted_ordinal=3,
        ),
        MaterializedQueuedPrompt(
            command_id="cfg-1",
            kind=SetConfigKind(set_config=SetConfigEntry(key="model", value="fast")),
            queued_at_ms=8,
        ),
        MaterializedQueuedPrompt(command_id="prompt-3", queued_at_ms=9),
    ]
    turn = MaterializedTurn(
        command_id="prompt-1",
        accepted_ordinal=1,
        turn_start_position=1,
        started_at_ms=100,
        steered_into="prompt-2",
    )
    outcome = MaterializedTurnOutcome(
        command_id="prompt-0",
        turn_start_position=1,
        completed_ordinal=1,
        completed_at_ms=99,
        outcome=TurnOutcomeInterrupted(
            message="worker restarted", reason=OutcomeReason.WORKER_RESTARTED
        ),
    )
    configuration = {
        "mode": "fast",
        "mj_goal_state": {"goal": "ship it", "done": False, "score": 0.5},
    }

    apply(
        store,
        [
            MaterializedSessionMutation(
                last_activity_at_ms=100,
                execution=ExecutionRunning(started_at_ms=100),
                session_title="Rich session",
                configuration=configuration,
                transcript=[TranscriptUpsert(user)],
                queued_prompts=queue,
                active_turn=turn,
                last_turn_outcome=outcome,
            ),
            MaterializedSessionMutation(
                last_activity_at_ms=200,
                transcript=[TranscriptUpsert(thought), TranscriptUpsert(agent_v1)],
            ),
        ],
    )
    apply(
        store,
        [
            MaterializedSessionMutation(
                last_activity_at_ms=300,
                transcript=[TranscriptUpsert(terminal), TranscriptUpsert(tool)],
            ),
            MaterializedSessionMutation(
                last_activity_at_ms=400,
                transcript=[TranscriptUpsert(agent_v2), TranscriptUpsert(plan)],
                pending_elicitations=[QUESTION],
            ),
            MaterializedSessionMutation(transcript=[TranscriptUpsert(proposal)]),
            MaterializedSessionMutation(
                last_activity_at_ms=350, transcript=[TranscriptUpsert(notice)]
            ),
        ],
    )

    expected = MaterializedSession(
        session_id=SESSION,
        applied_event_ordinal=6,
        applied_event_digest=digest(6),
        last_activity_at_ms=400,
        execution=ExecutionRunning(started_at_ms=100),
        session_title="Rich session",
        configuration=configuration,
        transcript=[user, agent_v2, thought, terminal, tool, plan, proposal, notice],
        queued_prompts=queue,
        pending_elicitations=[QUESTION],
        active_turn=turn,
        last_turn_outcome=outcome,
    )
    assert load_materialized_session(store, SESSION) == expected
    reader = open_reader(store_path)
    try:
        loaded = load_materialized_session(reader, SESSION)
    finally:
        reader.close()
    assert loaded == expected
    assert loaded is not None
    assert msgspec.json.encode(loaded) == msgspec.json.encode(expected)


@pytest.mark.parametrize(
    "execution", [ExecutionIdle(), ExecutionClosing(), ExecutionRunning(started_at_ms=5)]
)
def test_the_execution_state_round_trips(store: apsw.Connection, execution: object) -> None:
    apply(store, [MaterializedSessionMutation(execution=ExecutionRunning(started_at_ms=1))])
    apply(store, [MaterializedSessionMutation(execution=execution)])  # type: ignore[arg-type]

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.execution == execution


def test_the_transcript_loads_by_position_then_stable_id_and_the_queue_by_its_order(
    store: apsw.Connection,
) -> None:
    apply(store, [MaterializedSessionMutation()] * 2)
    items = [
        item(sid, position, SystemBody(text=sid))
        for sid, position in [("z", 1), ("b", 3), ("a", 3), ("m", 2)]
    ]
    queue = [MaterializedQueuedPrompt(command_id=c, queued_at_ms=1) for c in ["q3", "q1", "q2"]]

    apply(
        store,
        [
            MaterializedSessionMutation(
                transcript=[TranscriptUpsert(i) for i in items], queued_prompts=queue
            )
        ],
    )

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert [i.stable_id for i in loaded.transcript] == ["z", "m", "a", "b"]
    assert [q.command_id for q in loaded.queued_prompts] == ["q3", "q1", "q2"]

    apply(store, [MaterializedSessionMutation(queued_prompts=queue[1:])])

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert [q.command_id for q in loaded.queued_prompts] == ["q1", "q2"]


def test_streamed_text_chunks_stored_one_per_token_are_merged_on_read(
    store: apsw.Connection,
) -> None:
    apply(store, [MaterializedSessionMutation()])
    tokens = [
        {"messageId": "m1", "content": {"type": "text", "text": t}} for t in ["Hel", "lo", " world"]
    ]
    other = [{"messageId": "m2", "content": {"type": "text", "text": "!"}}]
    image = [{"messageId": "m2", "content": {"type": "image", "data": "AA=="}}]
    tail = [
        {"messageId": "m2", "content": {"type": "text", "text": "a"}},
        {"messageId": "m2", "content": {"type": "text", "text": "b"}},
    ]
    body = msgspec.json.encode(
        {"kind": "agent", "chunks": tokens + other + image + tail, "streaming": False}
    )
    store.execute(
        "INSERT INTO materialized_transcript_items(session_id, stable_id, position,"
        " latest_content_event_ordinal, created_at_ms, last_changed_at_ms, body_json)"
        " VALUES (?, 'agent:m1', 1, 1, 5, 5, ?)",
        (SESSION, body.decode()),
    )

    loaded = load_materialized_session(store, SESSION)

    assert loaded is not None
    assert loaded.transcript[0].body == AgentBody(
        chunks=[
            {"messageId": "m1", "content": {"type": "text", "text": "Hello world"}},
            other[0],
            image[0],
            {"messageId": "m2", "content": {"type": "text", "text": "ab"}},
        ]
    )


@pytest.mark.parametrize(
    ("corruption", "text"),
    [
        (
            "UPDATE materialized_sessions SET configuration_json = 'nope'",
            "stored configuration does not decode",
        ),
        (
            "UPDATE materialized_sessions SET pending_elicitations_json = '[1]'",
            "stored pending elicitations",
        ),
        ("UPDATE materialized_sessions SET active_turn_json = '{}'", "stored active turn"),
        (
            'UPDATE materialized_transcript_items SET body_json = \'{"kind":"mystery"}\'',
            "body of transcript item 's'",
        ),
        (
            "UPDATE materialized_queued_prompts SET kind_json = '\"steer\"'",
            "kind of queued command 'q'",
        ),
        (
            "UPDATE materialized_transcript_items SET position = 9",
            "stored projection is inconsistent",
        ),
    ],
)
def test_a_stored_projection_that_does_not_decode_or_validate_is_a_projection_error(
    store: apsw.Connection, corruption: str, text: str
) -> None:
    apply(
        store,
        [
            MaterializedSessionMutation(
                transcript=[TranscriptUpsert(item("s", 1, SystemBody(text="s")))],
                queued_prompts=[MaterializedQueuedPrompt(command_id="q", queued_at_ms=1)],
            )
        ],
    )
    store.execute(corruption)

    with pytest.raises(ProjectionError, match=text) as caught:
        load_materialized_session(store, SESSION)

    assert caught.value.session_id == SESSION
    assert SESSION in str(caught.value)


def test_the_frontier_follows_committed_pages(store: apsw.Connection) -> None:
    apply(store, [MaterializedSessionMutation()] * 3)

    assert load_frontier(store, SESSION) == RelayCursor(ordinal=3, digest=digest(3))
