"""The ask path's round trip: the one-shot reply, a single message's batch, waiting for company.

Behaviour only (no timing thresholds): an ask's answer, error, timeout and closed store
arrive as before through :class:`OneShotReply`; a batch of one message runs without a
savepoint yet a failure still leaves nothing behind; the writer waits for company only
when several asks were in flight at its last commit, never for a lone sender or for
messages nobody waits for, and a wait that company ends commits them together.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pykka
import pytest

import relaystore.actors.core as core_module
import relaystore.actors.writer as writer_module
from relaystore.actors.envelope import OneShotReply
from relaystore.actors.inbox import Inbox
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.errors import AskTimeout, InvalidInput, StoreClosed, UnknownSession
from relaystore.domain.messages import (
    LoadApiEvents,
    RecordActivities,
    Request,
    SaveLifecycleSession,
    SaveSession,
)
from relaystore.storage.batch import Batch
from relaystore.storage.connection import open_writer
from relaystore.storage.paging import load_latest_seq
from relaystore.testing import example_session


def activity(n: int, session: str = "session-1") -> RecordActivities:
    return RecordActivities(
        activities=[
            (
                session,
                ApiActivityState(
                    state=f"state-{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
                ),
            )
        ],
        recorded_at_ms=n,
    )


def seqs(store: EventStore) -> list[int]:
    return [event.recorded_at_ms for event in store.ask(LoadApiEvents(after_seq=0)).events]


class Hold(Request[None], frozen=True, kw_only=True):
    """A test-only writer message: the writer blocks on ``gate`` once it runs it."""

    gate: threading.Event
    entered: threading.Event


_real_perform = writer_module.perform


def _perform_with_hold(connection: apsw.Connection, message: Any) -> object:
    if isinstance(message, Hold):
        message.entered.set()
        message.gate.wait()
        return None
    return _real_perform(connection, message)


@pytest.fixture(autouse=True)
def _hold_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "perform", _perform_with_hold)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3", queue_capacity=16) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        store.ask(SaveSession(record=example_session("session-2")))
        yield store


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every time the writer waits for company: the longest it may wait, in seconds."""
    calls: list[float] = []
    original = Inbox.wait_for_message

    def recording(self: Inbox, timeout: float) -> bool:
        calls.append(timeout)
        return original(self, timeout)

    monkeypatch.setattr(Inbox, "wait_for_message", recording)
    return calls


def hold_writer(store: EventStore) -> threading.Event:
    """Block the writer inside a message; returns the gate that releases it."""
    gate, entered = threading.Event(), threading.Event()
    store._core.send(Hold(gate=gate, entered=entered), None)  # type: ignore[arg-type]
    assert entered.wait(5)
    return gate


# -- the one-shot reply ----------------------------------------------------------------


def test_a_one_shot_reply_hands_over_its_value_once() -> None:
    reply = OneShotReply()
    reply.set("first")
    reply.set("second")  # ignored: only the first answer counts
    assert reply.get(timeout=1) == "first"
    assert reply.get(timeout=0) == "first"  # still readable


def test_a_one_shot_reply_raises_the_error_it_was_answered_with() -> None:
    reply = OneShotReply()
    error = UnknownSession("ghost")
    reply.set_exception((type(error), error, None))
    with pytest.raises(UnknownSession):
        reply.get(timeout=1)
    with pytest.raises(UnknownSession):
        reply.get()


def test_a_one_shot_reply_failed_without_an_exception_still_raises() -> None:
    reply = OneShotReply()
    reply.set_exception(None)
    with pytest.raises(RuntimeError):
        reply.get(timeout=1)


def test_an_unanswered_one_shot_reply_times_out_like_a_pykka_future() -> None:
    reply = OneShotReply()
    with pytest.raises(pykka.Timeout):
        reply.get(timeout=0)
    reply.set(7)  # an answer after the timeout is still kept
    assert reply.get(timeout=0) == 7


def test_a_one_shot_reply_wakes_a_waiter_in_another_thread() -> None:
    reply = OneShotReply()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(reply.get(timeout=5)))
    waiter.start()
    reply.set("answer")
    waiter.join(timeout=5)
    assert got == ["answer"]


# -- ask: answers, errors, timeouts, a closed store ------------------------------------


def test_ask_returns_the_reply_and_raises_the_typed_error(store: EventStore) -> None:
    assert store.ask(activity(1)) is None
    with pytest.raises(UnknownSession):
        store.ask(SaveLifecycleSession(record=example_session("ghost")))
    with pytest.raises(InvalidInput):
        store.ask(activity(2), timeout=-1)
    assert seqs(store) == [1]


def test_an_ask_past_its_timeout_raises_ask_timeout_and_still_takes_effect(
    store: EventStore,
) -> None:
    gate = hold_writer(store)
    with pytest.raises(AskTimeout):
        store.ask(activity(3), timeout=0.05)
    gate.set()
    assert store.ask(activity(4)) is None
    assert seqs(store) == [3, 4]


def test_a_wait_on_an_actor_that_died_unanswered_raises_store_closed(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core_module, "_DEAD_CHECK_SECONDS", 0.01)

    class Silent(pykka.ThreadingActor):
        pass

    ref = Silent.start()
    ref.stop()
    with pytest.raises(StoreClosed):
        store._core.wait_reply(OneShotReply(), None, ref, activity(5))
    with pytest.raises(StoreClosed):
        store._core.wait_reply(OneShotReply(), 10.0, ref, activity(5))


def test_an_answer_of_actor_dead_error_means_the_store_closed(store: EventStore) -> None:
    reply = OneShotReply()
    error = pykka.ActorDeadError("gone")
    reply.set_exception((type(error), error, None))
    with pytest.raises(StoreClosed):
        store._core.wait_reply(reply, None, None, activity(6))


def test_an_ask_after_close_raises_store_closed(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path / "closed.sqlite3")
    store.close()
    with pytest.raises(StoreClosed):
        store.ask(activity(1))


def test_a_pykka_future_still_serves_as_a_reply(store: EventStore) -> None:
    future: pykka.Future[Any] = pykka.ThreadingFuture()
    writer = store._core.send(activity(8), future)
    assert store._core.wait_reply(future, 5.0, writer, activity(8)) is None
    assert seqs(store) == [8]


# -- a batch of one message ------------------------------------------------------------


def _write_then_fail(connection: apsw.Connection, seq: int) -> None:
    connection.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', ?, ?)",
        (seq, '{"type":"turn_started","data":{}}'),
    )
    raise UnknownSession("session-1")


def _insert(connection: apsw.Connection, seq: int) -> int:
    connection.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', ?, ?)",
        (seq, '{"type":"turn_started","data":{}}'),
    )
    return seq


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Any]:
    path = tmp_path / "batch.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
    handle = open_writer(path, synchronous="OFF")
    try:
        yield handle
    finally:
        handle.close()


def test_a_failing_step_run_alone_leaves_nothing_behind(writer: Any) -> None:
    before = load_latest_seq(writer.connection)
    with Batch(writer) as batch:
        value, error = batch.run(_write_then_fail, 1, alone=True)
        assert (value, type(error)) == (None, UnknownSession)
        assert batch.commit() == before
    assert not writer.connection.in_transaction
    assert load_latest_seq(writer.connection) == before
    with Batch(writer) as batch:  # the writer goes on as usual
        assert batch.run(_insert, 2, alone=True) == (2, None)
        assert batch.commit() == before + 1


def test_a_step_cannot_run_after_a_step_run_alone_failed(writer: Any) -> None:
    with Batch(writer) as batch:
        batch.run(_write_then_fail, 1, alone=True)
        with pytest.raises(RuntimeError):
            batch.run(_insert, 2)


def test_a_failing_step_among_others_rolls_back_only_itself(writer: Any) -> None:
    before = load_latest_seq(writer.connection)
    with Batch(writer) as batch:
        assert batch.run(_insert, 1) == (1, None)
        assert isinstance(batch.run(_write_then_fail, 2)[1], UnknownSession)
        assert batch.run(_insert, 3) == (3, None)
        assert batch.commit() == before + 2
    rows = writer.connection.execute(
        "SELECT recorded_at_ms FROM api_events WHERE seq > ? ORDER BY seq", (before,)
    ).fetchall()
    assert rows == [(1,), (3,)]


def test_a_lone_failing_ask_fails_alone_and_the_store_goes_on(store: EventStore) -> None:
    with pytest.raises(UnknownSession):
        store.ask(SaveLifecycleSession(record=example_session("ghost")))
    store.ask(activity(9))
    assert seqs(store) == [9]
    assert store.metrics().messages_written >= 1


# -- waiting for company ---------------------------------------------------------------


def test_a_lone_sender_never_waits_for_company(store: EventStore, waits: list[float]) -> None:
    for n in range(30):
        store.ask(activity(n))
    assert waits == []
    assert seqs(store) == list(range(30))


def test_told_messages_never_count_as_company(store: EventStore, waits: list[float]) -> None:
    gate = hold_writer(store)
    waits.clear()  # holding the writer is itself a told message after an ask
    for n in range(5):
        store.tell(activity(n))
    gate.set()
    store.ask(activity(5))  # the tells were in the inbox at a commit, but nobody waits on them
    store.ask(activity(6))
    assert waits == []
    assert seqs(store) == list(range(7))


def _asks_at_once(
    store: EventStore, messages: list[RecordActivities], waits: list[float] | None = None
) -> list[object]:
    """Queue ``messages`` as asks from one thread each behind a held writer, then release.

    ``waits`` is cleared once the writer is held (holding it may wait for company).
    """
    gate = hold_writer(store)
    if waits is not None:
        waits.clear()
    results: list[object] = [None] * len(messages)

    def send(i: int) -> None:
        try:
            results[i] = store.ask(messages[i], timeout=10)
        except Exception as exc:  # noqa: BLE001 - asserted by the caller
            results[i] = exc

    senders = [threading.Thread(target=send, args=(i,)) for i in range(len(messages))]
    for sender in senders:
        sender.start()
    inbox = store._core.writer.actor_inbox  # type: ignore[union-attr]
    while inbox.qsize() < len(messages):
        threading.Event().wait(0.005)
    gate.set()
    for sender in senders:
        sender.join(timeout=10)
    return results


def test_after_a_commit_that_answered_several_asks_a_lone_ask_waits_briefly_then_commits(
    store: EventStore, waits: list[float]
) -> None:
    assert _asks_at_once(store, [activity(1), activity(2, "session-2")], waits) == [None, None]
    assert waits == []  # both were already waiting: no need to wait for either
    store.ask(activity(3))  # its company never comes: the wait ends and it commits
    assert len(waits) == 1
    assert 0 < waits[0] <= writer_module.COMPANY_WAIT_SECONDS
    store.ask(activity(4))  # the last batch answered one ask: a lone sender again
    assert len(waits) == 1
    assert seqs(store) == [1, 2, 3, 4]


def test_company_that_arrives_during_the_wait_commits_in_the_same_batch(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _asks_at_once(store, [activity(1), activity(2, "session-2")]) == [None, None]
    second = OneShotReply()
    original = Inbox.wait_for_message

    def company_arrives(self: Inbox, timeout: float) -> bool:
        # The other sender's next ask lands while the writer waits for it.
        store._core.send(activity(4, "session-2"), second)
        return original(self, timeout)

    monkeypatch.setattr(Inbox, "wait_for_message", company_arrives)
    commits = store.metrics().commits
    assert store.ask(activity(3)) is None
    assert second.get(timeout=5) is None
    assert store.metrics().commits == commits + 1  # one commit for both
    assert seqs(store) == [1, 2, 3, 4]


def test_a_stop_during_a_wait_for_company_still_commits_what_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "stop.sqlite3"
    store = EventStore.open(path, queue_capacity=16)
    store.ask(SaveSession(record=example_session("session-1")))
    store.ask(SaveSession(record=example_session("session-2")))
    assert _asks_at_once(store, [activity(1), activity(2, "session-2")]) == [None, None]
    original = Inbox.wait_for_message
    closing: list[threading.Thread] = []

    def close_meanwhile(self: Inbox, timeout: float) -> bool:
        if not closing:  # the store closes while the writer waits for company
            closing.append(threading.Thread(target=store.close))
            closing[0].start()
            while self.empty():
                threading.Event().wait(0.001)
        return original(self, timeout)

    monkeypatch.setattr(Inbox, "wait_for_message", close_meanwhile)
    reply = OneShotReply()
    store._core.send(activity(3), reply)
    assert reply.get(timeout=10) is None
    closing[0].join(timeout=10)
    with EventStore.open(path) as reopened:
        assert seqs(reopened) == [1, 2, 3]
