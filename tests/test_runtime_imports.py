"""The runtime a supervisor embeds loads only the runtime.

A supervisor imports ``relaystore`` (or ``relaystore.aio``), opens a store, writes and
reads. None of that may load the command line, the HTTP server or the NATS client, or
their third-party libraries: they cost start-up time and memory in every embedding
process, and an optional extra missing must not matter to a supervisor that never serves.
Each case runs in a fresh interpreter, so what another test imported does not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each case runs in a fresh interpreter

OUTSIDE_THE_RUNTIME = (
    "relaystore.actors.cli",
    "relaystore.actors.http",
    "relaystore.actors.nats",
    "starlette",
    "sse_starlette",
    "uvicorn",
    "nats",
    "shtab",
    "prometheus_client",
)
"""Packages whose modules the embedded runtime must never load."""

BLOCKING = """
import relaystore
from relaystore import EventStore, LoadState, SaveSession
from relaystore.testing import example_session
store = EventStore.open(PATH)
store.ask(SaveSession(record=example_session("session-1")))
store.ask(LoadState())
store.close()
"""

ASYNCIO = """
import asyncio
import relaystore.aio
from relaystore import LoadState, SaveSession
from relaystore.testing import example_session
async def main():
    store = await relaystore.aio.AsyncEventStore.open(PATH)
    await store.ask(SaveSession(record=example_session("session-1")))
    await store.ask(LoadState())
    await store.close()
asyncio.run(main())
"""

REPORT = """
import json, sys
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(script: str, path: Path) -> list[str]:
    program = f"PATH = {str(path)!r}\n{script}\n{REPORT}"
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _outside(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if any(name == top or name.startswith(top + ".") for top in OUTSIDE_THE_RUNTIME)
    ]


@pytest.mark.parametrize("script", [BLOCKING, ASYNCIO], ids=["blocking", "asyncio"])
def test_a_supervisor_using_the_store_loads_no_command_line_http_or_nats(
    script: str, tmp_path: Path
) -> None:
    modules = _modules_after(script, tmp_path / "store.sqlite3")
    assert "relaystore.actors.store" in modules  # the runtime did load
    assert _outside(modules) == []
