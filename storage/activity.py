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

from ..domain.activity import plan_activities
from ..domain.api_events import ApiActivityState
from ..domain.errors import UnknownSession
from ..domain.lifecycle import startup_fault
from ..domain.wire import encode
from .events import append_api_events, insert_api_event
from .sessions import current_time_ms
from .transaction import transaction

__all__ = ["PUBLISH_ACTIVITY", "record_activities", "record_startup_fault"]

PUBLISH_ACTIVITY = (
    "INSERT INTO api_session_activity(session_id, body) VALUES (?, ?)"
    " ON CONFLICT(session_id) DO UPDATE SET body = excluded.body"
)
"""Keep ``(session_id, body)`` as the session's last published activity: what the
writer compares the next one with, and what a replica keeps from the feed it applies.
No change is numbered for it (revision 16): the feed's ``activity_changed`` carries it."""

# No row: the session does not exist. Else the activity last published for it, or NULL.
_PUBLISHED = """
SELECT (SELECT body FROM api_session_activity WHERE session_id = ?1)
FROM sessions WHERE session_id = ?1
"""
# The same for many sessions at once (a JSON array of ids): a row per existing session.
_PUBLISHED_MANY = """
SELECT s.session_id, a.body FROM json_each(?1) AS j
JOIN sessions AS s ON s.session_id = j.value
LEFT JOIN api_session_activity AS a ON a.session_id = s.session_id
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
        cursor = connection.cursor()  # one for the three statements
        published = _published(cursor, list(dict.fromkeys(sid for sid, _ in batch)))
        plan = plan_activities(published, batch, recorded_at_ms)
        append_api_events(cursor, plan.events)
        if len(plan.published) == 1:  # the common case: execute costs less
            cursor.execute(PUBLISH_ACTIVITY, next(iter(plan.published.items())))
        elif plan.published:
            cursor.executemany(PUBLISH_ACTIVITY, plan.published.items())


def _published(cursor: apsw.Cursor, session_ids: list[str]) -> dict[str, str]:
    """What was last published for each of ``session_ids`` that exists (``""``: none
    yet); a session that does not exist is left out. One statement however many: per
    session, 100 cost 319 µs against 41 read at once (one costs 3.1 against 5.8)."""
    if not session_ids:
        return {}
    if len(session_ids) == 1:
        row = cursor.execute(_PUBLISHED, (session_ids[0],)).fetchone()
        return {} if row is None else {session_ids[0]: row[0] or ""}
    rows = cursor.execute(_PUBLISHED_MANY, (encode(session_ids).decode(),))
    return {str(session_id): body or "" for session_id, body in rows}


def record_startup_fault(
    connection: apsw.Connection, session_id: str, message: str, *, now_ms: int | None = None
) -> None:
    """Append ``session_fault`` (``startup_failed``) for an existing session; else nothing."""
    event = startup_fault(message)
    with contextlib.suppress(UnknownSession):  # the insert is undone; nothing is written
        insert_api_event(connection, session_id, current_time_ms(now_ms), event)
