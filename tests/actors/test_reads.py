"""The read side through both facades: sessions, transcript pages, history, usage."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from relaystore import (
    DeleteSession,
    EventStore,
    InvalidInput,
    ListSessions,
    ListWorkspaces,
    LoadElicitations,
    LoadProjectionTail,
    LoadRawElicitations,
    LoadRawTranscriptPage,
    LoadRawUsagePage,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptPage,
    LoadTurnSummary,
    LoadUsagePage,
    ObserveRelayEvents,
    SaveSession,
    TranscriptPage,
)
from relaystore.aio import AsyncEventStore
from relaystore.domain.materialized import ExecutionRunning
from relaystore.domain.wire import encode
from relaystore.testing import JournalBuilder, example_session

pytestmark = pytest.mark.integration  # its stores project in worker processes


def _fill(store: EventStore) -> None:
    """session-1 (workspace default): two finished turns, an open question, a third
    turn still streaming; session-2 (workspace w2): saved, never projected."""
    store.ask(SaveSession(record=example_session("session-1")))
    other = msgspec.structs.replace(example_session("session-2"), workspace_id="w2")
    store.ask(SaveSession(record=other))
    journal = JournalBuilder()
    events = journal.prompt_turn("hello there", chunks=("one ", "two"))
    events += journal.prompt_turn("second prompt", chunks=("three",))
    events += journal.question(action=None)
    events += journal.start_prompt("third")
    events += journal.say("streaming...")
    store.ask(ObserveRelayEvents(session_id="session-1", events=events))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "s.sqlite3") as opened:
        _fill(opened)
        yield opened


def _pages(store: EventStore, **query: object) -> list[TranscriptPage]:
    pages: list[TranscriptPage] = []
    after = 0
    while True:
        page = store.ask(LoadTranscriptPage(session_id="session-1", after_seq=after, **query))  # type: ignore[arg-type]
        assert page is not None
        pages.append(page)
        if not page.items or page.next_after_seq == page.latest_seq:
            return pages
        assert page.next_after_seq > after
        after = page.next_after_seq


def test_sessions_and_workspaces(store: EventStore) -> None:
    listed = store.ask(ListSessions()).sessions
    assert [s.id for s in listed] == ["session-1", "session-2"]
    first = listed[0]
    assert (first.workspace_id, first.title, first.lifecycle) == (
        "default",
        "hello there",
        "suspended",
    )
    assert (first.chat_phase, first.is_idle, first.state) == ("running", False, "Stopped")
    assert [q.id for q in first.pending_elicitations] == ["question-1"]
    assert first.last_turn_outcome is None  # the list carries no turn identity
    assert listed[1].chat_phase == "idle"
    assert listed[1].is_idle
    assert [s.id for s in store.ask(ListSessions(workspace_id="w2")).sessions] == ["session-2"]
    assert store.ask(ListSessions(workspace_id="nowhere")).sessions == []
    workspaces = {w.id: w.session_count for w in store.ask(ListWorkspaces()).workspaces}
    assert workspaces == {"default": 1, "w2": 1}


def test_session_detail_shows_the_last_outcome_without_usage(store: EventStore) -> None:
    detail = store.ask(LoadSessionDetail(session_id="session-1"))
    assert detail is not None
    assert detail.last_turn_outcome is not None
    assert detail.last_turn_outcome.command_id == "prompt-2"
    assert detail.last_turn_outcome.usage is None
    assert detail.last_turn_outcome.diagnostic is None
    assert store.ask(LoadSessionDetail(session_id="nobody")) is None


def test_transcript_pages_cover_every_item_once(store: EventStore) -> None:
    whole = store.ask(LoadTranscriptPage(session_id="session-1"))
    assert whole is not None
    assert [i.role for i in whole.items] == ["user", "agent", "user", "agent", "user", "agent"]
    assert [i.text for i in whole.items][:2] == ["hello there", "one two"]
    assert whole.latest_seq == whole.items[-1].seq == whole.next_after_seq
    assert isinstance(whole.execution, ExecutionRunning)
    paged = [item for page in _pages(store, limit=1) for item in page.items]
    assert paged == whole.items
    # An agent message's seq is its latest content ordinal, not its position.
    agent = whole.items[1]
    assert agent.seq > agent.position


def test_role_filter_applies_before_the_limit(store: EventStore) -> None:
    agents = [i for page in _pages(store, limit=1, roles=("agent",)) for i in page.items]
    assert [i.text for i in agents] == ["one two", "three", "streaming..."]
    page = store.ask(LoadTranscriptPage(session_id="session-1", roles=("plan",)))
    assert page is not None
    assert page.items == []
    assert page.next_after_seq == page.latest_seq  # an empty filtered page fast-forwards


def test_finished_only_pages_finished_agent_items_up_to_the_open_one(store: EventStore) -> None:
    whole = store.ask(LoadTranscriptPage(session_id="session-1"))
    assert whole is not None
    (open_item,) = [i for i in whole.items if i.text == "streaming..."]
    page = store.ask(LoadTranscriptPage(session_id="session-1", finished_only=True))
    assert page is not None
    assert [(i.role, i.text) for i in page.items] == [("agent", "one two"), ("agent", "three")]
    # Through the filtered rows to just before the open agent item, never past it.
    assert page.next_after_seq == open_item.seq - 1
    assert page.latest_seq == whole.latest_seq
    again = store.ask(
        LoadTranscriptPage(
            session_id="session-1", finished_only=True, after_seq=page.next_after_seq
        )
    )
    assert again is not None
    assert (again.items, again.next_after_seq) == ([], page.next_after_seq)
    first = store.ask(
        LoadTranscriptPage(session_id="session-1", finished_only=True, roles=("agent",), limit=1)
    )
    assert first is not None
    assert [i.text for i in first.items] == ["one two"]
    assert first.next_after_seq == first.items[0].seq  # the limit reached: the last seq


def test_finished_only_refuses_another_role(store: EventStore) -> None:
    with pytest.raises(InvalidInput, match="implies role=agent"):
        store.ask(LoadTranscriptPage(session_id="session-1", finished_only=True, roles=("tool",)))


def test_limit_is_clamped(store: EventStore) -> None:
    one = store.ask(LoadTranscriptPage(session_id="session-1", limit=0))
    assert one is not None
    assert len(one.items) == 1
    many = store.ask(LoadTranscriptPage(session_id="session-1", limit=10**6))
    assert many is not None
    assert len(many.items) == 6


def test_history_pages_backwards(store: EventStore) -> None:
    newest = store.ask(LoadTranscriptHistory(session_id="session-1", limit=4))
    assert newest is not None
    assert newest.before is not None
    assert [i.text for i in newest.items] == ["second prompt", "three", "third", "streaming..."]
    assert newest.frontier > 0
    older = store.ask(
        LoadTranscriptHistory(
            session_id="session-1",
            before_position=newest.before.position,
            before_id=newest.before.stable_id,
            limit=4,
        )
    )
    assert older is not None
    assert older.before is None
    assert [i.text for i in older.items] == ["hello there", "one two"]
    by_id = store.ask(
        LoadTranscriptHistory(session_id="session-1", before_id=newest.before.stable_id)
    )
    assert by_id is not None
    assert by_id.items == older.items
    with pytest.raises(InvalidInput, match="names no transcript item"):
        store.ask(LoadTranscriptHistory(session_id="session-1", before_id="agent:nothing"))


def test_turn_summary_and_projection_tail(store: EventStore) -> None:
    summary = store.ask(LoadTurnSummary(session_id="session-1"))
    assert summary is not None
    assert (summary.turn_number, summary.final_message) == (2, "three")
    first = store.ask(
        LoadTurnSummary(session_id="session-1", turn_start_position=2, completed_ordinal=5)
    )
    assert first is not None
    assert (first.turn_number, first.final_message) == (1, "one two")
    assert store.ask(LoadTurnSummary(session_id="session-2")) is None  # no finished turn
    tail = store.ask(LoadProjectionTail(session_id="session-1", limit=2))
    assert tail is not None
    assert [i.stable_id for i in tail.session.transcript] == ["user:prompt-3", "agent:msg-3"]
    assert tail.omitted_items == 4
    assert tail.provisional_title == "hello there"
    assert tail.latest_turn_start_position == tail.session.transcript[0].position


def test_usage_and_elicitations(store: EventStore) -> None:
    usage = store.ask(LoadUsagePage(session_id="session-1", limit=1))
    assert usage is not None
    assert [t.command_id for t in usage.turns] == ["prompt-1"]
    assert usage.coverage.recorded_turns == 2
    assert usage.coverage.missing_reports == 2
    rest = store.ask(LoadUsagePage(session_id="session-1", after_seq=usage.next_after_seq))
    assert rest is not None
    assert [t.command_id for t in rest.turns] == ["prompt-2"]
    assert rest.next_after_seq == rest.latest_seq
    assert store.ask(LoadUsagePage(session_id="nobody")) is None
    questions = store.ask(LoadElicitations(session_id="session-1"))
    assert questions is not None
    assert [q.id for q in questions.elicitations] == ["question-1"]
    assert store.ask(LoadElicitations(session_id="nobody")) is None
    raw = store.ask(LoadRawUsagePage(session_id="session-1", limit=1))
    assert raw is not None
    assert encode(raw) == encode(usage)
    raw_questions = store.ask(LoadRawElicitations(session_id="session-1"))
    assert raw_questions is not None
    assert encode(raw_questions) == encode(questions)
    assert store.ask(LoadRawUsagePage(session_id="nobody")) is None
    assert store.ask(LoadRawElicitations(session_id="nobody")) is None


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"limit": 1},
        {"limit": 3},
        {"roles": ("user",)},
        {"roles": ("agent", "tool")},
        {"finished_only": True},
        {"finished_only": True, "limit": 1},
    ],
)
def test_the_raw_transcript_page_is_the_typed_pages_bytes(
    store: EventStore, query: dict[str, Any]
) -> None:
    """Every page of the session, walked by its own cursor: the raw page (what ``GET
    .../transcript`` answers) encodes to the typed page's bytes, bodies undecoded."""
    after = 0
    while True:
        typed = store.ask(LoadTranscriptPage(session_id="session-1", after_seq=after, **query))
        raw = store.ask(LoadRawTranscriptPage(session_id="session-1", after_seq=after, **query))
        assert typed is not None
        assert raw is not None
        assert encode(raw) == encode(typed)
        if not typed.items or typed.next_after_seq == after:
            break
        after = typed.next_after_seq
    assert store.ask(LoadRawTranscriptPage(session_id="nobody")) is None
    empty = store.ask(LoadTranscriptPage(session_id="session-2"))  # saved, never projected
    assert encode(store.ask(LoadRawTranscriptPage(session_id="session-2"))) == encode(empty)


@pytest.mark.parametrize(
    ("message", "where"),
    [
        (LoadTranscriptPage(session_id="session-1", after_seq=-1), "LoadTranscriptPage.after_seq"),
        (LoadTranscriptPage(session_id="session-1", roles=("boss",)), "LoadTranscriptPage"),  # type: ignore[arg-type]
        (LoadTranscriptPage(session_id="session-1", limit="5"), "LoadTranscriptPage.limit"),  # type: ignore[arg-type]
        (LoadTranscriptHistory(session_id="session-1", before_position=0), "before_position"),
        (LoadTurnSummary(session_id="session-1", turn_start_position=3), "LoadTurnSummary"),
        (LoadUsagePage(session_id="session-1", after_seq=-5), "LoadUsagePage.after_seq"),
        (LoadRawUsagePage(session_id="session-1", after_seq=-5), "LoadRawUsagePage.after_seq"),
        (
            LoadRawTranscriptPage(session_id="session-1", after_seq=-1),
            "LoadRawTranscriptPage.after_seq",
        ),
        (
            LoadRawTranscriptPage(session_id="session-1", roles=("user",), finished_only=True),
            "finished_only",
        ),
        (LoadRawElicitations(session_id=""), "LoadRawElicitations.session_id"),
        (ListSessions(workspace_id=" "), "ListSessions.workspace_id"),
        (LoadSessionDetail(session_id=""), "LoadSessionDetail.session_id"),
    ],
)
def test_bad_reads_are_refused_at_the_facade(
    store: EventStore, message: object, where: str
) -> None:
    with pytest.raises(InvalidInput, match=where):
        store.ask(message)  # type: ignore[call-overload]


def test_the_async_facade_answers_the_same_reads(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with EventStore.open(path) as store:
        _fill(store)
        expected = (
            store.ask(ListSessions()),
            store.ask(LoadTranscriptPage(session_id="session-1", limit=2)),
            store.ask(LoadUsagePage(session_id="session-1")),
        )
        raw_expected = encode(store.ask(LoadRawUsagePage(session_id="session-1")))

    async def main() -> None:
        async with AsyncEventStore.open(path, read_only=True) as aio:
            got = (
                await aio.ask(ListSessions()),
                await aio.ask(LoadTranscriptPage(session_id="session-1", limit=2)),
                await aio.ask(LoadUsagePage(session_id="session-1")),
            )
            assert got == expected
            raw = await aio.ask(LoadRawUsagePage(session_id="session-1"))
            assert encode(raw) == raw_expected == encode(expected[2])
            with pytest.raises(InvalidInput, match="after_seq"):
                await aio.ask(LoadTranscriptPage(session_id="session-1", after_seq=-1))

    asyncio.run(asyncio.wait_for(main(), 30))


def test_usage_outlives_a_deleted_session(store: EventStore) -> None:
    store.ask(DeleteSession(session_id="session-1"))
    assert store.ask(LoadSessionDetail(session_id="session-1")) is None
    assert store.ask(LoadTranscriptPage(session_id="session-1")) is None
    usage = store.ask(LoadUsagePage(session_id="session-1"))
    assert usage is not None
    assert [t.command_id for t in usage.turns] == ["prompt-1", "prompt-2"]


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_finished_only_never_hands_out_a_tool_call(tmp_path: Path, projection: str) -> None:
    # A tool call without a status, or pending, is no agent item: finished_only never
    # returns it, open or closed; the agent reply after it is returned once finished.
    journal = JournalBuilder()
    events = journal.start_prompt("run it")
    for call_id, status in [("call-1", None), ("call-2", "pending")]:
        update: dict[str, object] = {"sessionUpdate": "tool_call", "toolCallId": call_id}
        update["title"] = f"Run {call_id}"
        if status is not None:
            update["status"] = status
        events.append(journal.add({"type": "session_update", "data": {"update": update}}))
    events += journal.say("done")
    events += journal.end_prompt(events[0].command_id or "")
    with EventStore.open(tmp_path / "s.sqlite3", projection=projection) as store:  # type: ignore[arg-type]
        store.ask(SaveSession(record=example_session("session-1")))
        store.ask(ObserveRelayEvents(session_id="session-1", events=events))
        whole = store.ask(LoadTranscriptPage(session_id="session-1"))
        page = store.ask(LoadTranscriptPage(session_id="session-1", finished_only=True))
    assert whole is not None
    assert page is not None
    assert {"tool"} <= {i.role for i in whole.items}
    assert [(i.role, i.text) for i in page.items] == [("agent", "done")]
    assert page.next_after_seq == page.latest_seq
