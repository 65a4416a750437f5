"""A projector reloads its session from the index facts and the window, not every item.

The store keeps each item's index facts beside its body (schema revision 9); a
projector that reloads its session reads the facts of every item and only the newest
``WINDOW`` items whole. These tests pin what that must keep: the reloaded projector
projects the rest of the journal exactly as projecting it whole does; it reads no more
whole items than the window; and items whose facts the store does not know (an older
build's insert, a body changed without its facts) are decoded instead.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import apsw
import pytest

from relaystore.actors import (
    projector_wiring as wiring_module,
    reader as reader_module,
)
from relaystore.actors.store import EventStore
from relaystore.actors.workers import pool as worker_pool
from relaystore.domain.errors import ProjectionError
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import LoadMaterializedSession, ObserveRelayEvents, SaveSession
from relaystore.domain.projection import frozen
from relaystore.domain.wire import encode
from relaystore.storage.materialized import _INDEX_AFTER, load_index_entries
from relaystore.testing import example_session
from tests.actors.test_projection_replay import _canonical, _events, _fields
from tests.domain.journal_stories import replay

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSIONS = ("session-1", "session-2")
STEPS = [("prompt", 0, "go"), ("start", 0, ""), ("tool", 1, "run"), ("chunk", 0, "x")]
STEPS += [("tool_update", 1, "again"), ("plan", 0, "p"), ("complete", 0, "")]


def _spy(patch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Record what the readers hand projectors: the size of each index entries page
    (``starts``: the pages that begin a reload) and of each page of whole items."""
    seen: dict[str, list[int]] = {"entries": [], "starts": [], "items": []}

    def entries(connection: Any, session_id: str, after: Any, limit: int) -> Any:
        page = load_index_entries(connection, session_id, after, limit)
        if page is not None:
            seen["entries"].append(len(page.entries))
            if after is None:
                seen["starts"].append(len(page.entries))
        return page

    load_items = reader_module.load_transcript_items_page

    def items(connection: Any, session_id: str, after: Any, limit: int) -> Any:
        reply = load_items(connection, session_id, after, limit)
        if reply is not None:
            seen["items"].append(len(reply.items))
        return reply

    patch.setattr(reader_module, "load_index_entries", entries)
    patch.setattr(reader_module, "load_transcript_items_page", items)
    return seen


@pytest.fixture(autouse=True)
def nothing_parks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Projection workers keep no stopped projector's projection: every start reloads."""
    monkeypatch.setattr(worker_pool, "PARKED_BYTES_PER_PROJECTOR", 1)


def _project_both(store: EventStore, events: list[Any], step: int) -> None:
    for start in range(0, len(events), step):
        for sid in SESSIONS:
            store.ask(ObserveRelayEvents(session_id=sid, events=events[start : start + step]))


def _assert_whole(stored: list[MaterializedSession | None], events: list[Any]) -> None:
    whole, _ = replay(MaterializedSession.empty("session-1"), events)
    for sid, session in zip(SESSIONS, stored, strict=True):
        assert session is not None
        expected = MaterializedSession(**{**_fields(whole), "session_id": sid})
        assert _canonical(session) == _canonical(expected)


@pytest.mark.parametrize(("window", "reload_items"), [(4, 32), (4, 2)])
def test_a_reload_reads_every_items_facts_but_only_the_newest_items_whole(
    monkeypatch: pytest.MonkeyPatch, window: int, reload_items: int
) -> None:
    """One projector for two sessions: every message reloads its session. Each reload
    reads the index entries of every item, a few at a time, and at most the newest
    ``RELOAD_ITEMS`` (never more than the window) whole; both sessions end as
    projecting their journals whole."""
    events = _events(STEPS * 30)
    monkeypatch.setattr(frozen, "WINDOW", window)
    monkeypatch.setattr(frozen, "SLACK", 1)
    monkeypatch.setattr(wiring_module, "RELOAD_ITEMS", reload_items)
    whole_per_reload = min(window, reload_items)
    monkeypatch.setattr(wiring_module, "LOAD_PAGE_ENTRIES", 9)
    monkeypatch.setattr(wiring_module, "LOAD_PAGE_ITEMS", 3)
    seen = _spy(monkeypatch)
    with (
        tempfile.TemporaryDirectory() as folder,
        EventStore.open(Path(folder) / "s.sqlite3", max_projectors=1) as store,
    ):
        for sid in SESSIONS:
            store.ask(SaveSession(record=example_session(sid)))
        _project_both(store, events, 40)
        for kept in seen.values():
            kept.clear()
        _project_both(store, _more(events), 1)  # a reload for every event
        stored = [store.ask(LoadMaterializedSession(session_id=sid)) for sid in SESSIONS]
    reloads = len(seen["starts"])
    assert reloads >= len(_more(events))  # the path under test ran
    assert max(seen["entries"]) <= 9
    assert sum(seen["entries"]) > reloads * 100  # every item's facts, at every reload
    # Whole items: pages of at most 3, and never more than the window per reload (a
    # cold item an event names is fetched by another message, not counted here).
    assert max(seen["items"]) <= 3
    assert sum(seen["items"]) <= whole_per_reload * reloads
    assert sum(seen["items"]) >= reloads  # the newest items are read whole
    _assert_whole(stored, events + _more(events))


def _more(events: list[Any]) -> list[Any]:
    """The journal continued: ``STEPS`` once more after ``events``."""
    extended = _events(STEPS * 31)
    assert [encode(e) for e in extended[: len(events)]] == [encode(e) for e in events]
    return extended[len(events) :]


def test_items_whose_facts_the_store_does_not_know_are_decoded_on_reload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What an older build leaves (an item inserted without facts, a body updated
    without them: the trigger forgets the facts) reloads from the bodies, and the
    sessions still project as whole."""
    events = _events(STEPS * 30)
    monkeypatch.setattr(frozen, "WINDOW", 4)
    monkeypatch.setattr(frozen, "SLACK", 1)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.sqlite3"
        with EventStore.open(path, max_projectors=1) as store:
            for sid in SESSIONS:
                store.ask(SaveSession(record=example_session(sid)))
            _project_both(store, events, 40)
        raw = apsw.Connection(str(path))
        with raw:
            known = raw.execute(
                "SELECT count(*) FROM materialized_transcript_items WHERE index_facts IS NULL"
            ).get
            assert known == 0  # this build writes every item's facts
            raw.execute(  # an older build's update: the body changes, the facts do not
                "UPDATE materialized_transcript_items SET body_json = body_json"
                " WHERE position % 3 = 0"
            )
            raw.execute(  # an older build's insert: no facts at all
                "UPDATE materialized_transcript_items SET index_facts = NULL WHERE position % 3 = 1"
            )
            forgotten = raw.execute(
                "SELECT count(*) FROM materialized_transcript_items WHERE index_facts IS NULL"
            ).get
        raw.close()
        assert isinstance(forgotten, int)
        assert forgotten > 50
        with EventStore.open(path, max_projectors=1) as store:
            _project_both(store, _more(events), 40)
            stored = [store.ask(LoadMaterializedSession(session_id=sid)) for sid in SESSIONS]
    _assert_whole(stored, events + _more(events))


def _stored(tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        store.ask(ObserveRelayEvents(session_id="session-1", events=_events(STEPS * 3)))
    return path


def _facts(raw: apsw.Connection) -> dict[str, object]:
    rows = raw.execute("SELECT stable_id, index_facts FROM materialized_transcript_items")
    return {str(sid): facts for sid, facts in rows}


def test_the_store_forgets_an_items_facts_only_when_its_body_changes_without_them(
    tmp_path: Path,
) -> None:
    raw = apsw.Connection(str(_stored(tmp_path)))
    before = _facts(raw)
    assert all(isinstance(f, str) and ":" in f for f in before.values())
    assert any(f.endswith(":") for f in before.values())  # most items: no facts
    assert any(not f.endswith(":") for f in before.values())
    sid = next(iter(before))
    raw.execute(
        "UPDATE materialized_transcript_items SET last_changed_at_ms = last_changed_at_ms + 1"
        " WHERE stable_id = ?",
        (sid,),
    )
    assert _facts(raw) == before  # the body did not change
    raw.execute(
        "UPDATE materialized_transcript_items SET body_json = body_json,"
        " index_facts = '99999:' WHERE stable_id = ?",
        (sid,),
    )
    assert _facts(raw)[sid] == "99999:"  # a write with new facts keeps them
    raw.execute(
        "UPDATE materialized_transcript_items SET body_json = body_json WHERE stable_id = ?",
        (sid,),
    )
    assert _facts(raw)[sid] is None
    raw.close()


@pytest.mark.parametrize(
    ("facts", "why"),
    [("nonsense", "no ordinal prefix"), ('3:["x"]', "do not decode"), ('3:[["lost"]]', "unknown")],
)
def test_stored_facts_that_do_not_decode_are_refused_naming_the_item(
    tmp_path: Path, facts: str, why: str
) -> None:
    raw = apsw.Connection(str(_stored(tmp_path)))
    sid = str(raw.execute("SELECT stable_id FROM materialized_transcript_items LIMIT 1").get)
    raw.execute(
        "UPDATE materialized_transcript_items SET index_facts = ? WHERE stable_id = ?",
        (facts, sid),
    )
    with pytest.raises(ProjectionError, match=why) as refused:
        load_index_entries(raw, "session-1", None, 1000)
    assert repr(sid) in str(refused.value)
    assert refused.value.session_id == "session-1"
    raw.close()


def test_an_index_entries_page_seeks_to_its_cursor(tmp_path: Path) -> None:
    """A page after a cursor starts at the cursor in the position index; it does not
    walk the session from its first item (a reload of a long session reads each item
    once, not once per page before it)."""
    raw = apsw.Connection(str(_stored(tmp_path)))
    plan = " ".join(
        str(row[3])
        for row in raw.execute("EXPLAIN QUERY PLAN " + _INDEX_AFTER, ("session-1", 3, "x", 10))
    )
    raw.close()
    assert "position>?" in plan.replace(" ", "")
