"""Activity changes and startup faults."""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import (
    ApiActivityChanged,
    ApiActivityKind,
    ApiActivityState,
    ApiSessionFault,
)
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.wire import encode
from relaystore.storage.activity import record_activities, record_startup_fault
from relaystore.storage.paging import load_api_events, load_latest_seq
from relaystore.storage.sessions import delete_session, save_session
from tests.storage.builders import count_rows, idle_activity, running_session, scan


def activities(connection: apsw.Connection) -> list[ApiActivityState]:
    found = []
    for event in scan(connection):
        assert isinstance(event.event, ApiActivityChanged)
        found.append(event.event.data.activity)
    return found


def test_api_activity_events_track_changes_without_repeating_or_reviving_forgotten_sessions(
    session_db: apsw.Connection,
) -> None:
    # Seed test 7.
    db = session_db
    idle = idle_activity(100)
    record_activities(db, [("session-1", idle)], 100)
    record_activities(db, [("session-1", idle)], 200)
    background = msgspec.structs.replace(idle, is_idle=False)
    assert background.details is not None
    background.details = msgspec.structs.replace(
        background.details,
        kind=ApiActivityKind.BACKGROUND,
        idle_since_ms=None,
        background_started_at_ms=250,
    )
    record_activities(db, [("session-1", background)], 250)
    waiting = msgspec.structs.replace(background, waiting_for_input=True)
    record_activities(db, [("session-1", waiting)], 300)
    unknown = ApiActivityState(
        state="disconnected", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    record_activities(db, [("session-1", unknown)], 400)

    page = load_api_events(db, None, 0, 100)
    assert len(page.events) == 4
    assert [event.recorded_at_ms for event in page.events] == [100, 250, 300, 400]
    assert activities(db) == [idle, background, waiting, unknown]

    delete_session(db, "session-1")
    record_activities(db, [("session-1", idle)], 500)
    page = load_api_events(db, None, 4, 100)
    assert page.events == []
    assert page.latest_seq == 4
    assert count_rows(db, "api_session_activity") == 0


def test_the_published_activity_is_stored_exactly_as_encoded(session_db: apsw.Connection) -> None:
    record_activities(session_db, [("session-1", idle_activity())], 1)
    stored = session_db.execute("SELECT body FROM api_session_activity").get
    assert stored == encode(idle_activity()).decode()
    [event] = scan(session_db)
    assert bytes(event.data) == b'{"activity":' + encode(idle_activity()) + b"}"


def test_a_batch_skips_unknown_sessions_and_tracks_each_session_separately(
    db: apsw.Connection,
) -> None:
    save_session(db, running_session("a"))
    save_session(db, running_session("b"))
    idle = idle_activity()
    record_activities(db, [("a", idle), ("ghost", idle), ("b", idle), ("a", idle)], 9)
    assert [(event.session_id, event.type) for event in scan(db)] == [
        ("a", "activity_changed"),
        ("b", "activity_changed"),
    ]
    assert db.execute("SELECT count(*) FROM sessions WHERE session_id = 'ghost'").get == 0


def test_changes_within_one_batch_are_compared_with_the_batchs_own_earlier_items(
    session_db: apsw.Connection,
) -> None:
    idle = idle_activity()
    busy = msgspec.structs.replace(idle, is_idle=False)
    record_activities(
        session_db,
        [("session-1", idle), ("session-1", idle), ("session-1", busy), ("session-1", idle)],
        5,
    )
    assert activities(session_db) == [idle, busy, idle]
    stored = session_db.execute("SELECT body FROM api_session_activity").get
    assert stored == encode(idle).decode()
    record_activities(session_db, [("session-1", idle)], 6)
    assert activities(session_db) == [idle, busy, idle]


def test_an_activity_batch_is_one_transaction(session_db: apsw.Connection) -> None:
    class Boom(Exception):
        pass

    def items() -> Iterator[tuple[str, ApiActivityState]]:
        yield ("session-1", idle_activity())
        raise Boom

    with pytest.raises(Boom):
        record_activities(session_db, items(), 1)
    assert load_latest_seq(session_db) == 0
    assert count_rows(session_db, "api_session_activity") == 0


def test_a_startup_fault_is_recorded_for_an_existing_session(session_db: apsw.Connection) -> None:
    record_startup_fault(session_db, "session-1", "image pull failed", now_ms=42)
    [event] = scan(session_db)
    assert isinstance(event.event, ApiSessionFault)
    assert event.event.data.reason is OutcomeReason.STARTUP_FAILED
    assert event.event.data.message == "image pull failed"
    assert event.event.data.command_id is None
    assert event.recorded_at_ms == 42


def test_a_startup_fault_of_an_unknown_session_is_dropped(db: apsw.Connection) -> None:
    record_startup_fault(db, "ghost", "image pull failed")
    assert load_latest_seq(db) == 0


def test_a_batch_over_many_sessions_reads_and_writes_each_ones_last_activity(
    db: apsw.Connection,
) -> None:
    """Several sessions in one batch (read together, written together): each is compared
    with its own last published activity, and each keeps its own."""
    for session_id in ("a", "b", "c"):
        save_session(db, running_session(session_id))
    idle = idle_activity()
    busy = msgspec.structs.replace(idle, is_idle=False)
    record_activities(db, [("a", idle), ("b", idle)], 1)
    record_activities(db, [("a", idle), ("b", busy), ("ghost", busy), ("c", idle)], 2)
    assert [(event.session_id, event.recorded_at_ms) for event in scan(db)] == [
        ("a", 1),
        ("b", 1),
        ("b", 2),
        ("c", 2),
    ]
    stored = dict(db.execute("SELECT session_id, body FROM api_session_activity"))
    assert stored == {
        "a": encode(idle).decode(),
        "b": encode(busy).decode(),
        "c": encode(idle).decode(),
    }


def test_an_empty_batch_publishes_nothing(session_db: apsw.Connection) -> None:
    record_activities(session_db, [], 1)
    assert scan(session_db) == []
    assert count_rows(session_db, "api_session_activity") == 0
