"""``session_update``: streamed messages and thoughts, tool calls, plans, options, titles, usage."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from relaystore.domain.errors import ProjectionError
from relaystore.domain.materialized import (
    UNCHANGED,
    AgentBody,
    ExecutionRunning,
    PlanBody,
    SystemBody,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
    TranscriptUpsert,
)
from relaystore.domain.outcomes import (
    ProviderCost,
)
from relaystore.domain.projection import GOAL_STATE_KEY, SessionProjection
from relaystore.domain.projection.streams import merge_content_chunk
from relaystore.domain.relay import (
    SessionUpdate,
)
from tests.domain.projection.support import (
    STREAMING,
    Journal,
    agent_body,
    chunk,
    finished,
    item,
    queued,
    started,
    turn,
    update,
)

# --- session_update ------------------------------------------------------------------------


def test_agent_chunks_with_one_message_id_merge_into_one_streaming_item() -> None:
    journal = Journal()
    journal.run(STREAMING)
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
    journal.run([*STREAMING[:2], chunk("one"), chunk(" two")])

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
    journal.run(STREAMING)
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
    journal.run(STREAMING[:2])
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
    journal.run([*STREAMING, chunk("t", "t1", kind="agent_thought_chunk"), chunk("again", "m1")])
    assert agent_body(journal.session, "agent:m1").streaming is True
    mutation = journal.add(finished())
    closed = [
        change.item.stable_id
        for change in mutation.transcript
        if isinstance(change, TranscriptUpsert)
    ]
    assert closed == ["agent:m1"]
    journal2 = Journal()
    journal2.run([*STREAMING, chunk("t", "t1", kind="agent_thought_chunk")])
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
    journal.run(STREAMING)
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
    journal.run(STREAMING)
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
    journal.run(STREAMING[:2])
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


@pytest.mark.parametrize("kind", [{"agent": "chunk"}, ["plan"], 7, None, "no_such_update"])
def test_a_session_update_of_a_kind_no_handler_takes_projects_nothing(kind: Any) -> None:
    """Any JSON a worker writes as ``sessionUpdate`` (an object or a list, which could not
    key a lookup table, too) projects nothing and refuses nothing."""
    journal = Journal()
    journal.run(STREAMING)
    before = journal.session
    mutation = journal.add(
        SessionUpdate.of(update={"sessionUpdate": kind, "content": {"type": "text", "text": "x"}}),
        at_ms=150,
    )

    assert mutation.transcript == []
    assert mutation.api_events == []
    assert journal.session.transcript == before.transcript
    assert journal.session.last_activity_at_ms == 150
