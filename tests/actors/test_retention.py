"""``CompactTranscript`` and ``relaystore compact``: a checkpoint lets the store forget
what an old tool call's line no longer shows, online; the item still pages in place."""

from __future__ import annotations

from pathlib import Path

import msgspec

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.domain.messages import CompactTranscript, LoadMaterializedSession
from relaystore.domain.reads import LoadTranscriptPage
from relaystore.domain.retention import RETENTION_BATCH_ITEMS
from relaystore.domain.sessions import CheckpointMetadata
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import ok

SESSION = "session-1"


def _tool_call(journal: JournalBuilder, call_id: str, size: int) -> int:
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": "Edit files",
        "kind": "edit",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "x" * size}}],
        "rawInput": {"file_text": "y" * size},
    }
    return journal.add({"type": "session_update", "data": {"update": update}}).ordinal


def _store(tmp_path: Path) -> tuple[Path, int, int]:
    journal = JournalBuilder()
    journal.start_prompt("edit")
    covered = _tool_call(journal, "call-1", 20_000)
    small = _tool_call(journal, "call-2", 10)
    frontier = journal.frontier.ordinal
    live = _tool_call(journal, "call-3", 20_000)
    db = tmp_path / "store.sqlite3"
    record = example_session(SESSION)
    checkpoint = CheckpointMetadata(
        archive_path="/srv/archive.tar",
        sha256="a" * 64,
        created_at="2026-12-01T00:00:00Z",
        event_frontier=frontier,
    )
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=msgspec.structs.replace(record, checkpoint=checkpoint)))
        store.ask(ObserveRelayEvents(session_id=SESSION, events=journal.events))
    assert small <= frontier < live
    return db, covered, live


def _items(store: EventStore) -> dict[str, object]:
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    return {item.stable_id: item for item in session.transcript}


def test_a_pass_compacts_only_covered_large_tool_calls_and_they_still_page(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        before = _items(store)
        page_before = store.ask(LoadTranscriptPage(session_id=SESSION, after_seq=0))
        report = store.ask(CompactTranscript(session_id=SESSION))
        after = _items(store)
        page_after = store.ask(LoadTranscriptPage(session_id=SESSION, after_seq=0))
        again = store.ask(CompactTranscript(session_id=SESSION))
    assert (report.items, report.remaining) == (1, False)
    assert report.bytes > 20_000
    compacted = after["tool:call-1"]
    call = compacted.body.call  # type: ignore[attr-defined]
    assert "rawInput" not in call
    assert call["content"] == []
    assert call["title"] == "Edit files"
    # Position, times and seq stay: the item keeps its place in every page.
    original = before["tool:call-1"]
    assert (compacted.position, compacted.created_at_ms, compacted.last_changed_at_ms) == (  # type: ignore[attr-defined]
        original.position,  # type: ignore[attr-defined]
        original.created_at_ms,  # type: ignore[attr-defined]
        original.last_changed_at_ms,  # type: ignore[attr-defined]
    )
    assert page_after is not None
    assert page_before is not None
    assert [(i.stable_id, i.seq) for i in page_after.items] == [
        (i.stable_id, i.seq) for i in page_before.items
    ]
    assert after["tool:call-2"] == before["tool:call-2"]  # small: left alone
    assert after["tool:call-3"] == before["tool:call-3"]  # past the checkpoint: left alone
    assert (again.items, again.bytes) == (0, 0)


def test_a_session_without_a_checkpoint_keeps_everything(tmp_path: Path) -> None:
    journal = JournalBuilder()
    _tool_call(journal, "call-1", 20_000)
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        record = msgspec.structs.replace(example_session(SESSION), checkpoint=None)
        store.ask(SaveSession(record=record))
        store.ask(ObserveRelayEvents(session_id=SESSION, events=journal.events))
        report = store.ask(CompactTranscript(session_id=SESSION))
    assert (report.items, report.bytes) == (0, 0)


def test_the_command_compacts_every_checkpointed_session(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    result = ok(db, "compact")
    assert f"session {SESSION}: 1 tool call compacted" in result.stdout
    assert "compacted 1 tool call in 1 session," in result.stdout
    assert "compacted 0 tool calls" in ok(db, "compact", SESSION).stdout


def test_the_batch_is_the_origins() -> None:
    assert RETENTION_BATCH_ITEMS == 4096
