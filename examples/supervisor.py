"""A small asyncio supervisor: ingest several workers' journals while serving the feed.

Run: ``python examples/supervisor.py [STORE] [--port PORT]`` (default: a temporary store,
port 8040; 0 picks a free port; needs ``pip install "relaystore[http]"``). In one event
loop it

* opens the store with :class:`relaystore.aio.AsyncEventStore` (the only writer),
* feeds every example worker root's relay events to the store, one task per session,
  in pages, as a supervisor relays what its workers journal,
* follows the feed with ``async for`` and prints each API event as it commits,
* and starts ``relaystore serve`` as a separate process (it opens the store read-only),
  so HTTP clients follow the same feed with the origin's server-sent-event contract.

It stops once every journal is ingested and the follower has seen every event; the
server is stopped with SIGINT (also when anything fails). A server that cannot start (the
port is taken) is one line on stderr and exit status 1. ``--no-serve`` leaves the HTTP
server out.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from relaystore import ObserveRelayEvents, SaveSession
from relaystore.actors.journal import read_journal
from relaystore.aio import AsyncEventStore
from relaystore.testing import example_session

WORKERS = Path(__file__).parent / "worker-root"
PAGE = 64


async def ingest(store: AsyncEventStore, root: Path) -> int:
    """Relay one worker's journal into the store; returns the events applied."""
    journal = read_journal(root)
    session_id = journal.source.session_id
    await store.ask(SaveSession(record=example_session(session_id, "example-project")))
    events = [event for event, _location in journal]
    applied = 0
    for start in range(0, len(events), PAGE):
        report = await store.ask(
            ObserveRelayEvents(session_id=session_id, events=events[start : start + PAGE])
        )
        applied += report.applied
    return applied


async def follow(store: AsyncEventStore, done: asyncio.Event) -> int:
    """Print every API event as it commits, until ingest is done and all were seen."""
    seen = cursor = 0
    while not (done.is_set() and cursor >= store.latest_seq):
        async for event in store.follow(after_seq=cursor, timeout=0.2):
            seen, cursor = seen + 1, event.seq
            print(f"  feed {event.seq:>3} {event.session_id[:8]} {event.kind}")
    return seen


class ServerDidNotStart(Exception):
    """``relaystore serve`` exited before it announced its address (its last line says why)."""


class Server(NamedTuple):
    process: asyncio.subprocess.Process
    url: str
    """Where it serves (with ``--port 0``, on the port it chose)."""
    relay: asyncio.Task[None]
    """Copies what it writes later to our stderr."""


async def start_server(store_path: Path, port: int) -> Server:
    """Start ``relaystore serve`` and wait for the line it writes once it accepts
    connections (or for its exit: :class:`ServerDidNotStart`)."""
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "relaystore.actors.cli", "--db", str(store_path),
        "serve", "--port", str(port),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert server.stderr is not None
    last = ""
    while line := (await server.stderr.readline()).decode(errors="replace").strip():
        if line.startswith("relaystore: serving ") and " at " in line:
            url = line.split(" at ", 1)[1].split()[0].removesuffix("/api/v1/events")
            return Server(server, url, asyncio.create_task(_relay(server.stderr)))
        last = line
    await server.wait()
    raise ServerDidNotStart(last or f"relaystore serve exited with status {server.returncode}")


async def _relay(stream: asyncio.StreamReader) -> None:
    while line := await stream.readline():
        sys.stderr.write(line.decode(errors="replace"))


async def stop_server(server: Server) -> None:
    """SIGINT, as Ctrl-C would; killed if it has not exited within 10 s."""
    process = server.process
    if process.returncode is None:
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
    await server.relay


async def main(store_path: Path, port: int | None) -> None:
    server: Server | None = None
    try:
        async with AsyncEventStore.open(store_path) as store:
            if port is not None:
                server = await start_server(store_path, port)
                print(
                    f"serving {server.url}/api/v1/events (token: {store_path}.api-token)",
                    flush=True,
                )
            done = asyncio.Event()
            follower = asyncio.create_task(follow(store, done))
            roots = sorted(path for path in WORKERS.iterdir() if path.is_dir())
            applied = await asyncio.gather(*(ingest(store, root) for root in roots))
            done.set()
            seen = await follower
            print(
                f"ingested {sum(applied)} relay events from {len(roots)} workers; {seen} API events"
            )
            assert seen == store.latest_seq, (seen, store.latest_seq)
    finally:
        if server is not None:
            await stop_server(server)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", type=Path)
    parser.add_argument("--port", type=int, default=8040)
    parser.add_argument("--no-serve", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = args.store or Path(scratch) / "supervisor.sqlite3"
        try:
            asyncio.run(main(path, None if args.no_serve else args.port))
        except ServerDidNotStart as exc:
            sys.exit(f"supervisor: the HTTP server did not start: {exc}")
