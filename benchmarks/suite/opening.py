"""open: time to open and close a 1M-event store (100k with ``--quick``).

relaystore: ``EventStore.open(path)`` then ``close()`` on :mod:`suite.bigstore`'s store
(the writer connection with its lock, schema check and optimize, the writer actor and two
reader actors with their connections), median of 5, file warm in the page cache.

Baseline: a bare apsw open of the same file that reads what a store needs to know to
start (journal mode and the latest seq), then closes; median of 5, interleaved with the
relaystore opens. The first open after the bulk load (when the store's optimize may have
work to do) is recorded as a detail. Aim: median under 200 ms.
"""

from __future__ import annotations

import time
from pathlib import Path

import apsw

from relaystore.actors.store import EventStore
from suite.bigstore import big_store
from suite.common import Context, Figure, log, median

NAME = "open"
AIM_MS = 200.0
RUNS = 5


def open_ours(path: Path) -> float:
    started = time.perf_counter()
    EventStore.open(path).close()
    return (time.perf_counter() - started) * 1e3


def open_bare(path: Path) -> float:
    started = time.perf_counter()
    db = apsw.Connection(str(path))
    db.execute("PRAGMA journal_mode").fetchall()
    db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'api_events'").fetchall()
    db.close()
    return (time.perf_counter() - started) * 1e3


def run(ctx: Context) -> list[Figure]:
    big = big_store(ctx)
    ours: list[float] = []
    bare: list[float] = []
    for _ in range(RUNS):
        bare.append(open_bare(big.path))
        ours.append(open_ours(big.path))
    log(f"open: {median(ours):.1f} ms (bare apsw {median(bare):.2f} ms)")
    return [
        Figure(
            benchmark=NAME,
            name=f"EventStore.open + close, {big.events // 1000}k events",
            value=median(ours),
            unit="ms",
            baseline="bare apsw open + latest seq + close",
            baseline_value=median(bare),
            aim=f"value < {AIM_MS:.0f} ms",
            ok=median(ours) < AIM_MS,
            details={
                "runs_ms": ours,
                "baseline_runs_ms": bare,
                "first_open_after_bulk_load_ms": big.first_open_seconds * 1e3,
                "store_bytes": big.path.stat().st_size,
            },
        )
    ]
