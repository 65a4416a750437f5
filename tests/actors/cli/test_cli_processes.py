"""Every command as a real ``relaystore`` process, beside the same command run in process.

Most command-line cases run ``main(argv)`` in the test's process
(:mod:`tests.actors.cli_in_process`); these keep each command honest as a process:
a store replayed by a real process (projecting in worker processes, the default), then
each reading command run both ways, printing the same bytes with the same status, and
each keeping command run as a process once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.actors.cli_support import WORKER_ROOTS, cli, cli_process

pytestmark = pytest.mark.integration  # every case runs relaystore as a process

SESSION = WORKER_ROOTS[0].name
READS = [
    ("events",),
    ("events", "--session", SESSION, "--limit", "3"),
    ("show", SESSION),
    ("stats",),
    ("stats", "--json"),
    ("sessions", "--json"),
    ("transcript", SESSION, "-o", "text"),
    ("history", SESSION, "--json"),
    ("usage", SESSION, "--json"),
    ("search", "migration", "--json"),
    ("export", SESSION),
    ("verify", *map(str, WORKER_ROOTS)),
    ("audit", "--json"),
    ("completion", "bash"),
    ("--version",),
    ("show", "nobody"),  # refused: status 1, one line
    ("events", "--limit", "0"),  # a usage error: status 2
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("processes") / "store.sqlite3"
    result = cli_process(db, "replay", *map(str, WORKER_ROOTS))
    assert result.returncode == 0, result.stderr
    return db


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_reading_command_prints_the_same_as_a_process_and_in_process(
    store: Path, args: tuple[str, ...]
) -> None:
    real, here = cli_process(store, *args), cli(store, *args)
    assert "Traceback" not in real.stderr
    if args[0] == "export":  # the one line _timeless evens out is there to even out
        assert _EXPORTED.search(real.stdout)
    assert (real.returncode, _timeless(real.stdout), real.stderr) == (
        here.returncode,
        _timeless(here.stdout),
        here.stderr,
    )


_EXPORTED = re.compile(r"^(- \*\*exported\*\*: ).+$", re.MULTILINE)


def _timeless(stdout: str) -> str:
    """``stdout`` with an export's one line that says when it ran (the clock, which
    differs between two runs a second apart on a busy machine) made the same."""
    return _EXPORTED.sub(r"\1(when it ran)", stdout)


def test_each_keeping_command_runs_as_a_process(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    backup = cli_process(store, "backup", str(db))
    assert backup.returncode == 0, backup.stderr
    assert db.exists()
    for args in (
        ("vacuum",),
        ("new-store-id",),
        ("reproject", SESSION),
        ("compact", SESSION),
        ("delete", SESSION),
        ("replay", str(WORKER_ROOTS[0])),  # back again, projected in worker processes
    ):
        result = cli_process(db, *args)
        assert result.returncode == 0, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert cli(db, "show", SESSION).returncode == 0
