"""examples/supervisor.py runs as shipped: asyncio ingest of every worker, a live feed,
and ``relaystore serve`` beside it answering HTTP clients."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from relaystore import EventStore, LoadApiEvents
from tests.paths import ROOT

pytestmark = pytest.mark.integration  # the supervisor example runs as a process


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_supervisor_example_ingests_every_worker_and_serves_the_feed(tmp_path: Path) -> None:
    store = tmp_path / "supervisor.sqlite3"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "supervisor.py"), str(store),
         "--port", str(_free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "ingested 161 relay events from 3 workers; 35 API events" in done.stdout
    assert done.stdout.count("  feed ") == 35
    assert Path(f"{store}.api-token").exists()  # the server started and made its token
    with EventStore.open(store, read_only=True) as reopened:
        assert reopened.ask(LoadApiEvents(after_seq=0)).latest_seq == 35


def _supervisor(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "supervisor.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_port_another_process_holds_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _supervisor(str(tmp_path / "s.sqlite3"), "--port", str(port))
    assert done.returncode == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("supervisor: the HTTP server did not start: "), done.stderr
    assert "Address already in use" in lines[-1]
    assert "Traceback" not in done.stderr
    assert "ingested" not in done.stdout


def test_port_0_serves_on_a_free_port_it_prints_and_shuts_it_down(tmp_path: Path) -> None:
    done = _supervisor(str(tmp_path / "s.sqlite3"), "--port", "0")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    served = re.search(r"^serving http://127\.0\.0\.1:(\d+)/api/v1/events", done.stdout, re.M)
    assert served is not None, done.stdout
    port = int(served[1])
    assert port != 0
    assert "ingested 161 relay events from 3 workers; 35 API events" in done.stdout
    with socket.socket() as probe:  # the server stopped with the supervisor
        assert probe.connect_ex(("127.0.0.1", port)) != 0
