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
other with every option at its default (``projection="process"``: a session past the
cap is parked in its worker, not reloaded, and each small message crosses a worker's
pipe); each row's baseline (10 sessions) projects the way the row does. Same aim. The
details' ``projector_loads`` are the projections loaded from the store in the measured
phase (``StoreMetrics.projector_loads``).

The defaults rows (and their baselines) run in a fresh interpreter each
(``python -m suite.sessions defaults ...``), so a last row can say the memory 1,000 live
sessions take with every option its default (100 with ``--quick``): the peak RSS
(``VmHWM``) of that interpreter plus its projection workers' (read before the store
closes), against the 10-session baseline's. Aim: under 300 MiB.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from relaystore.actors.settings import DEFAULT_MAX_PROJECTORS, DEFAULT_PROJECTION, ProjectionMode
from relaystore.actors.store import EventStore
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.relay import RelayEvent
from relaystore.testing import JournalBuilder, example_session
from suite.common import Context, Figure, log
from suite.memory import _status_kib, _workers_peak_mib, measure as fresh

NAME = "sessions"
BASE = 10
AIM = 0.85
MEMORY_LIMIT_MIB = 300.0
"""The memory aim of the defaults row: 1,000 live sessions under this (issue 35)."""


def _feed(store: EventStore, session_id: str, events: list[RelayEvent]) -> None:
    store.ask(ObserveRelayEvents(session_id=session_id, events=events))


def measure(
    path: Path,
    sessions: int,
    items: int,
    measured_turns: int,
    max_projectors: int | None = None,
    projection: ProjectionMode = "thread",
    before_close: Callable[[EventStore], object] | None = None,
) -> tuple[float, int]:
    """Relay events/s of the measured phase, ``measured_turns`` turns in total, round
    robin, and how many projectors it started (sessions reloaded). ``max_projectors``:
    None keeps every session's projector. ``before_close`` sees the store last."""
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
            # The builder keeps what it built: let it go, so the peak RSS is the store's.
            builder.start = builder.frontier
            builder.events.clear()
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
        if before_close is not None:
            before_close(store)
    return total / elapsed, loads


def child(argv: list[str]) -> int:
    """``defaults DB SESSIONS ITEMS TURNS CAP``: one :func:`measure` with every option
    but ``max_projectors`` its default, in this fresh interpreter; prints its rate,
    reloads and peak RSS (its own and its workers') as one JSON object."""
    mode, db, sessions, items, turns, cap = argv
    if mode != "defaults":
        raise SystemExit(f"unknown mode {mode}")
    report: dict[str, Any] = {}

    def workers(store: EventStore) -> None:
        report["workers_peak_mib"] = _workers_peak_mib(store)

    rate, loads = measure(
        Path(db), int(sessions), int(items), int(turns), int(cap), DEFAULT_PROJECTION, workers
    )
    report["own_peak_mib"] = _status_kib("VmHWM") / 1024
    report["peak_mib"] = report["own_peak_mib"] + report.get("workers_peak_mib", 0.0)
    report.update(rate=rate, loads=loads)
    print(json.dumps(report))
    return 0


def _measured(
    path: Path, sessions: int, items: int, turns: int, cap: int | None, projection: ProjectionMode
) -> tuple[float, int, dict[str, Any] | None]:
    """One :func:`measure`: a defaults row's in a fresh interpreter (with its memory)."""
    if cap is None or projection != DEFAULT_PROJECTION:
        return (*measure(path, sessions, items, turns, cap, projection), None)
    args = ("defaults", str(path), str(sessions), str(items), str(turns), str(cap))
    report = fresh(*args, module="suite.sessions")
    return report["rate"], report["loads"], report


def run(ctx: Context) -> list[Figure]:
    items = ctx.scale(400, 100)
    cap = DEFAULT_MAX_PROJECTORS if not ctx.quick else 85
    counts: list[tuple[int, int | None, ProjectionMode]] = (
        [
            (300, None, "thread"),
            (1000, None, "thread"),
            (300, cap, "thread"),
            (300, cap, DEFAULT_PROJECTION),
            (1000, cap, DEFAULT_PROJECTION),
        ]
        if not ctx.quick
        else [(100, None, "thread"), (100, cap, "thread"), (100, cap, DEFAULT_PROJECTION)]
    )
    figures = []
    for sessions, limit, projection in counts:
        turns = sessions * ctx.scale(3, 2)
        rates, base_rates, loads = [], [], []
        peaks: list[dict[str, Any] | None] = []
        base_peaks: list[dict[str, Any] | None] = []
        tag = ("" if limit is None else f"-cap{limit}") + ("" if projection == "thread" else "-p")
        for r in range(ctx.scale(2, 1)):
            # The baseline runs the way the row does (a defaults row's: also afresh).
            base_limit = None if limit is None else limit
            base = _measured(
                ctx.scratch / f"sessions-base-{sessions}{tag}-{r}.sqlite3",
                BASE,
                items,
                turns,
                base_limit,
                projection,
            )
            base_rates.append(base[0])
            base_peaks.append(base[2])
            rate, reloads, peak = _measured(
                ctx.scratch / f"sessions-{sessions}{tag}-{r}.sqlite3",
                sessions,
                items,
                turns,
                limit,
                projection,
            )
            rates.append(rate)
            loads.append(reloads)
            peaks.append(peak)
        rate, base = max(rates), max(base_rates)
        log(
            f"sessions: {sessions} live (max_projectors {limit or 'above N'}) {rate:,.0f} ev/s"
            f" vs {BASE} live {base:,.0f} ev/s; projections loaded {loads} for {turns} turns"
        )
        name = f"{sessions} sessions interleaved, transcripts of {items} items"
        if limit is not None:
            name += f", max_projectors={limit}"
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
        if sessions == counts[-1][0] and limit is not None and projection == DEFAULT_PROJECTION:
            figures.append(_memory(sessions, items, peaks, base_peaks))
    return figures


def _memory(
    sessions: int,
    items: int,
    peaks: list[dict[str, Any] | None],
    base_peaks: list[dict[str, Any] | None],
) -> Figure:
    """The defaults row's memory: the largest peak over its rounds, against the baseline's."""
    peak = max(report["peak_mib"] for report in peaks if report is not None)
    base = max(report["peak_mib"] for report in base_peaks if report is not None)
    log(f"sessions: {sessions} live with every option its default: peak RSS {peak:.0f} MiB")
    return Figure(
        NAME,
        f"peak RSS with {sessions} live sessions of {items} items, every option its default "
        "(this process and its workers)",
        peak,
        "MiB",
        f"{BASE} sessions, same events",
        base,
        aim=f"value < {MEMORY_LIMIT_MIB:.0f} MiB",
        ok=peak < MEMORY_LIMIT_MIB,
        details={"children": peaks, "baseline_children": base_peaks},
    )


if __name__ == "__main__":
    raise SystemExit(child(sys.argv[1:]))
