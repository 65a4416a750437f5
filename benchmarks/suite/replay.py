"""replay: relay events/s through read + verify + project + commit, against raw apsw inserts.

relaystore: a generated format 2 journal (200k events; 20k with ``--quick``) is written
as a ``.jsonl`` file and replayed into a fresh store the way ``relaystore replay`` does
(:func:`suite.common.replay_journal`: ``JournalReader`` and ``ObserveRelayEvents`` in
batches of 512 through ``EventStore``, ``synchronous=FULL``).

Baseline: raw apsw inserting as many API-event-sized rows (~300 bytes) into a plain table
in 1000-row transactions (``executemany``), WAL, ``synchronous=FULL``.

Runs alternate baseline / replay / baseline ...; each side's median counts.
Aim: relaystore at least 1/8 of raw.
"""

from __future__ import annotations

import time
from pathlib import Path

import apsw

from relaystore.actors.journal import JournalReader, resolve_source
from relaystore.actors.settings import ProjectionMode
from relaystore.actors.store import EventStore
from suite.common import Context, Figure, log, median, replay_journal
from suite.journal import JournalStats, write_journal

NAME = "replay"
AIM = 1 / 8
ROW_BYTES = 300
ROWS_PER_TRANSACTION = 1000


def journal(ctx: Context, events: int) -> JournalStats:
    """The run's journal of ``events`` events (written once, shared with ``memory``)."""

    def build() -> JournalStats:
        started = time.perf_counter()
        stats = write_journal(ctx.scratch / f"journal-{events}.jsonl", events, seed=ctx.seed)
        log(
            f"wrote a {events:,}-event journal ({stats.bytes / 1e6:.0f} MB, "
            f"{stats.mean_line_bytes:.0f} B/line) in {time.perf_counter() - started:.1f} s"
        )
        return stats

    stats: JournalStats = ctx.shared(f"journal-{events}", build)
    return stats


def raw_inserts(path: Path, rows: int) -> float:
    """Rows/s of plain apsw inserts of ~300-byte rows, 1000 per transaction, WAL + FULL."""
    db = apsw.Connection(str(path))
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE events(seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL,"
        " recorded_at_ms INTEGER NOT NULL, body TEXT NOT NULL)"
    )
    head = '{"type":"activity_changed","data":{"state":"running","n":"%09d","pad":"'
    pad = "x" * (ROW_BYTES - len(head % 0) - 3)
    template = head + pad + '"}}'
    started = time.perf_counter()
    for first in range(0, rows, ROWS_PER_TRANSACTION):
        count = min(ROWS_PER_TRANSACTION, rows - first)
        batch = [
            ("session-0001", 1_790_000_000_000 + n, template % n)
            for n in range(first, first + count)
        ]
        with db:
            db.executemany(
                "INSERT INTO events(session_id, recorded_at_ms, body) VALUES (?, ?, ?)", batch
            )
    elapsed = time.perf_counter() - started
    db.close()
    return rows / elapsed


def read_only(stats: JournalStats) -> float:
    """Events/s of the reading stage alone (``JournalReader``: read and decode)."""
    started = time.perf_counter()
    count = sum(1 for _ in JournalReader(resolve_source(stats.path, session_id="bench")))
    return count / (time.perf_counter() - started)


def replay_once(
    path: Path, stats: JournalStats, projection: ProjectionMode = "thread"
) -> tuple[float, float, int]:
    """Replay the journal into a new store at ``path``: (events/s, this process's CPU
    seconds, API events)."""
    with EventStore.open(path, synchronous="FULL", projection=projection) as store:
        cpu = time.process_time()
        started = time.perf_counter()
        applied = replay_journal(store, stats.path)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        api_events = store.latest_seq
    if applied != stats.events:
        raise RuntimeError(f"replay applied {applied} of {stats.events} events")
    return stats.events / elapsed, cpu, api_events


def run(ctx: Context) -> list[Figure]:
    events = ctx.scale(200_000, 20_000)
    runs = ctx.scale(2, 1)
    stats = journal(ctx, events)
    raw: list[float] = []
    ours: list[float] = []
    cpu: list[float] = []
    process: list[float] = []
    process_cpu: list[float] = []
    api_events = 0
    for n in range(runs):
        raw.append(raw_inserts(ctx.scratch / f"raw-{n}.sqlite3", events))
        log(f"raw apsw: {raw[-1]:,.0f} rows/s")
        rate, seconds, api_events = replay_once(ctx.scratch / f"replay-{n}.sqlite3", stats)
        ours.append(rate)
        cpu.append(seconds)
        log(f"replay: {rate:,.0f} events/s ({seconds:.1f} s CPU)")
        rate, seconds, _ = replay_once(ctx.scratch / f"replay-p{n}.sqlite3", stats, "process")
        process.append(rate)
        process_cpu.append(seconds)
        log(f"replay, projection in a process: {rate:,.0f} events/s ({seconds:.1f} s CPU here)")
    raw.append(raw_inserts(ctx.scratch / f"raw-{runs}.sqlite3", events))
    log(f"raw apsw: {raw[-1]:,.0f} rows/s")
    reading = read_only(stats)
    value, base = median(ours), median(raw)
    wall = events / value
    return [
        Figure(
            benchmark=NAME,
            name=f'replay {events // 1000}k events, projection="thread"',
            value=value,
            unit="events/s",
            baseline="raw apsw rows/s (1000/txn, WAL, FULL)",
            baseline_value=base,
            aim=f"ratio >= 1/8 ({AIM:.3f})",
            ok=value / base >= AIM,
            details={
                "events": events,
                "journal_bytes": stats.bytes,
                "mean_line_bytes": round(stats.mean_line_bytes, 1),
                "api_events_written": api_events,
                "runs": ours,
                "baseline_runs": raw,
                "cpu_seconds_median": median(cpu),
                "cpu_share_of_wall": round(median(cpu) / wall, 3),
                "read_stage_events_per_s": reading,
                "kinds": dict(stats.kinds.most_common()),
            },
        ),
        Figure(
            benchmark=NAME,
            name=f'replay {events // 1000}k events, projection="process" (the default)',
            value=median(process),
            unit="events/s",
            baseline="raw apsw rows/s (1000/txn, WAL, FULL)",
            baseline_value=base,
            aim=f"ratio >= 1/8 ({AIM:.3f})",
            ok=median(process) / base >= AIM,
            details={
                "runs": process,
                "vs_thread_path": round(median(process) / value, 3),
                "cpu_seconds_here_median": median(process_cpu),
                "cpu_seconds_here_thread_path": median(cpu),
            },
        ),
    ]
