"""``relaystore sessions``, ``transcript``, ``history`` and ``usage``, run for real."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import msgspec
import pytest

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import ENV, LineReader, cli, command, failure, ok

pytestmark = (
    pytest.mark.integration
)  # its store projects in worker processes; transcript --follow beside a writer process


def _items(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, JournalBuilder]:
    path = tmp_path / "store.sqlite3"
    journal = JournalBuilder()
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        other = msgspec.structs.replace(example_session("session-2"), workspace_id="w2")
        store.ask(SaveSession(record=other))
        events = journal.prompt_turn("hello there", chunks=("one ", "two"))
        events += journal.prompt_turn("second prompt", chunks=("three",))
        store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    return path, journal


def test_sessions_lists_and_filters(db: tuple[Path, JournalBuilder]) -> None:
    path, _ = db
    lines = ok(path, "sessions").stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["session-1", "default"],
        ["session-2", "w2"],
    ]
    assert lines[0].endswith("\thello there")
    # --json lists as JSON lines, one session a line.
    listed = [json.loads(line) for line in ok(path, "sessions", "--json").stdout.splitlines()]
    assert [s["id"] for s in listed] == ["session-1", "session-2"]
    only = ok(path, "sessions", "--workspace", "w2", "--json").stdout.splitlines()
    assert [json.loads(line)["id"] for line in only] == ["session-2"]


def test_transcript_pages_filters_and_limits(db: tuple[Path, JournalBuilder]) -> None:
    path, _ = db
    items = _items(ok(path, "transcript", "session-1").stdout)
    assert [(i["role"], i["text"]) for i in items] == [
        ("user", "hello there"),
        ("agent", "one two"),
        ("user", "second prompt"),
        ("agent", "three"),
    ]
    after = _items(ok(path, "transcript", "session-1", "--after", str(items[1]["seq"])).stdout)
    assert after == items[2:]
    assert _items(ok(path, "transcript", "session-1", "--limit", "1").stdout) == items[:1]
    agents = _items(ok(path, "transcript", "session-1", "--role", "agent").stdout)
    assert [i["text"] for i in agents] == ["one two", "three"]
    finished = ok(path, "transcript", "session-1", "--finished-only")
    assert _items(finished.stdout) == agents  # finished agent items only
    both = cli(
        path, "transcript", "session-1", "--role", "agent", "--role", "user", "--finished-only"
    )
    assert "implies role=agent" in failure(both)
    assert "no session session-9" in failure(cli(path, "transcript", "session-9"))
    assert cli(path, "transcript", "session-1", "--role", "boss").returncode == 2


def test_history_and_usage(db: tuple[Path, JournalBuilder]) -> None:
    path, _ = db
    newest = json.loads(ok(path, "history", "session-1", "--limit", "2").stdout)
    assert [i["text"] for i in newest["items"]] == ["second prompt", "three"]
    position = str(newest["before"]["position"])
    older = json.loads(ok(path, "history", "session-1", "--before-position", position).stdout)
    assert [i["text"] for i in older["items"]] == ["hello there", "one two"]
    by_id = json.loads(
        ok(path, "history", "session-1", "--before-id", newest["before"]["stable_id"]).stdout
    )
    assert by_id == older
    both = cli(path, "history", "session-1", "--before-position", "3", "--before-id", "x")
    assert both.returncode == 2  # one cursor or the other
    assert "names no transcript item" in failure(
        cli(path, "history", "session-1", "--before-id", "x")
    )
    usage = json.loads(ok(path, "usage", "session-1").stdout)
    assert [t["command_id"] for t in usage["turns"]] == ["prompt-1", "prompt-2"]
    assert usage["coverage"]["recorded_turns"] == 2
    assert "no session session-9" in failure(cli(path, "usage", "session-9"))


def test_transcript_follow_prints_new_items(
    db: tuple[Path, JournalBuilder], spawned: list[subprocess.Popen[str]]
) -> None:
    path, journal = db
    follower = subprocess.Popen(
        command(path, "transcript", "session-1", "--follow"),
        cwd=path.parent,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(follower)
    assert follower.stdout is not None
    reader = LineReader(follower.stdout)
    deadline = time.monotonic() + 20
    assert len(reader.take(4, deadline=deadline)) == 4
    with EventStore.open(path) as store:
        store.ask(ObserveRelayEvents(session_id="session-1", events=journal.prompt_turn("more")))
    new = [json.loads(line) for line in reader.take(2, deadline=deadline)]
    assert [(i["role"], i["text"]) for i in new] == [("user", "more"), ("agent", "Done.")]
