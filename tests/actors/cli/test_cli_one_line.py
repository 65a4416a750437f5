"""One coherent command line, as a user meets it in a shell: help on every option, one
shape of ``--json``, ``--db`` refused where no store is used, ``audit`` in any order,
``--wait``, ``-o text``, and a follow that ends when its reader does."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystore.actors import cli as cli_module
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import (
    ROOT,
    TIMEOUT,
    LineReader,
    cli,
    command,
    failure,
    ok,
    run_command,
    start,
)


def walk(
    parser: argparse.ArgumentParser, name: str = "relaystore"
) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, sub in action.choices.items():
                yield from walk(sub, f"{name} {child}")
        else:
            yield name, action


def test_every_option_and_argument_has_help() -> None:
    missing = [
        f"{where}: {'/'.join(action.option_strings) or action.dest}"
        for where, action in walk(cli_module._parser())
        if not (action.help or "").strip()
    ]
    assert missing == []


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    """A store holding session-1 (two prompt turns), and its worker root."""
    journal = JournalBuilder()
    journal.prompt_turn("hello there")
    journal.prompt_turn("and again")
    root = tmp_path / "worker"
    journal.write_worker_root(root, "session-1")
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(root))
    return db, root


# -- --json: JSON lines for lists and streams, one object for a report ----------------


def test_every_json_output_is_json_lines_or_one_object(
    store: tuple[Path, Path], tmp_path: Path
) -> None:
    db, root = store
    lines = {
        "sessions": ok(db, "sessions", "--json").stdout,
        "events": ok(db, "events", "--json").stdout,
        "transcript": ok(db, "transcript", "session-1", "--json").stdout,
        "replay": ok(db, "replay", str(root), "--json").stdout,
    }
    for name, text in lines.items():
        parsed = [json.loads(line) for line in text.splitlines()]
        assert parsed, name
        assert all(isinstance(item, dict) for item in parsed), name
    assert [item["id"] for item in map(json.loads, lines["sessions"].splitlines())] == ["session-1"]
    assert json.loads(lines["replay"])["session_id"] == "session-1"
    reports = {
        "stats": ok(db, "stats", "--json").stdout,
        "show": ok(db, "show", "session-1", "--json").stdout,
        "history": ok(db, "history", "session-1", "--json").stdout,
        "usage": ok(db, "usage", "session-1", "--json").stdout,
        "audit": ok(db, "audit", "--json").stdout,
        "verify": ok(db, "verify", str(root), "--json").stdout,
        "backup": ok(db, "backup", str(tmp_path / "copy.sqlite3"), "--json").stdout,
    }
    for name, text in reports.items():
        assert isinstance(json.loads(text), dict), name
    assert json.loads(reports["backup"])["path"].endswith("copy.sqlite3")


def test_counts_agree_with_their_number(store: tuple[Path, Path], tmp_path: Path) -> None:
    db, _ = store
    single = tmp_path / "single.jsonl"
    one = JournalBuilder()
    one.add({"type": "notice", "data": {"message": "just one"}})
    one.write(single)
    assert ok(db, "verify", str(single)).stdout.splitlines()[-1] == (
        "1 record, 1 valid digest, 0 problems"
    )
    other = tmp_path / "other.sqlite3"
    replayed = ok(other, "replay", str(single)).stderr.splitlines()
    assert replayed[0].endswith(
        ", 0 API events written, frontier 1 (" + one.frontier.digest[:12] + ")"
    )
    assert replayed[-1].startswith("replayed 1 event: 1 applied, 0 already applied, ")
    assert replayed[-1].endswith(", 1 session)")
    assert ok(db, "compact", "session-1").stdout.splitlines()[-1] == (
        "compacted 0 tool calls in 1 session, 0 bytes reclaimed"
    )


# -- --db where no store is used ----------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize(
    "args",
    [
        ("--db", "x.sqlite3", "verify", "journal.jsonl"),
        ("verify", "journal.jsonl", "--db", "x.sqlite3"),
        ("completion", "bash", "--db", "x.sqlite3"),
        ("--db", "x.sqlite3", "fleet", "events", "--nats", "nats://127.0.0.1:1"),
        ("fleet", "events", "--nats", "nats://127.0.0.1:1", "--db", "x.sqlite3"),
    ],
)
def test_db_is_refused_where_no_store_is_used(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run_command([*command(tmp_path / "unused", "verify")[:3], *args], tmp_path)
    assert result.returncode == 2, result.stderr
    name = "verify" if "verify" in args else "completion" if "completion" in args else "fleet"
    assert f"--db is not used by {name}, which" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "x.sqlite3").exists()


# -- audit in any order --------------------------------------------------------------------


def test_audit_takes_sessions_before_or_after_the_journals(store: tuple[Path, Path]) -> None:
    db, root = store
    first = ok(db, "audit", "session-1", "--journals", str(root)).stdout
    second = ok(db, "audit", "--journals", str(root), "session-1").stdout
    assert first == second
    assert first.startswith("session-1: matches ")
    unknown = cli(db, "audit", "--journals", str(root), "nobody")
    assert unknown.returncode == 1
    assert "nobody: cannot audit (no session nobody in this store)" in unknown.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("show", "nobody"),
        ("transcript", "nobody"),
        ("history", "nobody"),
        ("usage", "nobody"),
        ("events", "--session", "nobody"),
        ("delete", "nobody"),
        ("compact", "nobody"),
        ("prune-log", "nobody", "--through", "1"),
        ("checkpoint", "nobody", "--through", "1", "--archive", str(ROOT / "README.md")),
    ],
    ids=lambda args: args[0],
)
def test_a_session_the_store_lacks_is_one_sentence_in_every_command(
    store: tuple[Path, Path], args: tuple[str, ...]
) -> None:
    """Reads, the feed and the maintenance commands word an unknown session alike."""
    db, _ = store
    assert failure(cli(db, *args)) == f"relaystore: {db}: no session nobody in this store"


@pytest.mark.integration
def test_reproject_and_audit_word_a_session_the_store_lacks_alike(
    store: tuple[Path, Path],
) -> None:
    db, _ = store
    assert failure(cli(db, "reproject", "nobody")) == "relaystore: no session nobody in this store"
    unknown = cli(db, "audit", "nobody")
    assert unknown.returncode == 1
    assert "(no session nobody in this store)" in unknown.stdout


# -- following ------------------------------------------------------------------------------


def follow(
    spawned: list[subprocess.Popen[str]], db: Path, *args: str
) -> tuple[subprocess.Popen[str], LineReader]:
    process = start(db, *args)
    spawned.append(process)
    assert process.stdout is not None
    return process, LineReader(process.stdout)


def stop(process: subprocess.Popen[str], reader: LineReader) -> str:
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=TIMEOUT) == 130
    reader.join()
    assert process.stderr is not None
    err = process.stderr.read()
    assert "Traceback" not in err
    return err


@pytest.mark.integration
def test_follow_can_wait_for_a_session_that_does_not_exist_yet(
    store: tuple[Path, Path], tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, _ = store
    assert failure(cli(db, "events", "--session", "later", "--follow")) == (
        f"relaystore: {db}: no session later in this store"
    )
    events, event_lines = follow(spawned, db, "events", "--session", "later", "--follow", "--wait")
    items, item_lines = follow(
        spawned, db, "transcript", "later", "--follow", "--wait", "-o", "text"
    )
    journal = JournalBuilder()
    journal.prompt_turn("arrives later")
    root = tmp_path / "later-root"
    journal.write_worker_root(root, "later")
    deadline = time.monotonic() + TIMEOUT
    # Both are waiting (each said so) before the session is made.
    assert events.stderr is not None
    assert items.stderr is not None
    assert "waiting for session later" in events.stderr.readline()
    assert "waiting for session later" in items.stderr.readline()
    ok(db, "replay", str(root))
    got = [json.loads(line) for line in event_lines.take(2, deadline=deadline)]
    assert [event["type"] for event in got] == ["turn_started", "turn_ended"]
    assert {event["session_id"] for event in got} == {"later"}
    shown = item_lines.take(2, deadline=deadline)
    assert len(shown) == 2, shown
    assert " user: arrives later" in shown[0]
    stop(events, event_lines)
    stop(items, item_lines)


def test_text_output_is_one_readable_line_per_event_and_item(store: tuple[Path, Path]) -> None:
    db, _ = store
    wire = ok(db, "events").stdout.splitlines()
    text = ok(db, "events", "-o", "text").stdout.splitlines()
    assert len(text) == len(wire) == 4
    first = json.loads(wire[0])
    assert text[0].startswith(f"{first['seq']}  ")
    assert "  session-1  turn_started  " in text[0]
    items = ok(db, "transcript", "session-1", "-o", "text").stdout.splitlines()
    assert [line.split("  ", 2)[2] for line in items] == [
        "user: hello there",
        "agent: " + items[1].split("agent: ", 1)[1],
        "user: and again",
        "agent: " + items[3].split("agent: ", 1)[1],
    ]
    with pytest.raises(json.JSONDecodeError):
        json.loads(text[0])


@pytest.mark.integration
def test_events_follow_into_head_ends_when_head_does(store: tuple[Path, Path]) -> None:
    db, _ = store
    started = time.monotonic()
    pipeline = 'set -o pipefail; "$@" | head -n 1'
    result = run_command(["bash", "-c", pipeline, "pipe", *command(db, "events", "--follow")], ROOT)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 1
    assert "Traceback" not in result.stderr
    assert "BrokenPipe" not in result.stderr
    assert time.monotonic() - started < 15  # it ended on its own, not at the timeout
