"""toolcalls: per-event cost of a long session of shell tool calls, against a short one.

Each tool call is a provider call that finishes with a raw result (an exit code and
its output as a list of byte values, as Kimi reports it) followed by the terminal
output the result names, which the call claims by matching that result. The figure is
relay events/s projecting a session of ``CALLS`` such calls with the pure projection
(:class:`relaystore.domain.projection.SessionProjection`, no store), against the first
``BASE`` of them projected the same way. A flat cost means matching a terminal output
to its tool does not walk the tools before it. Aim: at least 0.85.
"""

from __future__ import annotations

import time

from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.projection import SessionProjection
from relaystore.domain.relay import RelayEvent, SessionUpdate, TerminalOutput
from relaystore.testing import JournalBuilder
from suite.common import Context, Figure, log

NAME = "toolcalls"
CALLS = 10_000
BASE = 1_000
AIM = 0.85


def tool_call_events(calls: int) -> list[RelayEvent]:
    """A session of ``calls`` finished shell calls, each followed by its terminal output."""
    journal = JournalBuilder()
    for n in range(calls):
        output = f"step {n}: ok\n"
        journal.add(
            SessionUpdate.of(
                update={
                    "sessionUpdate": "tool_call",
                    "toolCallId": f"call-{n}",
                    "title": "Shell",
                    "kind": "execute",
                    "status": "completed",
                    "rawOutput": {"exit_code": 0, "output": list(output.encode())},
                }
            )
        )
        journal.add(
            TerminalOutput.of(terminal_id=f"t-{n}", output=output, exit_code=0, truncated=False)
        )
    return journal.events


def measure(events: list[RelayEvent]) -> float:
    """Relay events/s projecting ``events`` into an empty session."""
    projection = SessionProjection(MaterializedSession.empty("bench-toolcalls"))
    started = time.perf_counter()
    for event in events:
        projection.apply(event, digest_checked=True)
    elapsed = time.perf_counter() - started
    assert len(projection.session.transcript) == len(events) // 2  # every output claimed
    return len(events) / elapsed


def run(ctx: Context) -> list[Figure]:
    events = tool_call_events(CALLS)
    base_events = events[: 2 * BASE]
    rates = []
    base_rates = []
    for _ in range(ctx.scale(3, 1)):
        base_rates.append(max(measure(base_events) for _ in range(ctx.scale(3, 2))))
        rates.append(measure(events))
    rate, base = max(rates), max(base_rates)
    log(f"toolcalls: {CALLS:,} calls {rate:,.0f} ev/s vs first {BASE:,} {base:,.0f} ev/s")
    return [
        Figure(
            NAME,
            f"session of {CALLS:,} tool calls with raw results",
            rate,
            "events/s",
            f"first {BASE:,} tool calls",
            base,
            aim=f">= {AIM}",
            ok=rate / base >= AIM,
            details={"events": len(events), "rounds": len(rates)},
        )
    ]
