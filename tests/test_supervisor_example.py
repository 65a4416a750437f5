"""examples/supervisor.py runs as shipped: asyncio ingest of every worker, a live feed,
and ``relaystore serve`` beside it answering HTTP clients."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from relaystore import EventStore, LoadApiEvents
from tests.paths import ROOT


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
