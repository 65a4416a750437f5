"""Running the ``relaystore`` command: what the command-line tests share.

A support module, not a test module. :func:`cli` and the helpers on it (:func:`ok`,
:func:`replay`, :func:`events`, :func:`show`, :func:`frontier`) run the command in this
process (:mod:`tests.actors.cli_in_process`), for the cases that only parse and print;
:func:`cli_process`, :func:`run_command` and :func:`start` run it as a real process, for
what needs one (a terminal, a signal, a second process holding the store, the exit), in
tests marked ``integration`` (the ``spawned`` fixture lives in ``conftest.py``).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import msgspec

from relaystore.domain.errors import StoreError
from relaystore.domain.materialized import MaterializedSession
from relaystore.storage.connection import open_reader
from relaystore.storage.stats import load_stats
from tests.actors.cli_in_process import run_in_process
from tests.paths import REAL_EXCERPT

ROOT = Path(__file__).resolve().parents[2]
WORKER_ROOTS = sorted((ROOT / "examples" / "worker-root").iterdir())
FIXTURE = REAL_EXCERPT
WIRE_KEYS = ["seq", "session_id", "recorded_at_ms", "type", "data"]
SUMMARY = re.compile(
    r"replayed (\d+) events?: (\d+) applied, (\d+) already applied, (\d+) API events? written"
)
ENV = {
    **{key: value for key, value in os.environ.items() if key != "RELAYSTORE_DB"},
    "PYTHONPATH": str(ROOT),
    "PYTHONIOENCODING": "utf-8",
}
TIMEOUT = 60.0
"""Bound on any one command; a hang fails the test instead of the whole run."""


# -- running the command -------------------------------------------------------------------


STORELESS = ("verify", "fleet", "completion")
"""The commands that use no store: ``--db`` is refused, so they are run without it."""


def command(db: Path, *args: str) -> list[str]:
    """``relaystore --db DB ARGS`` (without ``--db`` for a command that uses no store)."""
    store = () if args and args[0] in STORELESS else ("--db", str(db))
    return [sys.executable, "-m", "relaystore.actors.cli", *store, *args]


def run_command(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in ``cwd`` to its end (within :data:`TIMEOUT`); capture its output."""
    return subprocess.run(
        argv,
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT,
        check=False,
    )


def cli(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``relaystore --db DB ARGS`` from the store's folder, in this process (see
    :mod:`tests.actors.cli_in_process`: its output and status as a process's).

    A ``replay`` projects in this process's threads (``--projection thread``) unless the
    case names ``--projection``: worker processes are what this lane leaves out, and
    the store they make is the same (the ``cli_process`` cases replay with the default,
    in worker processes)."""
    argv = command(db, *args)[3:]
    if args[:1] == ("replay",) and "--projection" not in args:
        at = argv.index("replay") + 1
        argv[at:at] = ["--projection", "thread"]
    return run_in_process(argv, db.parent, env or ENV, TIMEOUT)


def cli_process(
    db: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``relaystore --db DB ARGS`` from the store's folder as a real process (a test
    that uses it is marked ``integration``); capture its output."""
    return run_command(command(db, *args), db.parent, env)


def start(db: Path, *args: str, stdout: int = subprocess.PIPE) -> subprocess.Popen[str]:
    """Start ``relaystore --db DB ARGS`` in the store's folder, stderr (and, unless told
    otherwise, stdout) piped as text; give it to the ``spawned`` fixture."""
    return subprocess.Popen(
        command(db, *args),
        cwd=db.parent,
        env=ENV,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(process: subprocess.Popen[Any]) -> None:
    """Kill ``process`` if it still runs, reap it and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=TIMEOUT)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


def ok(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the command and insist on success."""
    result = cli(db, *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def replay(db: Path, *sources: Path | str, session: str | None = None) -> tuple[int, ...]:
    """Replay ``sources`` successfully; return the summary's four figures."""
    extra = ("--session", session) if session else ()
    result = ok(db, "replay", *map(str, sources), *extra)
    return summary(result.stderr)


def summary(stderr: str) -> tuple[int, ...]:
    lines = stderr.strip().splitlines()
    assert lines, "replay printed no summary"
    match = SUMMARY.search(lines[-1])
    assert match is not None, stderr
    return tuple(int(group) for group in match.groups())


def events(db: Path, *args: str) -> list[str]:
    """The JSON lines ``events`` prints."""
    return ok(db, "events", *args).stdout.splitlines()


def show(db: Path, session_id: str) -> MaterializedSession:
    session = msgspec.json.decode(ok(db, "show", session_id).stdout, type=MaterializedSession)
    assert session.session_id == session_id
    return session


def frontier(db: Path, session_id: str) -> tuple[int, str]:
    session = show(db, session_id)
    return session.applied_event_ordinal, session.applied_event_digest


def failure(result: subprocess.CompletedProcess[str]) -> str:
    """Check a refused command: status 1, one line on stderr, no traceback; return it."""
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def latest_seq(db: Path) -> int:
    """The store's newest API event seq, read in this process (0 while it is being made)."""
    try:
        connection = open_reader(db)
    except StoreError:
        return 0
    try:
        return load_stats(connection).latest_seq
    except StoreError:
        return 0
    finally:
        connection.close()


def copy_store(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")
    return target


class LineReader:
    """Read a pipe's lines on a thread, so the test can wait with a deadline."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))

    def take(self, count: int, *, deadline: float) -> list[str]:
        got: list[str] = []
        while len(got) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                got.append(self.lines.get(timeout=remaining))
            except queue.Empty:
                break
        return got

    def join(self) -> None:
        self._thread.join(timeout=TIMEOUT)
