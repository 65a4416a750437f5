"""``relaystore replay`` and ``verify`` as a person at a terminal meets them: files given
one by one in any order, a record that says what the journal says, and Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from relaystore.domain.errors import StoreError
from relaystore.domain.relay import AgentInitialized
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
)
from relaystore.storage.connection import open_reader
from relaystore.storage.materialized import load_materialized_session
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import (
    TIMEOUT,
    LineReader,
    cli as run_cli,
    frontier,
    ok,
    start,
    summary,
)


def sealed_root(folder: Path, session_id: str, turns: int = 12) -> tuple[Path, JournalBuilder]:
    journal = JournalBuilder()
    for turn in range(turns):
        journal.prompt_turn(f"turn {turn}")
    root = folder / session_id
    journal.write_worker_root(root, session_id, seal_every=10)
    return root, journal


# -- the files of one session, in any order --------------------------------------------


def test_a_glob_of_a_journal_folder_replays_and_verifies_in_ordinal_order(
    tmp_path: Path,
) -> None:
    root, journal = sealed_root(tmp_path / "workers", "globbed")
    active, *segments = sorted((root / "relay-journal").iterdir())
    assert active.name == "active.jsonl"
    assert len(segments) > 2
    files = [active, *reversed(segments)]  # the newest first: no order a reader could use
    # Leftovers a glob picks up that the folder never reads.
    (root / "relay-journal" / "active.jsonl.new").write_bytes(b"half written\n")
    (root / "relay-journal" / "stale-active-1.jsonl").write_bytes(b"{not a journal\n")
    given = [*map(str, files), str(root / "relay-journal" / "active.jsonl.new")]
    given.insert(1, str(root / "relay-journal" / "stale-active-1.jsonl"))

    verified = json.loads(ok(tmp_path / "unused.sqlite3", "verify", "--json", *given).stdout)
    assert verified["ok"] is True, verified["problems"]
    assert verified["records"] == len(journal.events)
    assert verified["frontiers"]["globbed"]["ordinal"] == len(journal.events)

    db = tmp_path / "store.sqlite3"
    assert summary(ok(db, "replay", *given).stderr)[:2] == (len(journal.events),) * 2
    assert frontier(db, "globbed") == (journal.frontier.ordinal, journal.frontier.digest)


def test_single_files_of_one_session_are_read_in_ordinal_order(tmp_path: Path) -> None:
    journal = JournalBuilder()
    for turn in range(6):
        journal.prompt_turn(f"turn {turn}")
    lines = journal.lines()
    later = tmp_path / "later" / "split.jsonl"
    earlier = tmp_path / "earlier" / "split.jsonl"
    later.parent.mkdir()
    earlier.parent.mkdir()
    later.write_bytes(b"".join(lines[10:]))
    earlier.write_bytes(b"".join(lines[:12]))  # two lines of overlap, as a crash leaves
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(later), str(earlier))
    assert frontier(db, "split")[0] == len(lines)
    verified = json.loads(ok(db, "verify", "--json", str(later), str(earlier)).stdout)
    assert verified["ok"] is True, verified["problems"]


# -- the record says what the journal says ----------------------------------------------


def runtime(harness: HarnessKind) -> AgentInitialized:
    identity = RuntimeIdentity(
        harness=harness,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="provider", version="1")],
    )
    identity.refresh_id()
    return AgentInitialized.of(
        protocol_version=1, capabilities={}, agent_info=None, runtime=identity
    )


def listed(db: Path, session_id: str) -> dict[str, object]:
    lines = ok(db, "sessions", "--json").stdout.splitlines()
    (found,) = [session for session in map(json.loads, lines) if session["id"] == session_id]
    return dict(found)


def test_a_replayed_sessions_record_takes_harness_and_times_from_its_journal(
    tmp_path: Path,
) -> None:
    journal = JournalBuilder(start_ms=1_700_000_000_123)  # 2023-11-14T22:13:20.123Z
    journal.add(runtime(HarnessKind.CLAUDE))
    journal.prompt_turn("hello")
    path = tmp_path / "told.jsonl"
    journal.write(path)
    db = tmp_path / "store.sqlite3"
    ok(db, "replay", str(path))
    session = listed(db, "told")
    assert session["harness_kind"] == "claude"
    assert session["created_at"] == "2023-11-14T22:13:20.123Z"
    assert session["updated_at"] == "2023-11-14T22:13:24.123Z"  # its fifth event, 1 s apart

    # A later replay of the grown journal moves updated_at on, and a newer receipt wins.
    journal.add(runtime(HarnessKind.KIMI), at_ms=1_800_000_000_000)
    journal.write(path)
    ok(db, "replay", str(path))
    session = listed(db, "told")
    assert session["harness_kind"] == "kimi"
    assert session["created_at"] == "2023-11-14T22:13:20.123Z"
    assert session["updated_at"] == "2027-01-15T08:00:00.000Z"


# -- Ctrl-C ------------------------------------------------------------------------------


@pytest.mark.integration
def test_ctrl_c_says_how_far_the_replay_got_and_keeps_what_was_committed(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    folder = tmp_path / "workers"
    sessions = [f"s{index:02d}" for index in range(24)]
    for session_id in sessions:
        sealed_root(folder, session_id, turns=60)
    db = tmp_path / "store.sqlite3"
    process = start(db, "replay", str(folder), "--projection", "thread", stdout=subprocess.DEVNULL)
    spawned.append(process)
    assert process.stderr is not None
    reader = LineReader(process.stderr)
    first = reader.take(1, deadline=time.monotonic() + TIMEOUT)
    assert first, "no session line before the replay ended"
    assert first[0].startswith("session s00:"), first  # printed as it finishes
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=TIMEOUT) == 130
    reader.join()
    rest = []
    while not reader.lines.empty():
        rest.append(reader.lines.get())
    assert "Traceback" not in "\n".join(rest)
    said = rest[-1]
    assert said.startswith("relaystore: interrupted after "), rest
    assert "of 24 sessions" in said
    assert "replay again to resume" in said
    done = int(said.split("interrupted after ")[1].split(" ")[0])
    assert 1 <= done < 24, said

    # What was committed stays: every session done is whole, and a second run finishes.
    again = ok(db, "replay", str(folder), "--projection", "thread")
    finished = [line for line in again.stderr.splitlines() if line.startswith("session ")]
    assert len(finished) == 24
    for line in finished[:done]:
        assert " 0 read, 0 applied" in line, line
    assert frontier(db, sessions[-1])[0] == 240


def test_a_refused_source_still_prints_the_sessions_done_before_it(tmp_path: Path) -> None:
    folder = tmp_path / "workers"
    sealed_root(folder, "a-first")
    sealed_root(folder, "b-broken")
    active = folder / "b-broken" / "relay-journal" / "active.jsonl"
    lines = active.read_bytes().splitlines(keepends=True)
    lines[3] = re.sub(rb'"digest":"[0-9a-f]{64}"', b'"digest":"' + b"0" * 64 + b'"', lines[3])
    active.write_bytes(b"".join(lines))
    result = run_cli(tmp_path / "store.sqlite3", "replay", str(folder))
    assert result.returncode == 1, result.stderr
    said = result.stderr.splitlines()
    assert said[0].startswith("session a-first: 48 read"), said
    assert len(said) == 2, said
    assert "digest" in said[1], said


def _applied_so_far(db: Path, session_id: str) -> int:
    """The session's committed frontier ordinal (0 while the store or session is absent)."""
    try:
        connection = open_reader(db)
    except StoreError:
        return 0  # not created yet
    try:
        session = load_materialized_session(connection, session_id, transcript_limit=0)
    except StoreError:
        return 0
    finally:
        connection.close()
    return 0 if session is None else session.applied_event_ordinal


@pytest.mark.integration
def test_the_ctrl_c_line_counts_exactly_what_was_committed(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    root, journal = sealed_root(tmp_path / "workers", "long", turns=2000)
    db = tmp_path / "store.sqlite3"
    process = start(db, "replay", str(root), "--projection", "thread", stdout=subprocess.DEVNULL)
    spawned.append(process)
    assert process.stderr is not None
    deadline = time.monotonic() + TIMEOUT
    while _applied_so_far(db, "long") == 0:  # the store shows a commit: interrupt now
        assert process.poll() is None, "the replay ended before it committed anything"
        assert time.monotonic() < deadline, "the replay never committed"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=TIMEOUT) == 130
    said = process.stderr.read().splitlines()[-1]
    assert said.startswith("relaystore: interrupted after 0 of 1 session"), said
    counts = re.search(
        r"\((\d+) events? read, (\d+) applied, in the middle of session long\)", said
    )
    assert counts is not None, said
    committed = _applied_so_far(db, "long")
    assert 0 < committed < len(journal.events)  # interrupted midway
    assert int(counts.group(2)) == committed, said
    assert int(counts.group(1)) == committed, said  # every event read was committed
