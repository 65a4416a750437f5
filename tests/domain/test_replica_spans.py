"""The rule a restore and a mirror apply at each commit marker (``cut_span``), on
hand-made spans: what it applies, drops, holds and refuses."""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.errors import StoreError
from relaystore.domain.replication import (
    GAP,
    Incoming,
    Mark,
    RecordState,
    WireEvent,
    cut_span,
)

STORE = "ab" * 16


def _event(seq: int, body: bytes = b"{}") -> Incoming:
    value = WireEvent(seq, "s1", 0, "t", msgspec.Raw(body))
    return Incoming("event", STORE, seq, "s1", value)


def _record(number: int, *, deleted: bool = False) -> Incoming:
    value = RecordState(session_id="s1", workspace=None, context=None, session=None)
    return Incoming("record", STORE, number, "s1", value if deleted else None)


def _marker(change: int, seq: int, *, says_gaps: bool = False) -> Incoming:
    return Incoming("commit", STORE, change, None, None, marker_seq=seq, says_gaps=says_gaps)


def _gap(first: int, last: int) -> Incoming:
    return Incoming(GAP, STORE, first, None, None, marker_seq=last)


def _at(messages: list[Incoming]) -> list[tuple[int, Incoming]]:
    return list(enumerate(messages, start=1))


def test_a_span_applies_each_message_once_and_holds_what_is_past_its_marker() -> None:
    messages = [_record(1), _event(1), _event(2), _event(2), _record(2), _event(9)]
    span = cut_span(STORE, Mark(0, 0), _marker(2, 2), 99, _at(messages))
    assert [(m.kind, m.number) for m in span.messages] == [
        ("record", 1),
        ("record", 2),
        ("event", 1),
        ("event", 2),
    ]
    assert [m.number for _, m in span.held] == [9]
    assert span.mark == Mark(2, 2)


def test_what_the_mark_covers_is_dropped_and_a_stale_marker_applies_nothing() -> None:
    republished = [_record(1), _event(1), _event(2)]
    stale = cut_span(STORE, Mark(1, 2), _marker(1, 2), 99, _at(republished))
    assert stale.messages == []
    assert stale.held == []
    assert stale.mark == Mark(1, 2)
    span = cut_span(STORE, Mark(1, 2), _marker(1, 3), 99, _at([*republished, _event(3)]))
    assert [m.number for m in span.messages] == [3]


@pytest.mark.parametrize(
    ("messages", "marker", "says"),
    [
        ([_record(2), _event(1)], _marker(2, 1), "change 1 of store"),
        ([_record(1), _event(1), _event(1, b"[]")], _marker(1, 1), "twice with different"),
    ],
)
def test_a_missing_change_or_a_forged_duplicate_is_refused_naming_it(
    messages: list[Incoming], marker: Incoming, says: str
) -> None:
    with pytest.raises(StoreError, match=says):
        cut_span(STORE, Mark(0, 0), marker, 99, _at(messages))


@pytest.mark.parametrize(
    ("messages", "marker"),
    [
        ([_record(1), _event(1), _event(3)], _marker(1, 3)),
        ([_record(1), _event(1)], _marker(1, 2)),
    ],
)
def test_a_missing_event_seq_waits_for_the_next_marker_naming_it(
    messages: list[Incoming], marker: Incoming
) -> None:
    span = cut_span(STORE, Mark(0, 0), marker, 99, _at(messages))
    assert span.hole is not None
    assert f"API event seq 2 of store {STORE} is missing" in span.hole
    assert span.messages == []
    assert [m for _, m in span.held] == messages
    assert span.mark == Mark(0, 0)
    # The next marker's span deletes a session: the hole is its events; all applied.
    later = cut_span(
        STORE, Mark(0, 0), _marker(2, 3), 99, [*span.held, (9, _record(2, deleted=True))]
    )
    assert later.hole is None
    assert later.mark == Mark(2, 3)


def test_under_an_older_publisher_a_hole_is_taken_for_a_deleted_sessions_events() -> None:
    span = cut_span(STORE, Mark(0, 0), _marker(1, 3), 9, _at([_record(1, deleted=True), _event(1)]))
    assert [m.number for m in span.messages] == [1, 1]


def test_a_marker_that_says_gaps_refuses_a_hole_its_gaps_do_not_cover() -> None:
    """Before: a hole inside a span that also deleted a session was accepted."""
    deleting = [_record(1, deleted=True), _event(1), _gap(2, 3), _event(5), _gap(6, 6)]
    span = cut_span(STORE, Mark(0, 0), _marker(1, 6, says_gaps=True), 9, _at(deleting))
    assert span.hole is not None
    assert f"API event seq 4 of store {STORE} is missing" in span.hole
    assert span.messages == []
    whole = [*deleting[:3], _event(4), *deleting[3:]]
    span = cut_span(STORE, Mark(0, 0), _marker(1, 6, says_gaps=True), 9, _at(whole))
    assert span.hole is None
    assert [(m.kind, m.number) for m in span.messages] == [
        ("record", 1),
        ("event", 1),
        ("event", 4),
        ("event", 5),
    ]
    assert span.mark == Mark(1, 6)


def test_a_gap_past_the_marker_waits_and_one_the_mark_covers_is_dropped() -> None:
    messages = [_record(1), _event(1), _gap(2, 4), _gap(5, 7)]
    span = cut_span(STORE, Mark(0, 0), _marker(1, 4, says_gaps=True), 9, _at(messages))
    assert span.hole is None
    assert [m.number for m in span.messages] == [1, 1]
    assert [(m.kind, m.number) for _, m in span.held] == [(GAP, 5)]
    later = cut_span(
        STORE, span.mark, _marker(1, 8, says_gaps=True), 9, [*span.held, (9, _event(8))]
    )
    assert later.hole is None
    assert [m.number for m in later.messages] == [8]


def test_a_marker_behind_on_one_count_and_ahead_on_the_other_is_refused() -> None:
    with pytest.raises(StoreError, match="no state of the store is that"):
        cut_span(STORE, Mark(5, 5), _marker(6, 4), 9, [])


def test_a_replica_without_a_mark_starts_from_the_lowest_it_reads() -> None:
    span = cut_span(STORE, None, _marker(4, 8), 9, _at([_record(4), _event(7), _event(8)]))
    assert span.mark == Mark(4, 8)
    assert [m.number for m in span.messages] == [4, 7, 8]


def test_a_replica_without_a_mark_counts_a_gap_among_the_seqs_not_the_changes() -> None:
    """A gap's number is a seq: read as a change it would start the span at change 2."""
    messages = [_record(4), _gap(2, 6), _event(7), _event(8)]
    span = cut_span(STORE, None, _marker(4, 8, says_gaps=True), 9, _at(messages))
    assert span.hole is None
    assert span.mark == Mark(4, 8)
    assert [(m.kind, m.number) for m in span.messages] == [
        ("record", 4),
        ("event", 7),
        ("event", 8),
    ]
