"""``LoadRawApiEvents`` through the facade, and the readers of the feed that print it.

Real journals (the example worker roots and the fixtures copied from the origin) are
replayed into a store; every event they project must read raw exactly as the typed
page encodes it. The message is checked like ``LoadApiEvents``, the command line prints
the typed bytes, and ``AsyncEventStore.follow_raw`` (the HTTP stream's source) yields
what ``follow`` yields.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from relaystore import (
    ApiActivityState,
    ApiEventFilter,
    ApiEventPage,
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadRawApiEvents,
    RawApiEvent,
    RawApiEventPage,
    RecordActivities,
    RecordStartupFault,
    SaveSession,
)
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.aio import AsyncEventStore
from relaystore.domain.errors import RelayChainError
from relaystore.testing import example_session
from tests.actors.cli_support import ENV, TIMEOUT, WORKER_ROOTS, command
from tests.paths import LIVE_RECORDS, REAL_EXCERPT

WORKSPACES = ("default", "team", "lab")


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding every real journal of the repository, in three workspaces."""
    db = tmp_path_factory.mktemp("raw") / "store.sqlite3"
    sources = [*WORKER_ROOTS, REAL_EXCERPT, *LIVE_RECORDS]
    with EventStore.open(db) as store:
        for index, path in enumerate(sources):
            # The real excerpt has a gap: every event before it is committed.
            with contextlib.suppress(RelayChainError):
                replay_source(
                    store,
                    resolve_source(path),
                    workspace=WORKSPACES[index % 3],
                    from_first=True,
                )
        # The one-line records project no API event: give their sessions the kinds the
        # supervisor writes (an activity with awkward text, a startup fault).
        for index, path in enumerate(LIVE_RECORDS):
            state = ApiActivityState(
                state=f'waiting "{index}" \\ \u2028 é\n',
                is_idle=False,
                waiting_for_input=False,
                capacity_retry=False,
            )
            activity = (resolve_source(path).session_id, state)
            store.ask(RecordActivities(activities=[activity], recorded_at_ms=-index))
        store.ask(
            RecordStartupFault(
                session_id=resolve_source(REAL_EXCERPT).session_id, message="no image\t😀"
            )
        )
    return db


def all_pages(
    store: EventStore, message: type[Any], event_filter: ApiEventFilter, limit: int
) -> list[Any]:
    """Every page from seq 0 on, asked with ``message``."""
    pages, cursor = [], 0
    while True:
        page = store.ask(message(filter=event_filter, after_seq=cursor, limit=limit))
        pages.append(page)
        if not page.events:
            return pages
        cursor = page.next_after_seq


def assert_same_page(raw: RawApiEventPage, typed: ApiEventPage) -> None:
    assert [(event.seq, event.kind, event.json) for event in raw.events] == [
        (event.seq, event.type, msgspec.json.encode(event)) for event in typed.events
    ]
    assert (raw.next_after_seq, raw.latest_seq) == (typed.next_after_seq, typed.latest_seq)


@pytest.mark.integration
def test_every_event_of_the_real_journals_reads_raw_as_the_typed_path_encodes_it(
    fixture_store: Path,
) -> None:
    with EventStore.open(fixture_store, read_only=True) as store:
        latest = store.latest_seq
        every = store.ask(LoadApiEvents(after_seq=0, limit=1000)).events
        assert len({event.session_id for event in every}) == len(WORKER_ROOTS) + 3
        assert {event.kind for event in every} >= {
            "runtime_resolved",
            "turn_started",
            "turn_ended",
            "command_ended",
            "session_fault",
            "input_required",
            "input_resolved",
            "activity_changed",
        }
        sessions = sorted({event.session_id for event in every})
        filters = [
            ApiEventFilter(),
            *(ApiEventFilter(session_id=session_id) for session_id in sessions),
            *(ApiEventFilter(workspace_id=workspace) for workspace in WORKSPACES),
            ApiEventFilter(session_id=sessions[0], workspace_id="team"),
        ]
        for event_filter in filters:
            for limit in (1, 7, 1000):
                raw = all_pages(store, LoadRawApiEvents, event_filter, limit)
                typed = all_pages(store, LoadApiEvents, event_filter, limit)
                assert len(raw) == len(typed)
                for raw_page, typed_page in zip(raw, typed, strict=True):
                    assert_same_page(raw_page, typed_page)
        for after_seq in (None, 0, 3, latest - 1, latest, latest + 10):
            assert_same_page(
                store.ask(LoadRawApiEvents(after_seq=after_seq, limit=5)),
                store.ask(LoadApiEvents(after_seq=after_seq, limit=5)),
            )


@pytest.mark.parametrize(
    "fields",
    [
        {"after_seq": -1},
        {"after_seq": "1"},
        {"after_seq": 2**63},
        {"after_seq": True},
        {"limit": None},
        {"limit": 1.5},
        {"limit": -(2**63) - 1},
        {"filter": None},
        {"filter": "session-1"},
        {"filter": ApiEventFilter(workspace_id=7)},  # type: ignore[arg-type]
    ],
)
def test_invalid_fields_raise_the_invalid_input_of_load_api_events(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    with EventStore.open(tmp_path / "s.sqlite3") as store:
        with pytest.raises(InvalidInput) as typed:
            store.ask(LoadApiEvents(**fields))
        with pytest.raises(InvalidInput) as raw:
            store.ask(LoadRawApiEvents(**fields))
    assert type(raw.value) is type(typed.value)
    assert raw.value.detail == typed.value.detail.replace("LoadApiEvents", "LoadRawApiEvents")


@pytest.mark.integration
def test_a_raw_page_is_a_reader_reply_in_a_read_only_store(fixture_store: Path) -> None:
    with EventStore.open(fixture_store, read_only=True, readers=1) as store:
        page = store.ask(LoadRawApiEvents(after_seq=0, limit=3))
        assert type(page) is RawApiEventPage
        assert all(type(event) is RawApiEvent for event in page.events)
        assert [event.seq for event in page.events] == [1, 2, 3]


def _events_bytes(db: Path, *args: str) -> bytes:
    result = subprocess.run(
        command(db, "events", *args),
        cwd=db.parent,
        env=ENV,
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.integration
def test_the_command_line_prints_the_typed_bytes(fixture_store: Path) -> None:
    with EventStore.open(fixture_store, read_only=True) as store:
        typed = store.ask(LoadApiEvents(after_seq=0, limit=1000)).events
        session = typed[-1].session_id
        cases: list[tuple[tuple[str, ...], ApiEventFilter, int]] = [
            ((), ApiEventFilter(), 0),
            (("--session", session), ApiEventFilter(session_id=session), 0),
            (("--workspace", "team"), ApiEventFilter(workspace_id="team"), 0),
            (("--after", str(typed[4].seq)), ApiEventFilter(), typed[4].seq),
        ]
        for args, event_filter, after_seq in cases:
            page = store.ask(LoadApiEvents(filter=event_filter, after_seq=after_seq, limit=1000))
            assert page.events, args
            expected = b"".join(msgspec.json.encode(event) + b"\n" for event in page.events)
            assert _events_bytes(fixture_store, *args) == expected, args
    limited = b"".join(msgspec.json.encode(event) + b"\n" for event in typed[5:8])
    assert _events_bytes(fixture_store, "--after", str(typed[4].seq), "--limit", "3") == limited


def test_follow_raw_yields_what_follow_yields(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            await store.ask(SaveSession(record=example_session()))
            seen: list[RawApiEvent] = []

            async def follow() -> None:
                async for event in store.follow_raw(after_seq=0):
                    seen.append(event)
                    if len(seen) == 5:
                        return

            follower = asyncio.create_task(follow())
            for n in range(5):
                state = ApiActivityState(
                    state=f'state "{n}"\n',
                    is_idle=False,
                    waiting_for_input=False,
                    capacity_retry=False,
                )
                await store.ask(
                    RecordActivities(activities=[("session-1", state)], recorded_at_ms=n)
                )
            await asyncio.wait_for(follower, 5)
            typed = [event async for event in store.follow(after_seq=0, timeout=0)]
            assert [(e.seq, e.kind, e.json) for e in seen] == [
                (e.seq, e.kind, msgspec.json.encode(e)) for e in typed
            ]
            tail = [e.seq async for e in store.follow_raw(after_seq=3, timeout=0)]
            assert tail == [4, 5]
            other = ApiEventFilter(session_id="other")
            assert [e async for e in store.follow_raw(filter=other, timeout=0)] == []
            with pytest.raises(InvalidInput):
                await anext(store.follow_raw(after_seq=-1))

    asyncio.run(asyncio.wait_for(main(), 30))
