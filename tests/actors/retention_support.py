"""Stores with tool calls retention can shrink: what the retention and maintenance tests share.

A support module, not a test module.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.domain.sessions.records import CheckpointMetadata
from relaystore.testing import JournalBuilder, example_session

SESSION = "session-1"


def tool_call(journal: JournalBuilder, call_id: str, size: int) -> int:
    """Add a completed tool call whose body is about ``2 * size`` characters; its ordinal."""
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


def checkpoint_at(frontier: int) -> CheckpointMetadata:
    return CheckpointMetadata(
        archive_path="/srv/archive.tar",
        sha256="a" * 64,
        created_at="2026-12-01T00:00:00Z",
        event_frontier=frontier,
    )


def retention_store(db: Path, *, checkpointed: bool = True) -> tuple[int, int]:
    """A store whose session ``SESSION`` has a large tool call at or below its checkpoint
    frontier, a small one, and a large one past it (no checkpoint unless
    ``checkpointed``), its relay log in two pages split at the frontier; returns
    ``(frontier, last ordinal)``."""
    journal = JournalBuilder()
    journal.start_prompt("edit")
    tool_call(journal, "call-1", 20_000)
    tool_call(journal, "call-2", 10)
    frontier = journal.frontier.ordinal
    last = tool_call(journal, "call-3", 20_000)
    record = msgspec.structs.replace(
        example_session(SESSION), checkpoint=checkpoint_at(frontier) if checkpointed else None
    )
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=record))
        # Two asks, two relay log pages: the checkpoint covers the first whole.
        covered = [event for event in journal.events if event.ordinal <= frontier]
        rest = journal.events[len(covered) :]
        store.ask(ObserveRelayEvents(session_id=SESSION, events=covered))
        store.ask(ObserveRelayEvents(session_id=SESSION, events=rest))
    return frontier, last


def maintenance_store(tmp_path: Path) -> tuple[Path, int, Path]:
    """A store with SESSION (one tool call to compact once checkpointed) and a session
    ``doomed`` to delete; its frontier; a checkpoint archive beside it."""
    db = tmp_path / "store.sqlite3"
    frontier, _ = retention_store(db, checkpointed=False)
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session("doomed")))
    archive = tmp_path / "checkpoint.tar"
    archive.write_bytes(b"archive bytes")
    return db, frontier, archive
