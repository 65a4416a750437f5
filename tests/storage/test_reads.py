"""The read statements on hand-written rows: seq ties, usage totals, deleted sessions."""

from __future__ import annotations

import apsw

from relaystore.domain.outcomes import (
    MaterializedTurnOutcome,
    TokenUsage,
    TurnOutcomeCompleted,
    UsageScope,
)
from relaystore.domain.wire import encode
from relaystore.storage.reads.transcript import load_transcript_page
from relaystore.storage.reads.usage import load_usage_page


def _item(
    db: apsw.Connection, stable_id: str, position: int, latest: int | None, body: str
) -> None:
    db.execute(
        "INSERT INTO materialized_transcript_items(session_id, stable_id, position,"
        " latest_content_event_ordinal, created_at_ms, last_changed_at_ms, body_json)"
        " VALUES ('session-1', ?, ?, ?, 1, 1, ?)",
        (stable_id, position, latest, body),
    )


def test_items_sharing_a_seq_travel_together(store: apsw.Connection) -> None:
    _item(store, "user:1", 1, None, '{"kind":"user","content":[]}')
    _item(store, "agent:a", 2, 3, '{"kind":"agent","chunks":[],"streaming":false}')
    _item(store, "system:3", 3, None, '{"kind":"system","text":"x"}')
    _item(store, "system:4", 4, None, '{"kind":"system","text":"y"}')
    page = load_transcript_page(store, "session-1", 0, limit=2)
    assert page is not None
    assert [(i.stable_id, i.seq) for i in page.items] == [
        ("user:1", 1),
        ("agent:a", 3),
        ("system:3", 3),
    ]
    assert (page.next_after_seq, page.latest_seq) == (3, 4)
    rest = load_transcript_page(store, "session-1", page.next_after_seq, limit=2)
    assert rest is not None
    assert [i.stable_id for i in rest.items] == ["system:4"]
    assert rest.next_after_seq == 4


def _turn(n: int, scope: UsageScope | None, tokens: int) -> MaterializedTurnOutcome:
    usage = None
    if scope is not None:
        usage = TokenUsage(
            scope=scope, total_tokens=tokens, input_tokens=tokens - 1, output_tokens=1
        )
    return MaterializedTurnOutcome(
        command_id=f"p{n}",
        turn_start_position=n,
        completed_ordinal=n,
        completed_at_ms=100,
        outcome=TurnOutcomeCompleted(stop_reason="end_turn"),
        usage=usage,
    )


def test_usage_totals_count_whole_turn_reports_only(store: apsw.Connection) -> None:
    for n, scope in enumerate([UsageScope.TURN, UsageScope.TURN, UsageScope.LAST_REQUEST, None], 1):
        store.execute(
            "INSERT INTO session_turn_usage(session_id, command_id, completed_ordinal,"
            " turn_start_position, body) VALUES ('session-1', ?, ?, ?, ?)",
            (f"p{n}", n, n, encode(_turn(n, scope, 10 * n)).decode()),
        )
    page = load_usage_page(store, "session-1", 0, limit=2)
    assert page is not None
    assert [t.command_id for t in page.turns] == ["p1", "p2"]
    assert page.next_after_seq == 2
    assert page.latest_seq == 4
    assert {k: (v.tokens, v.reported_turns) for k, v in page.totals.items()} == {
        "total_tokens": (30, 2),
        "input_tokens": (28, 2),
        "output_tokens": (2, 2),
    }
    coverage = page.coverage
    assert (coverage.recorded_turns, coverage.full_turn_reports) == (4, 2)
    assert (coverage.last_request_reports, coverage.missing_reports) == (1, 1)
