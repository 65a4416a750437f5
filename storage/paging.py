"""Reading the global feed of API events: pages with a cursor, and runtime receipts.

The contract (one read transaction, so a page and its cursors are one snapshot):

* ``latest_seq`` is the highest seq ever committed (with the store's high-water
  mark, :mod:`.sequences`), even when those events were deleted since; 0 before the first event.
* ``after_seq=None`` means "from now": the page is empty and its cursor is
  ``latest_seq`` (:func:`~relaystore.domain.paging.feed_cursor`); a negative one is
  refused (:func:`~relaystore.domain.paging.check_after_seq`).
* Events are those with ``seq > after_seq`` matching the filter (session, workspace
  and/or command), oldest first, at most ``limit`` of them, ``limit`` clamped to
  ``1..=1000`` (:mod:`relaystore.domain.paging`).
* ``next_after_seq`` is the last returned seq, or ``max(latest_seq, after_seq)`` for
  an empty page (:func:`~relaystore.domain.paging.next_page_cursor`): a cursor never
  moves backwards, and an empty filtered page fast-forwards to ``latest_seq``.
* Events of deleted sessions are gone; the cursors of everyone else are unaffected.

Concatenating the pages that follow ``next_after_seq`` yields exactly the matching
events of one full scan, whatever the limit.

A *raw* page (:func:`load_raw_api_events`) is the same page with each event as the bytes
``msgspec.json.encode(ApiEvent)`` gives, built by SQLite from the stored columns without
decoding the body: a stored body is ``{"type":"<kind>","data":<data>}`` (see
:mod:`relaystore.storage.events`), and the flat wire shape is ``{"seq":..,"session_id":..,
"recorded_at_ms":..,`` followed by that body without its opening brace. Both kinds of
page share one statement builder and one transaction shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import apsw
import msgspec

from ..domain.api_events import (
    API_EVENT_KINDS,
    ApiEventFilter,
    ApiEventPage,
    ApiRuntimeResolved,
    RawApiEvent,
    RawApiEventPage,
)
from ..domain.errors import InvalidInput
from ..domain.paging import check_after_seq, clamp_page_limit, feed_cursor, next_page_cursor
from ..domain.runtime import RuntimeReceipt
from ..domain.wire import encode
from .events import api_event_from_row, api_events_from_rows
from .sequences import LATEST_SEQ
from .transaction import transaction

__all__ = [
    "load_api_events",
    "load_latest_seq",
    "load_raw_api_events",
    "load_runtime_receipt",
]

T = TypeVar("T")
_Rows = list[tuple[Any, ...]]

_EVENT_COLUMNS = "e.seq, e.session_id, e.recorded_at_ms, e.body"
# A raw event: its seq; the body's head up to and including '","data":' followed by its
# last character (which name the kind and show that the body has the layout relaystore
# writes: then the typed path slices it exactly as this one does); the wire bytes.
# SQLite's json_quote escapes exactly as msgspec and serde_json do (tests pin it), and an
# integer prints as they print it.
_RAW_COLUMNS = (
    'e.seq, substr(e.body, 1, instr(e.body, \'","data":\') + 8)'
    " || substr(CAST(e.body AS BLOB), -1),"
    " CAST('{\"seq\":' || e.seq || ',\"session_id\":' || json_quote(e.session_id)"
    " || ',\"recorded_at_ms\":' || e.recorded_at_ms || ',' || substr(e.body, 2) AS BLOB)"
)
# CROSS JOIN pins the plan to walking events in seq order from the cursor. Left free,
# the planner (with ANALYZE statistics) switches for high cursors to reading every
# event of the workspace's sessions and sorting them, ten times slower per page.
_JOIN = " CROSS JOIN session_contexts w ON w.session_id = e.session_id"
_TAIL = " e.seq > ? ORDER BY e.seq LIMIT ?"


_COMMAND = (
    " coalesce(json_extract(e.body, '$.data.command_id'),"
    " json_extract(e.body, '$.data.turn.command_id')) = ? AND"
)
"""The command an event belongs to (``ApiEventFilter.command_id``): checked on each event
the walk meets, after the cursor and the session's index have narrowed it."""


def _page_query(columns: str, by_session: bool, by_workspace: bool, by_command: bool) -> str:
    """The page statement selecting ``columns`` for one filter shape.

    One statement per filter shape, so each can use its index (an "?1 IS NULL OR" test
    would force a scan of every later event for a one-session filter).
    """
    query = f"SELECT {columns} FROM api_events e"
    if by_workspace:
        query += _JOIN
    query += " WHERE"
    if by_session:
        query += " e.session_id = ? AND"
    if by_workspace:
        query += " w.workspace_id = ? AND"
    if by_command:
        query += _COMMAND
    return query + _TAIL


_QUERIES = {
    (columns, by_session, by_workspace, by_command): _page_query(
        columns, by_session, by_workspace, by_command
    )
    for columns in (_EVENT_COLUMNS, _RAW_COLUMNS)
    for by_session in (False, True)
    for by_workspace in (False, True)
    for by_command in (False, True)
}
_RAW_KINDS = {f'{{"type":"{kind}","data":}}': kind for kind in API_EVENT_KINDS}
"""The head and last character of a body in relaystore's layout, by the kind it names."""
_JSON_SCAN = msgspec.json.Decoder(msgspec.Raw)
"""Checks that bytes are one JSON value without building it: a body whose ends look
right can still have been edited past the table's CHECK (an operator's ``sqlite3``
shell) or damaged on disk. Twice as fast as SQLite's ``json_valid`` in the query."""


def load_latest_seq(connection: apsw.Connection) -> int:
    """The highest seq ever committed (0 before the first event)."""
    with transaction(connection, "read the latest API event seq"):
        value = connection.execute(LATEST_SEQ).get
    return int(value) if value is not None else 0


def load_api_events(
    connection: apsw.Connection,
    filter: ApiEventFilter | None = None,
    after_seq: int | None = None,
    limit: int = 100,
) -> ApiEventPage:
    """One page of events after ``after_seq`` matching ``filter`` (see module contract).

    Raises :class:`~relaystore.domain.errors.InvalidInput` for a negative ``after_seq`` or an
    event body that does not decode (the whole page fails).
    """
    rows, latest, cursor = _read_page(
        connection, "load API events", filter, after_seq, limit, _fetch_events
    )
    events = api_events_from_rows(rows)
    next_after_seq = next_page_cursor(cursor, latest, events[-1].seq if events else None)
    return ApiEventPage(events=events, next_after_seq=next_after_seq, latest_seq=latest)


def load_raw_api_events(
    connection: apsw.Connection,
    filter: ApiEventFilter | None = None,
    after_seq: int | None = None,
    limit: int = 100,
) -> RawApiEventPage:
    """The page :func:`load_api_events` gives, each event as its wire bytes, undecoded.

    Same snapshot, events and cursors; each ``json`` is byte for byte
    ``msgspec.json.encode`` of the typed event. A body in relaystore's own layout is
    trusted, as it was checked when it was written: its data is not decoded again, only
    scanned to be sure the bytes are still JSON. A page holding any other body
    (hand-written SQL, older tools, a body edited or damaged into invalid JSON) takes
    the typed path and is encoded from it, so it raises what :func:`load_api_events`
    raises: :class:`~relaystore.domain.errors.InvalidInput` for a negative ``after_seq`` or a body
    that does not decode. A page that fails returns nothing.
    """

    def read(fetch: Callable[[str], _Rows]) -> tuple[list[RawApiEvent] | None, _Rows]:
        if _is_utf8(connection):
            rows = fetch(_RAW_COLUMNS)
            kinds, event, scan = _RAW_KINDS, RawApiEvent, _JSON_SCAN.decode
            try:
                events = [event(seq, kinds[head], wire) for seq, head, wire in rows]
                for _, _, wire in rows:
                    scan(wire)
            except (KeyError, msgspec.DecodeError):  # decode the page instead
                pass
            else:
                return events, []
        return None, fetch(_EVENT_COLUMNS)

    (raw, rows), latest, cursor = _read_page(
        connection, "load raw API events", filter, after_seq, limit, read
    )
    events = raw
    if events is None:
        events = [
            RawApiEvent(typed.seq, typed.type, encode(typed))
            for typed in api_events_from_rows(rows)
        ]
    next_after_seq = next_page_cursor(cursor, latest, events[-1].seq if events else None)
    return RawApiEventPage(events=events, next_after_seq=next_after_seq, latest_seq=latest)


def _fetch_events(fetch: Callable[[str], _Rows]) -> _Rows:
    return fetch(_EVENT_COLUMNS)


def _read_page(
    connection: apsw.Connection,
    action: str,
    filter: ApiEventFilter | None,
    after_seq: int | None,
    limit: int,
    read: Callable[[Callable[[str], _Rows]], T],
) -> tuple[T, int, int]:
    """``read(fetch)`` in one read transaction, with ``latest_seq`` and the cursor.

    ``fetch(columns)`` runs the page's statement (filter, cursor, clamped limit)
    selecting ``columns``; ``action`` names the transaction in errors.
    """
    check_after_seq(after_seq)
    wanted = filter if filter is not None else ApiEventFilter()
    wanted.validate()
    session_id, workspace_id = wanted.session_id, wanted.workspace_id
    by_session, by_workspace = session_id is not None, workspace_id is not None
    by_command = wanted.command_id is not None
    with transaction(connection, action):
        value = connection.execute(LATEST_SEQ).get
        latest = int(value) if value is not None else 0
        cursor = feed_cursor(after_seq, latest)
        bindings: list[object] = []
        if by_session:
            bindings.append(session_id)
        if by_workspace:
            bindings.append(workspace_id)
        if by_command:
            bindings.append(wanted.command_id)
        bindings += [cursor, clamp_page_limit(limit)]

        def fetch(columns: str) -> _Rows:
            query = _QUERIES[columns, by_session, by_workspace, by_command]
            return connection.execute(query, bindings).fetchall()

        result = read(fetch)
    return result, latest, cursor


def _is_utf8(connection: apsw.Connection) -> bool:
    """Whether the connection's database stores text as UTF-8 (raw bytes are cast from
    its text). Asked on every page: a PRAGMA costs about a microsecond, and a cache of
    it would be state outside the connection's owner."""
    return bool(connection.execute("PRAGMA encoding").get == "UTF-8")


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
