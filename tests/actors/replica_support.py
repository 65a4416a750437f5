"""What the replication tests share: stores to publish, "the restored store equals
the original" as a user checks it (``events`` bytes, ``show`` per session, ``audit``,
the store id), a store's rows as a file holds them, and a hostile hand on the stream
(nats-py's own JetStream calls: delete a message, purge, publish forged ones). A
support module, not a test module."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.actors.nats_support import attempt, events_lines, journal_root, run, store_id
from tests.paths import ROOT

__all__ = [
    "EXAMPLES",
    "RawMessage",
    "assert_restored",
    "delete_message",
    "publish_raw",
    "purge_stream",
    "raw_messages",
    "rows",
    "assert_stream_once",
    "make_store",
    "session_ids",
]

EXAMPLES = ROOT / "examples" / "worker-root"
"""Three example worker roots (three sessions)."""


def make_store(folder: Path, name: str, *, turns: int = 40, extra: str = "gen") -> Path:
    """A store holding the examples and one generated session of ``turns`` turns."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"{name}.sqlite3"
    run(db, "replay", str(EXAMPLES))
    if turns:
        run(db, "replay", str(journal_root(folder / "roots", extra, turns)))
    return db


def session_ids(db: Path) -> list[str]:
    return [line.split("\t")[0] for line in run(db, "sessions").stdout.decode().splitlines()]


def assert_restored(original: Path, restored: Path) -> None:
    """The restored store prints what the original prints and audits clean."""
    assert events_lines(restored) == events_lines(original)
    sessions = session_ids(original)
    assert session_ids(restored) == sessions
    for session in sessions:
        assert run(restored, "show", session).stdout == run(original, "show", session).stdout
    audit = attempt(restored, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert store_id(restored) == store_id(original)


def assert_stream_once(messages: list[object]) -> None:
    """No event seq and no change number twice in the stream, and no change missing."""
    seqs = [m.seq for m in messages if m.kind == "event"]  # type: ignore[attr-defined]
    changes = [m.change for m in messages if m.kind in ("record", "start", "log")]  # type: ignore[attr-defined]
    assert not [seq for seq, n in Counter(seqs).items() if n > 1]
    assert not [change for change, n in Counter(changes).items() if n > 1]
    assert sorted(changes) == list(range(1, len(changes) + 1))


def rows(db: Path) -> list[str]:
    """Every row of the store's file (``iterdump``), read-only: equal lists, equal stores
    (SQLite's query planner statistics, which opening a store may refresh, left out)."""
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [line for line in connection.iterdump() if "sqlite_stat" not in line]
    finally:
        connection.close()


@dataclass(frozen=True)
class RawMessage:
    """One message of the stream as stored: subject, data, headers, stream position."""

    subject: str
    data: bytes
    headers: dict[str, str]
    position: int


def _with_nats(url: str, act: Callable[[Any], Awaitable[Any]]) -> Any:
    import nats

    async def go() -> Any:
        nc = await nats.connect(url, allow_reconnect=False)
        try:
            return await act(nc)
        finally:
            await nc.close()

    return asyncio.run(go())


def raw_messages(url: str, stream: str, subject: str) -> list[RawMessage]:
    """Every message of ``stream`` on ``subject``, in stream order, headers and all."""
    from nats.js import api

    async def read(nc: Any) -> list[RawMessage]:
        info = await nc.jsm().add_consumer(
            stream,
            api.ConsumerConfig(
                ack_policy=api.AckPolicy.ALL, filter_subject=subject, inactive_threshold=30
            ),
        )
        found: list[RawMessage] = []
        if info.num_pending == 0:
            return found
        subscription = await nc.jetstream().pull_subscribe_bind(info.name, stream)
        while True:
            batch = await subscription.fetch(1000, timeout=5)
            found += [
                RawMessage(m.subject, m.data, dict(m.headers or {}), m.metadata.sequence.stream)
                for m in batch
            ]
            await batch[-1].ack()
            if batch[-1].metadata.num_pending == 0:
                return found

    result: list[RawMessage] = _with_nats(url, read)
    return result


def delete_message(url: str, stream: str, position: int) -> None:
    """JetStream ``delete_msg``: the message at stream seq ``position`` is gone."""

    async def delete(nc: Any) -> None:
        assert await nc.jsm().delete_msg(stream, position)

    _with_nats(url, delete)


def purge_stream(url: str, stream: str) -> None:
    """JetStream purge: every message gone (the stream's sequence numbers go on)."""

    async def purge(nc: Any) -> None:
        assert await nc.jsm().purge_stream(stream)

    _with_nats(url, purge)


def publish_raw(url: str, messages: list[tuple[str, bytes, dict[str, str]]]) -> None:
    """Publish ``(subject, data, headers)`` to JetStream as given, each acknowledged."""

    async def publish(nc: Any) -> None:
        js = nc.jetstream()
        for subject, data, headers in messages:
            await js.publish(subject, data, headers=headers or None)

    _with_nats(url, publish)
