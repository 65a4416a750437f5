"""Ctrl-C (SIGINT) ends a following command with exit 130, however the command was started.

A background job of a non-interactive shell (``relaystore events --follow &`` in a
script, or a test run started that way) starts with SIGINT ignored, and Python leaves an
inherited ignored SIGINT ignored: ``events --follow``, ``transcript --follow`` and their
``--wait`` then followed for ever after a SIGINT (``serve`` and ``replay`` set handlers of
their own and stopped). Each case starts the command with SIGINT ignored (set, then the
command exec'd in the same process), waits for its first output (it follows or waits),
sends SIGINT and waits for its exit; the bound on that wait is a hang detector, not a
timing target.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from relaystore.testing import JournalBuilder
from tests.actors.cli_support import ENV, TIMEOUT, ok

pytestmark = pytest.mark.integration  # the relaystore command as a process, and its signals

IGNORING_SIGINT = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)  # as '&' in a non-interactive shell does\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'relaystore.actors.cli', *sys.argv[1:]])\n"
)
"""Run ``relaystore ARGS`` in this process with SIGINT ignored, as it is inherited."""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store holding session-1 (one prompt turn)."""
    journal = JournalBuilder()
    journal.prompt_turn("hello there")
    root = journal.write_worker_root(tmp_path / "worker", "session-1")
    store = tmp_path / "store.sqlite3"
    ok(store, "replay", str(root))
    return store


@pytest.mark.parametrize(
    ("args", "first_on"),
    [
        (("events", "--follow"), "stdout"),
        (("transcript", "session-1", "--follow", "-o", "text"), "stdout"),
        (("events", "--session", "later", "--follow", "--wait"), "stderr"),
    ],
    ids=["events", "transcript", "wait"],
)
def test_sigint_ends_a_follow_started_with_sigint_ignored(
    db: Path, args: tuple[str, ...], first_on: str, spawned: list[subprocess.Popen[str]]
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", IGNORING_SIGINT, "--db", str(db), *args],
        cwd=db.parent,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(process)
    stream = process.stdout if first_on == "stdout" else process.stderr
    assert stream is not None
    assert stream.readline(), "no output before the command ended"  # it follows (or waits)

    process.send_signal(signal.SIGINT)  # what Ctrl-C does
    try:
        _, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"relaystore {' '.join(args)} went on after SIGINT (it was started ignoring it)"
        )
    assert process.returncode == 130, err
    assert "Traceback" not in err
