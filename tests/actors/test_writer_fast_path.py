"""The writer's fast path: a blocking ask to an idle writer runs in the asking thread,
unless that thread is the main one.

What it must keep: answers after the commit (and a SIGKILL after the answer keeps the
data), FIFO per sender, group commit for concurrent senders, one user of the connection
at a time (close waits for a batch in flight), a failing message answered and the writer
serving on, no commit on an event loop. And what the withdrawn first version broke: the
main thread, where signals arrive, never runs a batch, so Ctrl-C in an ask never leaves
a transaction open, the writer's lock taken or a commit unannounced, and a signal
handler that closes the store never waits for a batch its own thread holds; an exception
that escapes a batch in another thread leaves the store as the writer would.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw
import pytest

import relaystore.actors.writer as writer_module
from relaystore.actors.inbox import HeldInbox, inbox_of
from relaystore.actors.store import EventStore
from relaystore.aio import AsyncEventStore
from relaystore.domain.errors import UnknownSession, WriterStopped
from relaystore.domain.messages import (
    RecordActivities,
    Request,
    SaveLifecycleSession,
    SaveSession,
)
from relaystore.storage.batch import Batch
from relaystore.testing import example_session
from tests.actors.activity_support import activity
from tests.actors.cli_support import TIMEOUT
from tests.actors.seed import all_events

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]


class Hold(Request[None], frozen=True, kw_only=True):
    """A test-only writer message: the writer blocks on ``gate``, then runs ``then``."""

    gate: threading.Event
    entered: threading.Event
    then: RecordActivities | None = None


class Boom(Request[None], frozen=True, kw_only=True):
    """A test-only writer message that fails as a bug would (not a StoreError)."""


class Interrupt(BaseException):
    """What an asynchronous exception would be: no ``Exception``, so no step catches it."""


class Halt(Request[None], frozen=True, kw_only=True):
    """A test-only writer message whose step raises :class:`Interrupt`."""


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
        if isinstance(message, Halt):
            raise Interrupt("in a step")
        return _real_perform(connection, message)  # type: ignore[arg-type]

    monkeypatch.setattr(writer_module, "perform", perform)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.sqlite3"


@pytest.fixture
def store(path: Path) -> Iterator[EventStore]:
    with EventStore.open(path, queue_capacity=16) as store:
        store.ask(SaveSession(record=example_session()))
        idle(store)
        yield store


def idle(store: EventStore) -> None:
    """Wait until the writer holds nothing (it finishes a message just after answering)."""
    writer = store._core.writer
    assert writer is not None
    inbox = inbox_of(writer)
    assert isinstance(inbox, HeldInbox)
    deadline = time.monotonic() + TIMEOUT
    while not inbox.idle():
        assert time.monotonic() < deadline, "the writer never became idle"
        time.sleep(0.001)


def elsewhere(call: Callable[[], T], name: str = "asker") -> T:
    """``call()`` in a thread of its own (not the main one); its result, or its
    exception raised here."""
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            box.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            box.append((False, exc))

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join(TIMEOUT)
    assert not thread.is_alive(), f"{name} did not finish"
    done, value = box[0]
    if not done:
        raise value
    result: T = value
    return result


def close_in_time(store: EventStore) -> None:
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(TIMEOUT)
    assert not closer.is_alive(), "close() hangs"


def test_a_lone_ask_from_another_thread_runs_there_and_counts_as_a_commit(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    before = store.metrics()

    def ask_five() -> None:
        for n in range(5):
            store.ask(activity(n))

    elsewhere(ask_five)
    assert ran_in[-5:] == [("RecordActivities", "asker")] * 5
    after = store.metrics()
    assert after.commits - before.commits == 5
    assert after.messages_written - before.messages_written == 5
    assert after.api_events_written - before.api_events_written == 5
    assert after.latest_seq == store.latest_seq == 5
    assert store.wait_for(5, timeout=0)


def test_the_main_thread_always_hands_over(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    main = threading.main_thread()
    assert threading.current_thread() is main, "this test must run in the main thread"
    for n in range(5):
        store.ask(activity(n))
    assert [kind for kind, _ in ran_in[-5:]] == ["RecordActivities"] * 5
    assert all(name != main.name for _, name in ran_in)
    assert store.wait_for(5, timeout=0)


def test_an_ask_with_a_timeout_and_a_tell_are_handed_over(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    def ask_and_tell() -> None:
        store.ask(activity(0), timeout=5)
        store.tell(activity(1))

    elsewhere(ask_and_tell)
    assert store.wait_for(2, timeout=5)
    assert all(name != "asker" for _, name in ran_in[-2:])


def test_a_tell_then_an_ask_from_one_thread_run_in_that_order(
    store: EventStore, ran_in: list[tuple[str, str]]
) -> None:
    expected = []
    for n in range(2, 60):
        expected.append(n)
        if n % 3 == 0:
            expected.append(1000 + n)

    def send() -> None:
        gate, entered = threading.Event(), threading.Event()
        store._core.send(Hold(gate=gate, entered=entered, then=activity(0)), None)
        assert entered.wait(5)
        threading.Timer(0.2, gate.set).start()
        store.ask(activity(1))  # the writer holds the told message: this one hands over
        for n in range(2, 60):  # and with nothing held, every told message still runs first
            store.tell(activity(n))
            if n % 3 == 0:
                store.ask(activity(1000 + n))

    elsewhere(send)
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


def _until_the_writer_is_idle(store: EventStore) -> None:
    """Return once the writer holds no message: the state the fast path needs. A reply
    reaches the asker before the writer's thread lets go of its message, which on a busy
    machine can be long enough for the next ask to be handed over instead."""
    pen = store._core._pen
    assert pen is not None
    assert pen._inbox is not None
    inbox = pen._inbox
    deadline = time.monotonic() + 60  # a hang detector, not the condition
    while not inbox.idle():
        assert time.monotonic() < deadline, "the writer never became idle"
        time.sleep(0.001)


def test_close_waits_for_a_fast_path_batch_in_flight(
    path: Path, ran_in: list[tuple[str, str]]
) -> None:
    store = EventStore.open(path)
    store.ask(SaveSession(record=example_session()))
    _until_the_writer_is_idle(store)  # its reply may come before it lets go of the message
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
    def fail_twice() -> None:
        with pytest.raises(UnknownSession):
            store.ask(SaveLifecycleSession(record=example_session("nobody")))
        with pytest.raises(WriterStopped, match="Boom failed unexpectedly"):
            store._core.ask_blocking(Boom())

    elsewhere(fail_twice)
    assert [name for _, name in ran_in[-2:]] == ["asker", "asker"]
    elsewhere(lambda: store.ask(activity(1)))
    store.tell(activity(2))  # and the writer's own thread too
    assert store.wait_for(2, timeout=5)
    assert [e.recorded_at_ms for e in all_events(store)] == [1, 2]


class _BeginThenInterrupt(Batch):
    """A batch interrupted after ``BEGIN IMMEDIATE`` ran, before it knew it had begun."""

    def __init__(self, writer: Any) -> None:
        super().__init__(writer)
        self.connection = writer.connection

    def __enter__(self) -> Batch:
        self.connection.execute("BEGIN IMMEDIATE")
        raise Interrupt("after BEGIN")


class _CommitThenInterrupt(Batch):
    """A batch interrupted right after its ``COMMIT`` ran."""

    def commit(self) -> int:
        super().commit()
        raise Interrupt("after COMMIT")


@pytest.mark.parametrize("where", ["after BEGIN", "in a step", "after COMMIT"])
def test_an_exception_escaping_a_fast_path_batch_leaves_the_store_as_the_writer_would(
    store: EventStore,
    monkeypatch: pytest.MonkeyPatch,
    ran_in: list[tuple[str, str]],
    where: str,
) -> None:
    """No transaction left open (later writes go on), the writer's lock released (close
    returns), the commit that ran announced (without waiting for the next one)."""
    elsewhere(lambda: store.ask(activity(0)))
    message: Request[Any] = activity(1)
    if where == "after BEGIN":
        monkeypatch.setattr(writer_module, "Batch", _BeginThenInterrupt)
    elif where == "after COMMIT":
        monkeypatch.setattr(writer_module, "Batch", _CommitThenInterrupt)
    else:
        message = Halt()
    idle(store)
    with pytest.raises(Interrupt, match=where):
        elsewhere(lambda: store._core.ask_blocking(message))
    assert ran_in[-1][1] == "asker" or where == "after BEGIN"
    monkeypatch.setattr(writer_module, "Batch", Batch)
    committed = 2 if where == "after COMMIT" else 1
    assert store.latest_seq == committed, "the commit that ran is announced"
    assert store.wait_for(committed, timeout=0)
    elsewhere(lambda: store.ask(activity(2)))  # the fast path
    store.ask(activity(3))  # the writer's thread
    assert store.latest_seq == committed + 2
    stored = [e.recorded_at_ms for e in all_events(store)]
    assert stored == ([0, 1, 2, 3] if where == "after COMMIT" else [0, 2, 3])
    close_in_time(store)


def test_the_async_facade_never_commits_on_its_event_loop(
    path: Path, ran_in: list[tuple[str, str]]
) -> None:
    async def main() -> None:
        loop_thread = threading.current_thread().name
        async with AsyncEventStore.open(path) as store:
            await store.ask(SaveSession(record=example_session()))
            for n in range(3):
                await store.ask(activity(n))
        assert ran_in
        assert all(name != loop_thread for _, name in ran_in)

    # A loop in another thread than the main one: where the fast path could run.
    elsewhere(lambda: asyncio.run(asyncio.wait_for(main(), 30)), name="loop")


_CHILD = """
import faulthandler, json, os, random, signal, sys, threading, time

faulthandler.enable()  # SIGABRT: every thread's stack (what a hang waits on)

import relaystore.actors.writer as writer_module
from relaystore.actors.store import EventStore
from relaystore.domain.errors import StoreClosed
from relaystore.domain.messages import SaveSession
from relaystore.testing import example_session
from tests.actors.activity_support import activity

ran_in = []  # the thread that performed each writer message
_perform = writer_module.perform

def perform(connection, message):
    ran_in.append(threading.current_thread().name)
    return _perform(connection, message)

writer_module.perform = perform
"""


def child(script: str, *args: str) -> subprocess.Popen[str]:
    """A Python process running :data:`_CHILD` then ``script`` (from the repository)."""
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD + textwrap.dedent(script), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def finished(process: subprocess.Popen[str]) -> dict[str, Any]:
    """The JSON the child printed last, once it exited 0 (in time: a hang fails here)."""
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        out, err = process.communicate(timeout=TIMEOUT)
        pytest.fail(f"the child hangs; its output:\n{out}\n{err}")
    assert process.returncode == 0, f"the child failed:\n{out}\n{err}"
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return report


@pytest.mark.integration
def test_an_answered_ask_from_another_thread_survives_a_sigkill(
    path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    script = """
    store = EventStore.open(sys.argv[1], synchronous="FULL")
    store.ask(SaveSession(record=example_session()))

    def ask_on():
        n = 0
        while True:
            store.ask(activity(n))
            print(n, ran_in[-1], flush=True)
            n += 1

    threading.Thread(target=ask_on, name="asker").start()
    threading.Event().wait()
    """
    process = child(script, str(path))
    spawned.append(process)
    assert process.stdout is not None
    answered, threads = -1, set()
    deadline = time.monotonic() + TIMEOUT
    while answered < 20:
        assert time.monotonic() < deadline, "the child answered nothing in time"
        number, thread = process.stdout.readline().split()
        answered = int(number)
        threads.add(thread)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=10) == -signal.SIGKILL
    assert "asker" in threads, "the asks ran in the asking thread"
    with EventStore.open(path) as reopened:
        stored = [e.recorded_at_ms for e in all_events(reopened)]
    assert stored[: answered + 1] == list(range(answered + 1))


@pytest.mark.integration
def test_ctrl_c_in_main_thread_asks_leaves_the_store_writable_closable_and_announced(
    path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    """SIGINT, again and again, while the main thread asks (the withdrawn fast path ran
    those asks in the main thread: a transaction left open, the lock left taken, a
    commit left unannounced)."""
    script = """
    store = EventStore.open(sys.argv[1], synchronous="OFF")
    store.ask(SaveSession(record=example_session()))
    armed = False  # a KeyboardInterrupt only inside the asking loop's try

    def on_sigint(signum, frame):
        global armed
        if armed:
            armed = False
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    seen = []  # what a follower sees
    threading.Thread(target=lambda: seen.extend(e.seq for e in store.follow()), daemon=True).start()
    stop = threading.Event()

    def pester():  # Ctrl-C at random moments, to the main thread and to the process
        rng = random.Random(35)
        main = threading.main_thread().ident
        while not stop.is_set():
            if rng.random() < 0.5:
                signal.pthread_kill(main, signal.SIGINT)
            else:
                os.kill(os.getpid(), signal.SIGINT)
            time.sleep(rng.uniform(0, 0.0004))

    pesterer = threading.Thread(target=pester)
    pesterer.start()
    asked = answered = interrupted = 0
    deadline = time.monotonic() + 1.5
    while True:
        try:
            armed = True
            if time.monotonic() >= deadline:
                armed = False
                break
            asked += 1
            store.ask(activity(asked))
            answered += 1
            armed = False
        except KeyboardInterrupt:
            interrupted += 1
    stop.set()
    pesterer.join()
    latest = store.fetch_latest_seq()  # read from the store; commits nothing
    announced = store.wait_for(latest, timeout=10)
    until = time.monotonic() + 10
    while (not seen or seen[-1] < latest) and time.monotonic() < until:
        time.sleep(0.01)
    followed = bool(seen) and seen[-1] >= latest
    store.ask(activity(10**6))  # still writable: WriterStopped would end the child here
    for n in range(20):  # and another thread's ask still takes the fast path
        t = threading.Thread(target=store.ask, args=(activity(10**6 + n),), name="after")
        t.start()
        t.join(10)
    store.close()  # returns (a hang is the parent's timeout)
    print(json.dumps({
        "asked": asked, "answered": answered, "interrupted": interrupted,
        "latest": latest, "announced": announced, "followed": followed,
        "main_ran": ran_in.count("MainThread"), "after_ran": ran_in.count("after"),
    }))
    """
    process = child(script, str(path))
    spawned.append(process)
    report = finished(process)
    assert report["interrupted"] > 0, report
    assert report["announced"], report
    assert report["followed"], report
    assert report["main_ran"] == 0, report
    assert report["after_ran"] > 0, report


@pytest.mark.parametrize("synchronous", ["OFF", "FULL"])
@pytest.mark.integration
def test_a_sigterm_handler_that_asks_and_closes_the_store_while_another_thread_asks_returns(
    path: Path, spawned: list[subprocess.Popen[str]], synchronous: str
) -> None:
    """The handler runs in the main thread, never inside a batch: the other thread's
    batch runs there (close waits for it, and it never waits for the handler), and the
    handler's own ask is handed over (the withdrawn fast path ran it in the main thread,
    where a handler cutting into that batch then waited for it for ever)."""
    script = """
    store = EventStore.open(sys.argv[1], synchronous=sys.argv[2])
    store.ask(SaveSession(record=example_session()))
    handled = []

    def on_sigterm(signum, frame):
        try:
            store.ask(activity(10**6))  # the handler writes first, as a shutdown hook may
        except StoreClosed:
            pass
        store.close()
        handled.append(signum)

    signal.signal(signal.SIGTERM, on_sigterm)
    asked = []

    def ask_on():
        n = 0
        try:
            while True:
                store.ask(activity(n))
                n += 1
                if n == 50:
                    print("ready", flush=True)
        except StoreClosed:
            asked.append(n)

    asker = threading.Thread(target=ask_on, name="asker")
    asker.start()
    while asker.is_alive():
        asker.join(0.05)
    print(json.dumps({
        "handled": handled, "asked": asked,
        "fast": ran_in.count("asker"), "main_ran": ran_in.count("MainThread"),
    }))
    """
    process = child(script, str(path), synchronous)
    spawned.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    report = finished(process)
    assert report["handled"] == [signal.SIGTERM], report
    assert len(report["asked"]) == 1, report
    assert report["main_ran"] == 0, report
    assert report["fast"] > 0, report
    with EventStore.open(path) as reopened:
        stored = [e.recorded_at_ms for e in reopened.follow(timeout=0)]
    assert 10**6 in stored, "the handler's ask was committed before the store closed"


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
