"""The in-process command line the fast lane relies on (:mod:`tests.actors.cli_in_process`):
a run's status, output and environment are a process's, and a run that leaves something
behind fails instead of leaking into the next test."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import relaystore.actors.cli
from relaystore import EventStore
from tests.actors.cli_in_process import run_in_process
from tests.actors.cli_support import ENV, TIMEOUT


def run(
    monkeypatch: pytest.MonkeyPatch, main: object, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    monkeypatch.setattr(relaystore.actors.cli, "main", main)
    result = run_in_process(["x"], cwd, env or ENV, TIMEOUT)
    return result.returncode, result.stdout, result.stderr


def test_output_status_folder_and_environment_are_the_runs_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RELAYSTORE_DB", "/nowhere")
    before = dict(os.environ), os.getcwd(), sys.stdout

    def main(argv: Sequence[str]) -> int:
        print(f"{os.getcwd()} {os.environ.get('RELAYSTORE_DB')} {os.environ['ONLY']}")
        sys.stdout.buffer.write(b"bytes\n")
        print("said", file=sys.stderr)
        assert sys.stdin.read() == ""
        raise SystemExit(2)

    status, out, err = run(monkeypatch, main, tmp_path, {"ONLY": "this"})
    assert (status, out, err) == (2, f"{tmp_path} None this\nbytes\n", "said\n")
    assert (dict(os.environ), os.getcwd(), sys.stdout) == before


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (3, 3), ("why", 1)])
def test_system_exit_is_the_status_a_process_would_end_with(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: object, status: int
) -> None:
    def main(argv: Sequence[str]) -> int:
        raise SystemExit(code)

    assert run(monkeypatch, main, tmp_path)[0] == status


def test_a_store_left_open_fails_the_run_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    left: list[EventStore] = []

    def main(argv: Sequence[str]) -> int:
        left.append(EventStore.open(tmp_path / "store.sqlite3", projection="thread"))
        return 0

    with pytest.raises(AssertionError, match="stores left open"):
        run(monkeypatch, main, tmp_path)
    left[0].close()


def test_a_logging_handler_left_behind_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import logging

    handler = logging.NullHandler()

    def main(argv: Sequence[str]) -> int:
        logging.getLogger("relaystore.left").addHandler(handler)
        return 0

    try:
        with pytest.raises(AssertionError, match="logging handlers"):
            run(monkeypatch, main, tmp_path)
    finally:
        logging.getLogger("relaystore.left").removeHandler(handler)
