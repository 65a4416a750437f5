"""Reading the global feed of API events: pages with a cursor, and runtime receipts.

The contract (one read transaction, so a page and its cursors are one snapshot):

* ``latest_seq`` is the highest seq ever committed (the ``sqlite_sequence`` high-water
  mark), even when those events were deleted since; 0 before the first event.
* ``after_seq=None`` means "from now": the page is empty and its cursor is
  ``latest_seq``.
* Events are those with ``seq > after_seq`` matching the filter (session and/or
  workspace), oldest first, at most ``limit`` of them, ``limit`` clamped to
  ``1..=1000``.
* ``next_after_seq`` is the last returned seq, or ``max(latest_seq, after_seq)`` for
  an empty page: a cursor never moves backwards, and an empty filtered page
  fast-forwards to ``latest_seq``.
* Events of deleted sessions are gone; the cursors of everyone else are unaffected.

Concatenating the pages that follow ``next_after_seq`` yields exactly the matching
events of one full scan, whatever the limit.
"""

from __future__ import annotations

import apsw

from relaystore.domain.api_events import ApiEventFilter, ApiEventPage, ApiRuntimeResolved
from relaystore.domain.errors import InvalidInput
from relaystore.domain.runtime import RuntimeReceipt
from relaystore.storage.events import api_event_from_row, api_events_from_rows
from relaystore.storage.transaction import transaction

__all__ = [
    "MAX_PAGE_LIMIT",
    "clamp_limit",
    "load_api_events",
    "load_latest_seq",
    "load_runtime_receipt",
]

MAX_PAGE_LIMIT = 1000
"""The most events one page holds."""

_LATEST = "SELECT seq FROM sqlite_sequence WHERE name = 'api_events'"
_COLUMNS = "SELECT e.seq, e.session_id, e.recorded_at_ms, e.body FROM api_events e"
# CROSS JOIN pins the plan to walking events in seq order from the cursor. Left free,
# the planner (with ANALYZE statistics) switches for high cursors to reading every
# event of the workspace's sessions and sorting them, ten times slower per page.
_JOIN = " CROSS JOIN session_contexts w ON w.session_id = e.session_id"
_TAIL = " e.seq > ? ORDER BY e.seq LIMIT ?"
# One statement per filter shape, so each can use its index (an "?1 IS NULL OR" test
# would force a scan of every later event for a one-session filter).
_QUERIES = {
    (False, False): _COLUMNS + " WHERE" + _TAIL,
    (True, False): _COLUMNS + " WHERE e.session_id = ? AND" + _TAIL,
    (False, True): _COLUMNS + _JOIN + " WHERE w.workspace_id = ? AND" + _TAIL,
    (True, True): _COLUMNS + _JOIN + " WHERE e.session_id = ? AND w.workspace_id = ? AND" + _TAIL,
}


def clamp_limit(limit: int) -> int:
    """``limit`` clamped to ``1..=MAX_PAGE_LIMIT`` (0 or less gives 1)."""
    return max(1, min(limit, MAX_PAGE_LIMIT))


def load_latest_seq(connection: apsw.Connection) -> int:
    """The highest seq ever committed (0 before the first event)."""
    with transaction(connection, "read the latest API event seq"):
        value = connection.execute(_LATEST).get
    return int(value) if value is not None else 0


def load_api_events(
    connection: apsw.Connection,
    filter: ApiEventFilter | None = None,
    after_seq: int | None = None,
    limit: int = 100,
) -> ApiEventPage:
    """One page of events after ``after_seq`` matching ``filter`` (see module contract).

    Raises :class:`~domain.errors.InvalidInput` for a negative ``after_seq`` or an
    event body that does not decode (the whole page fails).
    """
    if after_seq is not None and after_seq < 0:
        raise InvalidInput(f"after_seq must be 0 or more, not {after_seq}")
    wanted = filter if filter is not None else ApiEventFilter()
    session_id, workspace_id = wanted.session_id, wanted.workspace_id
    with transaction(connection, "load API events"):
        value = connection.execute(_LATEST).get
        latest = int(value) if value is not None else 0
        cursor = latest if after_seq is None else after_seq
        bindings: list[object] = []
        if session_id is not None:
            bindings.append(session_id)
        if workspace_id is not None:
            bindings.append(workspace_id)
        bindings += [cursor, clamp_limit(limit)]
        query = _QUERIES[session_id is not None, workspace_id is not None]
        rows = connection.execute(query, bindings).fetchall()
    events = api_events_from_rows(rows)  # type: ignore[arg-type]
    next_after_seq = events[-1].seq if events else max(latest, cursor)
    return ApiEventPage(events=events, next_after_seq=next_after_seq, latest_seq=latest)


def load_runtime_receipt(connection: apsw.Connection, session_id: str) -> RuntimeReceipt | None:
    """The receipt of the session's newest ``runtime_resolved`` event, or ``None``."""
    with transaction(connection, "load the runtime receipt"):
        row = connection.execute(
            "SELECT seq, body FROM api_events WHERE session_id = ?"
            " AND json_extract(body, '$.type') = 'runtime_resolved' ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
    if row is None:
        return None
    seq, body = row
    event = api_event_from_row(int(seq), session_id, 0, str(body)).event
    if not isinstance(event, ApiRuntimeResolved):
        raise InvalidInput(f"runtime receipt event seq {seq} has an invalid type")
    return event.data.receipt
