"""A foreign connection holding SQLite's write lock is transient, never the writer's end.

An operator's ``sqlite3`` shell, a backup or a replication tool may hold the store's
write lock for a while (here: a separate apsw connection in ``BEGIN IMMEDIATE``). An ask
then waits for the lock within the writer's busy timeout; past it, the batch is refused
with the retryable ``StoreBusy`` (nothing written), ``metrics()`` shows it, and once the
lock is released the writer serves again. The busy timeout is shortened here (it is
read when the writer connection opens) so the lock holds last a second or so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import relaystore.storage.connection as connection_module
from relaystore import (
    AskTimeout,
    EventStore,
    LoadApiEvents,
    ObserveRelayEvents,
    SaveSession,
    StoreBusy,
    StoreError,
)
from relaystore.aio import AsyncEventStore
from relaystore.testing import JournalBuilder, example_session
from tests.actors.activity_support import activity

BUSY_MS = 300


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EventStore]:
    monkeypatch.setattr(connection_module, "BUSY_TIMEOUT_MS", BUSY_MS)
    with EventStore.open(tmp_path / "store.sqlite3") as opened:
        opened.ask(SaveSession(record=example_session()))
        yield opened


@pytest.fixture
def foreign(store: EventStore) -> Iterator[apsw.Connection]:
    """Another connection to the store, holding its write lock until the test rolls back."""
    other = apsw.Connection(str(store.path))
    other.execute("BEGIN IMMEDIATE")
    yield other
    if other.in_transaction:
        other.execute("ROLLBACK")
    other.close()


def kinds(store: EventStore) -> list[str]:
    return [event.kind for event in store.ask(LoadApiEvents(after_seq=0)).events]


def test_a_held_lock_refuses_the_batch_with_store_busy_and_the_writer_serves_on(
    store: EventStore, foreign: apsw.Connection
) -> None:
    with pytest.raises(StoreBusy, match="write lock") as caught:
        store.ask(activity(1, prefix="working-"))
    assert isinstance(caught.value, StoreError)
    assert caught.value.path == str(store.path)
    busy = store.metrics()
    assert (busy.writer_busy, busy.busy_refusals) == (True, 1)
    with pytest.raises(AskTimeout):  # an ask waits within its own timeout
        store.ask(activity(2, prefix="working-"), timeout=BUSY_MS / 1000 / 3)
    deadline = time.monotonic() + 10
    while store.metrics().busy_refusals < 2:  # its batch is refused once the wait runs out
        assert time.monotonic() < deadline
        time.sleep(0.01)
    foreign.execute("ROLLBACK")  # the operator lets go
    store.ask(activity(3, prefix="working-"))
    assert kinds(store) == ["activity_changed"]  # only what was acknowledged
    served = store.metrics()
    assert served.writer_busy is False
    assert served.busy_refusals == 2  # the timed-out ask's batch was refused too


def test_an_ask_waits_for_a_lock_released_within_the_busy_timeout(
    store: EventStore, foreign: apsw.Connection
) -> None:
    release = threading.Timer(BUSY_MS / 1000 / 4, foreign.execute, ("ROLLBACK",))
    release.start()
    try:
        store.ask(activity(1, prefix="working-"))
    finally:
        release.join()
    assert kinds(store) == ["activity_changed"]
    assert store.metrics().busy_refusals == 0


@pytest.mark.integration
def test_relay_events_refused_while_busy_apply_once_resent(
    store: EventStore, foreign: apsw.Connection
) -> None:
    journal = JournalBuilder()
    journal.prompt_turn("while an operator holds the lock")
    events = journal.events
    message = ObserveRelayEvents(session_id="session-1", events=events)
    with pytest.raises(StoreBusy):
        store.ask(message)
    foreign.execute("ROLLBACK")
    report = store.ask(message)
    assert (report.applied, report.already_applied) == (len(events), 0)


def test_the_async_facade_gets_the_same_store_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection_module, "BUSY_TIMEOUT_MS", BUSY_MS)
    path = tmp_path / "store.sqlite3"

    async def main() -> None:
        async with AsyncEventStore.open(path) as store:
            await store.ask(SaveSession(record=example_session()))
            other = apsw.Connection(str(path))
            other.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(StoreBusy):
                    await store.ask(activity(1, prefix="working-"))
                assert store.metrics().writer_busy
            finally:
                other.execute("ROLLBACK")
                other.close()
            await store.ask(activity(2, prefix="working-"))
            assert not store.metrics().writer_busy

    asyncio.run(asyncio.wait_for(main(), 30))
