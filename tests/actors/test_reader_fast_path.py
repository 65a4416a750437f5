"""The read fast path: a blocking read from a thread other than the main one that finds a
reader idle is answered in the asking thread, on that reader's connection, without the
two thread hops; the main thread, a busy reader, a timeout or a closed store hand over
(or refuse) as before, and the answers are the same."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from relaystore import (
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadState,
    LoadTranscriptHistory,
    ObserveRelayEvents,
    SaveSession,
    StoreClosed,
)
from relaystore.actors import reader
from relaystore.testing import JournalBuilder, example_session
from tests.actors.activity_support import activity

pytestmark = pytest.mark.integration  # its stores project in worker processes


@pytest.fixture
def answered_in(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads reads were answered in, in order."""
    threads: list[str] = []
    original = reader.answer

    def answer(connection: Any, message: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(connection, message)

    monkeypatch.setattr(reader, "answer", answer)
    return threads


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3") as opened:
        opened.ask(SaveSession(record=example_session("s")))
        events = JournalBuilder().prompt_turn("hi")
        opened.ask(ObserveRelayEvents(session_id="s", events=events))
        yield opened


def _in_thread(call: Callable[[], Any], name: str = "asker") -> Any:
    """``call()`` in a thread of its own: its value, or the exception it raised."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except Exception as exc:  # noqa: BLE001 - the test compares it
            result.append(exc)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return result[0]


def test_a_read_from_another_thread_is_answered_there(
    store: EventStore, answered_in: list[str]
) -> None:
    in_main = store.ask(LoadState())
    assert answered_in[-1] != threading.current_thread().name  # the main thread hands over
    assert _in_thread(lambda: store.ask(LoadState())) == in_main
    assert answered_in[-1] == "asker"
    _in_thread(lambda: store.ask(LoadState(), timeout=10))
    assert answered_in[-1] != "asker"  # an ask with a timeout hands over


def test_a_busy_reader_is_handed_the_read_never_shared(
    store: EventStore, answered_in: list[str]
) -> None:
    """Every desk held (as while its reader answers): the read waits for a reader, it
    never uses a connection another thread is using."""
    desks = store._core._desks  # test access: the readers' desks
    for desk in desks:
        desk.lock.acquire()
    done = threading.Event()
    result: list[Any] = []

    def ask() -> None:
        result.append(store.ask(LoadState()))
        done.set()

    thread = threading.Thread(target=ask, name="asker")
    thread.start()
    assert not done.wait(0.3)  # handed over: its reader waits for the desk
    for desk in desks:
        desk.lock.release()
    thread.join(30)
    assert done.is_set()
    assert answered_in[-1] != "asker"
    assert result == [store.ask(LoadState())]


def test_a_refusal_is_the_same_in_either_path(store: EventStore) -> None:
    message = LoadTranscriptHistory(session_id="s", before_id="no-such-item")
    with pytest.raises(InvalidInput) as handed:
        store.ask(message)
    fast = _in_thread(lambda: store.ask(message))
    assert type(fast) is InvalidInput
    assert str(fast) == str(handed.value)


def test_after_close_a_read_from_another_thread_is_store_closed(store: EventStore) -> None:
    store.close()
    assert type(_in_thread(lambda: store.ask(LoadState()))) is StoreClosed


def test_reads_from_many_threads_beside_a_writer_see_whole_commits(store: EventStore) -> None:
    """Eight threads page the feed while another writes: no connection is used by two
    threads at once (apsw would refuse), and every page is a snapshot in seq order."""
    stop = threading.Event()
    problems: list[str] = []

    def write() -> None:
        n = 0
        while not stop.is_set():
            store.ask(activity(n, "s"))
            n += 1

    def read() -> None:
        for _ in range(150):
            try:
                page = store.ask(LoadApiEvents(after_seq=0, limit=1000))
            except Exception as exc:  # noqa: BLE001 - collected, the assertion names it
                problems.append(f"{type(exc).__name__}: {exc}")
                return
            seqs = [event.seq for event in page.events]
            if seqs != sorted(seqs) or (seqs and seqs[-1] > page.latest_seq):
                problems.append(f"page {seqs[:3]}... latest {page.latest_seq}")

    writer = threading.Thread(target=write)
    writer.start()
    readers = [threading.Thread(target=read) for _ in range(8)]
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join(60)
    stop.set()
    writer.join(30)
    assert problems == []
