"""The raw usage and elicitation reads: the typed page's bytes, without decoding a body.

``GET .../usage`` and ``GET .../elicitations`` answer ``encode`` of the raw replies, so
every cursor and limit of any stored rows must give the bytes the typed read encodes.
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.elicitation.forms import ElicitationRequest
from relaystore.domain.errors import ProjectionError
from relaystore.domain.outcomes import MaterializedTurnOutcome, ProviderCost
from relaystore.domain.wire import encode
from relaystore.storage.reads.elicitations import load_elicitations, load_raw_elicitations
from relaystore.storage.reads.usage import load_raw_usage_page, load_usage_page
from tests.domain.strategies import (
    PLAIN_FLOATS,
    elicitation_requests,
    materialized_turn_outcomes,
)

_costs = st.builds(
    ProviderCost,
    amount=PLAIN_FLOATS,
    currency=st.sampled_from(["USD", "EUR", "é\u2028"]),
    observed_at_ms=st.integers(0, 2**53),
)


def _stored_turns(draw_turns: list[dict[str, Any]]) -> list[MaterializedTurnOutcome]:
    """Generated turns as the store writes them: distinct commands and ordinals."""
    turns = []
    for n, fields in enumerate(draw_turns, 1):
        turn = msgspec.convert(fields, MaterializedTurnOutcome)
        turns.append(msgspec.structs.replace(turn, command_id=f"c{n}", completed_ordinal=n * 3))
    return turns


def _store_usage(
    db: apsw.Connection, turns: list[MaterializedTurnOutcome], cost: ProviderCost | None
) -> None:
    db.execute("DELETE FROM session_turn_usage")
    db.execute("DELETE FROM session_provider_cost")
    db.executemany(
        "INSERT INTO session_turn_usage(session_id, command_id, completed_ordinal,"
        " turn_start_position, body) VALUES ('session-1', ?, ?, ?, ?)",
        [(t.command_id, t.completed_ordinal, None, encode(t).decode()) for t in turns],
    )
    if cost is not None:
        db.execute(
            "INSERT INTO session_provider_cost(session_id, body) VALUES ('session-1', ?)",
            (encode(cost).decode(),),
        )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.lists(materialized_turn_outcomes, max_size=6),
    cost=st.none() | _costs,
    limit=st.sampled_from([1, 2, 5, 1000]),
)
def test_every_usage_page_reads_raw_as_the_typed_page_encodes(
    store: apsw.Connection,
    turns: list[dict[str, Any]],
    cost: ProviderCost | None,
    limit: int,
) -> None:
    stored = _stored_turns(turns)
    _store_usage(store, stored, cost)
    for after in range(3 * len(stored) + 2):
        typed = load_usage_page(store, "session-1", after, limit)
        raw = load_raw_usage_page(store, "session-1", after, limit)
        assert typed is not None
        assert raw is not None
        assert encode(raw) == encode(typed)
        assert raw.next_after_seq == typed.next_after_seq


def test_raw_usage_answers_none_for_an_unknown_session(store: apsw.Connection) -> None:
    assert load_raw_usage_page(store, "nobody") is None


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(questions=st.lists(elicitation_requests, max_size=3))
def test_pending_questions_read_raw_as_the_typed_list_encodes(
    store: apsw.Connection, questions: list[dict[str, Any]]
) -> None:
    typed_questions = msgspec.convert(questions, list[ElicitationRequest])
    store.execute(
        "INSERT INTO materialized_sessions(session_id, pending_elicitations_json)"
        " VALUES ('session-1', ?) ON CONFLICT(session_id)"
        " DO UPDATE SET pending_elicitations_json = excluded.pending_elicitations_json",
        (encode(typed_questions).decode(),),
    )
    typed = load_elicitations(store, "session-1")
    raw = load_raw_elicitations(store, "session-1")
    assert typed is not None
    assert raw is not None
    assert encode(raw) == encode(typed)


def test_raw_elicitations_answer_none_without_a_projection(store: apsw.Connection) -> None:
    assert load_raw_elicitations(store, "nobody") is None


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ('{"command_id": "c1", ', "turn usage of command 'c1' does not decode"),
        ("[1]", "not a JSON object"),
    ],
)
def test_a_stored_turn_that_is_not_a_json_object_is_refused_by_name(
    store: apsw.Connection, body: str, why: str
) -> None:
    store.execute(
        "INSERT INTO session_turn_usage(session_id, command_id, completed_ordinal, body)"
        " VALUES ('session-1', 'c1', 1, ?)",
        (body,),
    )
    with pytest.raises(ProjectionError, match=why) as refused:
        load_raw_usage_page(store, "session-1")
    assert refused.value.session_id == "session-1"
    with pytest.raises(ProjectionError, match="turn usage"):
        load_usage_page(store, "session-1")


def test_stored_questions_that_are_not_an_array_are_refused(store: apsw.Connection) -> None:
    store.execute(
        "INSERT INTO materialized_sessions(session_id, pending_elicitations_json)"
        " VALUES ('session-1', '{}') ON CONFLICT(session_id)"
        " DO UPDATE SET pending_elicitations_json = excluded.pending_elicitations_json"
    )
    with pytest.raises(ProjectionError, match="pending elicitations is not a JSON array"):
        load_raw_elicitations(store, "session-1")
    with pytest.raises(ProjectionError, match="pending elicitations"):
        load_elicitations(store, "session-1")
