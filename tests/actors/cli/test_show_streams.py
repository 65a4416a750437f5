"""``relaystore show`` reads a long session a page at a time (``LoadTranscriptItems``)
and prints exactly the document the whole session encodes to."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from relaystore import (
    EventStore,
    InvalidInput,
    LoadMaterializedSession,
    LoadTranscriptItems,
    ObserveRelayEvents,
    SaveSession,
)
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import ok

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-1"


def _store(tmp_path: Path, turns: int) -> Path:
    journal = JournalBuilder()
    for n in range(turns):
        journal.prompt_turn(f"turn {n}", chunks=("a", "b"))
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session(SESSION)))
        if turns:
            store.ask(ObserveRelayEvents(session_id=SESSION, events=journal.events))
    return db


def _whole(db: Path) -> bytes:
    with EventStore.open(db, read_only=True) as store:
        session = store.ask(LoadMaterializedSession(session_id=SESSION))
    return msgspec.json.format(msgspec.json.encode(session), indent=2) + b"\n"


@pytest.mark.parametrize("turns", [0, 1, 700])
def test_show_prints_the_whole_session_document_byte_for_byte(tmp_path: Path, turns: int) -> None:
    db = _store(tmp_path, turns)
    shown = ok(db, "show", SESSION).stdout.encode()
    assert shown == _whole(db)


def test_transcript_items_page_through_the_whole_transcript_in_store_order(
    tmp_path: Path,
) -> None:
    db = _store(tmp_path, 300)
    with EventStore.open(db, read_only=True) as store:
        whole = store.ask(LoadMaterializedSession(session_id=SESSION))
        assert whole is not None
        items, after, pages = [], None, 0
        while True:
            page = store.ask(
                LoadTranscriptItems(
                    session_id=SESSION,
                    after_position=None if after is None else after[0],
                    after_id=None if after is None else after[1],
                    limit=100,
                )
            )
            assert page is not None
            assert (page.frontier_ordinal, page.frontier_digest) == (
                whole.kept_frontier.ordinal,
                whole.kept_frontier.digest,
            )
            items += page.items
            pages += 1
            if not page.more:
                break
            after = (page.items[-1].position, page.items[-1].stable_id)
        assert items == whole.transcript
        assert pages == -(-len(whole.transcript) // 100)
        assert store.ask(LoadTranscriptItems(session_id="nobody")) is None
        with pytest.raises(InvalidInput, match="give both"):
            store.ask(LoadTranscriptItems(session_id=SESSION, after_position=3))
        with pytest.raises(InvalidInput, match="limit"):
            store.ask(LoadTranscriptItems(session_id=SESSION, limit=0))
        with pytest.raises(InvalidInput, match="after_position: -1 is below 0"):
            store.ask(LoadTranscriptItems(session_id=SESSION, after_position=-1, after_id="x"))
        with pytest.raises(InvalidInput, match="after_position: integer outside"):
            store.ask(LoadTranscriptItems(session_id=SESSION, after_position=2**70, after_id="x"))
