"""relaylog: what keeping the relay log costs, in bytes and in replay throughput.

The run's realistic journal (100k events; 20k with ``--quick``, the one ``replay``
writes) is replayed into fresh stores with ``EventStore.open(relay_log=True)`` and with
``relay_log=False``, alternating (off, on, off, on, ...), ``synchronous=FULL``, through
the same code as ``relaystore replay``. Each store's file is measured after ``close``
(the writer checkpoints, so the main file holds everything).

Figures:

* log bytes per event: (store with the log - store without) / events, against the
  journal's uncompressed bytes per event. Aim: ratio <= 0.5.
* replay events/s with the log, against the same replay without it. Aim: ratio >= 0.9.

The details also hold zlib's compression of the journal in 128-line pages at levels 1,
6 and 9 (kept fraction and seconds), the evidence for
:data:`relaystore.domain.relay.log.LOG_COMPRESSION_LEVEL`.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path

from relaystore.actors.projector import PAGE_SIZE
from relaystore.actors.store import EventStore
from suite.common import Context, Figure, log, median, replay_journal
from suite.journal import JournalStats
from suite.replay import journal

NAME = "relaylog"
SIZE_AIM = 0.5
SPEED_AIM = 0.9


def _replay(path: Path, stats: JournalStats, *, relay_log: bool) -> tuple[float, int]:
    """(events/s, store bytes after close) of one replay into a new store."""
    with EventStore.open(path, synchronous="FULL", relay_log=relay_log) as store:
        started = time.perf_counter()
        applied = replay_journal(store, stats.path)
        elapsed = time.perf_counter() - started
    if applied != stats.events:
        raise RuntimeError(f"replay applied {applied} of {stats.events} events")
    return stats.events / elapsed, path.stat().st_size


def _levels(stats: JournalStats) -> dict[str, dict[str, float]]:
    """zlib at levels 1, 6 and 9 over the journal in pages of PAGE_SIZE lines."""
    lines = stats.path.read_bytes().splitlines()
    pages = [b"\n".join(lines[i : i + PAGE_SIZE]) for i in range(0, len(lines), PAGE_SIZE)]
    raw = sum(len(page) for page in pages)
    found: dict[str, dict[str, float]] = {}
    for level in (1, 6, 9):
        started = time.perf_counter()
        kept = sum(len(zlib.compress(page, level)) for page in pages)
        found[str(level)] = {
            "kept_fraction": round(kept / raw, 4),
            "seconds": round(time.perf_counter() - started, 3),
        }
    return found


def run(ctx: Context) -> list[Figure]:
    events = ctx.scale(100_000, 20_000)
    rounds = ctx.scale(3, 1)
    stats = journal(ctx, events)
    off: list[float] = []
    on: list[float] = []
    sizes_off: list[int] = []
    sizes_on: list[int] = []
    for n in range(rounds):
        rate, size = _replay(ctx.scratch / f"relaylog-off-{n}.sqlite3", stats, relay_log=False)
        off.append(rate)
        sizes_off.append(size)
        log(f"replay without the log: {rate:,.0f} events/s, store {size / 1e6:.1f} MB")
        rate, size = _replay(ctx.scratch / f"relaylog-on-{n}.sqlite3", stats, relay_log=True)
        on.append(rate)
        sizes_on.append(size)
        log(f"replay with the log: {rate:,.0f} events/s, store {size / 1e6:.1f} MB")
    growth = (median(sizes_on) - median(sizes_off)) / events
    per_event = stats.bytes / events
    levels = _levels(stats)
    log(f"zlib per page of {PAGE_SIZE} lines: {levels}")
    return [
        Figure(
            benchmark=NAME,
            name="relay log bytes/event",
            value=growth,
            unit="B/event",
            baseline="journal bytes/event (uncompressed)",
            baseline_value=per_event,
            aim=f"ratio <= {SIZE_AIM}",
            ok=growth / per_event <= SIZE_AIM,
            details={
                "events": events,
                "journal_bytes": stats.bytes,
                "store_bytes_with_log": sizes_on,
                "store_bytes_without_log": sizes_off,
                "whole_store_bytes_per_journal_byte": round(median(sizes_on) / stats.bytes, 3),
                "zlib_levels": levels,
            },
        ),
        Figure(
            benchmark=NAME,
            name=f"replay {events // 1000}k with the log",
            value=median(on),
            unit="events/s",
            baseline="the same replay without the log",
            baseline_value=median(off),
            aim=f"ratio >= {SPEED_AIM}",
            ok=median(on) / median(off) >= SPEED_AIM,
            details={"runs_with_log": on, "runs_without_log": off},
        ),
    ]
