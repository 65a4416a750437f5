"""Maintenance request rows (``maintenance_requests``, schema revision 10).

The rules are :mod:`relaystore.domain.maintenance`; these are their statements. A
command's side (:func:`submit_request`, :func:`load_request`, :func:`withdraw_request`)
runs on a connection of :func:`~relaystore.storage.connection.open_requester`; the
writer's side (:func:`claim_request`, :func:`finish_request`, :func:`recover_requests`)
on the write connection, inside the writer's batch; :func:`open_requests` on a reader.

Guarantees: every change is one transaction. A request id names one request for good
(submitting it again returns the row as it is); one open (pending or running) row per
request spelling, so an identical request submitted while one is open joins it; at most
:data:`~relaystore.domain.maintenance.MAX_OPEN_REQUESTS` open rows and the newest
:data:`~relaystore.domain.maintenance.KEPT_ANSWERS` answered ones. A pending request is
withdrawn, or taken, never both: each is a conditional update of its state.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.errors import InvalidInput, StoreBusy
from ..domain.maintenance import (
    ABANDONED,
    KEPT_ANSWERS,
    MAX_OPEN_REQUESTS,
    MaintenanceAnswer,
    RequestState,
    StoredRequest,
)
from ..domain.wire import encode
from .sessions import current_time_ms
from .transaction import transaction

__all__ = [
    "claim_request",
    "finish_request",
    "load_request",
    "open_requests",
    "recover_requests",
    "submit_request",
    "withdraw_request",
]

_COLUMNS = "request_id, kind, request_json, state, requester_pid, taken_by_pid, answer_json"
_ANSWER = msgspec.json.Decoder(MaintenanceAnswer)
_STATES: dict[object, RequestState] = {
    "pending": "pending",
    "running": "running",
    "done": "done",
    "failed": "failed",
}


def _stored_request(row: apsw.SQLiteValues) -> StoredRequest:
    request_id, kind, text, state, requester, taken, answer = row
    decoded = None
    if answer is not None:
        try:
            decoded = _ANSWER.decode(str(answer))
        except msgspec.DecodeError as exc:
            raise InvalidInput(
                f"the answer of maintenance request {request_id} does not read ({exc}); "
                "the row is damaged"
            ) from None
    if state not in _STATES:
        raise InvalidInput(f"maintenance request {request_id} has no known state ({state!r})")
    if not isinstance(requester, int) or not (taken is None or isinstance(taken, int)):
        raise InvalidInput(f"maintenance request {request_id} names no process; the row is damaged")
    return StoredRequest(
        request_id=str(request_id),
        kind=str(kind),
        request_json=str(text),
        state=_STATES[state],
        requester_pid=int(str(requester)),
        taken_by_pid=None if taken is None else int(str(taken)),
        answer=decoded,
    )


def load_request(connection: apsw.Connection, request_id: str) -> StoredRequest | None:
    """The request named ``request_id`` (None: there is none)."""
    row = connection.execute(
        f"SELECT {_COLUMNS} FROM maintenance_requests WHERE request_id = ?", (request_id,)
    ).fetchone()
    return None if row is None else _stored_request(row)


def submit_request(
    connection: apsw.Connection,
    request_id: str,
    kind: str,
    request_json: str,
    requester_pid: int,
) -> StoredRequest:
    """Record a pending request and return its row; see the module doc for a request id
    or a spelling that is there already (the joined row now names ``requester_pid``,
    the process waiting for it). Raises :class:`StoreBusy` when
    :data:`~relaystore.domain.maintenance.MAX_OPEN_REQUESTS` wait already."""
    with transaction(connection, f"record maintenance request {request_id}"):
        existing = load_request(connection, request_id)
        if existing is not None:
            return _rejoin(connection, existing, requester_pid)
        row = connection.execute(
            f"SELECT {_COLUMNS} FROM maintenance_requests WHERE request_json = ? "
            "AND state IN ('pending', 'running')",
            (request_json,),
        ).fetchone()
        if row is not None:
            joined = _stored_request(row)
            connection.execute(
                "UPDATE maintenance_requests SET requester_pid = ? WHERE request_id = ?",
                (requester_pid, joined.request_id),
            )
            return msgspec.structs.replace(joined, requester_pid=requester_pid)
        (open_count,) = connection.execute(
            "SELECT count(*) FROM maintenance_requests WHERE state IN ('pending', 'running')"
        ).fetchone() or (0,)
        if int(open_count) >= MAX_OPEN_REQUESTS:
            raise StoreBusy(
                f"{open_count} maintenance requests wait for the store's writer already; "
                "try again once they are answered"
            )
        connection.execute(
            "INSERT INTO maintenance_requests(request_id, kind, request_json, state, "
            "requested_at_ms, requester_pid) VALUES (?, ?, ?, 'pending', ?, ?)",
            (request_id, kind, request_json, current_time_ms(), requester_pid),
        )
    return StoredRequest(
        request_id=request_id,
        kind=kind,
        request_json=request_json,
        state="pending",
        requester_pid=requester_pid,
    )


def _rejoin(
    connection: apsw.Connection, stored: StoredRequest, requester_pid: int
) -> StoredRequest:
    """A request submitted again under its id: one still pending now names its new
    requester; one abandoned (never run: its requester was gone) is pending again."""
    abandoned = stored.answer is not None and stored.answer.error == ABANDONED
    if stored.state != "pending" and not abandoned:
        return stored
    connection.execute(
        "UPDATE maintenance_requests SET state = 'pending', requester_pid = ?, "
        "answer_json = NULL, answered_at_ms = NULL WHERE request_id = ?",
        (requester_pid, stored.request_id),
    )
    return msgspec.structs.replace(
        stored, state="pending", requester_pid=requester_pid, answer=None
    )


def withdraw_request(connection: apsw.Connection, request_id: str) -> bool:
    """Delete the request if nobody took it yet; False: it was taken (or is gone)."""
    with transaction(connection, f"withdraw maintenance request {request_id}"):
        connection.execute(
            "DELETE FROM maintenance_requests WHERE request_id = ? AND state = 'pending'",
            (request_id,),
        )
        return connection.changes() > 0


def open_requests(connection: apsw.Connection, limit: int) -> list[StoredRequest]:
    """The oldest ``limit`` open (pending or running) requests, oldest first. A row that
    does not read (an answer of another shape, text that is not UTF-8) is returned too,
    with what is wrong in ``damaged`` and its ``rowid``, so the desk fails it and goes
    on: one bad row must not stop it."""
    rowids = [
        int(rowid)
        for (rowid,) in connection.execute(
            "SELECT rowid FROM maintenance_requests WHERE state IN ('pending', 'running') "
            "ORDER BY requested_at_ms, request_id LIMIT ?",
            (limit,),
        )
    ]
    found = []
    for rowid in rowids:
        try:
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM maintenance_requests WHERE rowid = ?", (rowid,)
            ).fetchone()
            if row is not None:
                found.append(_stored_request(row))
        except (InvalidInput, UnicodeDecodeError, ValueError) as exc:
            found.append(_damaged(connection, rowid, exc))
    return found


def _damaged(connection: apsw.Connection, rowid: int, error: Exception) -> StoredRequest:
    """The open row ``rowid``, which does not read, as the desk fails it."""
    raw, state = connection.execute(
        "SELECT CAST(request_id AS BLOB), state FROM maintenance_requests WHERE rowid = ?",
        (rowid,),
    ).fetchone() or (b"", "pending")
    request_id = bytes(raw).decode("utf-8", "replace")
    reason = str(error) if isinstance(error, InvalidInput) else f"{type(error).__name__}: {error}"
    return StoredRequest(
        request_id=request_id,
        kind="",
        request_json="",
        state=_STATES.get(state, "pending"),
        requester_pid=0,
        damaged=f"maintenance request {request_id} does not read ({reason}); the row is damaged",
        rowid=rowid,
    )


def claim_request(connection: apsw.Connection, request_id: str, pid: int) -> bool:
    """Take a pending request for the writer in process ``pid``; False: it was withdrawn
    (or taken) meanwhile."""
    with transaction(connection, f"take maintenance request {request_id}"):
        connection.execute(
            "UPDATE maintenance_requests SET state = 'running', taken_by_pid = ? "
            "WHERE request_id = ? AND state = 'pending'",
            (pid, request_id),
        )
        return connection.changes() > 0


def finish_request(
    connection: apsw.Connection,
    request_id: str,
    answer: MaintenanceAnswer,
    *,
    from_state: RequestState = "running",
    requester_pid: int | None = None,
    rowid: int | None = None,
) -> bool:
    """Record ``answer`` for a request in ``from_state`` (and, given ``requester_pid``,
    still asked for by that process), ``done``, or ``failed`` when the answer failed,
    and keep only the newest answers; False: it was not so. Given ``rowid`` (a damaged
    row, whose id may not read), the row is found by it instead of its id."""
    state = "failed" if answer.failed else "done"
    where = "rowid = ?" if rowid is not None else "request_id = ?"
    with transaction(connection, f"answer maintenance request {request_id}"):
        connection.execute(
            "UPDATE maintenance_requests SET state = ?, answer_json = ?, answered_at_ms = ? "
            f"WHERE {where} AND state = ? AND requester_pid = coalesce(?, requester_pid)",
            (
                state,
                encode(answer).decode(),
                current_time_ms(),
                request_id if rowid is None else rowid,
                from_state,
                requester_pid,
            ),
        )
        finished = connection.changes() > 0
        connection.execute(
            "DELETE FROM maintenance_requests WHERE state IN ('done', 'failed') AND "
            "request_id NOT IN (SELECT request_id FROM maintenance_requests "
            "WHERE state IN ('done', 'failed') ORDER BY answered_at_ms DESC, request_id "
            "LIMIT ?)",
            (KEPT_ANSWERS,),
        )
    return finished


def recover_requests(connection: apsw.Connection, answer: MaintenanceAnswer) -> int:
    """Fail every running request with ``answer`` (a writer that stopped left them);
    returns how many. Only the writer that holds the store may call it."""
    with transaction(connection, "recover interrupted maintenance requests"):
        connection.execute(
            "UPDATE maintenance_requests SET state = 'failed', answer_json = ?, "
            "answered_at_ms = ? WHERE state = 'running'",
            (encode(answer).decode(), current_time_ms()),
        )
        return connection.changes()
