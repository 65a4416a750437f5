"""A store nobody closed never keeps the process alive, and a clean exit closes it.

Each case runs a small script in a subprocess that opens a store, has one write
acknowledged and then returns or raises without ``close()``. The process must end by
itself (the subprocess timeout is a hang detector, not a timing target), with the
acknowledged write in the file, and the interpreter's exit must have closed the store
(its ``-wal`` checkpointed into the main file, as ``close()`` leaves it).
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest

from relaystore import EventStore, LoadApiEvents
from tests.actors.cli_support import ENV, TIMEOUT

BLOCKING = """
    import sys
    from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
    from relaystore.testing import example_session

    store = EventStore.open(sys.argv[1])
    store.ask(SaveSession(record=example_session()))
    state = ApiActivityState(
        state="working-1", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    store.ask(RecordActivities(activities=[("session-1", state)], recorded_at_ms=5))
    assert store.wait_for(1, timeout=30)
    if sys.argv[2] == "raise":
        raise RuntimeError("the supervisor crashed")
"""

AWAITING = """
    import asyncio
    import sys
    from relaystore import ApiActivityState, RecordActivities, SaveSession
    from relaystore.aio import AsyncEventStore
    from relaystore.testing import example_session

    async def main() -> None:
        store = await AsyncEventStore.open(sys.argv[1])
        await store.ask(SaveSession(record=example_session()))
        state = ApiActivityState(
            state="working-1", is_idle=False, waiting_for_input=False, capacity_retry=False
        )
        await store.ask(RecordActivities(activities=[("session-1", state)], recorded_at_ms=5))
        follower = store.follow(after_seq=0)
        assert (await anext(follower)).kind == "activity_changed"
        if sys.argv[2] == "raise":
            raise RuntimeError("the supervisor crashed")

    asyncio.run(main())
"""


def _run(script: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter (the timeout is a hang detector)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *arguments],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=TIMEOUT,
        check=False,
    )


def _kinds(path: Path) -> list[str]:
    """The kinds of the store's API events, in order."""
    with EventStore.open(path, read_only=True) as store:
        return [e.kind for e in store.ask(LoadApiEvents(after_seq=0)).events]


@pytest.mark.parametrize("script", [BLOCKING, AWAITING], ids=["blocking", "awaiting"])
@pytest.mark.parametrize("ending", ["return", "raise"])
@pytest.mark.integration
def test_an_unclosed_store_lets_the_process_exit_with_its_writes(
    tmp_path: Path, script: str, ending: str
) -> None:
    path = tmp_path / "store.sqlite3"
    result = _run(script, str(path), ending)
    assert result.returncode == (1 if ending == "raise" else 0), result.stderr
    if ending == "raise":
        assert "the supervisor crashed" in result.stderr
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # closed at exit: checkpointed
    assert _kinds(path) == ["activity_changed"]


def test_closing_forgets_the_exit_hook(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path / "store.sqlite3")
    core = weakref.ref(store._core)
    store.close()
    del store
    gc.collect()
    assert core() is None  # nothing (the exit hook included) keeps a closed store


FORKING = """
    import os
    import select
    import sys
    from pathlib import Path
    from relaystore import EventStore, ObserveRelayEvents, SaveSession, StoreClosed
    from relaystore.testing import JournalBuilder, example_session

    journal = JournalBuilder()
    journal.prompt_turn("question")
    store = EventStore.open(sys.argv[1], projection=sys.argv[2])
    store.ask(SaveSession(record=example_session()))
    store.ask(ObserveRelayEvents(session_id="session-1", events=journal.events[:2]))
    wal = Path(f"{sys.argv[1]}-wal")
    assert wal.exists()
    said, says = os.pipe()
    child = os.fork()
    if child == 0:  # the store's threads and workers are the parent's
        os.close(said)
        try:
            store.ask(ObserveRelayEvents(session_id="session-1", events=journal.events[2:]))
        except StoreClosed as exc:
            os.write(says, str(exc).encode())
        sys.exit(0)  # the exit hook must not wait for the parent's threads
    os.close(says)
    exited, _, _ = select.select([os.pidfd_open(child)], [], [], 20)
    if not exited:
        os.kill(child, 9)
        os.waitpid(child, 0)
        sys.exit("the forked child did not exit within 20 s")
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    print(os.read(said, 4096).decode())
    assert wal.exists()  # the child closed nothing of the parent's
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=journal.events[2:]))
    assert report.applied == len(journal.events) - 2
    assert store.metrics().worker_restarts == 0
"""


@pytest.mark.parametrize("projection", ["thread", "process"])
@pytest.mark.integration
def test_a_forked_child_exits_at_once_and_leaves_the_parents_store(
    tmp_path: Path, projection: str
) -> None:
    """A process that forks after opening a store: the child's exit closes nothing (its
    store is the parent's, whose threads it does not have) and a use of it there is
    ``StoreClosed`` naming the parent; the parent goes on, and closes at its exit."""
    path = tmp_path / "store.sqlite3"
    result = _run(FORKING, str(path), projection)
    assert result.returncode == 0, result.stderr
    assert "the store belongs to process" in result.stdout
    assert "was forked from it" in result.stdout
    assert _kinds(path).count("turn_ended") == 1


STOPPED_WORKERS = """
    import os
    import signal
    import sys
    from relaystore import EventStore, ObserveRelayEvents, SaveSession
    from relaystore.actors.workers import pool as worker_pool
    from relaystore.testing import JournalBuilder, example_session

    worker_pool.SILENCE_SECONDS = 1.0  # the bound, shortened for the test
    journal = JournalBuilder()
    journal.prompt_turn("question")
    store = EventStore.open(sys.argv[1])
    store.ask(SaveSession(record=example_session()))
    store.ask(ObserveRelayEvents(session_id="session-1", events=journal.events[:2]))
    pids = store._core._workers.pids
    with open(sys.argv[2], "w") as out:
        out.write(" ".join(map(str, pids)))
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    store.tell(ObserveRelayEvents(session_id="session-1", events=journal.events[2:]))
    sys.exit(0)  # the exit closes the store, with a message under way on a stopped worker
"""


@pytest.mark.integration
def test_an_exit_with_stopped_workers_kills_them_and_returns(tmp_path: Path) -> None:
    """The interpreter's exit closes the store: a worker stopped (SIGSTOP) mid-message
    is presumed lost after the silence bound and killed, the message finishes on a new
    worker, and the process exits instead of waiting for the stopped one."""
    path = tmp_path / "store.sqlite3"
    pids_file = tmp_path / "pids.txt"
    try:
        result = _run(STOPPED_WORKERS, str(path), str(pids_file))
        assert result.returncode == 0, result.stderr
    finally:
        for pid in map(int, pids_file.read_text().split()):
            if _alive(pid):  # the store left it: never leave a stopped process behind
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"worker {pid} outlived its embedder")
    assert _kinds(path).count("turn_ended") == 1


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
