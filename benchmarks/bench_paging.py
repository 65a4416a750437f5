"""Paging cost on a large store (a script, not a test).

Builds a store of ``--events`` API events (default 1,000,000) spread over a few hundred
sessions in 3 workspaces, then times 100-event pages read through
:func:`storage.paging.load_api_events` on a read-only connection, at random cursors,
without a filter, with a workspace filter and with a session filter. Next to each it
times a bare apsw ``SELECT`` of the same rows (tuples only, no decoding) and prints the
median and p99 of both and their ratio. Run from the repository root::

    python benchmarks/bench_paging.py [--events 1000000] [--pages 2000] [--db PATH]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from domain.api_events import (
    ApiActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEventData,
    ApiEventFilter,
    ApiSessionFault,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
)
from domain.outcomes import (
    ApiTurnOutcome,
    MaterializedTurnOutcome,
    OutcomeReason,
    TokenUsage,
    TurnOutcomeCompleted,
    UsageScope,
)
from domain.sessions import example_session
from storage.connection import open_reader, open_writer
from storage.events import encode_event_body
from storage.paging import load_api_events
from storage.sessions import save_session

WORKSPACES = ("default", "team", "lab")
BATCH = 10_000
PAGE = 100


def templates() -> list[ApiEventData]:
    """A realistic mix: turns, activity changes and the odd fault."""
    turn = MaterializedTurn(
        command_id="prompt-1", accepted_ordinal=1, turn_start_position=4, started_at_ms=2
    )
    outcome = MaterializedTurnOutcome(
        command_id="prompt-1",
        accepted_ordinal=1,
        turn_start_position=4,
        completed_ordinal=40,
        completed_at_ms=1_795_000_000_000,
        outcome=TurnOutcomeCompleted(stop_reason="end_turn"),
        usage=TokenUsage(
            scope=UsageScope.TURN, total_tokens=9000, input_tokens=8000, output_tokens=1000
        ),
    )
    activity = ApiActivityState(
        state="running",
        details=ApiActivityDetails(kind=ApiActivityKind.TURN, turn_started_at_ms=1_795_000_000_000),
    )
    return [
        ApiTurnStarted.of(turn=turn),
        ApiActivityChanged.of(activity=activity),
        ApiActivityChanged.of(activity=ApiActivityState(state="running", is_idle=True)),
        ApiTurnEnded.of(turn=ApiTurnOutcome.from_materialized(outcome)),
        ApiSessionFault.of(
            reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited", command_id=None
        ),
    ]


def build(path: Path, events: int, sessions: int, seed: int) -> list[str]:
    """Create the store; return the session ids."""
    rng = random.Random(seed)
    ids = [f"session-{n:04d}" for n in range(sessions)]
    bodies = [encode_event_body(event) for event in templates()]
    started = time.perf_counter()
    with open_writer(path, synchronous="OFF") as writer:
        db = writer.connection
        with db:
            for n, session_id in enumerate(ids):
                record = msgspec.structs.replace(
                    example_session(session_id), workspace_id=WORKSPACES[n % len(WORKSPACES)]
                )
                save_session(db, record)
        written = 0
        while written < events:
            count = min(BATCH, events - written)
            rows = [
                (
                    rng.choice(ids),
                    1_795_000_000_000 + written + i,
                    bodies[(written + i) % len(bodies)],
                )
                for i in range(count)
            ]
            with db:
                db.executemany(
                    "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES (?, ?, ?)",
                    rows,
                )
            written += count
        db.execute("ANALYZE")
    print(
        f"built {events:,} events over {sessions} sessions in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    return ids


def clock(call: Callable[..., object], *args: object) -> float:
    """Microseconds ``call(*args)`` took."""
    started = time.perf_counter_ns()
    call(*args)
    return (time.perf_counter_ns() - started) / 1e3


def select(connection: apsw.Connection, sql: str, bindings: tuple[object, ...]) -> object:
    """The bare apsw read: tuples, nothing decoded."""
    return connection.execute(sql, bindings).fetchall()


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# The statements storage.paging runs, returning plain tuples.
BARE = {
    "none": "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e WHERE e.seq > ? ORDER BY e.seq LIMIT ?",
    "workspace": (
        "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
        " CROSS JOIN session_contexts w ON w.session_id = e.session_id"
        " WHERE w.workspace_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?"
    ),
    "session": (
        "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
        " WHERE e.session_id = ? AND e.seq > ? ORDER BY e.seq LIMIT ?"
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--pages", type=int, default=2000, help="pages timed per scenario")
    parser.add_argument("--db", type=Path, help="reuse or keep the store here")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        path = args.db or Path(scratch) / "bench.sqlite3"
        if path.exists():
            ids = [f"session-{n:04d}" for n in range(args.sessions)]
        else:
            ids = build(path, args.events, args.sessions, args.seed)
        reader = open_reader(path)
        rng = random.Random(args.seed)
        scenarios: list[tuple[str, ApiEventFilter, tuple[object, ...]]] = [
            ("none", ApiEventFilter(), ()),
            ("workspace", ApiEventFilter(workspace_id="team"), ("team",)),
            ("session", ApiEventFilter(session_id=ids[1]), (ids[1],)),
        ]
        print(
            f"{args.events:,} events, {args.sessions} sessions, {PAGE}-event pages at random cursors"
        )
        print(f"{'filter':<10} {'load_api_events':>24} {'bare SELECT':>24} {'ratio':>14}")
        print(f"{'':<10} {'median / p99 (us)':>24} {'median / p99 (us)':>24} {'median / p99':>14}")
        for name, event_filter, bound in scenarios:
            # Cursors up to the last page, so every page is full (the session filter
            # sees a sparse stream: keep its cursors early enough to fill a page).
            high = args.events - PAGE * (args.sessions if name == "session" else 4)
            cursors = [rng.randrange(0, max(1, high)) for _ in range(args.pages)]
            full: list[float] = []
            bare: list[float] = []
            # Both read each cursor, in alternating order: machine noise and SQLite's
            # page cache (the second reader of a page finds it warm) favour neither.
            for n, cursor in enumerate(cursors):
                if n % 2:
                    bare.append(clock(select, reader, BARE[name], (*bound, cursor, PAGE)))
                full.append(clock(load_api_events, reader, event_filter, cursor, PAGE))
                if not n % 2:
                    bare.append(clock(select, reader, BARE[name], (*bound, cursor, PAGE)))
            (fm, fp), (bm, bp) = summary(full), summary(bare)
            print(
                f"{name:<10} {fm:>11.0f} / {fp:>10.0f} {bm:>11.0f} / {bp:>10.0f} {fm / bm:>6.2f} / {fp / bp:>5.2f}"
            )
        reader.close()


if __name__ == "__main__":
    main()
