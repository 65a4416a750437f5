"""The API event log: appending bodies and reading them back as :class:`ApiEvent`.

A row body is the event's ``{"type", "data"}`` JSON exactly as :func:`relaystore.domain.wire.encode`
writes it (deterministic), so equal events are equal bytes. Reading slices ``type`` and
``data`` out of that canonical text instead of decoding and re-encoding it; a body in
any other layout (hand-written SQL, older tools) takes the slower generic path. Either
way the data is checked against its type, and a body that does not decode raises
:class:`~relaystore.domain.errors.InvalidInput` naming the seq and session.
"""

from __future__ import annotations

from collections.abc import Iterable

import apsw
import msgspec

from ..domain.api_events import ApiEvent, ApiEventData, decode_api_event_data
from ..domain.errors import InvalidInput, UnknownSession
from ..domain.wire import encode
from .sequences import NEXT_SEQ
from .transaction import is_foreign_key_violation, transaction

__all__ = [
    "api_event_from_row",
    "append_api_events",
    "api_events_from_rows",
    "encode_event_body",
    "insert_api_event",
    "insert_api_events",
]

_INSERT = (
    f"INSERT INTO api_events(seq, session_id, recorded_at_ms, body) VALUES ({NEXT_SEQ}, ?, ?, ?)"
)
_PREFIX = '{"type":"'
_SEPARATOR = '","data":'


def encode_event_body(event: ApiEventData) -> str:
    """The stored body of ``event``: ``{"type":..,"data":..}``, compact and deterministic."""
    return encode(event).decode()


def insert_api_event(
    connection: apsw.Connection, session_id: str, recorded_at_ms: int, event: ApiEventData
) -> int:
    """Append one event and return its seq (one transaction; nested, one statement in the
    caller's).

    Raises :class:`~relaystore.domain.errors.UnknownSession` when the session row does not exist.
    """
    body = encode_event_body(event)
    with transaction(connection, "append an API event", join=True):  # one statement
        try:
            connection.execute(_INSERT, (session_id, recorded_at_ms, body))
        except apsw.ConstraintError as exc:
            if is_foreign_key_violation(exc):
                raise UnknownSession(session_id) from exc
            raise
        return connection.last_insert_rowid()


def insert_api_events(
    connection: apsw.Connection, rows: Iterable[tuple[str, int, ApiEventData]]
) -> None:
    """Append ``(session_id, recorded_at_ms, event)`` rows in order, all or none (nested:
    in the caller's transaction, which undoes a failure).

    Raises :class:`~relaystore.domain.errors.UnknownSession` naming a session that does not exist.
    """
    bodies = _bodies(rows)
    if bodies:
        # Joined: one statement, or (several rows) callers that undo a failed step: the
        # batch's savepoint, or a page commit that raises through it.
        with transaction(connection, "append API events", join=True):
            _append(connection, bodies)


def append_api_events(cursor: apsw.Cursor, rows: Iterable[tuple[str, int, ApiEventData]]) -> None:
    """:func:`insert_api_events` inside a caller's :func:`~relaystore.storage.transaction.transaction`
    block (which undoes a failure and maps SQLite's errors), on its cursor: the same rows,
    without a second transaction block (a tenth of an activity write's Python)."""
    bodies = _bodies(rows)
    if bodies:
        _append(cursor, bodies)


def _bodies(rows: Iterable[tuple[str, int, ApiEventData]]) -> list[tuple[str, int, str]]:
    return [(sid, at, encode_event_body(event)) for sid, at, event in rows]


def _append(connection: apsw.Connection | apsw.Cursor, bodies: list[tuple[str, int, str]]) -> None:
    try:
        if len(bodies) == 1:  # the common case: execute costs less than executemany
            connection.execute(_INSERT, bodies[0])
        else:
            connection.executemany(_INSERT, bodies)
    except apsw.ConstraintError as exc:
        if not is_foreign_key_violation(exc):
            raise
        for sid, _, _ in bodies:
            if (
                connection.execute("SELECT 1 FROM sessions WHERE session_id = ?", (sid,)).fetchone()
                is None
            ):
                raise UnknownSession(sid) from exc
        raise


def api_events_from_rows(rows: Iterable[tuple[int, str, int, str]]) -> list[ApiEvent]:
    """The :class:`ApiEvent` of each ``(seq, session_id, recorded_at_ms, body)`` row, in order.

    Canonical bodies are sliced, not re-encoded; ``ApiEvent`` still checks each data
    against its type, so a page with any other layout takes the generic decode. Raises
    InvalidInput naming the first row whose body does not decode.
    """
    rows = list(rows)
    raw, separator, start, skip = msgspec.Raw, _SEPARATOR, len(_PREFIX), len(_SEPARATOR)
    try:
        return [
            ApiEvent(
                seq=seq,
                session_id=session_id,
                recorded_at_ms=recorded_at_ms,
                type=body[start : (end := body.find(separator, start))],
                data=raw(body[end + skip : -1]),
            )
            for seq, session_id, recorded_at_ms, body in rows
        ]
    except (ValueError, msgspec.MsgspecError):
        return [_decoded(*row) for row in rows]


def api_event_from_row(seq: int, session_id: str, recorded_at_ms: int, body: str) -> ApiEvent:
    """The :class:`ApiEvent` of one stored row (see :func:`api_events_from_rows`)."""
    return api_events_from_rows([(seq, session_id, recorded_at_ms, body)])[0]


def _decoded(seq: int, session_id: str, recorded_at_ms: int, body: str) -> ApiEvent:
    try:
        event = decode_api_event_data(body)
    except InvalidInput as exc:
        raise InvalidInput(
            f"API event seq {seq} has a body relaystore cannot read ({exc}); "
            "the store may have been written by another tool",
            session_id=session_id,
        ) from exc
    return ApiEvent.of(seq=seq, session_id=session_id, recorded_at_ms=recorded_at_ms, event=event)
