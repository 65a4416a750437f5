"""The command line's small promises (issue 20, case 19): ``python -m relaystore``, a
``--version`` that loads no runtime, ``events`` refusing what it cannot show, and an
honest summary of an empty replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import relaystore
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import ENV, TIMEOUT, cli, events, failure, ok, replay

# What a command that needs no store must not load: the runtime and its dependencies.
RUNTIME = ("relaystore.actors.store", "relaystore.domain.messages", "apsw", "pykka", "msgspec")


def python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def imported(importtime: str) -> set[str]:
    """The modules ``python -X importtime`` reported importing."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in importtime.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store holding session-1 with one prompt turn (API events 1 and 2)."""
    journal = JournalBuilder()
    journal.prompt_turn("hello")
    root = journal.write_worker_root(tmp_path / "root", "session-1")
    store = tmp_path / "store.sqlite3"
    replay(store, root)
    return store


@pytest.mark.integration
def test_python_dash_m_relaystore_is_the_command(db: Path) -> None:
    result = python("-m", "relaystore", "--db", str(db), "events", cwd=db.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == events(db)
    usage = python("-m", "relaystore", cwd=db.parent)
    assert usage.returncode == 2
    assert usage.stderr.startswith("usage: relaystore ")


@pytest.mark.integration
@pytest.mark.parametrize("module", ["relaystore", "relaystore.actors.cli"])
def test_version_loads_no_runtime(tmp_path: Path, module: str) -> None:
    result = python("-X", "importtime", "-m", module, "--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"relaystore {relaystore.__version__}"
    loaded = imported(result.stderr)
    assert "relaystore.actors" in loaded  # the command line ran, and loaded no more:
    assert [name for name in RUNTIME if name in loaded] == []


@pytest.mark.integration
def test_importing_relaystore_loads_no_runtime(tmp_path: Path) -> None:
    result = python("-X", "importtime", "-c", "import relaystore", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [name for name in RUNTIME if name in imported(result.stderr)] == []


@pytest.mark.parametrize("follow", [False, True])
def test_events_after_the_head_is_refused_as_http_refuses_it(db: Path, follow: bool) -> None:
    extra = ("--follow",) if follow else ()
    assert len(events(db, "--after", "2")) == 0  # the head itself: nothing after it, exit 0
    line = failure(cli(db, "events", "--after", "3", *extra))
    assert line == "relaystore: cursor 3 is ahead of this database's newest event (2)"


def test_events_of_an_unknown_session_is_refused_as_show_refuses_it(db: Path) -> None:
    shown = failure(cli(db, "show", "nobody"))
    assert shown == f"relaystore: {db}: no session nobody in this store"
    for extra in ((), ("--follow",)):
        assert failure(cli(db, "events", "--session", "nobody", *extra)) == shown
    for command in (("transcript", "nobody"), ("history", "nobody"), ("usage", "nobody")):
        assert failure(cli(db, *command)) == shown  # one wording everywhere
    assert len(events(db, "--session", "session-1")) == 2


def test_replaying_an_empty_journal_reports_no_session(tmp_path: Path) -> None:
    root = JournalBuilder().write_worker_root(tmp_path / "root", "session-1")
    store = tmp_path / "store.sqlite3"
    result = ok(store, "replay", str(root))
    lines = result.stderr.splitlines()
    assert lines[0] == "session session-1: empty journal, nothing replayed (no session created)"
    assert lines[-1].startswith("replayed 0 events: ")
    assert lines[-1].endswith(", 0 sessions)")
    assert ok(store, "stats", "--json").stdout.count('"sessions": 0') == 1
