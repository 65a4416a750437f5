"""A small asyncio supervisor: ingest several workers' journals while serving the feed.

Run: ``python examples/supervisor.py [STORE] [--port PORT]`` (default: a temporary store,
port 8040; needs ``pip install "relaystore[http]"``). In one event loop it

* opens the store with :class:`relaystore.aio.AsyncEventStore` (the only writer),
* feeds every example worker root's relay events to the store, one task per session,
  in pages, as a supervisor relays what its workers journal,
* follows the feed with ``async for`` and prints each API event as it commits,
* and starts ``relaystore serve`` as a separate process (it opens the store read-only),
  so HTTP clients follow the same feed with the origin's server-sent-event contract.

It stops once every journal is ingested and the follower has seen every event; the
server is stopped with SIGINT. ``--no-serve`` leaves the HTTP server out.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
from pathlib import Path

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


async def _until_listening(port: int, seconds: float = 20.0) -> None:
    """Wait until the server accepts connections (it answers 401 without a token)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)
        else:
            writer.close()
            await writer.wait_closed()
            return


async def main(store_path: Path, port: int | None) -> None:
    server: asyncio.subprocess.Process | None = None
    async with AsyncEventStore.open(store_path) as store:
        if port is not None:
            server = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "relaystore.actors.cli", "--db", str(store_path),
                "serve", "--port", str(port),
            )  # fmt: skip
            await _until_listening(port)
            print(f"serving http://127.0.0.1:{port}/api/v1/events (token: {store_path}.api-token)")
        done = asyncio.Event()
        follower = asyncio.create_task(follow(store, done))
        roots = sorted(path for path in WORKERS.iterdir() if path.is_dir())
        applied = await asyncio.gather(*(ingest(store, root) for root in roots))
        done.set()
        seen = await follower
        print(f"ingested {sum(applied)} relay events from {len(roots)} workers; {seen} API events")
        assert seen == store.latest_seq, (seen, store.latest_seq)
    if server is not None:
        server.send_signal(signal.SIGINT)
        await server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?", type=Path)
    parser.add_argument("--port", type=int, default=8040)
    parser.add_argument("--no-serve", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = args.store or Path(scratch) / "supervisor.sqlite3"
        asyncio.run(main(path, None if args.no_serve else args.port))
