"""The session list, one session's detail, and the workspaces.

Owns the statements that read a stored session with its context, projection, activity
and queue in one row (:func:`list_sessions`, :func:`load_session_detail`) and the
workspace list (:func:`list_workspaces`). Each reads in one transaction; the view of a
session (title, lifecycle, chat phase, errors, settings) is
:func:`~relaystore.domain.sessions.views.api_session`'s to decide, not this module's.
A stored record that does not decode raises :class:`InvalidInput`; a projection column
that does not decode raises :class:`ProjectionError` naming the session.
"""

from __future__ import annotations

from typing import Any

import apsw
import msgspec

from ...domain.api_events import ApiActivityState
from ...domain.errors import InvalidInput
from ...domain.materialized import MaterializedExecutionState
from ...domain.read_replies import ApiSession, SessionFacts, SessionList, Workspace, WorkspaceList
from ...domain.sessions.views import api_session
from ..materialized import load_projection_behind, parse_execution
from ..stored_columns import (
    CONFIGURATION_DECODER,
    ELICITATIONS_DECODER,
    TURN_OUTCOME_DECODER,
    decode_stored,
)
from ..transaction import transaction

__all__ = ["list_sessions", "list_workspaces", "load_session_detail", "load_session_view"]

_SESSION_COLUMNS = """
SELECT s.session_id, s.record_json, c.workspace_id, m.execution_state,
       m.running_started_at_ms, m.session_title, m.configuration_json,
       m.pending_elicitations_json, a.body,
       (SELECT count(*) FROM materialized_queued_prompts q WHERE q.session_id = s.session_id),
       m.last_turn_outcome_json
FROM sessions s
JOIN session_contexts c ON c.session_id = s.session_id
LEFT JOIN materialized_sessions m ON m.session_id = s.session_id
LEFT JOIN api_session_activity a ON a.session_id = s.session_id
"""
_FACTS = msgspec.json.Decoder(SessionFacts)
_ACTIVITY = msgspec.json.Decoder(ApiActivityState)


def _execution(session_id: str, state: Any, started: Any) -> MaterializedExecutionState | None:
    if state is None:
        return None
    return parse_execution(str(state), started, session_id=session_id)


_TOP_LEVEL = (
    "NOT EXISTS (SELECT 1 FROM subagent_sessions r WHERE r.child_session_id = s.session_id)"
)


def list_sessions(
    connection: apsw.Connection, workspace_id: str | None = None, *, top_level_only: bool = False
) -> SessionList:
    """Every stored session (of ``workspace_id``, when given), ordered by id; with
    ``top_level_only`` only those not recorded as a sub-agent (the origin's
    ``?all=false``)."""
    query = _SESSION_COLUMNS
    conditions: list[str] = []
    bindings: tuple[str, ...] = ()
    if workspace_id is not None:
        conditions.append("c.workspace_id = ?")
        bindings = (workspace_id,)
    if top_level_only:
        conditions.append(_TOP_LEVEL)
    if conditions:
        query += " WHERE " + " AND ".join(conditions)
    with transaction(connection, "list sessions"):
        rows = connection.execute(query + " ORDER BY s.session_id", bindings).fetchall()
    return SessionList(sessions=[_api_session(row, detail=False) for row in rows])


def load_session_detail(connection: apsw.Connection, session_id: str) -> ApiSession | None:
    """One session with its last turn outcome and diagnostic, or ``None``."""
    with transaction(connection, f"load session {session_id}"):
        row = connection.execute(
            _SESSION_COLUMNS + " WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        behind = load_projection_behind(connection, session_id).get(session_id)
    if row is None:
        return None
    detail = _api_session(row, detail=True)
    if behind is not None:
        detail = msgspec.structs.replace(detail, projection_behind=behind)
    return detail


def load_session_view(connection: apsw.Connection, session_id: str) -> ApiSession | None:
    """One session as the session list shows it (no last turn), or ``None``."""
    with transaction(connection, f"load session {session_id}"):
        row = connection.execute(
            _SESSION_COLUMNS + " WHERE s.session_id = ?", (session_id,)
        ).fetchone()
    return None if row is None else _api_session(row, detail=False)


def _api_session(row: apsw.SQLiteValues, *, detail: bool) -> ApiSession:
    (
        session_id,
        record_json,
        workspace_id,
        state,
        started,
        title,
        configuration_json,
        elicitations_json,
        activity_json,
        queued,
        outcome_json,
    ) = row
    sid = str(session_id)
    try:
        record = _FACTS.decode(str(record_json))
    except msgspec.DecodeError as exc:
        raise InvalidInput(
            f"stored session record does not decode: {exc}; the store may have been written "
            "by another tool",
            session_id=sid,
        ) from exc
    outcome = (
        decode_stored(TURN_OUTCOME_DECODER, str(outcome_json), "last turn outcome", sid)
        if detail and outcome_json is not None
        else None
    )
    return api_session(
        record,
        workspace_id=str(workspace_id),
        execution=_execution(sid, state, started),
        session_title=None if title is None else str(title),
        configuration=(
            {}
            if configuration_json is None
            else decode_stored(CONFIGURATION_DECODER, str(configuration_json), "configuration", sid)
        ),
        pending_elicitations=(
            []
            if elicitations_json is None
            else decode_stored(
                ELICITATIONS_DECODER, str(elicitations_json), "pending elicitations", sid
            )
        ),
        queued_prompts=int(queued),  # type: ignore[arg-type]
        activity=(
            None
            if activity_json is None
            else decode_stored(_ACTIVITY, str(activity_json), "activity", sid)
        ),
        last_turn_outcome=outcome,
    )


def list_workspaces(connection: apsw.Connection) -> WorkspaceList:
    """Every workspace with its number of live sessions, newest first."""
    with transaction(connection, "list workspaces"):
        rows = connection.execute(
            "SELECT w.workspace_id, w.created_at, count(s.session_id) FROM workspaces w"
            " LEFT JOIN session_contexts c ON c.workspace_id = w.workspace_id"
            " LEFT JOIN sessions s ON s.session_id = c.session_id"
            " GROUP BY w.workspace_id ORDER BY w.created_at DESC, w.workspace_id"
        ).fetchall()
    return WorkspaceList(
        workspaces=[
            Workspace(
                id=str(workspace_id),
                name=str(workspace_id),
                created_at=str(created_at),
                last_opened_at=str(created_at),
                session_count=int(count),  # type: ignore[arg-type]
            )
            for workspace_id, created_at, count in rows
        ]
    )
