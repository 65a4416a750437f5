"""The writer's fast path: a blocking ask to an idle writer runs in the asking thread.

What it must keep: answers after the commit (and a SIGKILL after the answer keeps the
data), FIFO per sender, group commit for concurrent senders, one user of the connection
at a time (close waits for a batch in flight), a failing message answered and the writer
serving on, and no commit on an event loop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import relaystore.actors.writer as writer_module
from relaystore.actors.inbox import HeldInbox
from relaystore.actors.store import EventStore
from relaystore.aio import AsyncEventStore
from relaystore.domain.errors import UnknownSession, WriterStopped
from relaystore.domain.messages import (
    RecordActivities,
    Request,
    SaveLifecycleSession,
    SaveSession,
)
from relaystore.testing import example_session
from tests.actors.activity_support import activity
from tests.actors.seed import all_events


class Hold(Request[None], frozen=True, kw_only=True):
    """A test-only writer message: the writer blocks on ``gate``, then runs ``then``."""

    gate: threading.Event
    entered: threading.Event
    then: RecordActivities | None = None


class Boom(Request[None], frozen=True, kw_only=True):
    """A test-only writer message that fails as a bug would (not a StoreError)."""


_real_perform = writer_module.perform


@pytest.fixture
def ran_in() -> list[tuple[str, str]]:
    """(message type, thread name) of every message the writer performs."""
    return []


@pytest.fixture(autouse=True)
def _test_messages(monkeypatch: pytest.MonkeyPatch, ran_in: list[tuple[str, str]]) -> None:
    def perform(connection: apsw.Connection, message: object) -> object:
        ran_in.append((type(message).__name__, threading.current_thread().name))
        if isinstance(message, Hold):
            message.entered.set()
            assert message.gate.wait(10)
            return None if message.then is None else _real_perform(connection, message.then)
        if isinstance(message, Boom):
            raise RuntimeError("boom")
        return _real_perform(connection, message)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "perform", perform)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture
def store(path: Path) -> Iterator[EventStore]:
    with EventStore.open(path, queue_capacity=16) as store:
        store.ask(SaveSession(record=example_session()))
        yield store


def here() -> str:
    return threading.current_thread().name


def test_a_lone_ask_runs_in_the_asking_thread_and_counts_as_a_commit(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    before = store.metrics()
    for n in range(5):
        store.ask(activity(n))
    assert ran_in[-5:] == [("RecordActivities", here())] * 5
    after = store.metrics()
    assert after.commits - before.commits == 5
    assert after.messages_written - before.messages_written == 5
    assert after.api_events_written - before.api_events_written == 5
    assert after.latest_seq == store.latest_seq == 5
    assert store.wait_for(5, timeout=0)


def test_an_ask_with_a_timeout_and_a_tell_are_handed_over(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    store.ask(activity(0), timeout=5)
    store.tell(activity(1))
    assert store.wait_for(2, timeout=5)
    assert all(name != here() for _, name in ran_in[-2:])


def test_a_tell_then_an_ask_from_one_thread_run_in_that_order(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    gate, entered = threading.Event(), threading.Event()
    store._core.send(Hold(gate=gate, entered=entered, then=activity(0)), None)
    assert entered.wait(5)
    threading.Timer(0.2, gate.set).start()
    store.ask(activity(1))  # the writer holds the told message: this one hands over
    assert [e.recorded_at_ms for e in all_events(store)] == [0, 1]
    for n in range(2, 60):  # and with nothing held, every told message still runs first
        store.tell(activity(n))
        if n % 3 == 0:
            store.ask(activity(1000 + n))
    expected = []
    for n in range(2, 60):
        expected.append(n)
        if n % 3 == 0:
            expected.append(1000 + n)
    assert store.wait_for(len(expected) + 2, timeout=5)
    assert [e.recorded_at_ms for e in all_events(store)] == [0, 1, *expected]


def test_concurrent_senders_are_still_group_committed(store: EventStore) -> None:
    before = store.metrics()
    senders, each = 8, 40

    def send(sender: int) -> None:
        for n in range(each):
            store.ask(activity(n, prefix=f"s{sender}-"))

    threads = [threading.Thread(target=send, args=(s,)) for s in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = store.metrics()
    messages = after.messages_written - before.messages_written
    commits = after.commits - before.commits
    assert messages == senders * each
    assert after.batch_size_max > 1
    assert commits < messages, "concurrent asks must share commits"


def test_close_waits_for_a_fast_path_batch_in_flight(
    path: Path, ran_in: list[tuple[str, str]]
) -> None:
    store = EventStore.open(path)
    store.ask(SaveSession(record=example_session()))
    gate, entered = threading.Event(), threading.Event()
    answers: list[object] = []
    asker = threading.Thread(
        target=lambda: answers.append(
            store._core.ask_blocking(Hold(gate=gate, entered=entered, then=activity(7)))
        ),
        name="asker",
    )
    asker.start()
    assert entered.wait(5)
    assert ran_in[-1] == ("Hold", "asker"), "the idle writer's ask runs in the asking thread"
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(timeout=0.3)
    assert closer.is_alive(), "close must wait for the batch in flight"
    gate.set()
    closer.join(timeout=10)
    asker.join(timeout=10)
    assert not closer.is_alive()
    assert not asker.is_alive()
    assert answers == [None]
    with EventStore.open(path) as reopened:
        assert [e.recorded_at_ms for e in all_events(reopened)] == [7]


def test_a_failing_message_on_the_fast_path_answers_and_the_writer_serves_on(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    with pytest.raises(UnknownSession):
        store.ask(SaveLifecycleSession(record=example_session("nobody")))
    with pytest.raises(WriterStopped, match="Boom failed unexpectedly"):
        store._core.ask_blocking(Boom())
    assert [name for _, name in ran_in[-2:]] == [here(), here()]
    store.ask(activity(1))
    store.tell(activity(2))  # and the writer's own thread too
    assert store.wait_for(2, timeout=5)
    assert [e.recorded_at_ms for e in all_events(store)] == [1, 2]


def test_the_async_facade_never_commits_on_its_event_loop(
    path: Path, ran_in: list[tuple[str, str]]
) -> None:
    async def main() -> None:
        loop_thread = here()
        async with AsyncEventStore.open(path) as store:
            await store.ask(SaveSession(record=example_session()))
            for n in range(3):
                await store.ask(activity(n))
        assert ran_in
        assert all(name != loop_thread for _, name in ran_in)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_an_answered_ask_survives_a_sigkill(path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from relaystore.actors.store import EventStore
        from relaystore.domain.messages import SaveSession
        from relaystore.testing import example_session
        from tests.actors.activity_support import activity

        store = EventStore.open({str(path)!r}, synchronous="FULL")
        store.ask(SaveSession(record=example_session()))
        n = 0
        while True:
            store.ask(activity(n))
            print(n, flush=True)
            n += 1
        """
    )
    root = Path(__file__).resolve().parents[2]
    child = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        assert child.stdout is not None
        answered = -1
        deadline = time.monotonic() + 30
        while answered < 20:
            assert time.monotonic() < deadline, "the child answered nothing in time"
            answered = int(child.stdout.readline())
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=10) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    with EventStore.open(path) as reopened:
        stored = [e.recorded_at_ms for e in all_events(reopened)]
    assert stored[: answered + 1] == list(range(answered + 1))


def test_a_held_inbox_counts_what_its_actor_took_until_it_finishes() -> None:
    inbox = HeldInbox(maxsize=4)
    assert inbox.idle()
    inbox.put("a")
    inbox.put("b")
    assert not inbox.idle()
    inbox.get()
    inbox.get()
    assert inbox.qsize() == 0
    assert not inbox.idle(), "taken but not finished: not idle"
    inbox.finish(1)
    assert not inbox.idle()
    inbox.finish(1)
    assert inbox.idle()
