"""A damaged store: a body edited into invalid JSON, pages SQLite calls malformed.

Neither may reach a reader as bytes or as an apsw error: a damaged body fails its page
with the :class:`InvalidInput` the typed page gives, and SQLite's corruption error
becomes a relaystore error at storage's one boundary, naming the action and saying
what to do.
"""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from relaystore.domain.api_events import ApiInputRequired
from relaystore.domain.errors import InvalidInput, StoreError
from relaystore.storage.connection import open_reader, open_writer
from relaystore.storage.events import insert_api_event
from relaystore.storage.paging import load_api_events, load_raw_api_events
from relaystore.storage.sessions import save_session
from relaystore.storage.stats import load_stats
from tests.damage import break_api_events_table, overwrite_body
from tests.storage.builders import running_session

HEAD = '{"type":"input_required","data":'
# Bodies that start and end as relaystore writes them, but are not JSON.
DAMAGED = [
    HEAD + '{"turn_id":1,}',  # a trailing comma
    HEAD + '{"turn_id":1 "x":2}',  # a missing comma
    HEAD + '{"turn_id":"open}',  # an unterminated string
    HEAD + '{"turn_id":1}}}',  # unbalanced
    HEAD + '{"turn_id":1,"a":\'b\'}',  # single quotes
    HEAD + '{"turn_id":1,"a":tru}',  # a misspelt literal
]


@pytest.mark.parametrize("body", DAMAGED)
def test_a_body_edited_into_invalid_json_fails_the_raw_page_as_the_typed_one(
    store: apsw.Connection, body: str
) -> None:
    for turn in range(3):
        insert_api_event(store, "session-1", turn, ApiInputRequired.of(turn_id=turn))
    overwrite_body(store, 2, body)
    with pytest.raises(InvalidInput) as typed:
        load_api_events(store, None, 0, 100)
    with pytest.raises(InvalidInput) as raw:
        load_raw_api_events(store, None, 0, 100)
    assert raw.value.detail == typed.value.detail
    assert "seq 2" in raw.value.detail
    # The pages before the damaged event still read.
    assert [event.seq for event in load_raw_api_events(store, None, 0, 1).events] == [1]


def _damaged_copy(tmp_path: Path) -> Path:
    """A store with 50 events whose ``api_events`` table is malformed (the schema reads)."""
    path = tmp_path / "store.sqlite3"
    handle = open_writer(path, synchronous="OFF")
    save_session(handle.connection, running_session())
    for turn in range(50):
        insert_api_event(handle.connection, "session-1", turn, ApiInputRequired.of(turn_id=turn))
    handle.close()
    break_api_events_table(path)
    return path


def test_sqlite_corruption_is_a_relaystore_error_naming_the_action(tmp_path: Path) -> None:
    connection = open_reader(_damaged_copy(tmp_path))
    try:
        for read in (
            lambda: load_stats(connection),
            lambda: load_api_events(connection, None, 0, 10),
            lambda: load_raw_api_events(connection, None, 0, 10),
        ):
            with pytest.raises(StoreError) as caught:
                read()
            assert isinstance(caught.value, InvalidInput)
            assert isinstance(caught.value.__cause__, apsw.CorruptError)
            assert "damaged" in caught.value.detail
            assert "backup" in caught.value.detail
    finally:
        connection.close()
