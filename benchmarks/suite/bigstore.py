"""The large store ``reads`` and ``open`` share: 1M API events (100k with ``--quick``).

Built as the brief says: ``EventStore.open`` creates the store and saves 300 sessions in 3
workspaces through the writer; after closing it, API events (a realistic mix of turns,
activity changes and faults, bodies exactly as relaystore encodes them) are inserted
directly with apsw ``executemany`` at ``synchronous=OFF``; then the store is opened once
more through ``EventStore.open`` (its own optimize runs there) and closed. Built once per
run.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import apsw
import msgspec

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import (
    ApiActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEventData,
    ApiSessionFault,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
)
from relaystore.domain.messages import SaveSession
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    MaterializedTurnOutcome,
    OutcomeReason,
    TokenUsage,
    TurnOutcomeCompleted,
    UsageScope,
)
from relaystore.storage.events import encode_event_body
from relaystore.testing import example_session
from suite.common import Context, log

WORKSPACES = ("default", "team", "lab")
SESSIONS = 300
BATCH = 10_000


@dataclass(frozen=True)
class BigStore:
    path: Path
    events: int
    session_ids: tuple[str, ...]
    build_seconds: float
    first_open_seconds: float


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
        is_idle=False,
        waiting_for_input=False,
        capacity_retry=False,
    )
    return [
        ApiTurnStarted.of(turn=turn),
        ApiActivityChanged.of(activity=activity),
        ApiActivityChanged.of(
            activity=ApiActivityState(
                state="running", is_idle=True, waiting_for_input=False, capacity_retry=False
            )
        ),
        ApiTurnEnded.of(turn=ApiTurnOutcome.from_materialized(outcome)),
        ApiSessionFault.of(
            reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited", command_id=None
        ),
    ]


def build(path: Path, events: int, seed: int) -> BigStore:
    rng = random.Random(seed)
    ids = tuple(f"session-{n:04d}" for n in range(SESSIONS))
    bodies = [encode_event_body(event) for event in templates()]
    started = time.perf_counter()
    with EventStore.open(path) as store:
        for n, session_id in enumerate(ids):
            record = msgspec.structs.replace(
                example_session(session_id), workspace_id=WORKSPACES[n % len(WORKSPACES)]
            )
            store.ask(SaveSession(record=record))
    db = apsw.Connection(str(path))
    db.execute("PRAGMA synchronous=OFF")
    written = 0
    while written < events:
        count = min(BATCH, events - written)
        rows = [
            (rng.choice(ids), 1_795_000_000_000 + written + i, bodies[(written + i) % len(bodies)])
            for i in range(count)
        ]
        with db:
            db.executemany(
                "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES (?, ?, ?)", rows
            )
        written += count
    db.close()
    built = time.perf_counter() - started
    started = time.perf_counter()
    EventStore.open(path).close()
    first_open = time.perf_counter() - started
    log(
        f"built a {events:,}-event store in {built:.1f} s "
        f"({path.stat().st_size / 1e6:.0f} MB; first open {first_open * 1e3:.0f} ms)"
    )
    return BigStore(path, events, ids, built, first_open)


def big_store(ctx: Context) -> BigStore:
    events = ctx.scale(1_000_000, 100_000)
    store: BigStore = ctx.shared(
        "bigstore", lambda: build(ctx.scratch / f"big-{events}.sqlite3", events, ctx.seed)
    )
    return store
