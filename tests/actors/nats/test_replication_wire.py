"""The gap and marker messages on the wire (``relaystore.actors.nats.replication``): what the
publisher sends is what a reader decodes, and a gap that cannot be one is refused
naming the message."""

from __future__ import annotations

import pytest

from relaystore.actors.nats.replication import decode_incoming, gap_message, marker_message
from relaystore.domain.errors import StoreError
from relaystore.domain.replication import GAP

STORE = "cd" * 16


def test_a_gap_and_a_marker_decode_as_they_were_sent() -> None:
    gap = gap_message("relaystore", STORE, 4, 9)
    incoming = decode_incoming("relaystore", gap.subject, gap.headers, gap.data, 7)
    assert (incoming.kind, incoming.number, incoming.marker_seq) == (GAP, 4, 9)
    assert gap.headers["Nats-Msg-Id"] == f"{STORE}:g:4:9"
    marker = marker_message("relaystore", STORE, 3, 9)
    incoming = decode_incoming("relaystore", marker.subject, marker.headers, marker.data, 8)
    assert (incoming.number, incoming.marker_seq, incoming.says_gaps) == (3, 9, True)
    older = {k: v for k, v in marker.headers.items() if k != "Relaystore-Gaps"}  # 0.4's
    incoming = decode_incoming("relaystore", marker.subject, older, marker.data, 8)
    assert incoming.says_gaps is False


@pytest.mark.parametrize(("first", "last"), [(9, 4), (0, 3)])
def test_a_gap_that_cannot_be_one_is_refused_naming_the_message(first: int, last: int) -> None:
    gap = gap_message("relaystore", STORE, first, last)
    with pytest.raises(StoreError) as refused:
        decode_incoming("relaystore", gap.subject, gap.headers, gap.data, 11)
    assert str(refused.value).startswith(
        f"the message on relaystore.{STORE}.gap (stream seq 11): a gap of seqs {first}..{last}"
    )


def _event(event_type: str, data: str) -> tuple[str, dict[str, str], bytes]:
    body = (
        '{"seq":5,"session_id":"s1","recorded_at_ms":1,"type":"'
        + event_type
        + '","data":'
        + data
        + "}"
    )
    headers = {"Relaystore-Store": STORE, "Relaystore-Seq": "5"}
    return f"relaystore.{STORE}.default.s1", headers, body.encode()


def test_an_activity_event_decodes_and_one_whose_data_is_no_activity_is_refused() -> None:
    """A replica keeps a session's activity from its ``activity_changed`` events, so the
    boundary checks what such an event carries, naming the message."""
    activity = '{"activity":{"state":"idle","is_idle":true,"waiting_for_input":false,"capacity_retry":false}}'
    incoming = decode_incoming("relaystore", *_event("activity_changed", activity), 12)
    assert (incoming.kind, incoming.number, incoming.session_id) == ("event", 5, "s1")
    for data, said in (
        ('{"activity":{"state":"idle"}}', "its activity does not decode"),
        ('{"activity":7}', "its activity does not decode"),
    ):
        with pytest.raises(StoreError) as refused:
            decode_incoming("relaystore", *_event("activity_changed", data), 12)
        assert str(refused.value).startswith(
            f"the message on relaystore.{STORE}.default.s1 (stream seq 12): {said}"
        )
    # Any other kind's data is the feed's as published (not this check's).
    decode_incoming("relaystore", *_event("turn_started", '{"anything":1}'), 13)
