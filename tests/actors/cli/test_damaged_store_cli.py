"""``relaystore events`` and ``stats`` on a damaged store: one line, exit 1, no bytes out."""

from __future__ import annotations

from pathlib import Path

from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
from relaystore.storage.connection import open_writer
from relaystore.testing import example_session
from tests.actors.cli_support import cli, failure
from tests.damage import break_api_events_table, overwrite_body

HEAD = '{"type":"activity_changed","data":'


def _state(text: str) -> ApiActivityState:
    return ApiActivityState(
        state=text, is_idle=False, waiting_for_input=False, capacity_retry=False
    )


def _store(tmp_path: Path, events: int = 3) -> Path:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session()))
        for n in range(events):
            store.ask(
                RecordActivities(
                    activities=[("session-1", _state(f"state-{n}"))],
                    recorded_at_ms=n,
                )
            )
    return db


def test_events_refuses_a_body_edited_into_invalid_json_and_prints_none_of_it(
    tmp_path: Path,
) -> None:
    db = _store(tmp_path)
    handle = open_writer(db)
    overwrite_body(handle.connection, 2, HEAD + '{"activity":{"state":"edited",}}}')
    handle.close()
    result = cli(db, "events")
    line = failure(result)
    assert "seq 2" in line
    assert "edited" not in result.stdout


def test_stats_on_a_store_with_malformed_pages_says_so_in_one_line(tmp_path: Path) -> None:
    db = _store(tmp_path)
    break_api_events_table(db)
    for args in (("stats",), ("stats", "--json"), ("events",)):
        result = cli(db, *args)
        line = failure(result)
        assert "unexpected" not in line
        assert "the store is damaged" in line, line
        assert result.stdout == ""
