"""ReadAhead: a journal read in a thread, handed over in order, at most ``depth`` batches ahead."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystore.actors.journal import Location
from relaystore.actors.journal.ahead import ReadAhead
from relaystore.domain.errors import ChainFault, RelayChainError
from relaystore.domain.relay import RelayEvent
from relaystore.testing import JournalBuilder

SIZE = 4


def _events(count: int) -> list[RelayEvent]:
    builder = JournalBuilder()
    while builder.next_ordinal <= count:
        builder.prompt_turn(f"turn {builder.next_ordinal}")
    return [event for event in builder.events if event.ordinal <= count]


def _located(events: list[RelayEvent]) -> Iterator[tuple[RelayEvent, Location]]:
    for event in events:
        yield event, Location(Path("journal.jsonl"), event.ordinal)


def test_batches_come_in_order_full_except_the_last() -> None:
    events = _events(SIZE * 3 + 2)
    with ReadAhead(_located(events), size=SIZE) as ahead:
        batches = list(ahead)
    assert [len(batch.events) for batch in batches] == [SIZE, SIZE, SIZE, 2]
    assert [event for batch in batches for event in batch.events] == events
    assert all(batch.fault is None for batch in batches)
    assert batches[1].where[SIZE + 1] == Location(Path("journal.jsonl"), SIZE + 1)


def test_a_fault_arrives_after_the_batches_before_it_with_the_events_read_before_it() -> None:
    events = _events(SIZE + 3)
    fault = RelayChainError(ChainFault.GAP, "missing", session_id="s", ordinal=SIZE + 4)

    def reading() -> Iterator[tuple[RelayEvent, Location]]:
        yield from _located(events)
        raise fault

    with ReadAhead(reading(), size=SIZE) as ahead:
        batches = list(ahead)
    assert [len(batch.events) for batch in batches] == [SIZE, 3]
    assert [batch.fault for batch in batches] == [None, fault]
    assert batches[1].events == events[SIZE:]


def test_an_unexpected_error_in_the_reading_thread_is_raised_to_the_consumer() -> None:
    def reading() -> Iterator[tuple[RelayEvent, Location]]:
        yield from _located(_events(2))
        raise RuntimeError("bug in the reader")

    with ReadAhead(reading(), size=SIZE) as ahead, pytest.raises(RuntimeError, match="bug"):
        list(ahead)


def test_the_reader_stays_at_most_depth_batches_ahead() -> None:
    events = _events(SIZE * 12)
    taken = [0]
    lead = [0]

    def reading() -> Iterator[tuple[RelayEvent, Location]]:
        for item in _located(events):
            lead[0] = max(lead[0], item[0].ordinal - taken[0])
            yield item

    with ReadAhead(reading(), size=SIZE, depth=2) as ahead:
        for batch in ahead:
            time.sleep(0.005)  # a slow consumer: the reader runs as far ahead as it may
            taken[0] += len(batch.events)
    # Two batches queued, one being built, and the one the consumer holds.
    assert SIZE * 2 < lead[0] <= SIZE * 4


def test_closing_early_stops_the_thread_and_closes_the_reader() -> None:
    closed = threading.Event()

    def reading() -> Iterator[tuple[RelayEvent, Location]]:
        try:
            yield from _located(_events(SIZE * 20))
        finally:
            closed.set()

    ahead = ReadAhead(reading(), size=SIZE, depth=1)
    first = next(iter(ahead))
    assert len(first.events) == SIZE
    ahead.close()
    assert closed.is_set()
    assert not any(
        thread.name == "relaystore-read-ahead" and thread.is_alive()
        for thread in threading.enumerate()
    )


def test_size_and_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReadAhead(iter([]), size=0)
    with pytest.raises(ValueError, match="at least 1"):
        ReadAhead(iter([]), size=1, depth=0)
