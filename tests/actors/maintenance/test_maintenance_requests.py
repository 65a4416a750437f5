"""Maintenance beside a running supervisor (issue 34, item 2): ``compact``, ``reproject``,
``prune-log``, ``vacuum``, ``delete`` and ``checkpoint`` from the shell while a real
supervisor process holds the store and keeps ingesting; the refusals name the holder;
a request nobody takes times out typed and undone; a request id runs once."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import apsw
import pytest

from relaystore import EventStore, LoadState, SaveSession
from relaystore.testing import example_session
from tests.actors.cli_support import (
    ENV,
    TIMEOUT,
    LineReader,
    cli,
    cli_process,
    command,
    failure,
    ok,
    start,
)
from tests.actors.retention_support import SESSION, maintenance_store, retention_store
from tests.actors.supervisor_support import (
    _SUPERVISOR,
    LIVE,
    Supervisor,
    _spawn,
    live_frontier,
    release,
    start_holder,
    start_supervisor,
)

pytestmark = pytest.mark.integration  # writer processes the commands ask, and projection workers


def _store_with(tmp_path: Path, session_id: str) -> Path:
    """A store holding one saved session, closed."""
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session(session_id)))
    return db


def _sessions(db: Path) -> set[str]:
    with EventStore.open(db, read_only=True, readers=1) as store:
        return set(store.ask(LoadState()).sessions)


def _requests(db: Path) -> list[tuple[str, str, int | None]]:
    """Every request row: its id, its state, and the process that took it."""
    connection = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = connection.execute(
            "SELECT request_id, state, taken_by_pid FROM maintenance_requests "
            "ORDER BY coalesce(answered_at_ms, requested_at_ms), requested_at_ms"
        ).fetchall()
    finally:
        connection.close()
    return [(str(i), str(state), None if pid is None else int(pid)) for i, state, pid in rows]


def _await_request(db: Path, request_id: str) -> None:
    """Block until the store holds request ``request_id`` (a command recorded it)."""
    deadline = time.monotonic() + TIMEOUT
    while request_id not in {i for i, _, _ in _requests(db)}:
        assert time.monotonic() < deadline, "the command never recorded its request"
        time.sleep(0.02)  # the row is the only sign: a command prints nothing meanwhile


def _ran(result: subprocess.CompletedProcess[str], db: Path, pid: int) -> str:
    """The command's stdout, once its request is recorded as run by process ``pid``."""
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert _requests(db)[-1][1:] == ("done", pid)
    return result.stdout


def test_each_maintenance_command_works_beside_a_live_supervisor(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, frontier, archive = maintenance_store(tmp_path)
    supervisor = start_supervisor(db, spawned)
    pid = supervisor.process.pid
    try:
        started = supervisor.wait_acked_past(0)

        def run(*args: str) -> str:
            return _ran(cli(db, *args), db, pid)

        recorded = run("checkpoint", SESSION, "--through", str(frontier), "--archive", str(archive))
        assert hashlib.sha256(b"archive bytes").hexdigest() in recorded
        assert f"session {SESSION}: 1 tool call compacted" in run("compact", SESSION)
        assert f"reprojected {SESSION}:" in run("reproject", SESSION)
        assert f"{SESSION}: matches log" in ok(db, "audit", SESSION).stdout  # read-only
        pruned = run("prune-log", SESSION, "--through", str(frontier))
        assert f"pruned the relay log of {SESSION}: 1 page," in pruned
        assert "deleted session doomed" in run("delete", "doomed")
        assert "bytes before" in run("vacuum")
        # The supervisor kept committing while the commands ran, and still does.
        assert supervisor.wait_acked_past(started) > started
    finally:
        acked = supervisor.stop()
    assert live_frontier(db) >= acked  # nothing the supervisor acknowledged is lost
    assert _sessions(db) == {SESSION, LIVE}
    assert {(state, taker) for _, state, taker in _requests(db)} == {("done", pid)}


def test_a_refused_request_prints_its_one_line_and_exits_1(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "store.sqlite3"
    retention_store(db, checkpointed=False)
    supervisor = start_supervisor(db, spawned)
    try:
        unknown = cli(db, "delete", "nobody")
        unpruned = cli(db, "prune-log", SESSION, "--through", "1")
    finally:
        supervisor.stop()
    assert unknown.returncode == 1
    assert failure(unknown) == f"relaystore: {db}: no session nobody in this store"
    assert unpruned.returncode == 1
    assert "no verified checkpoint" in failure(unpruned)


def test_without_a_writer_the_command_opens_the_store_itself(tmp_path: Path) -> None:
    db = _store_with(tmp_path, "doomed")
    result = ok(db, "delete", "doomed")
    assert "deleted session doomed" in result.stdout
    assert result.stderr == ""
    assert _sessions(db) == set()
    assert _requests(db) == []  # run here: no request was recorded


def test_a_holder_that_takes_no_requests_is_refused_naming_its_process(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = _store_with(tmp_path, "kept")
    holder = start_holder(db, spawned, says_requests=False)
    try:
        vacuum = failure(cli(db, "vacuum"))
        renew = failure(cli(db, "new-store-id"))
        replay = failure(cli(db, "delete", "kept"))
    finally:
        release(holder)
    for line in (vacuum, replay):
        assert f"open for writing by process {holder.pid} (python" in line
        assert "takes no maintenance requests" in line
    assert f"already open for writing (by process {holder.pid} (python" in renew
    assert _sessions(db) == {"kept"}
    assert _requests(db) == []


def test_a_request_no_writer_takes_in_time_fails_typed_and_leaves_nothing(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = _store_with(tmp_path, "kept")
    holder = start_holder(db, spawned, says_requests=True)  # claims requests, never answers
    try:
        result = cli(db, "delete", "kept", "--timeout", "0.5")
        requests = _requests(db)
    finally:
        release(holder)
    line = failure(result)
    assert "no writer took maintenance request" in line
    assert "within 0.5 s" in line
    assert f"process {holder.pid}" in line
    assert "withdrawn and nothing was done" in line
    assert requests == []  # withdrawn
    assert _sessions(db) == {"kept"}


def test_a_request_id_runs_once_even_when_the_command_is_killed_and_run_again(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = _store_with(tmp_path, "doomed")
    holder = start_holder(db, spawned, says_requests=True)
    asking = subprocess.Popen(
        command(db, "delete", "doomed", "--request-id", "req-1", "--timeout", "60"),
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        env=ENV,
    )
    spawned.append(asking)  # type: ignore[arg-type]
    _await_request(db, "req-1")  # recorded, and nobody takes it: now kill the command
    os.kill(asking.pid, signal.SIGKILL)
    asking.wait()
    release(holder)
    assert _requests(db) == [("req-1", "pending", None)]

    supervisor = start_supervisor(db, spawned)
    try:
        first = cli(db, "delete", "doomed", "--request-id", "req-1")
        second = cli(db, "delete", "doomed", "--request-id", "req-1")
        plain = cli(db, "delete", "doomed")
    finally:
        supervisor.stop()
    assert "deleted session doomed" in first.stdout
    assert (first.returncode, second.returncode) == (0, 0)
    assert second.stdout == first.stdout  # its recorded answer
    assert failure(plain) == f"relaystore: {db}: no session doomed in this store"  # gone
    assert ("req-1", "done", supervisor.process.pid) in _requests(db)
    # With no writer, the recorded answer is printed again, not run a third time.
    assert ok(db, "delete", "doomed", "--request-id", "req-1").stdout == first.stdout


def test_a_request_id_of_another_request_is_refused(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = _store_with(tmp_path, "doomed")
    supervisor = start_supervisor(db, spawned)
    try:
        ok(db, "vacuum", "--request-id", "req-2")
        other = cli(db, "delete", "doomed", "--request-id", "req-2")
    finally:
        supervisor.stop()
    assert "request id req-2 names another request (vacuum)" in failure(other)
    assert "doomed" in _sessions(db)


def _insert_request(db: Path, request_id: str, state: str, **columns: object) -> None:
    """Write a request row as a foreign connection would (beside the live writer)."""
    values = {
        "request_id": request_id,
        "kind": "delete",
        "request_json": f'{{"kind":"delete","session_id":"{request_id}"}}',
        "state": state,
        "requested_at_ms": 0,  # the oldest: the desk reads it first
        "requester_pid": os.getpid(),
        **columns,
    }
    connection = apsw.Connection(str(db))
    try:
        connection.set_busy_timeout(5000)
        names = ", ".join(values)
        marks = ", ".join(
            f"{value}" if isinstance(value, Raw) else "?" for value in values.values()
        )
        connection.execute(
            f"INSERT INTO maintenance_requests({names}) VALUES ({marks})",
            [value for value in values.values() if not isinstance(value, Raw)],
        )
    finally:
        connection.close()


class Raw(str):
    """An SQL expression written into a row as it is."""


def test_a_damaged_open_row_is_failed_and_the_desk_goes_on(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = _store_with(tmp_path, "doomed")
    supervisor = start_supervisor(db, spawned)
    try:
        # Open rows that do not read: an answer of another shape, text that is not UTF-8.
        _insert_request(db, "bad-answer", "pending", answer_json="[1]")
        _insert_request(db, "bad-text", "pending", kind=Raw("CAST(x'ff' AS TEXT)"))
        result = cli(db, "delete", "doomed", "--timeout", "10")
    finally:
        supervisor.stop()
    assert "deleted session doomed" in result.stdout, result.stderr
    assert _sessions(db) == {LIVE}
    states = {request_id: state for request_id, state, _ in _requests(db)}
    assert states["bad-answer"] == states["bad-text"] == "failed"


def test_a_request_left_running_by_its_own_writer_is_answered(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    """What a foreign SQLite lock held while a request ran left: the request taken by
    the live writer and never answered (its answer could not be recorded). The writer
    answers it, so its command and a run again with its id end."""
    db = _store_with(tmp_path, "kept")
    supervisor = start_supervisor(db, spawned)
    try:
        _insert_request(db, "stuck", "running", taken_by_pid=supervisor.process.pid)
        waiting = cli(db, "delete", "stuck", "--request-id", "stuck")
        after = cli(db, "delete", "kept", "--timeout", "10")
    finally:
        supervisor.stop()
    assert "the store's writer stopped while it ran this request" in failure(waiting)
    assert "deleted session kept" in after.stdout, after.stderr
    assert _sessions(db) == {LIVE}
    assert ("stuck", "failed", supervisor.process.pid) in _requests(db)


def test_an_answer_the_store_refused_for_a_while_is_recorded_once_it_can_be(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    """The write of an answer fails for a while (as under a foreign SQLite lock held past
    the busy timeout; here a foreign trigger refuses it until told otherwise): the
    request ran, and its answer is recorded once the store takes it again."""
    db = _store_with(tmp_path, "doomed")
    logging_first = "import logging; logging.basicConfig(level=logging.WARNING)\n"
    supervisor = Supervisor(_spawn(logging_first + _SUPERVISOR, str(db), spawned=spawned))
    assert supervisor.process.stderr is not None
    logged = LineReader(supervisor.process.stderr)
    foreign = apsw.Connection(str(db))
    foreign.set_busy_timeout(5000)
    foreign.execute(
        "CREATE TABLE hold_answers(x INTEGER) STRICT; INSERT INTO hold_answers VALUES (1);"
        "CREATE TRIGGER hold_answers BEFORE UPDATE OF state ON maintenance_requests "
        "WHEN OLD.state = 'running' AND (SELECT count(*) FROM hold_answers) > 0 "
        "BEGIN SELECT RAISE(ABORT, 'answers held'); END;"
    )
    try:
        asking = start(db, "delete", "doomed", "--request-id", "held")
        spawned.append(asking)
        deadline = time.monotonic() + TIMEOUT
        while not any("answers held" in line for line in logged.take(1, deadline=deadline)):
            assert time.monotonic() < deadline, "the writer never tried to record the answer"
        assert _requests(db) == [("held", "running", supervisor.process.pid)]
        foreign.execute("DELETE FROM hold_answers")  # the store takes answers again
        out, err = asking.communicate(timeout=TIMEOUT)
    finally:
        foreign.execute("DROP TRIGGER IF EXISTS hold_answers; DROP TABLE IF EXISTS hold_answers")
        foreign.close()
        supervisor.stop()
    assert asking.returncode == 0, err
    assert "deleted session doomed" in out
    assert _requests(db) == [("held", "done", supervisor.process.pid)]
    assert _sessions(db) == {LIVE}


class _LockWhenTaken(logging.Handler):
    """On the desk's own log lines: takes a foreign SQLite write lock as the desk starts
    request ``request_id`` (it has claimed it, and runs it next) and releases it when
    the desk says it will run it again."""

    def __init__(self, foreign: apsw.Connection, request_id: str) -> None:
        super().__init__()
        self.foreign = foreign
        self.request_id = request_id
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if line == f"maintenance request {self.request_id}: delete":
            self.foreign.execute("BEGIN IMMEDIATE")
        elif self.foreign.in_transaction and line.startswith(
            f"maintenance request {self.request_id}: run again after"
        ):
            self.foreign.execute("ROLLBACK")


def test_a_request_whose_run_met_a_foreign_lock_is_run_again_and_answered(
    tmp_path: Path,
) -> None:
    """Another connection takes the store's write lock just as the desk starts a request
    and holds it past the busy timeout: the run fails for the lock, the desk runs it
    again once the lock has passed, and the request is answered done (before, it was
    left running for ever, and its command and every re-run of it hung)."""
    db = _store_with(tmp_path, "doomed")
    foreign = apsw.Connection(str(db))
    foreign.set_busy_timeout(int(TIMEOUT * 1000))
    handler = _LockWhenTaken(foreign, "locked")
    desk = logging.getLogger("relaystore.actors.maintenance.desk")
    level = desk.level
    desk.addHandler(handler)
    desk.setLevel(logging.INFO)
    try:
        with EventStore.open(db):
            result = cli_process(db, "delete", "doomed", "--request-id", "locked")
    finally:
        desk.removeHandler(handler)
        desk.setLevel(level)
        if foreign.in_transaction:
            foreign.execute("ROLLBACK")
        foreign.close()
    assert result.returncode == 0, result.stderr
    assert "deleted session doomed" in result.stdout
    assert "maintenance request locked: run again after 1 s" in handler.lines
    assert _requests(db) == [("locked", "done", os.getpid())]
    assert _sessions(db) == set()
