"""The actor runtime: backpressure, shutdown drain, refusals, group commit, readers, restarts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import pykka
import pytest

import relaystore.actors.writer as writer_module
from relaystore.actors.store import EventStore
from relaystore.domain.errors import (
    InvalidInput,
    SchemaMismatch,
    SchemaMismatchReason,
    StoreClosed,
    StoreLocked,
    UnknownSession,
    WriterStopped,
)
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    Request,
    SaveLifecycleSession,
    SaveSession,
)
from relaystore.storage.schema import COMPATIBILITY_FLOOR, SCHEMA_VERSION
from relaystore.testing import example_session
from tests.actors.activity_support import activity
from tests.actors.seed import all_events, chain, page, turn


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture
def store(path: Path) -> Iterator[EventStore]:
    with EventStore.open(path, queue_capacity=4) as store:
        store.ask(SaveSession(record=example_session()))
        yield store


class Hold(Request[None], frozen=True, kw_only=True):
    """A test-only writer message: the writer blocks on ``gate`` once it runs it."""

    gate: threading.Event
    entered: threading.Event


class ViolateAtCommit(Request[None], frozen=True, kw_only=True):
    """A test-only writer message whose write fails only at COMMIT."""


def _perform_with_test_messages(connection: apsw.Connection, message: object) -> object:
    if isinstance(message, Hold):
        message.entered.set()
        message.gate.wait()
        return None
    if isinstance(message, ViolateAtCommit):
        # A deferred foreign key is checked only at COMMIT, so the commit itself fails.
        connection.execute("PRAGMA defer_foreign_keys = ON")
        connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('ghost', 1, '{}')"
        )
        return None
    return _real_perform(connection, message)  # type: ignore[arg-type]


_real_perform = writer_module.perform


@pytest.fixture(autouse=True)
def _test_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "perform", _perform_with_test_messages)


def hold_writer(store: EventStore) -> threading.Event:
    """Block the writer inside a message; returns the gate that releases it."""
    gate, entered = threading.Event(), threading.Event()
    store._core.send(Hold(gate=gate, entered=entered), None)  # type: ignore[arg-type]
    assert entered.wait(5)
    return gate


def test_exactly_queue_capacity_messages_wait_behind_a_blocked_writer(store: EventStore) -> None:
    gate = hold_writer(store)
    for n in range(4):  # queue_capacity
        store.tell(activity(n))
    blocked = threading.Thread(target=store.tell, args=(activity(4),))
    blocked.start()
    blocked.join(timeout=0.3)
    assert blocked.is_alive(), "the sender past queue_capacity must block"
    gate.set()
    blocked.join(timeout=5)
    assert not blocked.is_alive()
    store.wait_for(5, timeout=5)
    assert [e.recorded_at_ms for e in all_events(store)] == [0, 1, 2, 3, 4]


def test_close_drains_every_accepted_message_in_order(path: Path) -> None:
    store = EventStore.open(path, queue_capacity=8)
    store.ask(SaveSession(record=example_session()))
    gate = hold_writer(store)
    futures = []
    for n in range(6):
        future: pykka.Future[object] = pykka.ThreadingFuture()
        store._core.send(activity(n), future)
        futures.append(future)
    closer = threading.Thread(target=store.close)
    closer.start()
    gate.set()
    closer.join(timeout=10)
    assert not closer.is_alive()
    assert [f.get(timeout=1) for f in futures] == [None] * 6
    with pytest.raises(StoreClosed):
        store.ask(LoadApiEvents(after_seq=0))
    store.close()  # twice is harmless
    with EventStore.open(path) as reopened:
        assert [e.recorded_at_ms for e in all_events(reopened)] == [0, 1, 2, 3, 4, 5]


def test_a_second_writer_is_refused_at_once(store: EventStore, path: Path) -> None:
    with pytest.raises(StoreLocked):
        EventStore.open(path)
    with EventStore.open(path, read_only=True) as reader:
        assert reader.ask(LoadApiEvents(after_seq=0)).events == []
        with pytest.raises(InvalidInput):
            reader.ask(SaveSession(record=example_session()))


def test_a_failing_message_fails_only_itself_within_a_group_commit(store: EventStore) -> None:
    gate = hold_writer(store)
    results: dict[str, object] = {}
    missing = example_session("ghost")

    def send(name: str, message: object) -> None:
        try:
            results[name] = store.ask(message)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001
            results[name] = exc

    senders = [
        threading.Thread(target=send, args=("first", activity(1))),
        threading.Thread(target=send, args=("bad", SaveLifecycleSession(record=missing))),
        threading.Thread(target=send, args=("last", activity(2))),
    ]
    for sender in senders:
        sender.start()
    while store._core.writer is not None and store._core.writer.actor_inbox.qsize() < 3:  # type: ignore[attr-defined]
        threading.Event().wait(0.01)
    gate.set()
    for sender in senders:
        sender.join(timeout=5)
    assert results["first"] is None
    assert results["last"] is None
    assert isinstance(results["bad"], UnknownSession)
    assert [e.recorded_at_ms for e in all_events(store)] == [1, 2]


def _tamper(path: Path, sql: str) -> None:
    connection = apsw.Connection(str(path))
    connection.execute(sql)
    connection.close()


@pytest.mark.integration
def test_the_writer_refuses_an_incompatible_store_without_writing(
    store: EventStore, path: Path
) -> None:
    _tamper(
        path,
        "INSERT INTO schema_migrations(version, applied_at) VALUES (99, 'x');"
        "UPDATE schema_compatibility SET minimum_compatible_version = 99; PRAGMA user_version = 99;",
    )
    with pytest.raises(SchemaMismatch) as caught:
        store.ask(activity(1))
    assert caught.value.reason is SchemaMismatchReason.INCOMPATIBLE
    with pytest.raises(SchemaMismatch):
        page(store, turn())
    _tamper(
        path,
        "DELETE FROM schema_migrations WHERE version = 99;"
        f"UPDATE schema_compatibility SET minimum_compatible_version = {COMPATIBILITY_FLOOR};"
        f"PRAGMA user_version = {SCHEMA_VERSION};",
    )
    assert all_events(store) == []


def test_the_writer_refuses_a_store_rolled_back_underneath_it(
    store: EventStore, path: Path
) -> None:
    future = SCHEMA_VERSION + 1
    _tamper(
        path,
        f"INSERT INTO schema_migrations(version, applied_at) VALUES ({future}, 'x');"
        f"PRAGMA user_version = {future};",
    )
    store.ask(activity(1))  # a compatible future revision is usable, and now observed
    _tamper(
        path,
        f"DELETE FROM schema_migrations WHERE version = {future};"
        f"PRAGMA user_version = {SCHEMA_VERSION};",
    )
    with pytest.raises(SchemaMismatch) as caught:
        store.ask(activity(2))
    assert caught.value.reason is SchemaMismatchReason.ROLLBACK
    assert [e.recorded_at_ms for e in all_events(store)] == [1]


def test_readers_page_consistently_while_the_writer_commits(store: EventStore) -> None:
    done = threading.Event()

    def write() -> None:
        for n in range(300):
            store.ask(activity(n))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[int] = []
    after = 0
    while not (done.is_set() and after >= 300):
        batch = store.ask(LoadApiEvents(after_seq=after, limit=7))
        seen.extend(event.seq for event in batch.events)
        assert batch.next_after_seq >= after
        after = batch.next_after_seq
    writer.join()
    assert seen == list(range(1, 301))


def test_wait_for_is_woken_by_a_commit(store: EventStore) -> None:
    assert not store.wait_for(1, timeout=0.05)
    waiter_result: list[bool] = []
    waiter = threading.Thread(target=lambda: waiter_result.append(store.wait_for(1, timeout=5)))
    waiter.start()
    store.ask(activity(1))
    waiter.join(timeout=5)
    assert waiter_result == [True]


@pytest.mark.integration
def test_a_bad_relay_event_leaves_the_projector_usable(store: EventStore) -> None:
    events = chain(store, turn())
    with pytest.raises(Exception, match="gap"):
        store.ask(ObserveRelayEvents(session_id="session-1", events=[events[0], events[2]]))
    assert all_events(store) == []
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    assert (report.applied, report.frontier_ordinal) == (3, 3)


@pytest.fixture
def thread_store(path: Path) -> Iterator[EventStore]:
    """:func:`store` projecting in its projectors' threads, for a test that injects a
    bug into this interpreter (a worker process's deaths are
    tests/actors/workers/test_projection_worker.py's)."""
    with EventStore.open(path, queue_capacity=4, projection="thread") as store:
        store.ask(SaveSession(record=example_session()))
        yield store


def test_a_crashed_projector_restarts_from_the_stored_projection(
    thread_store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = thread_store
    page(store, turn()[:1])
    import relaystore.actors.projector as projector_module

    real = projector_module.SessionProjection.apply

    def explode(*args: object, **kwargs: object) -> object:
        raise RuntimeError("injected projector bug")

    monkeypatch.setattr(projector_module.SessionProjection, "apply", explode)
    with pytest.raises(RuntimeError):
        page(store, turn()[1:])
    monkeypatch.setattr(projector_module.SessionProjection, "apply", real)
    store._core._projectors.get("session-1").stop()  # and the actor itself dies
    report = page(store, turn()[1:])
    assert (report.applied, report.frontier_ordinal) == (2, 3)
    assert [e.kind for e in all_events(store)] == ["turn_started", "turn_ended"]
    stored = store.ask(LoadMaterializedSession(session_id="session-1"))
    assert stored is not None
    assert stored.applied_event_ordinal == 3


def test_messages_after_close_raise_store_closed(path: Path) -> None:
    store = EventStore.open(path)
    store.close()
    with pytest.raises(StoreClosed):
        store.ask(SaveSession(record=example_session()))
    with pytest.raises(StoreClosed):
        store.tell(activity(1))


@pytest.mark.integration
def test_a_failing_tell_is_logged_and_stops_no_actor(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    events = chain(store, turn())
    store.tell(ObserveRelayEvents(session_id="session-1", events=[events[2]]))  # a gap
    store.tell(LoadApiEvents(after_seq=-1))  # refused by the reader
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    assert (report.applied, report.frontier_ordinal) == (3, 3)
    assert [e.kind for e in all_events(store)] == ["turn_started", "turn_ended"]
    store.close()  # every actor handles what it was sent before it stops
    failures = [record for record in caplog.records if "told" in record.getMessage()]
    assert len(failures) == 2


def test_a_failed_commit_stops_the_writer_for_every_later_message(store: EventStore) -> None:
    future: pykka.Future[object] = pykka.ThreadingFuture()
    store._core.send(ViolateAtCommit(), future)  # type: ignore[arg-type]
    with pytest.raises(WriterStopped, match="commit failed"):
        future.get(timeout=5)
    with pytest.raises(WriterStopped):
        store.ask(activity(1))
    with EventStore.open(store.path, read_only=True) as reader:
        assert reader.ask(LoadApiEvents(after_seq=0)).events == []
