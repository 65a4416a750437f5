"""The read side's rules: seq, limits, roles, finished, text, lifecycle."""

from __future__ import annotations

import pytest

from relaystore.domain.errors import InvalidInput
from relaystore.domain.materialized import (
    AgentBody,
    ExecutionClosing,
    ExecutionRunning,
    PlanBody,
    TerminalOutputBody,
    TerminalOutputRecord,
    ThoughtBody,
    ToolBody,
    UserBody,
)
from relaystore.domain.paging import (
    clamp_page_limit,
    transcript_page_cursor as finished_page_cursor,
)
from relaystore.domain.sessions.records import SessionState
from relaystore.domain.sessions.views import chat_phase_of, lifecycle_of, state_label
from relaystore.domain.transcript_views import (
    finished_only_roles,
    is_open_agent_item,
    item_role,
    item_text,
    transcript_seq,
)


def _chunk(text: str) -> dict[str, object]:
    return {"content": {"type": "text", "text": text}, "messageId": "m"}


def test_seq_is_the_latest_content_ordinal_else_the_position() -> None:
    assert transcript_seq(5, None) == 5
    assert transcript_seq(5, 9) == 9


@pytest.mark.parametrize(("asked", "given"), [(0, 1), (-3, 1), (200, 200), (10**9, 1000)])
def test_page_limits_clamp_to_1_through_1000(asked: int, given: int) -> None:
    assert clamp_page_limit(asked) == given


def test_streamed_chunks_join_before_the_text_is_trimmed() -> None:
    body = AgentBody(chunks=[_chunk("one"), _chunk(" two"), _chunk(" three")])
    assert item_text(body) == "one two three"
    assert (
        item_text(UserBody(content=[{"type": "text", "text": "<mj-context>x</mj-context>hi"}]))
        == "hi"
    )


def test_roles_and_texts_of_every_kind() -> None:
    record = TerminalOutputRecord(terminal_id="t", output="\x1b[31mred\x1b[0m")
    plan = PlanBody(plan={"entries": [{"content": "a"}, {"content": "b"}]})
    cases = [
        (TerminalOutputBody(record=record), "terminal", "red"),
        (plan, "plan", "- a\n- b"),
        (ToolBody(call={"title": "Run tests", "status": "completed"}), "tool", "Run tests"),
        (ThoughtBody(chunks=[_chunk("hmm")]), "thought", "hmm"),
    ]
    for body, role, text in cases:
        assert (item_role(body), item_text(body)) == (role, text)


def test_only_a_streaming_agent_message_is_an_open_agent_item() -> None:
    assert is_open_agent_item(AgentBody(chunks=[_chunk("x")], streaming=True))
    assert not is_open_agent_item(AgentBody(chunks=[_chunk("x")]))
    assert not is_open_agent_item(ThoughtBody(chunks=[_chunk("x")], streaming=True))
    assert not is_open_agent_item(ToolBody(call={"status": "pending"}))


def test_finished_only_implies_the_agent_role() -> None:
    assert finished_only_roles(()) == ("agent",)
    assert finished_only_roles(("agent",)) == ("agent",)
    for roles in [("tool",), ("agent", "user")]:
        with pytest.raises(InvalidInput, match="implies role=agent"):
            finished_only_roles(roles)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("last", "full", "barrier", "cursor"),
    [
        (7, True, None, 7),  # the limit reached: the last returned seq
        (7, False, 12, 11),  # just before the earliest open agent item
        (None, False, 4, 3),  # nothing finished yet: still just before it
        (None, False, 3, 3),  # never back from after_seq
        (7, False, None, 20),  # none open: to latest_seq
    ],
)
def test_finished_page_cursor_never_passes_an_open_agent_item(
    last: int | None, full: bool, barrier: int | None, cursor: int
) -> None:
    assert finished_page_cursor(3, 20, last, full=full, barrier=barrier) == cursor


def test_lifecycle_chat_phase_and_state_label() -> None:
    assert [lifecycle_of(s) for s in (SessionState.PROVISIONING, SessionState.RUNNING)] == [
        "starting",
        "live",
    ]
    assert lifecycle_of(SessionState.CHECKPOINTING) == "suspending"
    assert lifecycle_of(SessionState.STOPPED) == "suspended"
    assert lifecycle_of(SessionState.ERROR) == "failed"
    assert chat_phase_of(None) == "idle"
    assert chat_phase_of(ExecutionRunning(started_at_ms=1)) == "running"
    assert chat_phase_of(ExecutionClosing()) == "closing"
    assert state_label(SessionState.DESTROYED_WITH_DATA_LOSS) == "DestroyedWithDataLoss"
