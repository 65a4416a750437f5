"""nats: relaystore publish against a real nats-server (skipped without one).

Publish rate: a replay of prompt-turn journals (the densest API-event shape: two API
events per four relay events) into a fresh store, in this process, while
``relaystore publish`` (a separate, read-only process, as beside a supervisor) publishes
it to a JetStream stream on a local ``nats-server -js``. The figure is API events/s
from the replay's start until the stream holds the last one; the baseline is the
store's commit rate in the same replay (API events/s until the replay returned). Aim:
ratio >= 0.9.

Latency: a live supervisor load, one ``RecordActivities`` (one API event) every 2 ms from
one sender through ``EventStore.ask``; the same ``relaystore publish`` process; a
:class:`relaystore.nats.FleetFeed` consumer in this process. Latency of one event: from
its ``ask`` returning (committed) to the consumer yielding it, p50 and p99. Baseline: a
read-only :meth:`EventStore.follow` in this process on the same events at the same
time (what a local reader of the store sees; the read-only publisher waits on the same
WAL watch). Measured twice: with the publisher as its own read-only process, and with
:class:`relaystore.nats.Publisher` embedded in the supervisor's process (woken by its
commits, no WAL watch). No aim: the figures say what NATS adds.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.messages import RecordActivities, SaveSession
from relaystore.testing import JournalBuilder, example_session
from suite.common import Context, Figure, log, median, percentile

NAME = "nats"
AIM = 0.9
STREAM = "BENCH"
ROOT = Path(__file__).resolve().parents[2]


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Server:
    def __init__(self, binary: str, folder: Path) -> None:
        self.port = _port()
        self.url = f"nats://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", str(folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("nats-server did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


class _Publisher:
    """``relaystore publish`` in its own process; ready once it resumed from the stream."""

    def __init__(self, db: Path, url: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "relaystore.actors.cli", "--db", str(db)),
                *("publish", "--nats", url, "--stream", STREAM),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if b"after seq" in line:
                break
        else:
            raise RuntimeError("relaystore publish exited before it connected")
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for _ in self.process.stderr:
            pass

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


async def _last_seq(url: str, subject: str) -> int:
    import nats
    import nats.js.errors

    nc = await nats.connect(url, allow_reconnect=False)
    try:
        jsm = nc.jsm()
        try:
            message = await jsm.get_last_msg(STREAM, subject)
        except nats.js.errors.NotFoundError:
            return 0
        return int((message.headers or {})["Relaystore-Seq"])
    finally:
        await nc.close()


def _wait_published(url: str, subject: str, seq: int, timeout: float = 300) -> float:
    """perf_counter when the stream's last message on ``subject`` reached ``seq``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if asyncio.run(_last_seq(url, subject)) >= seq:
            return time.perf_counter()
        time.sleep(0.005)
    raise RuntimeError(f"the stream did not reach seq {seq}")


def _roots(folder: Path, sessions: int, turns: int) -> list[Path]:
    roots = []
    for index in range(sessions):
        builder = JournalBuilder()
        for turn in range(turns):
            builder.prompt_turn(f"prompt {turn}", chunks=(f"answer {turn} " * 20,))
        roots.append(builder.write_worker_root(folder / f"s-{index}", f"s-{index}"))
    return roots


def publish_rate(ctx: Context, url: str) -> Figure:
    sessions, turns = ctx.scale(8, 2), ctx.scale(2500, 1000)
    roots = _roots(ctx.scratch / "nats-roots", sessions, turns)
    db = ctx.scratch / "nats-replay.sqlite3"
    EventStore.open(db).close()
    publisher = _Publisher(db, url)
    try:
        with EventStore.open(db) as store:
            store_id = store.metrics().store_id
            started = time.perf_counter()
            for root in roots:
                replay_source(store, resolve_source(root))
            committed = time.perf_counter()
            latest = store.latest_seq
        published = _wait_published(url, f"relaystore.{store_id}.>", latest)
    finally:
        publisher.stop()
    commit_rate = latest / (committed - started)
    rate = latest / (published - started)
    log(
        f"nats: {latest:,} API events committed at {commit_rate:,.0f}/s, "
        f"in the stream at {rate:,.0f}/s (tail {published - committed:.2f} s)"
    )
    return Figure(
        benchmark=NAME,
        name=f"publish rate while replaying ({latest // 1000}k API events, publisher process)",
        value=rate,
        unit="API events/s",
        baseline="the replay's commit rate (API events/s)",
        baseline_value=commit_rate,
        aim=f"ratio >= {AIM}",
        ok=rate / commit_rate >= AIM,
        details={
            "api_events": latest,
            "sessions": sessions,
            "turns": turns,
            "tail_seconds": published - committed,
        },
    )


def _live(
    ctx: Context, url: str, db: Path, store: EventStore, count: int
) -> tuple[list[float], list[float]]:
    """Send ``count`` one-event messages at 500/s; commit -> consumer and -> follower ms."""
    from relaystore.nats import FleetFeed

    committed: dict[int, float] = {}
    consumed: dict[int, float] = {}
    followed: dict[int, float] = {}
    store_id = store.metrics().store_id
    base = store.latest_seq
    ready = threading.Event()

    async def consume() -> None:
        async with FleetFeed(url, stream=STREAM, store_id=store_id, follow=True) as feed:
            ready.set()
            async for event in feed:
                consumed[event.seq] = time.perf_counter()
                if event.seq >= base + count:
                    return

    def follow() -> None:
        with EventStore.open(db, read_only=True, readers=1) as reader:
            for event in reader.follow(after_seq=base, timeout=30):
                followed[event.seq] = time.perf_counter()
                if event.seq >= base + count:
                    return

    consumer = threading.Thread(target=lambda: asyncio.run(consume()), daemon=True)
    follower = threading.Thread(target=follow, daemon=True)
    consumer.start()
    follower.start()
    ready.wait(30)
    time.sleep(0.5)
    states = [
        ApiActivityState(
            state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
        )
        for i in range(2)
    ]
    next_at = time.perf_counter()
    for i in range(count):
        store.ask(RecordActivities(activities=[("live", states[i % 2])], recorded_at_ms=i))
        committed[store.latest_seq] = time.perf_counter()
        next_at += 0.002
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    consumer.join(120)
    follower.join(120)
    nats_ms = [(consumed[s] - committed[s]) * 1e3 for s in committed if s in consumed]
    local_ms = [(followed[s] - committed[s]) * 1e3 for s in committed if s in followed]
    if len(nats_ms) < count or len(local_ms) < count:
        raise RuntimeError(f"latency: {len(nats_ms)} of {count} events reached the consumer")
    return nats_ms, local_ms


def _latency_figures(where: str, nats_ms: list[float], local_ms: list[float]) -> list[Figure]:
    log(
        f"nats ({where}): commit -> consumer p50 {median(nats_ms):.1f} ms, p99 "
        f"{percentile(nats_ms, 0.99):.1f} ms (local read-only follower p50 "
        f"{median(local_ms):.1f} ms, p99 {percentile(local_ms, 0.99):.1f} ms)"
    )
    return [
        Figure(
            benchmark=NAME,
            name=f"commit -> FleetFeed latency {label}, {where}, 500 events/s live load",
            value=percentile(nats_ms, fraction),
            unit="ms",
            baseline=f"local read-only EventStore.follow {label}",
            baseline_value=percentile(local_ms, fraction),
            details={"events": len(nats_ms)},
        )
        for label, fraction in (("p50", 0.5), ("p99", 0.99))
    ]


def latency(ctx: Context, url: str) -> list[Figure]:
    """The publisher as its own read-only process, beside the supervisor."""
    db = ctx.scratch / "nats-live.sqlite3"
    with EventStore.open(db) as store:
        store.ask(SaveSession(record=example_session("live", "bench")))
        publisher = _Publisher(db, url)
        try:
            measured = _live(ctx, url, db, store, ctx.scale(3000, 600))
        finally:
            publisher.stop()
    return _latency_figures("publisher process", *measured)


def latency_embedded(ctx: Context, url: str) -> list[Figure]:
    """The publisher embedded in the supervisor's process (woken by its commits)."""
    from relaystore.actors.aio import AsyncEventStore
    from relaystore.nats import Publisher

    db = ctx.scratch / "nats-embedded.sqlite3"

    async def scenario() -> tuple[list[float], list[float]]:
        async with AsyncEventStore.open(db) as store:
            await store.ask(SaveSession(record=example_session("live", "bench")))
            publisher = Publisher(store, url, stream=STREAM)
            task = asyncio.create_task(publisher.run())
            try:
                return await asyncio.to_thread(
                    _live, ctx, url, db, store.sync, ctx.scale(3000, 600)
                )
            finally:
                publisher.stop()
                await task

    return _latency_figures("embedded publisher", *asyncio.run(scenario()))


def run(ctx: Context) -> list[Figure]:
    binary = shutil.which("nats-server")
    if binary is None:
        log("nats: skipped, nats-server is not installed (apt-get install nats-server)")
        return []
    server = _Server(binary, ctx.scratch / "nats-server")
    try:
        return [
            publish_rate(ctx, server.url),
            *latency(ctx, server.url),
            *latency_embedded(ctx, server.url),
        ]
    finally:
        server.stop()
