"""How fast relaystore reads journal lines, against a plain msgspec decode.

Generates a realistic journal (streamed agent text, tool calls and their updates, and the
command lifecycle around each prompt), then times, per line:

* ours: ``decode_relay_event`` (typed observation, raw observation bytes kept) followed by
  ``validate_relay_event_self`` (SHA-256 over the digest payload);
* plain: ``msgspec.json.decode(line)`` into dicts, no typing and no digest.

Each is run ``--repeat`` times, alternating; the best CPU time of each counts. Run from the repository root::

    python benchmarks/bench_codec.py [--lines 50000] [--repeat 5] [--seed 7]
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

from relaystore.domain.digests import validate_relay_event_self
from relaystore.domain.outcomes import TokenUsage, UsageScope
from relaystore.domain.relay import (
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayObservation,
    SessionUpdate,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.testing import JournalBuilder

WORDS = [
    "the",
    "patch",
    "keeps",
    "every",
    "journal",
    "line",
    "verifiable",
    "while",
    "the",
    "projection",
    "catches",
    "up;",
    "run",
    "git",
    "status,",
    "then",
    "read",
    "src/main.rs",
    "and",
    "check",
    "the",
    "failing",
    "test",
    "—",
    "naïve",
    "→",
    "fixed",
    "✓",
]


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _observations(rng: random.Random) -> Iterator[tuple[RelayObservation, str | None]]:
    """An endless journal: each prompt streams text and tool calls between its lifecycle."""
    prompt = 0
    while True:
        prompt += 1
        command_id = f"prompt-{prompt}"
        blocks = [{"type": "text", "text": _text(rng, 5, 40)}]
        yield (
            CommandQueued.of(
                command_id=command_id, command=PromptCommand.of(prompt=blocks), created_at_ms=prompt
            ),
            None,
        )
        yield CommandStarted.of(command_id=command_id, started_at_ms=prompt), command_id
        for step in range(rng.randint(20, 60)):
            roll = rng.random()
            if roll < 0.65:
                update = {
                    "sessionUpdate": rng.choice(["agent_message_chunk", "agent_thought_chunk"]),
                    "content": {"type": "text", "text": _text(rng, 1, 8)},
                }
            elif roll < 0.75:
                update = {
                    "sessionUpdate": "tool_call",
                    "toolCallId": f"{prompt}:tool_{step}",
                    "title": "Bash",
                    "kind": "execute",
                    "status": "pending",
                    "rawInput": {"command": "git status --short", "timeout": 120},
                    "content": [],
                }
            else:
                update = {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": f"{prompt}:tool_{step}",
                    "status": rng.choice(["in_progress", "completed"]),
                    "content": [
                        {"type": "content", "content": {"type": "text", "text": _text(rng, 3, 30)}}
                    ],
                }
            yield SessionUpdate.of(update=update), command_id
        usage = TokenUsage(
            scope=UsageScope.TURN,
            total_tokens=rng.randint(1000, 90000),
            input_tokens=rng.randint(500, 80000),
            output_tokens=rng.randint(10, 9000),
            cached_read_tokens=rng.randint(0, 60000),
        )
        yield (
            CommandCompleted.of(
                command_id=command_id, outcome=PromptOutcome.of(stop_reason="end_turn", usage=usage)
            ),
            command_id,
        )


def journal(count: int, seed: int) -> list[bytes]:
    """``count`` format 2 journal lines with correct digests."""
    rng = random.Random(seed)
    journal = JournalBuilder(start_ms=1_790_000_000_037, step_ms=37)
    for ordinal, (observation, command_id) in enumerate(_observations(rng), start=1):
        if ordinal > count:
            break
        journal.add(observation, command_id=command_id)
    return [encode_relay_event(event) for event in journal.events]


def ours(lines: list[bytes]) -> None:
    for line in lines:
        validate_relay_event_self(decode_relay_event(line))


def plain(lines: list[bytes]) -> None:
    decode = msgspec.json.decode
    for line in lines:
        decode(line)


def best_of(
    runs: dict[str, Callable[[list[bytes]], None]], lines: list[bytes], repeat: int
) -> dict[str, float]:
    """Best CPU time of each run (``process_time``, so other processes on the machine
    disturb it less); rounds alternate the runs so both see the same conditions."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.process_time()
            run(lines)
            best[name] = min(best[name], time.process_time() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    lines = journal(args.lines, args.seed)
    size = sum(len(line) for line in lines)
    print(f"{len(lines)} lines, {size / len(lines):.0f} bytes per line on average")

    best = best_of({"ours": ours, "plain": plain}, lines, args.repeat)
    ours_rate = len(lines) / best["ours"]
    plain_rate = len(lines) / best["plain"]
    print(f"decode_relay_event + validate_relay_event_self: {ours_rate:12,.0f} lines/s")
    print(f"msgspec.json.decode into dicts:                 {plain_rate:12,.0f} lines/s")
    print(f"ratio ours/plain: {ours_rate / plain_rate:.2f} (aim: at least 0.50)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
