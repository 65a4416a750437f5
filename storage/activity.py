"""Session activity: publish what each session is doing, and faults at its start.

Guarantees: an activity batch is one transaction; an ``activity_changed`` event is appended only
when the activity's serialized JSON differs from the last one published for that
session (byte comparison of the deterministic encoding); activity for a session that
does not exist (never saved, or deleted) is skipped, so a forgotten session is never
revived. A startup fault of a session that does not exist is dropped the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import apsw

from relaystore.domain.api_events import (
    ApiActivityChanged,
    ApiActivityState,
    ApiEventData,
    ApiSessionFault,
)
from relaystore.domain.errors import UnknownSession
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.wire import encode
from relaystore.storage.events import insert_api_event, insert_api_events
from relaystore.storage.sessions import current_time_ms
from relaystore.storage.transaction import transaction

__all__ = ["record_activities", "record_startup_fault"]

# No row: the session does not exist. Else the activity last published for it, or NULL.
_PUBLISHED = """
SELECT (SELECT body FROM api_session_activity WHERE session_id = ?1)
FROM sessions WHERE session_id = ?1
"""


def record_activities(
    connection: apsw.Connection,
    activities: Iterable[tuple[str, ApiActivityState]],
    recorded_at_ms: int,
) -> None:
    """Append ``activity_changed`` for every changed activity in ``activities``, in order."""
    with transaction(connection, "record session activity"):
        # The body last published per session, as this batch goes on; None: no session.
        published: dict[str, str | None] = {}
        changed: dict[str, str] = {}
        events: list[tuple[str, int, ApiEventData]] = []
        for session_id, activity in activities:
            if session_id in published:
                previous = published[session_id]
            else:
                row = connection.execute(_PUBLISHED, (session_id,)).fetchone()
                previous = None if row is None else (row[0] or "")
            if previous is None:
                published[session_id] = None
                continue  # never saved, or deleted: do not revive it
            body = encode(activity).decode()
            if previous == body:
                continue
            published[session_id] = changed[session_id] = body
            events.append((session_id, recorded_at_ms, ApiActivityChanged.of(activity=activity)))
        insert_api_events(connection, events)
        connection.executemany(
            "INSERT INTO api_session_activity(session_id, body) VALUES (?, ?)"
            " ON CONFLICT(session_id) DO UPDATE SET body = excluded.body",
            list(changed.items()),
        )


def record_startup_fault(
    connection: apsw.Connection, session_id: str, message: str, *, now_ms: int | None = None
) -> None:
    """Append ``session_fault`` (``startup_failed``) for an existing session; else nothing."""
    event = ApiSessionFault.of(
        reason=OutcomeReason.STARTUP_FAILED, message=message, command_id=None
    )
    with contextlib.suppress(UnknownSession):  # the insert is undone; nothing is written
        insert_api_event(connection, session_id, current_time_ms(now_ms), event)
