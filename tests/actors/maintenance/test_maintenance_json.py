"""``--json`` of the maintenance commands (issue 34, item 5): ``checkpoint``,
``compact``, ``reproject``, ``prune-log``, ``delete``, ``vacuum`` (and ``new-store-id``)
each print exactly one JSON object (the shape :mod:`relaystore.actors.cli.output` documents), whether the
desk of a live supervisor ran the request or the command opened the store itself; a
refused request is one object too, besides its one line on stderr."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import pytest

from relaystore.actors.maintenance.runs import answered
from relaystore.domain.maintenance import (
    DeleteRequest,
    ReprojectOutcome,
    VacuumOutcome,
    encode_request,
)
from tests.actors.cli_support import cli, failure, ok
from tests.actors.retention_support import SESSION, maintenance_store
from tests.actors.supervisor_support import release, start_holder, start_supervisor

pytestmark = pytest.mark.integration  # writer processes, and the stores' projection workers

ENVELOPE = {"command", "ok", "run_by", "writer_pid", "request_id", "error", "error_type"}
FIELDS = {
    "checkpoint": {"session_id", "through_ordinal", "archive_path", "sha256", "replaced_through"},
    "compact": {"sessions", "tool_calls", "bytes_reclaimed"},
    "reproject": {"behind_only", "sessions", "failures"},
    "prune-log": {"session_id", "pages_pruned", "events_pruned", "log_starts_at"},
    "delete": {"session_id"},
    "vacuum": {
        "path",
        "bytes_before",
        "bytes_after",
        "bytes_reclaimed",
        "pages_before",
        "pages_after",
        "page_size",
        "wal_truncated",
    },
}


def one_object(stdout: str) -> dict[str, Any]:
    """The whole of stdout as exactly one JSON object (json.loads refuses a second)."""
    document = json.loads(stdout)
    assert isinstance(document, dict), stdout
    return document


def _run_each(db: Path, frontier: int, archive: Path) -> dict[str, dict[str, Any]]:
    """Run every maintenance command with --json; each answer, by command."""
    runs: list[tuple[str, ...]] = [
        ("checkpoint", SESSION, "--through", str(frontier), "--archive", str(archive)),
        ("compact", SESSION),
        ("reproject", SESSION),
        ("prune-log", SESSION, "--through", str(frontier)),
        ("delete", "doomed"),
        ("vacuum",),
    ]
    answers: dict[str, dict[str, Any]] = {}
    for args in runs:
        result = ok(db, *args, "--json")
        assert result.stderr == ""
        document = one_object(result.stdout)
        name = args[0]
        assert set(document) == ENVELOPE | FIELDS[name], document
        assert document["command"] == name
        assert document["ok"] is True
        assert document["error"] is None
        assert document["error_type"] is None
        answers[name] = document
    return answers


def _check_what_was_done(answers: dict[str, dict[str, Any]], frontier: int, archive: Path) -> None:
    checkpoint = answers["checkpoint"]
    assert checkpoint["session_id"] == SESSION
    assert checkpoint["through_ordinal"] == frontier
    assert checkpoint["archive_path"] == str(archive.absolute())
    assert checkpoint["sha256"] == hashlib.sha256(b"archive bytes").hexdigest()
    assert checkpoint["replaced_through"] is None
    compact = answers["compact"]
    assert [session["session_id"] for session in compact["sessions"]] == [SESSION]
    assert compact["tool_calls"] == compact["sessions"][0]["tool_calls"] == 1
    assert compact["bytes_reclaimed"] == compact["sessions"][0]["bytes_reclaimed"] > 0
    reproject = answers["reproject"]
    assert reproject["behind_only"] is False
    assert reproject["failures"] == []
    assert [session["session_id"] for session in reproject["sessions"]] == [SESSION]
    assert reproject["sessions"][0]["events_reprojected"] > 0
    pruned = answers["prune-log"]
    assert pruned["session_id"] == SESSION
    assert pruned["pages_pruned"] == 1
    assert answers["delete"]["session_id"] == "doomed"
    vacuum = answers["vacuum"]
    assert vacuum["bytes_before"] == vacuum["pages_before"] * vacuum["page_size"]
    assert vacuum["bytes_after"] == vacuum["pages_after"] * vacuum["page_size"]
    assert vacuum["bytes_reclaimed"] == vacuum["bytes_before"] - vacuum["bytes_after"]
    assert isinstance(vacuum["wal_truncated"], bool)


def test_each_answer_is_one_object_when_a_live_writer_runs_it(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, frontier, archive = maintenance_store(tmp_path)
    supervisor = start_supervisor(db, spawned)
    try:
        supervisor.wait_acked_past(0)
        answers = _run_each(db, frontier, archive)
    finally:
        supervisor.stop()
    _check_what_was_done(answers, frontier, archive)
    for document in answers.values():
        assert document["run_by"] == "writer"
        assert document["writer_pid"] == supervisor.process.pid
        assert isinstance(document["request_id"], str)
        assert document["request_id"]


def test_each_answer_is_one_object_when_the_command_opens_the_store(tmp_path: Path) -> None:
    db, frontier, archive = maintenance_store(tmp_path)
    answers = _run_each(db, frontier, archive)
    _check_what_was_done(answers, frontier, archive)
    for document in answers.values():
        assert document["run_by"] == "command"
        assert document["writer_pid"] is None
        assert document["request_id"] is None


def test_a_named_request_reports_its_id(tmp_path: Path) -> None:
    db, _, _ = maintenance_store(tmp_path)
    document = one_object(ok(db, "delete", "doomed", "--json", "--request-id", "req-1").stdout)
    assert document["request_id"] == "req-1"
    assert document["session_id"] == "doomed"


def test_new_store_id_reports_both_ids_as_one_object(tmp_path: Path) -> None:
    db, _, _ = maintenance_store(tmp_path)
    document = one_object(ok(db, "new-store-id", "--json").stdout)
    assert set(document) == {"command", "path", "old_store_id", "new_store_id"}
    assert document["command"] == "new-store-id"
    assert document["path"] == str(db)
    assert document["old_store_id"] != document["new_store_id"]
    again = one_object(ok(db, "new-store-id", "--json").stdout)
    assert again["old_store_id"] == document["new_store_id"]


def test_a_refused_request_is_one_object_and_one_line(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, _, _ = maintenance_store(tmp_path)
    alone = cli(db, "delete", "nobody", "--json")
    supervisor = start_supervisor(db, spawned)
    try:
        beside = cli(db, "delete", "nobody", "--json")
    finally:
        supervisor.stop()
    read = failure(cli(db, "show", "nobody"))  # the one wording of a session the store lacks
    assert read == f"relaystore: {db}: no session nobody in this store"
    for result, run_by in ((alone, "command"), (beside, "writer")):
        assert failure(result) == read
        document = one_object(result.stdout)
        assert set(document) == ENVELOPE
        assert document["ok"] is False
        assert document["run_by"] == run_by
        assert document["error_type"] == "UnknownSession"
        assert document["error"] == "no session nobody in this store"


def test_the_text_is_worded_from_the_outcome() -> None:
    vacuumed = answered(
        VacuumOutcome(
            path="s.sqlite3",
            bytes_before=8192,
            bytes_after=4096,
            bytes_reclaimed=4096,
            pages_before=2,
            pages_after=1,
            page_size=4096,
        )
    )
    assert vacuumed.out == [
        "vacuumed s.sqlite3: 8192 bytes before, 4096 after, 4096 reclaimed "
        "(2 pages of 4096 bytes before, 1 after)"
    ]
    nothing = answered(ReprojectOutcome(behind_only=True, sessions=[], failures=[]))
    assert nothing.out == ["no session is behind its relay log"]
    assert not nothing.failed
    failed = answered(ReprojectOutcome(behind_only=False, sessions=[], failures=["no log"]))
    assert failed.out == []
    assert failed.err == ["no log"]
    assert failed.failed


def _dead_pid() -> int:
    """The id of a process that has ended."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid


def _refused_object(result: subprocess.CompletedProcess[str], error_type: str) -> str:
    """A refusal the command could not get an answer for: one line on stderr, exit 1, and
    one JSON object on stdout naming the error; returns the object's error."""
    line = failure(result)
    document = one_object(result.stdout)
    assert set(document) == ENVELOPE, document
    assert document["ok"] is False
    assert document["command"] == "delete"
    assert document["error_type"] == error_type
    assert document["error"] in line
    return str(document["error"])


def test_a_request_nobody_answers_is_one_object_naming_its_error(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, _, _ = maintenance_store(tmp_path)
    taker = start_holder(db, spawned, says_requests=True)  # says it takes requests; never does
    try:
        unanswered = cli(db, "delete", "doomed", "--timeout", "0.5", "--json")
    finally:
        release(taker)
    refuser = start_holder(db, spawned, says_requests=False)
    try:
        locked = cli(db, "delete", "doomed", "--json")
    finally:
        release(refuser)
    assert "no writer took maintenance request" in _refused_object(unanswered, "RequestUnanswered")
    assert "takes no maintenance requests" in _refused_object(locked, "StoreLocked")
    assert one_object(unanswered.stdout)["request_id"] is not None
    assert one_object(locked.stdout)["writer_pid"] == refuser.pid


def test_a_writer_that_died_holding_the_request_is_one_object(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, _, _ = maintenance_store(tmp_path)
    holder = start_holder(db, spawned, says_requests=True)
    try:
        # A request a process took and ended without answering (the holder lets no desk run).
        dead = _dead_pid()
        connection = apsw.Connection(str(db))
        connection.set_busy_timeout(5000)
        connection.execute(
            "INSERT INTO maintenance_requests(request_id, kind, request_json, state, "
            "requested_at_ms, requester_pid, taken_by_pid) VALUES ('r-dead', 'delete', ?, "
            "'running', 0, ?, ?)",
            (encode_request(DeleteRequest(session_id="doomed")), os.getpid(), dead),
        )
        connection.close()
        result = cli(db, "delete", "doomed", "--request-id", "r-dead", "--json")
    finally:
        release(holder)
    assert f"process {dead} took maintenance request r-dead" in _refused_object(
        result, "WriterStopped"
    )
    assert one_object(result.stdout)["request_id"] == "r-dead"
