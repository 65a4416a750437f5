"""sessions: per-event cost with many live sessions fed interleaved, against few.

A supervisor feeds many sessions at once: one turn of each in turn, round robin. Every
session's transcript is first grown to the same size (``ITEMS`` items: prompt turns of
a user message and an answer), then the measured phase feeds each session the same
number of turns, interleaved. The figure is relay events/s over the measured phase
with ``N`` sessions, against the same with 10 sessions fed the same total number of
events (so the baseline sessions get ``N/10`` times as many turns each). Every session
keeps its projector (``max_projectors`` above ``N``); a flat cost means the per-event
work does not grow with the number of live sessions. Aim: at least 0.85.
"""

from __future__ import annotations

import time
from pathlib import Path

from relaystore.actors.store import EventStore
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.relay import RelayEvent
from relaystore.testing import JournalBuilder, example_session
from suite.common import Context, Figure, log

NAME = "sessions"
BASE = 10
AIM = 0.85


def _feed(store: EventStore, session_id: str, events: list[RelayEvent]) -> None:
    store.ask(ObserveRelayEvents(session_id=session_id, events=events))


def measure(path: Path, sessions: int, items: int, measured_turns: int) -> float:
    """Relay events/s of the measured phase, ``measured_turns`` turns in total, round robin."""
    builders = {f"s-{n}": JournalBuilder() for n in range(sessions)}
    with EventStore.open(path, max_projectors=sessions + 1, synchronous="FULL") as store:
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
        started = time.perf_counter()
        for session_id, events in plan:
            _feed(store, session_id, events)
        elapsed = time.perf_counter() - started
    return total / elapsed


def run(ctx: Context) -> list[Figure]:
    items = ctx.scale(400, 100)
    counts = (300, 1000) if not ctx.quick else (100,)
    figures = []
    for sessions in counts:
        turns = sessions * ctx.scale(3, 2)
        rates = []
        base_rates = []
        for r in range(ctx.scale(2, 1)):
            base_rates.append(
                measure(ctx.scratch / f"sessions-base-{sessions}-{r}.sqlite3", BASE, items, turns)
            )
            rates.append(
                measure(ctx.scratch / f"sessions-{sessions}-{r}.sqlite3", sessions, items, turns)
            )
        rate, base = max(rates), max(base_rates)
        log(f"sessions: {sessions} live {rate:,.0f} ev/s vs {BASE} live {base:,.0f} ev/s")
        figures.append(
            Figure(
                NAME,
                f"{sessions} sessions interleaved, transcripts of {items} items",
                rate,
                "events/s",
                f"{BASE} sessions, same events",
                base,
                aim=f">= {AIM}",
                ok=rate / base >= AIM,
                details={"turns": turns, "rounds": len(rates)},
            )
        )
    return figures
