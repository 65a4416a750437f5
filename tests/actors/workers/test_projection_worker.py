"""Projection in a worker process (``EventStore.open(projection="process")``).

What an embedder relies on: the store it gets is byte for byte the store the thread path
writes (projection, feed, relay log); a refused event is refused where the thread path
refuses it, with every complete page before it committed; a worker killed with SIGKILL
mid-message loses nothing acknowledged and applies nothing twice; a worker that keeps
dying is a typed error; closing the store ends the worker; the worker never imports the
embedder's ``__main__``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import apsw
import msgspec
import pytest

from relaystore import EventStore
from relaystore.actors import cli
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.actors.workers import pool as worker_pool, proxy as worker_proxy
from relaystore.actors.workers.protocol import decode_events, encode_events
from relaystore.aio import AsyncEventStore
from relaystore.domain.errors import InvalidInput, RelayChainError, StoreBusy, WorkerLost
from relaystore.domain.messages import (
    DeleteSession,
    LoadApiEvents,
    LoadMaterializedSession,
    LoadRelayLog,
    ObserveRelayEvents,
    ProjectionReport,
    Reproject,
    SaveSession,
    SeedProjection,
)
from relaystore.domain.relay import RelayCursor, RelayEvent, RelayLine, encode_relay_event
from relaystore.domain.reports import StoreMetrics
from relaystore.domain.wire import encode
from relaystore.storage import connection as storage_connection
from relaystore.testing import JournalBuilder, example_session
from tests.actors.journal_factory import conversation, write_journal

pytestmark = pytest.mark.integration  # projection worker processes (started, killed, broken)

SESSION = "session-1"
FUTURE = b'{"type":"mailbox_digest_sent","data":{"count":3}}'


def _open(path: Path, projection: str, **options: Any) -> EventStore:
    return EventStore.open(path, projection=projection, **options)  # type: ignore[arg-type]


def _pids(store: EventStore) -> list[int]:
    """The store's running worker processes (test access to the pool)."""
    pool = store._core._workers  # the test needs the processes to kill
    return [] if pool is None else pool.pids


@pytest.fixture
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool of one worker, so a test knows which process holds its session."""
    monkeypatch.setattr(worker_pool, "_cores", lambda: 1)


def _snapshot(store: EventStore, *sessions: str) -> tuple[list[bytes], list[bytes], list[int]]:
    """Every session's stored projection, the whole feed and every logged ordinal."""
    projections, logged = [], []
    for session_id in sessions:
        stored = store.ask(LoadMaterializedSession(session_id=session_id))
        assert stored is not None
        projections.append(encode(stored))
        log = store.ask(LoadRelayLog(session_id=session_id))
        assert log is not None
        logged.extend(event.ordinal for event in log.events())
    feed: list[bytes] = []
    after = 0
    while True:  # a page holds at most 1,000 events
        page = store.ask(LoadApiEvents(after_seq=after, limit=1000))
        feed.extend(encode(event) for event in page.events)
        if not page.events:
            return projections, feed, logged
        after = page.next_after_seq


def _ingest(store: EventStore, session_id: str, events: list[Any], chunk: int) -> int:
    applied = 0
    for start in range(0, len(events), chunk):
        report = store.ask(
            ObserveRelayEvents(session_id=session_id, events=events[start : start + chunk])
        )
        applied += report.applied
    return applied


def _saved(store: EventStore, *sessions: str) -> EventStore:
    for session_id in sessions:
        store.ask(SaveSession(record=example_session(session_id)))
    return store


@pytest.mark.parametrize("chunk", [1, 37, 128, 600])
def test_a_process_projects_exactly_what_the_thread_path_does(tmp_path: Path, chunk: int) -> None:
    events = conversation(700)
    snapshots = []
    for mode in ("thread", "process"):
        with _saved(_open(tmp_path / f"{mode}.sqlite3", mode), SESSION) as store:
            assert _ingest(store, SESSION, events, chunk) == len(events)
            again = store.ask(ObserveRelayEvents(session_id=SESSION, events=events[-50:]))
            assert (again.applied, again.already_applied) == (0, 50)
            snapshots.append(_snapshot(store, SESSION))
            assert store.metrics().worker_restarts == 0
    assert snapshots[0] == snapshots[1]
    assert snapshots[1][2] == list(range(1, len(events) + 1))


def _interleaved(store: EventStore, sessions: list[str], events: list[RelayEvent]) -> None:
    for start in range(0, len(events), 50):
        for session_id in sessions:
            store.ask(ObserveRelayEvents(session_id=session_id, events=events[start : start + 50]))


def _held(store: EventStore) -> tuple[int, int]:
    """Projections the workers hold: for running projectors, and parked."""
    pool = store._core._workers  # test access to the pool
    assert pool is not None
    return pool.held()


def _both_modes_interleaved(
    tmp_path: Path, events: list[RelayEvent]
) -> dict[str, tuple[StoreMetrics, tuple[int, int]]]:
    """Three sessions fed ``events`` interleaved, 50 at a time, with room for one
    projector, in threads and in workers: each mode's metrics and what its workers hold
    ((0, 0) in threads); the stores end equal."""
    sessions = ["s-a", "s-b", "s-c"]
    seen, snapshots = {}, []
    for mode in ("thread", "process"):
        with _saved(_open(tmp_path / f"{mode}.sqlite3", mode, max_projectors=1), *sessions) as s:
            _interleaved(s, sessions, events)
            seen[mode] = (s.metrics(), _held(s) if mode == "process" else (0, 0))
            snapshots.append(_snapshot(s, *sessions))
    assert snapshots[0] == snapshots[1]
    return seen


def test_stopped_projectors_park_their_projections_in_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the thread path every message reloads its session; in the workers each session
    is loaded once and its projection parked while its projector is stopped."""
    monkeypatch.setattr(worker_pool, "PARKED_BYTES_PER_PROJECTOR", 1 << 30)
    events = conversation(400)
    seen = _both_modes_interleaved(tmp_path, events)
    for metrics, _ in seen.values():
        assert metrics.projector_starts == 3 * len(events) // 50
    assert seen["thread"][0].projector_loads == 3 * len(events) // 50
    assert seen["process"][0].projector_loads == 3
    assert seen["process"][1] == (1, 2)


def test_parked_projections_stay_within_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no bytes to park in, a worker drops every stopped projector's projection:
    every message loads its session again, as in the thread path, and nothing differs."""
    monkeypatch.setattr(worker_pool, "PARKED_BYTES_PER_PROJECTOR", 1)
    events = conversation(200)
    seen = _both_modes_interleaved(tmp_path, events)
    for metrics, _ in seen.values():
        assert metrics.projector_loads == metrics.projector_starts == 3 * len(events) // 50
    assert seen["process"][1] == (1, 0)


def test_parked_projections_stay_within_their_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``PARKED_PER_PROJECTOR`` sessions per projector stay parked, the oldest
    dropped first (the pool and the worker agree on which)."""
    monkeypatch.setattr(worker_pool, "PARKED_PER_PROJECTOR", 2)
    sessions = [f"s-{n}" for n in range(5)]
    events = conversation(100)
    with _saved(_open(tmp_path / "store.sqlite3", "process", max_projectors=1), *sessions) as s:
        _interleaved(s, sessions, events)
        assert _held(s) == (1, 2)
        assert s.metrics().projector_loads == s.metrics().projector_starts  # always too late
        for session_id in sessions[-3:-1]:  # the two parked last come back parked
            report = s.ask(ObserveRelayEvents(session_id=session_id, events=events[:1]))
            assert report.already_applied == 1
        assert s.metrics().projector_loads == s.metrics().projector_starts - 2


@pytest.mark.usefixtures("one_worker")
@pytest.mark.parametrize("change", ["delete", "seed"])
def test_a_parked_projection_is_dropped_when_its_session_changes_out_of_band(
    tmp_path: Path, change: str
) -> None:
    """A delete or a seed of a session whose projection is parked: its next projector
    starts from what the store then holds, never from the parked projection."""
    events = conversation(100)
    with _saved(_open(tmp_path / "store.sqlite3", "process", max_projectors=1), "a", "b") as s:
        if change == "delete":
            s.ask(ObserveRelayEvents(session_id="a", events=events[:80]))
        else:  # loaded at genesis, nothing applied: ordinal 41 is past a gap
            with pytest.raises(RelayChainError):
                s.ask(ObserveRelayEvents(session_id="a", events=events[40:80]))
        s.ask(ObserveRelayEvents(session_id="b", events=events[:10]))  # "a" is parked
        assert _held(s) == (1, 1)
        if change == "delete":
            s.ask(DeleteSession(session_id="a"))
            s.ask(SaveSession(record=example_session("a")))
            sent, expected = events[:50], 50
        else:
            start = RelayCursor(ordinal=40, digest=events[39].digest)
            assert s.ask(SeedProjection(session_id="a", start=start)) == start
            sent, expected = events[40:80], 40
        report = s.ask(ObserveRelayEvents(session_id="a", events=sent))
        assert (report.applied, report.already_applied) == (expected, 0)
        stored = s.ask(LoadMaterializedSession(session_id="a"))
        assert stored is not None
        assert stored.frontier is not None
        assert stored.frontier.ordinal == sent[-1].ordinal


def _stored_frontier(store: object, session_id: str) -> int:
    stored = store.ask(LoadMaterializedSession(session_id=session_id))  # type: ignore[attr-defined]
    assert stored is not None
    return 0 if stored.frontier is None else stored.frontier.ordinal


@pytest.mark.usefixtures("one_worker")
@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_delete_while_its_session_is_being_parked_for_room_drops_the_projection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """(Found by a hostile probe.) Another thread's message takes the session out for
    room; its parking
    (RemoteProjection.close -> WorkerPool.detach) runs after the entry left the live set,
    so a DeleteSession arriving then finds neither a live entry to retire nor a parked
    projection to forget. The session re-saved and replayed from ordinal 1 must apply."""
    original = worker_proxy.RemoteProjection.close
    parking = threading.Event()

    def slow_close(self: worker_proxy.RemoteProjection) -> None:
        if self._session_id == "a" and not parking.is_set():
            parking.set()
            time.sleep(0.5)  # widens the window between _victims and detach
        original(self)

    monkeypatch.setattr(worker_proxy.RemoteProjection, "close", slow_close)
    events = conversation(100)
    with _saved(_open(tmp_path / "s.sqlite3", mode, max_projectors=1), "a", "b") as store:
        store.ask(ObserveRelayEvents(session_id="a", events=events[:80]))
        feeding = threading.Thread(
            target=store.ask, args=(ObserveRelayEvents(session_id="b", events=events[:10]),)
        )
        feeding.start()
        if mode == "process":
            assert parking.wait(10)
        time.sleep(0.1)
        store.ask(DeleteSession(session_id="a"))
        store.ask(SaveSession(record=example_session("a")))
        feeding.join(30)
        report = store.ask(ObserveRelayEvents(session_id="a", events=events[:50]))
        assert (report.applied, report.already_applied) == (50, 0)
        assert _stored_frontier(store, "a") == 50


@pytest.mark.usefixtures("one_worker")
@pytest.mark.parametrize("mode", ["thread", "process"])
def test_a_retried_message_whose_last_page_was_refused_busy_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """(Found by a hostile probe.) The message's last page is refused (StoreBusy: another connection holds the write
    lock) while another conversation holds the worker, so the proxy's Forget waits in the
    worker's queue; the session is then taken out for room, and its Park replaces that
    Forget (one queued message per session). The retried message (StoreBusy is
    retryable) must be applied, not answered "already applied" from the parked
    projection that assumed the refused page."""
    monkeypatch.setattr(storage_connection, "BUSY_TIMEOUT_MS", 300)
    events = conversation(20)
    path = tmp_path / "s.sqlite3"
    with _saved(_open(path, mode, max_projectors=1), "a", "b") as store:
        store.ask(ObserveRelayEvents(session_id="a", events=events[:5]))
        store.ask(ObserveRelayEvents(session_id="b", events=events[:5]))
        other = apsw.Connection(str(path))
        other.execute("BEGIN IMMEDIATE")
        outcome: list[object] = []

        def first() -> None:
            try:
                store.ask(ObserveRelayEvents(session_id="a", events=events[5:15]))
            except StoreBusy as exc:
                outcome.append(exc)

        asking = threading.Thread(target=first)
        asking.start()
        time.sleep(0.1)  # a's conversation is over; its last page waits for the lock
        worker = None
        if mode == "process":
            assert store._core._workers is not None
            worker = store._core._workers.worker(0)
            worker._lock.acquire()  # as another session's conversation holds it
        asking.join(30)
        other.execute("ROLLBACK")
        other.close()
        feeding = threading.Thread(
            target=store.ask, args=(ObserveRelayEvents(session_id="b", events=events[5:8]),)
        )
        feeding.start()  # takes "a" out for room
        time.sleep(0.2)
        if worker is not None:
            worker._lock.release()
        feeding.join(30)
        assert len(outcome) == 1
        retry = store.ask(ObserveRelayEvents(session_id="a", events=events[5:15]))
        assert (retry.applied, retry.already_applied) == (10, 0)
        assert _stored_frontier(store, "a") == 15


@pytest.mark.parametrize("bad", [300, 700])
def test_a_replay_in_a_process_is_refused_where_the_thread_path_refuses_it(
    tmp_path: Path, bad: int
) -> None:
    """At 700 the bad event is in the second batch while the third is already handed
    over (``replay.AHEAD``): the third applies nothing, the second's error is reported."""
    events = conversation(2000)
    lines = [encode_relay_event(event) for event in events]
    lines[bad - 1] = lines[bad - 1].replace(events[bad - 1].digest.encode(), b"0" * 64)
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b"\n".join(lines) + b"\n")
    outcomes = []
    for mode in ("thread", "process"):
        with _open(tmp_path / f"{mode}.sqlite3", mode) as store:
            with pytest.raises(RelayChainError) as refused:
                replay_source(store, resolve_source(journal, session_id=SESSION))
            stored = store.ask(LoadMaterializedSession(session_id=SESSION))
            assert stored is not None
            error = refused.value
            outcomes.append(
                (type(error), error.fault, error.path, error.line, error.ordinal, stored.frontier)
            )
    assert outcomes[0] == outcomes[1]
    _, _, path, line, ordinal, frontier = outcomes[1]
    assert (path, line, ordinal) == (str(journal), bad, bad)
    assert frontier is not None
    assert frontier.ordinal == (bad - 1) // 128 * 128  # every complete page before it


@pytest.mark.usefixtures("one_worker")
def test_a_worker_killed_mid_message_loses_nothing_and_applies_nothing_twice(
    tmp_path: Path,
) -> None:
    events = conversation(3000)
    with _saved(_open(tmp_path / "thread.sqlite3", "thread"), SESSION) as store:
        store.ask(ObserveRelayEvents(session_id=SESSION, events=events))
        expected = _snapshot(store, SESSION)
    with _saved(_open(tmp_path / "process.sqlite3", "process"), SESSION) as store:
        store.ask(ObserveRelayEvents(session_id=SESSION, events=events[:10]))
        (victim,) = _pids(store)
        reports: list[ProjectionReport] = []
        asking = threading.Thread(
            target=lambda: reports.append(
                store.ask(ObserveRelayEvents(session_id=SESSION, events=events))
            )
        )
        asking.start()
        deadline = time.monotonic() + 30
        while store.metrics().relay_events_applied <= 10 + 128:  # a page committed
            assert time.monotonic() < deadline
            assert asking.is_alive()
            time.sleep(0.001)
        os.kill(victim, signal.SIGKILL)
        asking.join(60)
        assert not asking.is_alive()
        (report,) = reports
        assert (report.applied, report.already_applied) == (len(events) - 10, 10)
        assert report.frontier_ordinal == len(events)
        assert store.metrics().worker_restarts == 1
        assert victim not in _pids(store)
        assert _snapshot(store, SESSION) == expected


@pytest.mark.usefixtures("one_worker")
def test_a_worker_killed_between_messages_is_replaced_by_the_next(tmp_path: Path) -> None:
    events = conversation(500)
    with _saved(_open(tmp_path / "thread.sqlite3", "thread"), SESSION) as store:
        _ingest(store, SESSION, events, 100)
        expected = _snapshot(store, SESSION)
    with _saved(_open(tmp_path / "process.sqlite3", "process"), SESSION) as store:
        _ingest(store, SESSION, events[:250], 100)
        (victim,) = _pids(store)
        os.kill(victim, signal.SIGKILL)
        assert _ingest(store, SESSION, events, 100) == 250
        assert store.metrics().worker_restarts == 1
        assert _snapshot(store, SESSION) == expected


def test_a_stopped_worker_is_presumed_lost_replaced_and_never_hangs_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers stopped (SIGSTOP) and silent past the silence bound are killed: an ask
    is answered by a new worker, and ``close()`` returns with a message still being
    projected on a stopped one (finished on a new worker first) and every stopped worker
    killed and reaped."""
    monkeypatch.setattr(worker_pool, "SILENCE_SECONDS", 1.0, raising=False)
    events = conversation(60)
    path = tmp_path / "store.sqlite3"
    store = _saved(_open(path, "process"), "s-a", "s-b")
    stopped: list[int] = []
    try:
        for session_id in ("s-a", "s-b"):
            store.ask(ObserveRelayEvents(session_id=session_id, events=events[:20]))
        stopped = _pids(store)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        report = store.ask(ObserveRelayEvents(session_id="s-a", events=events[20:40]), 30)
        assert (report.applied, report.already_applied) == (20, 0)
        assert store.metrics().worker_restarts >= 1
        store.tell(ObserveRelayEvents(session_id="s-b", events=events[20:40]))
        closing = threading.Thread(target=store.close)
        closing.start()
        closing.join(30)  # a hang detector: the bound is seconds
        assert not closing.is_alive()
        for pid in stopped:
            with pytest.raises(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # killed and reaped
    finally:
        for pid in stopped:  # only if the store left them: never hang the test run
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        store.close()
    with _open(path, "thread", read_only=True) as reopened:
        for session_id in ("s-a", "s-b"):
            stored = reopened.ask(LoadMaterializedSession(session_id=session_id))
            assert stored is not None
            assert stored.kept_frontier.ordinal == 40


def test_a_worker_that_keeps_dying_is_a_typed_error_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        worker_pool.ProjectionWorker,
        "command",
        staticmethod(lambda fd: [sys.executable, "-c", "raise SystemExit(3)"]),
    )
    with _saved(_open(tmp_path / "store.sqlite3", "process"), SESSION) as store:
        with pytest.raises(WorkerLost) as lost:
            store.ask(ObserveRelayEvents(session_id=SESSION, events=conversation(20)))
        assert lost.value.session_id == SESSION
        assert "died twice" in str(lost.value)
        assert "exited with status 3" in str(lost.value)
        stored = store.ask(LoadMaterializedSession(session_id=SESSION))
        assert stored is not None
        assert stored.kept_frontier.ordinal == 0
        assert store.latest_seq == 0
        assert store.metrics().worker_restarts == 1


def test_the_workers_start_with_their_first_projector_and_end_with_the_store(
    tmp_path: Path,
) -> None:
    store = _saved(_open(tmp_path / "store.sqlite3", "process"), "s-a", "s-b")
    assert store._core._workers is not None
    cores = len(os.sched_getaffinity(0))
    assert len(store._core._workers) == min(cores, worker_pool.POOL_LIMIT)
    assert _pids(store) == []  # a store that projects nothing starts no process
    store.ask(ObserveRelayEvents(session_id="s-a", events=conversation(3)))
    assert len(_pids(store)) == 1
    store.ask(ObserveRelayEvents(session_id="s-b", events=conversation(3)))
    pids = _pids(store)
    assert len(pids) == min(cores, 2)  # the second projector got an idle worker
    store.close()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reaped: no such child any more
    assert _pids(store) == []


def test_the_worker_does_not_import_the_embedders_main(tmp_path: Path) -> None:
    marker = tmp_path / "imports.txt"
    script = tmp_path / "embedder.py"
    write_journal(tmp_path / "journal.jsonl", conversation(300))
    script.write_text(
        "import sys\n"
        f"open({str(marker)!r}, 'a').write('imported\\n')\n"
        "from relaystore import EventStore\n"
        "from relaystore.actors.journal import resolve_source\n"
        "from relaystore.actors.replay import replay_source\n"
        f"with EventStore.open({str(tmp_path / 'store.sqlite3')!r}, projection='process') as s:\n"
        f"    r = replay_source(s, resolve_source({str(tmp_path / 'journal.jsonl')!r}, "
        "session_id='s'))\n"
        "    print(r.applied)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "300"
    assert marker.read_text() == "imported\n"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (an exited one not yet reaped by its new parent is not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_workers_exit_when_the_embedding_process_is_killed(tmp_path: Path) -> None:
    """An embedder killed with SIGKILL (no close, no atexit) leaves no worker behind:
    each exits when its pipe closes."""
    script = tmp_path / "embedder.py"
    script.write_text(
        "import os, signal, sys\n"
        "from relaystore import EventStore, ObserveRelayEvents, SaveSession\n"
        "from relaystore.testing import JournalBuilder, example_session\n"
        f"store = EventStore.open({str(tmp_path / 'store.sqlite3')!r})\n"
        "for sid in ('a', 'b'):\n"
        "    store.ask(SaveSession(record=example_session(sid)))\n"
        "    journal = JournalBuilder()\n"
        "    journal.prompt_turn('go')\n"
        "    store.ask(ObserveRelayEvents(session_id=sid, events=journal.events))\n"
        "print(' '.join(map(str, store._core._workers.pids)), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:  # not pipes the workers hold
        done = subprocess.run(
            [sys.executable, str(script)], stdout=stdout, stderr=stderr, timeout=120, check=False
        )
    assert done.returncode == -signal.SIGKILL, err.read_text()
    pids = [int(pid) for pid in out.read_text().split()]
    assert pids  # the default projection started its workers
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in pids)


def test_a_newer_workers_line_is_held_in_a_process_as_in_a_thread(tmp_path: Path) -> None:
    before = JournalBuilder()
    before.prompt_turn("Hello")
    future = before.newer_line(FUTURE)
    after = JournalBuilder(after=future.cursor, start_ms=before.next_ms + 10)
    after.prompt_turn("After")
    events: list[RelayEvent | RelayLine] = [*before.events, future, *after.events]
    outcomes = []
    for mode in ("thread", "process"):
        with _saved(_open(tmp_path / f"{mode}.sqlite3", mode), SESSION) as store:
            report = store.ask(ObserveRelayEvents(session_id=SESSION, events=events))
            assert report.behind is not None
            assert report.behind.ordinal == future.ordinal
            outcomes.append((report, _snapshot(store, SESSION)))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][0].held == 1 + len(after.events)


def test_reproject_in_a_process_equals_the_thread_path(tmp_path: Path) -> None:
    events = conversation(400)
    outcomes = []
    for mode in ("thread", "process"):
        with _saved(_open(tmp_path / f"{mode}.sqlite3", mode), SESSION) as store:
            _ingest(store, SESSION, events, 128)
            report = store.ask(Reproject(session_id=SESSION))
            more = store.ask(ObserveRelayEvents(session_id=SESSION, events=conversation(450)))
            assert more.applied == 50
            outcomes.append((report, _snapshot(store, SESSION)))
    assert outcomes[0] == outcomes[1]


def test_events_cross_the_pipe_unchanged_in_order() -> None:
    before = JournalBuilder()
    before.prompt_turn("Hello")
    future = before.newer_line(FUTURE)
    after = JournalBuilder(after=future.cursor)
    after.prompt_turn("After")
    mixed: list[RelayEvent | RelayLine] = [future, *before.events, future, *after.events]
    assert decode_events(encode_events(mixed)) == mixed
    assert decode_events(encode_events(before.events)) == before.events
    assert decode_events(encode_events([])) == []


def test_open_refuses_an_unknown_projection_mode(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="projection must be one of thread, process"):
        _open(tmp_path / "store.sqlite3", "fork")


def test_a_worker_that_cannot_start_is_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-python")
    monkeypatch.setattr(worker_pool.ProjectionWorker, "command", staticmethod(lambda fd: [missing]))
    with _saved(_open(tmp_path / "store.sqlite3", "process"), SESSION) as store:
        with pytest.raises(
            WorkerLost, match=r'the projection worker could not start: .*projection="thread"'
        ):
            store.ask(ObserveRelayEvents(session_id=SESSION, events=conversation(20)))
        assert store.latest_seq == 0


def test_replay_says_in_one_line_that_its_worker_died(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The worker's own failure is one line (``main`` and its boot), and the command's
    refusal another: never a traceback."""
    monkeypatch.setattr(
        worker_pool.ProjectionWorker,
        "command",
        staticmethod(
            lambda fd: [
                sys.executable,
                "-c",
                worker_pool._BOOT.replace("main(", "main(-1 *"),
                str(fd),
            ]
        ),
    )
    journal = write_journal(tmp_path / "journal.jsonl", conversation(50))
    db = str(tmp_path / "store.sqlite3")
    status = cli.main(["--db", db, "replay", "--projection", "process", str(journal)])
    err = capfd.readouterr().err  # the workers' stderr too
    assert status == 1
    assert "Traceback" not in err
    assert "relaystore projection worker: ValueError: invalid handle" in err
    assert "the projection worker died twice" in err
    assert "exited with status 70" in err


def test_the_async_facade_projects_in_a_process_too(tmp_path: Path) -> None:
    events = conversation(300)

    async def ingest(mode: str) -> tuple[list[bytes], list[bytes], list[int]]:
        path = tmp_path / f"{mode}.sqlite3"
        async with AsyncEventStore.open(path, projection=mode) as store:  # type: ignore[arg-type]
            await store.ask(SaveSession(record=example_session(SESSION)))
            for start in range(0, len(events), 64):
                chunk = events[start : start + 64]
                await store.ask(ObserveRelayEvents(session_id=SESSION, events=chunk))
            assert bool(_pids(store.sync)) == (mode == "process")
            return await asyncio.to_thread(_snapshot, store.sync, SESSION)

    assert asyncio.run(ingest("process")) == asyncio.run(ingest("thread"))


@pytest.mark.parametrize(
    ("attribute", "value", "says"),
    [("executable", "", "does not know its Python"), ("frozen", True, "frozen application")],
    ids=["embedded", "frozen"],
)
def test_an_interpreter_that_cannot_start_itself_gets_a_typed_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attribute: str, value: object, says: str
) -> None:
    """An embedded interpreter (sys.executable empty) or a frozen application (whose
    executable is the application) cannot start a worker: the store still opens, starts
    nothing, and the first message says what to do."""
    monkeypatch.setattr(sys, attribute, value, raising=False)
    with (
        _saved(_open(tmp_path / "store.sqlite3", "process"), SESSION) as store,
        pytest.raises(WorkerLost, match=f'{says}.*projection="thread"'),
    ):
        store.ask(ObserveRelayEvents(session_id=SESSION, events=conversation(20)))
    assert _pids(store) == []


@pytest.mark.usefixtures("one_worker")
def test_a_worker_killed_again_and_again_while_sessions_ingest_loses_nothing(
    tmp_path: Path,
) -> None:
    """Three sessions fed from three threads through one worker, killed three times (each
    kill once the last one was recovered from): every ask succeeds, every event is
    applied once, and each session's projection, feed and log equal the thread path's."""
    sessions = ["s-a", "s-b", "s-c"]
    events = conversation(2000)
    with _saved(_open(tmp_path / "thread.sqlite3", "thread"), *sessions) as store:
        for session_id in sessions:
            _ingest(store, session_id, events, 100)
        expected = _snapshot(store, *sessions)
    with _saved(_open(tmp_path / "process.sqlite3", "process"), *sessions) as store:
        applied: dict[str, int] = {}
        failures: list[BaseException] = []

        def feed(session_id: str) -> None:
            try:
                applied[session_id] = _ingest(store, session_id, events, 100)
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        feeders = [threading.Thread(target=feed, args=(sid,)) for sid in sessions]
        for thread in feeders:
            thread.start()
        deadline = time.monotonic() + 60
        for kill in range(1, 4):  # at a quarter, a half and three quarters of the events
            while store.metrics().relay_events_applied < kill * len(events) * 3 // 4:
                assert time.monotonic() < deadline
                time.sleep(0.001)
            (victim,) = _pids(store)
            os.kill(victim, signal.SIGKILL)
            while store.metrics().worker_restarts < kill:
                assert time.monotonic() < deadline
                time.sleep(0.001)
        for thread in feeders:
            thread.join(60)
        assert failures == []
        assert applied == {session_id: len(events) for session_id in sessions}
        assert store.metrics().worker_restarts == 3
        assert _by_session(_snapshot(store, *sessions)) == _by_session(expected)


def _by_session(
    snapshot: tuple[list[bytes], list[bytes], list[int]],
) -> tuple[list[bytes], dict[str, list[bytes]], list[int]]:
    """A snapshot with its feed per session, without seqs: sessions fed at once
    interleave in the feed in any order, each in its own."""
    projections, feed, logged = snapshot
    per_session: dict[str, list[bytes]] = {}
    for line in feed:
        event = msgspec.json.decode(line)
        del event["seq"]
        per_session.setdefault(event["session_id"], []).append(encode(event))
    return projections, per_session, logged
