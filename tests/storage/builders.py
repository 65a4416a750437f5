"""Builders shared by the storage tests: the seed's events, written as rows directly.

The seed's tests get ``turn_started``/``turn_ended`` events by projecting relay
observations; at the storage level they are inserted as the projection would write them.
"""

from __future__ import annotations

import hashlib

import apsw
import msgspec

from relaystore.domain.api_events import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiEvent,
    ApiEventFilter,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
)
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    MaterializedTurnOutcome,
    TurnOutcomeCompleted,
)
from relaystore.domain.relay import RELAY_EVENT_GENESIS_DIGEST
from relaystore.domain.sessions.records import SessionRecord, SessionState
from relaystore.storage.events import insert_api_event
from relaystore.storage.paging import load_api_events
from relaystore.testing import example_session

__all__ = [
    "count_rows",
    "idle_activity",
    "insert_turn",
    "kinds",
    "old_turn_outcome",
    "running_session",
    "scan",
    "turn_ended",
    "turn_started",
]


def running_session(session_id: str = "session-1", bundle_id: str = "project-1") -> SessionRecord:
    """The seed fixture record, running."""
    return msgspec.structs.replace(
        example_session(session_id, bundle_id), state=SessionState.RUNNING
    )


def turn_started() -> ApiTurnStarted:
    """The ``turn_started`` the seed's ``turn()`` projects."""
    return ApiTurnStarted.of(
        turn=MaterializedTurn(
            command_id="prompt-1", accepted_ordinal=1, turn_start_position=1, started_at_ms=2
        )
    )


def old_turn_outcome(stop_reason: str = "end_turn") -> MaterializedTurnOutcome:
    """The projection's stored outcome of the seed's turn (the legacy event body)."""
    return MaterializedTurnOutcome(
        command_id="prompt-1",
        accepted_ordinal=1,
        turn_start_position=1,
        completed_ordinal=3,
        completed_at_ms=100,
        outcome=TurnOutcomeCompleted(stop_reason=stop_reason),
    )


def turn_ended(stop_reason: str = "end_turn") -> ApiTurnEnded:
    """The typed ``turn_ended`` of the seed's turn."""
    return ApiTurnEnded.of(turn=ApiTurnOutcome.from_materialized(old_turn_outcome(stop_reason)))


def insert_turn(connection: apsw.Connection, session_id: str = "session-1") -> None:
    """Append turn_started then turn_ended, recorded at 100, as one page would."""
    with connection:
        insert_api_event(connection, session_id, 100, turn_started())
        insert_api_event(connection, session_id, 100, turn_ended())


def idle_activity(since_ms: int = 100) -> ApiActivityState:
    """The seed's idle activity."""
    return ApiActivityState(
        state="running",
        details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=since_ms),
        is_idle=True,
        waiting_for_input=False,
        capacity_retry=False,
    )


def scan(
    connection: apsw.Connection, event_filter: ApiEventFilter | None = None, after_seq: int = 0
) -> list[ApiEvent]:
    """Every matching event after ``after_seq``, paging with the largest limit."""
    events: list[ApiEvent] = []
    cursor = after_seq
    while True:
        page = load_api_events(connection, event_filter, cursor, 1000)
        events += page.events
        if not page.events:
            return events
        cursor = page.next_after_seq


def kinds(events: list[ApiEvent]) -> list[str]:
    """The ``type`` of each event."""
    return [event.type for event in events]


def count_rows(connection: apsw.Connection, table: str) -> int:
    """Rows in ``table`` (a fixed name from the test itself)."""
    value = connection.execute(f"SELECT count(*) FROM {table}").get
    assert isinstance(value, int)
    return value


def event_digest(ordinal: int) -> str:
    """A well-formed relay digest for ``ordinal`` (the genesis digest at 0)."""
    if ordinal == 0:
        return RELAY_EVENT_GENESIS_DIGEST
    return hashlib.sha256(f"event-{ordinal}".encode()).hexdigest()
