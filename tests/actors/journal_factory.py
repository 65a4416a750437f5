"""Build realistic relay journals for command-line tests.

A journal is a run of prompt turns: the prompt is queued and started, the answer streams
as agent message chunks, and the command completes with ``end_turn``. Every turn yields
API events (``turn_started`` and ``turn_ended``), so the feed shows how far a replay got.
Events are built by :class:`relaystore.testing.JournalBuilder`; the conversation's
fixed wording and clock keep the command-line tests' journals as they were.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Iterator
from pathlib import Path

from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_FORMAT_V2,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCursor,
    RelayEvent,
    RelayObservation,
    SessionUpdate,
    encode_relay_event,
)
from relaystore.testing import JournalBuilder

__all__ = ["START_MS", "conversation", "journal_bytes", "observations", "write_journal"]

START_MS = 1_790_000_000_000
"""The clock before the first event; event ``n`` is recorded at ``START_MS + 37 * n``."""
_UNLINKED = "f" * 64
"""The digest a format 2 range starts after: format 2 events never link to it."""


def _chunk(text: str, message_id: str) -> SessionUpdate:
    return SessionUpdate.of(
        update={
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
            "messageId": message_id,
        }
    )


def observations(chunks_per_turn: int = 6) -> Iterator[tuple[str, RelayObservation]]:
    """An endless run of prompt turns as ``(command_id, observation)`` pairs."""
    turn = 0
    while True:
        turn += 1
        command_id = f"prompt-{turn}"
        prompt = [{"type": "text", "text": f"question {turn}: what does step {turn} do?"}]
        yield (
            command_id,
            CommandQueued.of(
                command_id=command_id,
                command=PromptCommand.of(prompt=prompt),
                created_at_ms=START_MS + turn,
            ),
        )
        yield command_id, CommandStarted.of(command_id=command_id, started_at_ms=START_MS + turn)
        for index in range(chunks_per_turn):
            yield command_id, _chunk(f"part {index} of answer {turn}. ", f"msg-{turn}")
        yield (
            command_id,
            CommandCompleted.of(
                command_id=command_id, outcome=PromptOutcome.of(stop_reason="end_turn")
            ),
        )


def conversation(
    last: int,
    *,
    first: int = 1,
    fmt: int = RELAY_EVENT_FORMAT_V2,
    chunks_per_turn: int = 6,
) -> list[RelayEvent]:
    """Events ``first..last`` of one conversation, with valid digests.

    Event ``n`` is recorded at ``START_MS + 37 * n``. Format 1 events chain from genesis
    (or, for ``first > 1``, from the conversation's own event ``first - 1``), so two calls
    with adjacent ranges continue one chain.
    """
    stream = observations(chunks_per_turn)
    if fmt == RELAY_EVENT_FORMAT_V1 or first <= 1:
        builder = JournalBuilder(format=fmt, start_ms=START_MS + 37, step_ms=37)
    else:  # format 2 needs no predecessor digest: skip building the events before first
        for _ in range(first - 1):
            next(stream)
        after = RelayCursor(ordinal=first - 1, digest=_UNLINKED)
        builder = JournalBuilder(
            format=fmt, after=after, start_ms=START_MS + 37 * first, step_ms=37
        )
    while builder.next_ordinal <= last:
        command_id, observation = next(stream)
        builder.add(observation, command_id=command_id)
    return [event for event in builder.events if event.ordinal >= first]


def journal_bytes(events: Iterable[RelayEvent]) -> bytes:
    """The journal lines of ``events``, each with its newline."""
    return b"".join(encode_relay_event(event) + b"\n" for event in events)


def write_journal(path: Path, events: Iterable[RelayEvent] | bytes) -> Path:
    """Write ``events`` (or raw bytes) to ``path``, gzipped when it ends in ``.gz``."""
    data = events if isinstance(events, bytes) else journal_bytes(events)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as out:
            out.write(data)
    else:
        path.write_bytes(data)
    return path
