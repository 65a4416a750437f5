"""sessions: per-event cost with many live sessions fed interleaved, against few.

A supervisor feeds many sessions at once: one turn of each in turn, round robin. Every
session's transcript is first grown to the same size (``ITEMS`` items: prompt turns of
a user message and an answer), then the measured phase feeds each session the same
number of turns, interleaved. The figure is relay events/s over the measured phase
with ``N`` sessions, against the same with 10 sessions fed the same total number of
events (so the baseline sessions get ``N/10`` times as many turns each). Every session
keeps its projector (``max_projectors`` above ``N``); a flat cost means the per-event
work does not grow with the number of live sessions. Aim: at least 0.85.

Two more rows feed 300 sessions with the default ``max_projectors`` (256; with
``--quick``, 100 sessions over 85): round robin over more sessions than the cap is
plain LRU eviction's worst case (every event reloads its session), so the rows measure
the eviction policy and the cost of a reload. One runs in the projectors' threads, the
other with every option at its default (``projection="process"``: each reload and each
small message crosses a worker's pipe); each row's baseline (10 sessions) projects the
way the row does. Same aim.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path

from relaystore.actors.core import ProjectionMode
from relaystore.actors.store import EventStore
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.relay import RelayEvent
from relaystore.testing import JournalBuilder, example_session
from suite.common import Context, Figure, log

NAME = "sessions"
DEFAULT_MAX_PROJECTORS: int = (
    inspect.signature(EventStore.open).parameters["max_projectors"].default
)
"""``EventStore.open``'s default ``max_projectors`` (256)."""
DEFAULT_PROJECTION: ProjectionMode = (
    inspect.signature(EventStore.open).parameters["projection"].default
)
"""``EventStore.open``'s default ``projection`` ("process")."""
BASE = 10
AIM = 0.85


def _feed(store: EventStore, session_id: str, events: list[RelayEvent]) -> None:
    store.ask(ObserveRelayEvents(session_id=session_id, events=events))


def measure(
    path: Path,
    sessions: int,
    items: int,
    measured_turns: int,
    max_projectors: int | None = None,
    projection: ProjectionMode = "thread",
) -> tuple[float, int]:
    """Relay events/s of the measured phase, ``measured_turns`` turns in total, round
    robin, and how many projectors it started (sessions reloaded). ``max_projectors``:
    None keeps every session's projector."""
    builders = {f"s-{n}": JournalBuilder() for n in range(sessions)}
    cap = sessions + 1 if max_projectors is None else max_projectors
    with EventStore.open(
        path, max_projectors=cap, synchronous="FULL", projection=projection
    ) as store:
        for session_id, builder in builders.items():
            store.ask(SaveSession(record=example_session(session_id, "bench")))
            warm: list[RelayEvent] = []
            for turn in range(items // 2):  # each turn adds a user message and an answer
                warm += builder.prompt_turn(f"warm-up {turn}", chunks=("one ", "two ", "three"))
            for start in range(0, len(warm), 512):
                _feed(store, session_id, warm[start : start + 512])
        plan: list[tuple[str, list[RelayEvent]]] = []
        ids = list(builders)
        for turn in range(measured_turns):
            session_id = ids[turn % sessions]
            events = builders[session_id].prompt_turn(f"measured {turn}", chunks=("a ", "b"))
            plan.append((session_id, events))
        total = sum(len(events) for _, events in plan)
        loads = store.metrics().projector_loads
        started = time.perf_counter()
        for session_id, events in plan:
            _feed(store, session_id, events)
        elapsed = time.perf_counter() - started
        loads = store.metrics().projector_loads - loads
    return total / elapsed, loads


def run(ctx: Context) -> list[Figure]:
    items = ctx.scale(400, 100)
    counts: list[tuple[int, int | None, ProjectionMode]] = (
        [
            (300, None, "thread"),
            (1000, None, "thread"),
            (300, DEFAULT_MAX_PROJECTORS, "thread"),
            (300, DEFAULT_MAX_PROJECTORS, DEFAULT_PROJECTION),
        ]
        if not ctx.quick
        else [(100, None, "thread"), (100, 85, "thread"), (100, 85, DEFAULT_PROJECTION)]
    )
    figures = []
    for sessions, cap, projection in counts:
        turns = sessions * ctx.scale(3, 2)
        rates = []
        base_rates = []
        loads = []
        tag = ("" if cap is None else f"-cap{cap}") + ("" if projection == "thread" else "-p")
        for r in range(ctx.scale(2, 1)):
            base_rates.append(
                measure(
                    ctx.scratch / f"sessions-base-{sessions}{tag}-{r}.sqlite3",
                    BASE,
                    items,
                    turns,
                    projection=projection,
                )[0]
            )
            rate, reloads = measure(
                ctx.scratch / f"sessions-{sessions}{tag}-{r}.sqlite3",
                sessions,
                items,
                turns,
                cap,
                projection,
            )
            rates.append(rate)
            loads.append(reloads)
        rate, base = max(rates), max(base_rates)
        log(
            f"sessions: {sessions} live (max_projectors {cap or 'above N'}) {rate:,.0f} ev/s"
            f" vs {BASE} live {base:,.0f} ev/s; projectors started {loads} for {turns} turns"
        )
        name = f"{sessions} sessions interleaved, transcripts of {items} items"
        if cap is not None:
            name += f", max_projectors={cap}"
        if projection != "thread":
            name += f', projection="{projection}" (every option its default)'
        figures.append(
            Figure(
                NAME,
                name,
                rate,
                "events/s",
                f"{BASE} sessions, same events",
                base,
                aim=f">= {AIM}",
                ok=rate / base >= AIM,
                details={
                    "turns": turns,
                    "rounds": len(rates),
                    "projector_loads": loads,
                    "projection": projection,
                    "baseline_projection": projection,
                },
            )
        )
    return figures
