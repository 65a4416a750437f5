"""Searching transcripts through both facades, and after a reprojection.

What an embedder relies on: ``ask(SearchTranscripts(...))`` answers a typed page of hits
through :class:`EventStore` and :class:`AsyncEventStore` alike, refuses a bad query with
``InvalidInput`` naming the field, and a reprojected session is found by its rebuilt
items only, exactly once each.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from relaystore import (
    EventStore,
    InvalidInput,
    ObserveRelayEvents,
    Reproject,
    SaveSession,
    SearchPage,
    SearchTranscripts,
)
from relaystore.aio import AsyncEventStore
from relaystore.testing import JournalBuilder, example_session

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-1"


def _fill(store: EventStore) -> None:
    store.ask(SaveSession(record=example_session(SESSION)))
    journal = JournalBuilder()
    events = journal.prompt_turn("why is the linker slow", chunks=("because of ", "debug info"))
    events += journal.prompt_turn("and the tests?", chunks=("they are fine",))
    store.ask(ObserveRelayEvents(session_id=SESSION, events=events))


def _where(page: SearchPage) -> list[tuple[str, str]]:
    return [(hit.session_id, hit.role) for hit in page.hits]


def test_both_facades_answer_the_same_page_and_refuse_a_bad_query(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with EventStore.open(path) as store:
        _fill(store)
        page = store.ask(SearchTranscripts(query="linker"))
        assert _where(page) == [(SESSION, "user")]
        assert page.hits[0].parts[1].text == "linker"
        assert page.hits[0].parts[1].match
        assert _where(store.ask(SearchTranscripts(query="debug", role="agent"))) == [
            (SESSION, "agent")
        ]
        assert store.ask(SearchTranscripts(query="debug", role="user")).hits == []
        with pytest.raises(InvalidInput, match=r"^SearchTranscripts\.query: "):
            store.ask(SearchTranscripts(query='"open'))

    async def main() -> SearchPage:
        async with AsyncEventStore.open(path, read_only=True) as aio:
            with pytest.raises(InvalidInput, match=r"^SearchTranscripts\.limit"):
                await aio.ask(SearchTranscripts(query="linker", limit=0))
            return await aio.ask(SearchTranscripts(query="linker"))

    assert asyncio.run(asyncio.wait_for(main(), 30)) == page


def test_a_reprojected_session_is_found_by_its_rebuilt_items_once(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "s.sqlite3") as store:
        _fill(store)
        before = store.ask(SearchTranscripts(query="linker OR debug OR fine OR tests"))
        store.ask(Reproject(session_id=SESSION))
        after = store.ask(SearchTranscripts(query="linker OR debug OR fine OR tests"))
        assert sorted(h.stable_id for h in after.hits) == sorted(h.stable_id for h in before.hits)
        assert len(after.hits) == 4
        assert [h.snippet for h in after.hits] == [h.snippet for h in before.hits]
