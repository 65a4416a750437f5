"""The ``relaystore`` command as an operator runs it: subprocesses, real files.

What an operator relies on beyond replaying and reading (``test_cli.py``): ``--version``;
``--db`` before or after the command; every bad option value is a usage error (exit 2,
argparse's usage line), bad input or store one line (exit 1), never a traceback; a folder
of worker roots replays as its roots, with a progress bar of known total and a summary
line per session; ``stats --json`` and ``verify --json`` for scripts; ``backup`` while a
writer runs; ``vacuum`` after deletes; ``serve`` without the ``http`` extra says how to
get it; ``completion`` prints a shell script.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relaystore
from relaystore import DeleteSession, EventStore, LoadState, SaveSession
from relaystore.domain.relay import RelayEvent, encode_relay_event
from relaystore.storage.connection import open_reader
from relaystore.storage.stats import load_stats
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import (
    ENV,
    SUMMARY,
    TIMEOUT,
    cli,
    cli_process,
    command,
    events,
    failure,
    latest_seq,
    ok,
    summary,
)
from tests.actors.journal_factory import conversation, write_journal

SESSION_LINE = re.compile(
    r"^session (\S+): (\d+) read, (\d+) applied, (\d+) already applied, "
    r"(\d+) API events? written, frontier (\d+|none)"
)


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``relaystore ARGS`` with no ``--db`` put in front."""
    return subprocess.run(
        [sys.executable, "-m", "relaystore.actors.cli", *args],
        cwd=cwd,
        env=env or ENV,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT,
        check=False,
    )


def session_lines(stderr: str) -> dict[str, tuple[int, ...]]:
    """The per-session summary: session id -> read, applied, already, written, frontier."""
    found: dict[str, tuple[int, ...]] = {}
    for line in stderr.splitlines():
        match = SESSION_LINE.match(line)
        if match is not None:
            frontier = -1 if match[6] == "none" else int(match[6])
            found[match[1]] = (*(int(match[n]) for n in range(2, 6)), frontier)
    return found


def usage_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "usage:" in result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


# -- worker roots ---------------------------------------------------------------------------

ROOTS = {"alpha": 7, "beta": 3, "gamma": 12}
"""Session id -> prompt turns (four relay events and two API events each)."""


def build_roots(folder: Path) -> dict[str, int]:
    """A folder of worker roots (one sealed into segments), with clutter beside them.

    Returns session id -> the journal's last ordinal.
    """
    last: dict[str, int] = {}
    for session_id, turns in ROOTS.items():
        journal = JournalBuilder()
        for turn in range(turns):
            journal.prompt_turn(f"question {turn} of {session_id}")
        # The worker root's folder name is not the session id: relay-state.json names it.
        journal.write_worker_root(
            folder / f"worker-{session_id}",
            session_id,
            seal_every=10 if session_id == "gamma" else None,
        )
        last[session_id] = len(journal.events)
    (folder / "notes.txt").write_text("not a worker root\n")
    (folder / "empty-folder").mkdir()
    return last


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    folder = tmp_path / "workers"
    folder.mkdir()
    return folder, build_roots(folder)


# -- --version, --db -----------------------------------------------------------------------


@pytest.mark.integration
def test_version_prints_the_package_version(tmp_path: Path) -> None:
    result = run("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"relaystore {relaystore.__version__}"
    assert re.fullmatch(r"relaystore \d+\.\d+\.\d+\S*", result.stdout.strip())
    assert not list(tmp_path.iterdir())  # no store made


@pytest.mark.integration
def test_db_is_accepted_after_the_command(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, _ = roots
    db = tmp_path / "after.sqlite3"
    result = run("replay", str(folder), "--db", str(db), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert db.exists()
    assert not (tmp_path / "relaystore.sqlite3").exists()
    feed = run("events", "--db", str(db), cwd=tmp_path)
    assert feed.returncode == 0, feed.stderr
    assert feed.stdout.splitlines() == events(db)
    assert len(feed.stdout.splitlines()) == 2 * sum(ROOTS.values())
    # Given twice, the one after the command wins; $RELAYSTORE_DB yields to both.
    other = tmp_path / "other.sqlite3"
    shutil.copyfile(db, other)
    env = {**ENV, "RELAYSTORE_DB": str(tmp_path / "missing.sqlite3")}
    both = run("--db", str(tmp_path / "missing.sqlite3"), "stats", "--db", str(other), cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    by_env = run("stats", "--json", cwd=tmp_path, env={**ENV, "RELAYSTORE_DB": str(other)})
    assert json.loads(by_env.stdout)["sessions"] == len(ROOTS)
    missing = run("stats", cwd=tmp_path, env=env)
    assert "missing.sqlite3" in failure(missing)


# -- usage errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("events", "--after", "-5"),
        ("events", "--after", "abc"),
        ("events", "--after", "1.5"),
        ("events", "--after", str(2**63)),
        ("events", "--limit", "-1"),
        ("events", "--limit", "0"),
        ("events", "--limit", "many"),
        ("events", "--session", "not an id"),
        ("events", "--workspace", ""),
        ("show", "../etc"),
        ("replay", "x.jsonl", "--session", "a/b"),
        ("verify", "x.jsonl", "--session", ""),
        ("serve", "--port", "70000"),
        ("serve", "--port", "-1"),
        ("serve", "--port", "http"),
        ("serve", "--keepalive", "0"),
        ("serve", "--keepalive", "-1"),
        ("serve", "--keepalive", "nan"),
        ("serve", "--host", ""),
        ("backup",),
        ("completion", "nushell"),
        ("--db", "", "stats"),
        ("stats", "--frobnicate"),
    ],
    ids=lambda args: " ".join(args) or "empty",
)
def test_each_invalid_option_value_is_a_usage_error(args: tuple[str, ...], tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    stderr = usage_error(cli(db, *args))
    assert "error: " in stderr
    assert not db.exists()


def test_a_bad_option_value_names_the_option_and_the_value(tmp_path: Path) -> None:
    stderr = usage_error(cli(tmp_path / "s.sqlite3", "events", "--after", "-5"))
    assert "argument --after" in stderr
    assert "-5" in stderr
    stderr = usage_error(cli(tmp_path / "s.sqlite3", "serve", "--port", "70000"))
    assert "argument --port" in stderr
    assert "70000" in stderr


# -- bad input or store: exit 1, one line ------------------------------------------------------


def test_a_foreign_file_is_refused_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    db.write_text("these are my notes, not a store\n")
    for args in (("events",), ("stats",), ("stats", "--json"), ("backup", "copy.sqlite3")):
        assert failure(cli(db, *args)).startswith("relaystore: ")
    assert db.read_text() == "these are my notes, not a store\n"


def test_serve_and_vacuum_refuse_a_missing_store(tmp_path: Path) -> None:
    db = tmp_path / "missing.sqlite3"
    for args in (("serve",), ("vacuum",), ("backup", "copy.sqlite3")):
        assert str(db) in failure(cli(db, *args))
    assert not db.exists()


@pytest.mark.integration
def test_serve_without_the_http_extra_says_what_to_install(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session()))
    code = (
        "import sys; sys.modules['uvicorn'] = None; sys.modules['sse_starlette'] = None\n"
        "from relaystore.actors.cli import main\n"
        f"sys.exit(main(['--db', {str(db)!r}, 'serve']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    line = failure(result)
    assert 'pip install "relaystore[http]"' in line
    assert "uvicorn" in line


def test_a_backup_into_a_missing_folder_names_it(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session()))
    line = failure(cli(db, "backup", str(tmp_path / "no-such-folder" / "copy.sqlite3")))
    assert "no-such-folder" in line


# -- replay of a folder of worker roots ---------------------------------------------------------


def test_a_folder_of_worker_roots_replays_each_root_with_a_summary_per_session(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, last = roots
    db = tmp_path / "store.sqlite3"
    result = ok(db, "replay", str(folder))

    per_session = session_lines(result.stderr)
    assert list(per_session) == sorted(last)  # the roots in name order, one line each
    for session_id, (read, applied, already, written, frontier) in per_session.items():
        assert (read, applied, already) == (last[session_id], last[session_id], 0)
        assert written == 2 * ROOTS[session_id]  # turn_started and turn_ended per turn
        assert frontier == last[session_id]
    total = sum(last.values())
    assert summary(result.stderr) == (total, total, 0, 2 * sum(ROOTS.values()))
    assert SUMMARY.search(result.stderr.splitlines()[-1])  # the totals line comes last
    assert "3 sessions" in result.stderr.splitlines()[-1]
    assert "ev/s" not in result.stderr  # no progress bar off a terminal unless asked
    stats = json.loads(ok(db, "stats", "--json").stdout)
    assert stats["sessions"] == len(ROOTS)

    # A second replay reads nothing and says where each session stands.
    again = ok(db, "replay", str(folder))
    for session_id, figures in session_lines(again.stderr).items():
        assert figures == (0, 0, 0, 0, last[session_id])
    assert summary(again.stderr) == (0, 0, 0, 0)

    # Verify takes the same folder.
    report = json.loads(ok(db, "verify", "--json", str(folder)).stdout)
    assert (report["records"], report["valid_digests"], report["problems"]) == (total, total, [])
    assert {name: cursor["ordinal"] for name, cursor in report["frontiers"].items()} == last


def test_a_folder_of_worker_roots_with_one_session_id_is_refused(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, _ = roots
    db = tmp_path / "store.sqlite3"
    line = failure(cli(db, "replay", str(folder), "--session", "merged"))
    assert "--session" in line
    assert not db.exists()


def test_a_folder_holding_no_worker_root_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "nothing-here"
    (folder / "sub").mkdir(parents=True)
    line = failure(cli(tmp_path / "store.sqlite3", "replay", str(folder)))
    assert str(folder) in line


def test_one_progress_bar_counts_sessions_and_events_across_journals(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, last = roots
    db = tmp_path / "store.sqlite3"
    result = ok(db, "replay", str(folder), "--progress")
    total = sum(last.values())
    assert "3/3 sessions: 100%" in result.stderr
    assert f"{total}/{total}" in result.stderr
    for session_id, session_total in last.items():
        assert f"{session_id}: 100%" not in result.stderr  # one bar, not one per journal
        assert f" {session_total}/{session_total} " not in result.stderr
    # Each session's line comes as its journal is done, between the bar's steps.
    order = [
        result.stderr.index(mark)
        for mark in (
            "session alpha:",
            "2/3 sessions",
            "session beta:",
            "3/3 sessions",
            "session gamma:",
        )
    ]
    assert order == sorted(order), result.stderr
    assert "Traceback" not in result.stderr
    assert summary(result.stderr)[0] == total


def test_the_progress_total_of_a_resumed_replay_is_what_is_left(tmp_path: Path) -> None:
    journal = JournalBuilder()
    for turn in range(40):
        journal.prompt_turn(f"turn {turn}")  # 160 events
    root = tmp_path / "worker"
    db = tmp_path / "store.sqlite3"
    lines = journal.lines()
    # The worker has written 100 events so far; relay-state.json says where it stands.
    journal.write_worker_root(root, "resumed")
    active = root / "relay-journal" / "active.jsonl"
    whole = active.read_bytes()
    active.write_bytes(b"".join(lines[:100]))
    first = ok(db, "replay", str(root), "--progress")
    assert "100/100" in first.stderr
    active.write_bytes(whole)
    second = ok(db, "replay", str(root), "--progress")
    assert "60/60" in second.stderr
    assert session_lines(second.stderr)["resumed"][:2] == (60, 60)
    # The active journal given as a file takes its total from relay-state.json.
    other = tmp_path / "other.sqlite3"
    as_file = ok(other, "replay", str(active), "--progress")
    assert "160/160" in as_file.stderr


def test_a_progress_bar_can_be_turned_off(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, _ = roots
    result = ok(tmp_path / "store.sqlite3", "replay", str(folder), "--no-progress")
    assert "%|" not in result.stderr


# -- stats --json, verify --json -----------------------------------------------------------------


def test_stats_json_is_one_object_with_the_stores_figures(
    tmp_path: Path, roots: tuple[Path, dict[str, int]]
) -> None:
    folder, _ = roots
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(folder))
    document = json.loads(ok(db, "stats", "--json").stdout)
    connection = open_reader(db)
    try:
        stats = load_stats(connection)
    finally:
        connection.close()
    assert document == {
        "schema_revision": stats.revision,
        "store_id": stats.store_id,
        "sessions": len(ROOTS),
        "latest_seq": 2 * sum(ROOTS.values()),
        "events_by_kind": {
            "turn_ended": sum(ROOTS.values()),
            "turn_started": sum(ROOTS.values()),
        },
        "projection_behind": {},
    }
    assert isinstance(document["schema_revision"], int)
    assert sum(document["events_by_kind"].values()) == document["latest_seq"]


def test_verify_json_lists_counts_and_every_problem(tmp_path: Path) -> None:
    good = conversation(30)
    lines = [encode_relay_event(event) for event in good]
    lines[9] = lines[9].replace(good[9].digest.encode(), b"0123abcd" * 8)  # ordinal 10
    del lines[20]  # ordinal 21 is missing
    lines.insert(4, b"not json")  # line 5; ordinal n now sits on line n + 1
    journal = write_journal(tmp_path / "many.jsonl", b"\n".join(lines) + b"\n")
    result = cli(tmp_path / "unused.sqlite3", "verify", "--json", str(journal))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert (report["records"], report["valid_digests"]) == (29, 28)
    problems = report["problems"]
    assert report["problem_count"] == len(problems) == 3
    assert [set(problem) for problem in problems] == [
        {"file", "line", "ordinal", "fault", "message"}
    ] * 3
    assert {problem["file"] for problem in problems} == {str(journal)}
    assert [(p["line"], p["ordinal"], p["fault"]) for p in problems] == [
        (5, None, "bad_line"),
        (11, 10, "bad_digest"),
        (22, 22, "gap"),
    ]
    assert all(problem["message"] for problem in problems)
    assert not (tmp_path / "unused.sqlite3").exists()

    clean = write_journal(tmp_path / "clean.jsonl", _clean(good))
    passed = json.loads(ok(tmp_path / "unused.sqlite3", "verify", "--json", str(clean)).stdout)
    assert passed["ok"] is True
    assert (passed["records"], passed["problems"]) == (30, [])
    assert passed["frontiers"]["clean"]["ordinal"] == 30


def _clean(events: list[RelayEvent]) -> bytes:
    return b"".join(encode_relay_event(event) + b"\n" for event in events)


# -- backup while a writer runs, vacuum after deletes ---------------------------------------


LONG_TURNS = 5_000  # 20,000 relay events: a replay that runs for a few seconds


@pytest.mark.integration
def test_a_backup_taken_while_a_replay_writes_is_a_prefix_of_the_feed(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    journal = write_journal(tmp_path / "long.jsonl", _clean(conversation(4 * LONG_TURNS)))
    db = tmp_path / "live.sqlite3"
    writer = subprocess.Popen(
        command(db, "replay", str(journal), "--session", "long"),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(writer)
    deadline = time.monotonic() + TIMEOUT
    while latest_seq(db) < 200 and writer.poll() is None:
        assert time.monotonic() < deadline, "the replay committed nothing in time"
        time.sleep(0.01)
    assert writer.poll() is None, "the replay ended before the backup started"

    copy = tmp_path / "copy.sqlite3"
    backup = ok(db, "backup", str(copy))
    match = re.search(r"backed up .* to (.+): (\d+) pages, latest seq (\d+)", backup.stdout)
    assert match is not None, backup.stdout
    assert match[1] == str(copy)
    copied_seq = int(match[3])
    assert copied_seq >= 200

    _, writer_err = writer.communicate(timeout=TIMEOUT)
    assert writer.returncode == 0, writer_err
    assert "Traceback" not in writer_err
    feed = events(db)
    copied = events(copy)
    assert len(copied) == copied_seq
    assert copied == feed[: len(copied)]
    assert 0 < len(copied) <= len(feed)
    # The copy is a whole store: a replay continues it to the same feed.
    ok(copy, "replay", str(journal), "--session", "long")
    assert events(copy) == feed


def test_vacuum_reclaims_the_pages_deletes_left(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    for session_id, turns in (("kept", 5), ("deleted", 1500)):
        journal = JournalBuilder()
        for turn in range(turns):
            journal.prompt_turn(f"turn {turn}", chunks=("x" * 200,))
        journal.write_worker_root(tmp_path / session_id, session_id)
        ok(db, "replay", str(tmp_path / session_id))
    kept = events(db, "--session", "kept")
    with EventStore.open(db) as store:
        store.ask(DeleteSession(session_id="deleted"))

    size = db.stat().st_size
    first = ok(db, "vacuum").stdout
    line = r"vacuumed \S+: (\d+) bytes? before, (\d+) after, (\d+) reclaimed \((\d+) pages? of (\d+) bytes before, (\d+) after\)\n"
    found = re.fullmatch(line, first)
    assert found is not None, first
    before, after, reclaimed, pages_before, page_size, pages_after = map(int, found.groups())
    assert pages_after < pages_before
    assert before == pages_before * page_size
    assert reclaimed == before - after
    assert before <= size  # the file held at least the pages it had
    again = ok(db, "vacuum").stdout
    assert re.fullmatch(line, again), again
    assert events(db) == kept
    assert json.loads(ok(db, "stats", "--json").stdout)["sessions"] == 1


@pytest.mark.integration
def test_vacuum_of_a_store_another_writer_holds_is_run_by_that_writer(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:  # this process's store takes the request
        store.ask(SaveSession(record=example_session()))
        result = cli_process(db, "vacuum")  # another process: the request crosses
        assert result.returncode == 0, result.stderr
        assert "bytes before" in result.stdout
        assert store.ask(LoadState()).sessions  # and it serves on


# -- interrupts and pipes ----------------------------------------------------------------------


@pytest.mark.integration
def test_ctrl_c_during_a_replay_exits_130_quietly_and_a_rerun_finishes(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    journal = write_journal(tmp_path / "long.jsonl", _clean(conversation(4 * LONG_TURNS)))
    db = tmp_path / "store.sqlite3"
    process = subprocess.Popen(
        command(db, "replay", str(journal), "--session", "long"),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    deadline = time.monotonic() + TIMEOUT
    while latest_seq(db) < 100 and process.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode in (130, 0), err  # 0: it finished before the signal landed
    assert "Traceback" not in err
    assert out == ""
    read, applied, already, _ = summary(ok(db, "replay", str(journal), "--session", "long").stderr)
    assert read == applied + already
    assert json.loads(ok(db, "stats", "--json").stdout)["sessions"] == 1


@pytest.mark.integration
def test_events_into_a_closed_pipe_stop_quietly(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    journal = JournalBuilder()
    for turn in range(3000):
        journal.prompt_turn(f"turn {turn}")
    journal.write_worker_root(tmp_path / "worker", "piped")
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(tmp_path / "worker"))
    process = subprocess.Popen(
        command(db, "events"),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().startswith('{"seq":1,')
    process.stdout.close()  # what `| head -1` does
    assert process.wait(timeout=TIMEOUT) == 0
    assert process.stderr is not None
    err = process.stderr.read()
    assert "Traceback" not in err
    assert "Exception ignored" not in err


# -- completion ---------------------------------------------------------------------------------


@pytest.mark.integration
def test_completion_prints_a_bash_script_naming_every_command(tmp_path: Path) -> None:
    result = run("completion", "bash", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("replay", "verify", "events", "show", "stats", "serve", "backup", "vacuum"):
        assert name in result.stdout
    assert "--keepalive" in result.stdout
    bash = shutil.which("bash")
    if bash is not None:
        checked = subprocess.run(
            [bash, "-n"], input=result.stdout, text=True, capture_output=True, check=False
        )
        assert checked.returncode == 0, checked.stderr
