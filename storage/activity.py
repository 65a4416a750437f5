"""Session activity: publish what each session is doing, and faults at its start.

Guarantees: an activity batch is one transaction; what it publishes is decided by
:func:`relaystore.domain.activity.plan_activities` (only changes, never for a session
that does not exist). A startup fault of a session that does not exist is dropped the
same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import apsw

from relaystore.domain.activity import plan_activities
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.errors import UnknownSession
from relaystore.domain.lifecycle import startup_fault
from relaystore.storage.events import insert_api_event, insert_api_events
from relaystore.storage.sessions import current_time_ms
from relaystore.storage.transaction import transaction

__all__ = ["record_activities", "record_startup_fault"]

_PUBLISH = (
    "INSERT INTO api_session_activity(session_id, body) VALUES (?, ?)"
    " ON CONFLICT(session_id) DO UPDATE SET body = excluded.body"
)

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
    """Append ``activity_changed`` for every changed activity in ``activities``, in order
    (:func:`relaystore.domain.activity.plan_activities` decides which)."""
    batch = list(activities)
    # Joined: only the writer's batch calls this, and it undoes a failed step.
    with transaction(connection, "record session activity", join=True):
        published: dict[str, str] = {}
        for session_id in dict.fromkeys(session_id for session_id, _ in batch):
            row = connection.execute(_PUBLISHED, (session_id,)).fetchone()
            if row is not None:
                published[session_id] = row[0] or ""
        plan = plan_activities(published, batch, recorded_at_ms)
        insert_api_events(connection, plan.events)
        for row in plan.published.items():
            connection.execute(_PUBLISH, row)


def record_startup_fault(
    connection: apsw.Connection, session_id: str, message: str, *, now_ms: int | None = None
) -> None:
    """Append ``session_fault`` (``startup_failed``) for an existing session; else nothing."""
    event = startup_fault(message)
    with contextlib.suppress(UnknownSession):  # the insert is undone; nothing is written
        insert_api_event(connection, session_id, current_time_ms(now_ms), event)
