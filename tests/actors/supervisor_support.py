"""A real supervisor process for the maintenance tests: it holds a store for writing and
keeps ingesting while ``relaystore`` commands run beside it.

A support module, not a test module. :func:`start_supervisor` starts a Python
subprocess that opens ``EventStore`` for writing (so its maintenance desk runs) and
feeds a session ``live`` one prompt turn per ask, printing ``acked N`` (the session's
frontier ordinal) after each acknowledged ask. It stops cleanly when its stdin closes.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from pathlib import Path

from relaystore import EventStore, LoadMaterializedSession
from tests.actors.cli_support import ENV, TIMEOUT

LIVE = "live"
"""The session the supervisor keeps ingesting into."""

_SUPERVISOR = """
import sys, threading
from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.testing import JournalBuilder, example_session

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
journal = JournalBuilder()
with EventStore.open(sys.argv[1], projection="thread") as store:
    store.ask(SaveSession(record=example_session("live")))
    print("ready", flush=True)
    turn = 0
    while not stop.is_set():
        events = journal.prompt_turn(f"turn {turn}")
        report = store.ask(ObserveRelayEvents(session_id="live", events=events))
        print(f"acked {report.frontier_ordinal}", flush=True)
        turn += 1
        stop.wait(0.01)  # pace the load: about a turn per 10 ms, not a busy loop
print("closed", flush=True)
"""

_HOLDER = """
import sys
from relaystore.storage.connection import open_writer
handle = open_writer(sys.argv[1])
if sys.argv[2] == "requests":
    handle.take_requests()  # says it takes requests, but no desk runs here
print("ready", flush=True)
sys.stdin.read()
handle.close()
"""


class Supervisor:
    """The supervisor subprocess and its acknowledgements, read by a thread."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.acked = 0
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self.next_line() == "ready"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put("")

    def next_line(self) -> str:
        line = self._lines.get(timeout=TIMEOUT)
        if line.startswith("acked "):
            self.acked = max(self.acked, int(line.split()[1]))
        return line

    def wait_acked_past(self, ordinal: int) -> int:
        """Block until an acknowledgement past ``ordinal`` arrives; the newest acked."""
        while self.acked <= ordinal:
            assert self.next_line(), "the supervisor ended"
        return self.acked

    def stop(self) -> int:
        """Close its stdin, let it close the store; the last ordinal it acknowledged."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        while (line := self.next_line()) != "closed":
            assert line, f"the supervisor died: {self.process.stderr}"
        assert self.process.wait(timeout=TIMEOUT) == 0
        return self.acked


def _spawn(script: str, *args: str, spawned: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    spawned.append(process)
    return process


def start_supervisor(db: Path, spawned: list[subprocess.Popen[str]]) -> Supervisor:
    """Start the ingesting supervisor on ``db``; returns once it holds the store."""
    return Supervisor(_spawn(_SUPERVISOR, str(db), spawned=spawned))


def start_holder(
    db: Path, spawned: list[subprocess.Popen[str]], *, says_requests: bool
) -> subprocess.Popen[str]:
    """A process holding ``db``'s write lock with no maintenance desk (a bare
    ``open_writer``; ``says_requests``: its lock file claims it takes requests)."""
    process = _spawn(_HOLDER, str(db), "requests" if says_requests else "no", spawned=spawned)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def release(process: subprocess.Popen[str]) -> None:
    """Let a holder close its writer and exit."""
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait(timeout=TIMEOUT) == 0


def live_frontier(db: Path) -> int:
    """The ordinal the store holds of the supervisor's session."""
    with EventStore.open(db, read_only=True, readers=1) as store:
        session = store.ask(LoadMaterializedSession(session_id=LIVE))
    assert session is not None
    return session.applied_event_ordinal
