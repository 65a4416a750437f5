"""Accounting outlives its session (schema revision 5, the origin's step 67)."""

from __future__ import annotations

from pathlib import Path

import apsw

from relaystore.domain.outcomes import MaterializedTurnOutcome, TurnOutcomeCompleted
from relaystore.domain.wire import encode
from relaystore.storage.connection import open_writer
from relaystore.storage.reads.sessions import list_sessions
from relaystore.storage.reads.usage import load_usage_page
from relaystore.storage.schema import SCHEMA_VERSION
from relaystore.storage.sessions import delete_session, save_session
from relaystore.testing import example_session
from tests.storage.legacy import step_back_to_revision_4


def _record_usage(db: apsw.Connection, session_id: str, n: int) -> None:
    turn = MaterializedTurnOutcome(
        command_id=f"p{n}",
        turn_start_position=n,
        completed_ordinal=n,
        completed_at_ms=100,
        outcome=TurnOutcomeCompleted(stop_reason="end_turn"),
    )
    db.execute(
        "INSERT INTO session_turn_usage(session_id, command_id, completed_ordinal,"
        " turn_start_position, body) VALUES (?, ?, ?, ?, ?)",
        (session_id, turn.command_id, n, n, encode(turn).decode()),
    )
    db.execute(
        "INSERT OR REPLACE INTO session_provider_cost(session_id, body) VALUES (?, ?)",
        (session_id, '{"amount":1.25,"currency":"USD","observed_at_ms":100}'),
    )


def test_deleting_a_session_keeps_its_usage_readable(store: apsw.Connection) -> None:
    _record_usage(store, "session-1", 1)
    _record_usage(store, "session-1", 2)
    delete_session(store, "session-1")
    assert list_sessions(store).sessions == []
    page = load_usage_page(store, "session-1")
    assert page is not None
    assert [t.command_id for t in page.turns] == ["p1", "p2"]
    assert page.provider_session_cost is not None
    assert page.provider_session_cost.amount == 1.25
    assert load_usage_page(store, "never-saved") is None


def test_migrating_to_revision_5_keeps_usage_rows(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    with open_writer(path) as writer:
        save_session(writer.connection, example_session("kept"))
        _record_usage(writer.connection, "kept", 1)
    step_back_to_revision_4(path)
    with open_writer(path) as writer:
        assert writer.revision == SCHEMA_VERSION
        db = writer.connection
        delete_session(db, "kept")
        page = load_usage_page(db, "kept")
        assert page is not None
        assert [t.command_id for t in page.turns] == ["p1"]
        plan = " ".join(
            str(row[3])
            for row in db.execute(
                "EXPLAIN QUERY PLAN SELECT stable_id FROM materialized_transcript_items"
                " WHERE session_id = 'x' AND COALESCE(latest_content_event_ordinal, position) > 3"
                " ORDER BY COALESCE(latest_content_event_ordinal, position), stable_id"
            )
        )
    assert "materialized_transcript_seq" in plan
    assert "TEMP B-TREE" not in plan  # a page walks the index, it sorts nothing
