"""Projection throughput on a generated 50k-event journal (a script, not a test).

The journal is rich in what real sessions are made of: streamed agent and thought
chunks, tool calls with many updates, terminal output, plans and a few questions. It
prints relay events per second for

* ``decode``: ``msgspec.json.decode`` of the lines into plain dicts (the baseline),
* ``decode_relay_event``: the typed decode of each line,
* ``SessionProjection.apply``: :meth:`domain.projection.SessionProjection.apply` over
  decoded events (chain and digest checks included; pure domain code, no storage),

and the ratio of the projection to the baseline. Run from the repository root::

    python benchmarks/bench_projection.py [--events 50000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.projection import SessionProjection
from relaystore.domain.relay import (
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    PromptOutcome,
    RelayObservation,
    SessionUpdate,
    TerminalOutput,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.testing import JournalBuilder

_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "builds")


def _observations(count: int, rng: random.Random) -> Iterator[RelayObservation]:
    """Turns of a busy session until ``count`` observations were produced."""
    produced = 0
    turn = 0
    while produced < count:
        turn += 1
        prompt_id = f"prompt-{turn}"
        text = " ".join(rng.choices(_WORDS, k=12))
        batch: list[RelayObservation] = [
            CommandQueued.of(
                command_id=prompt_id,
                command=PromptCommand.of(prompt=[{"type": "text", "text": text}]),
                created_at_ms=turn,
            ),
            CommandStarted.of(command_id=prompt_id, started_at_ms=turn),
        ]
        for step in range(rng.randint(2, 5)):
            thought_id = f"t-{turn}-{step}"
            for _ in range(rng.randint(10, 40)):
                batch.append(_chunk("agent_thought_chunk", thought_id, rng))
            message_id = f"m-{turn}-{step}"
            for _ in range(rng.randint(30, 120)):
                batch.append(_chunk("agent_message_chunk", message_id, rng))
            call_id = f"call-{turn}-{step}"
            batch.append(
                SessionUpdate.of(
                    update={
                        "sessionUpdate": "tool_call",
                        "toolCallId": call_id,
                        "title": "Bash",
                        "kind": "execute",
                        "content": [{"type": "terminal", "terminalId": f"term-{turn}-{step}"}],
                    }
                )
            )
            partial = ""
            for _ in range(rng.randint(10, 30)):
                partial += rng.choice(_WORDS) + " "
                batch.append(
                    SessionUpdate.of(
                        update={
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": call_id,
                            "status": "in_progress",
                            "rawInput": {"command": partial},
                        }
                    )
                )
            batch.append(
                TerminalOutput.of(
                    terminal_id=f"term-{turn}-{step}",
                    output="ok\n" * 5,
                    exit_code=0,
                    truncated=False,
                )
            )
            batch.append(
                SessionUpdate.of(
                    update={
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "completed",
                    }
                )
            )
            if step == 0:
                batch.append(
                    SessionUpdate.of(
                        update={
                            "sessionUpdate": "plan",
                            "entries": [
                                {"content": word, "priority": "medium", "status": "pending"}
                                for word in rng.sample(_WORDS, 3)
                            ],
                        }
                    )
                )
        if turn % 10 == 0:
            request = ElicitationRequest(id=f"q-{turn}", message="Proceed?", fields=[])
            batch.append(ElicitationRequested.of(request=request))
            batch.append(ElicitationResolved.of(elicitation_id=f"q-{turn}", action="accept"))
        batch.append(
            CommandCompleted.of(
                command_id=prompt_id, outcome=PromptOutcome.of(stop_reason="end_turn")
            )
        )
        for observation in batch:
            if produced == count:
                return
            produced += 1
            yield observation


def _chunk(kind: str, message_id: str, rng: random.Random) -> SessionUpdate:
    return SessionUpdate.of(
        update={
            "sessionUpdate": kind,
            "content": {"type": "text", "text": rng.choice(_WORDS) + " "},
            "messageId": message_id,
        }
    )


def generate_journal(count: int, seed: int = 7) -> list[bytes]:
    """``count`` journal lines (format 2, ordinals from 1)."""
    rng = random.Random(seed)
    journal = JournalBuilder(start_ms=1_800_000_000_007, step_ms=7)
    journal.extend(list(_observations(count, rng)))
    return [encode_relay_event(event) for event in journal.events]


def _best(repeat: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    lines = generate_journal(args.events)
    size = sum(len(line) + 1 for line in lines)
    events = [decode_relay_event(line) for line in lines]

    def decode_dicts() -> None:
        decode = msgspec.json.decode
        for line in lines:
            decode(line)

    def decode_typed() -> None:
        for line in lines:
            decode_relay_event(line)

    final: list[MaterializedSession] = []

    def project() -> None:
        projection = SessionProjection(MaterializedSession.empty("bench"))
        for event in events:
            projection.apply(event)
        final.append(projection.session)

    n = len(lines)
    baseline = _best(args.repeat, decode_dicts)
    typed = _best(args.repeat, decode_typed)
    projected = _best(args.repeat, project)
    session = final[-1]
    print(
        f"journal: {n} relay events, {size / 1e6:.1f} MB, final transcript {len(session.transcript)} items"
    )
    print(f"msgspec.json.decode -> dicts : {n / baseline:>12,.0f} events/s")
    print(f"decode_relay_event           : {n / typed:>12,.0f} events/s")
    print(f"SessionProjection.apply      : {n / projected:>12,.0f} events/s")
    print(f"projection / dict-decode time: {projected / baseline:.1f}x")


if __name__ == "__main__":
    main()
