"""A turn summed up and a projection with only its newest items: the reads that walk a
session's turns (:func:`load_turn_summary`, :func:`load_projection_tail`).

Each reads in one transaction, with the transcript reads' columns and text rule
(:mod:`.transcript`); which items begin a turn, the provisional title and a turn's final
message are :mod:`relaystore.domain.transcript_views`'s.
"""

from __future__ import annotations

import apsw

from ...domain.read_replies import ProjectionTail, TurnSummary
from ...domain.transcript_views import (
    final_message,
    is_user_item,
    latest_turn_start,
    provisional_title,
    turn_number,
)
from ..materialized import load_materialized_session
from ..stored_columns import TURN_OUTCOME_DECODER, decode_stored
from ..transaction import transaction
from .transcript import KIND_SQL, TEXT_COLUMNS, each_text, role_filter

__all__ = ["load_projection_tail", "load_turn_summary"]


def load_turn_summary(
    connection: apsw.Connection,
    session_id: str,
    turn_start_position: int | None = None,
    completed_ordinal: int | None = None,
) -> TurnSummary | None:
    """The turn from ``turn_start_position`` through ``completed_ordinal`` summed up;
    both ``None``: the last finished turn. ``None`` without a projection or a span."""
    with transaction(connection, f"load a turn summary of session {session_id}"):
        row = connection.execute(
            "SELECT last_turn_outcome_json FROM materialized_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        if turn_start_position is None or completed_ordinal is None:
            if row[0] is None:
                return None
            outcome = decode_stored(
                TURN_OUTCOME_DECODER, str(row[0]), "last turn outcome", session_id
            )
            if outcome.turn_start_position is None:
                return None
            turn_start_position, completed_ordinal = (
                outcome.turn_start_position,
                outcome.completed_ordinal,
            )
        started_items = connection.execute(
            f"SELECT stable_id, {KIND_SQL} FROM materialized_transcript_items"
            " WHERE session_id = ? AND position <= ?",
            (session_id, turn_start_position),
        )
        number = turn_number((str(stable_id), kind) for stable_id, kind in started_items)
        started, changed = connection.execute(
            "SELECT COALESCE(min(created_at_ms), 0), COALESCE(max(last_changed_at_ms), 0)"
            " FROM materialized_transcript_items"
            " WHERE session_id = ? AND position >= ? AND position <= ?",
            (session_id, turn_start_position, completed_ordinal),
        ).fetchone()  # type: ignore[misc]
        agents = connection.execute(
            f"SELECT {TEXT_COLUMNS} FROM materialized_transcript_items"
            " WHERE session_id = ? AND position > ? AND position <= ?"
            " AND latest_content_event_ordinal IS NOT NULL"
            " ORDER BY position DESC, stable_id DESC",
            (session_id, turn_start_position, completed_ordinal),
        )
        final = final_message(each_text(agents, session_id))
    return TurnSummary(
        turn_number=number,
        turn_started_at_ms=int(started),
        last_changed_at_ms=int(changed),
        final_message=final,
    )


def load_projection_tail(
    connection: apsw.Connection, session_id: str, limit: int = 1024
) -> ProjectionTail | None:
    """The projection with only its newest ``limit`` transcript items, and the window."""
    with transaction(connection, f"load the projection tail of session {session_id}"):
        session = load_materialized_session(connection, session_id, transcript_limit=limit)
        if session is None:
            return None
        total = connection.execute(
            "SELECT count(*) FROM materialized_transcript_items WHERE session_id = ?",
            (session_id,),
        ).get
        role_sql, kinds = role_filter(("user",))
        users = connection.execute(
            f"SELECT {TEXT_COLUMNS}, {KIND_SQL} FROM materialized_transcript_items"
            f" WHERE session_id = ?{role_sql} ORDER BY position, stable_id",
            (session_id, *kinds),
        )
        title = provisional_title(
            each_text((row for row in users if is_user_item(str(row[0]), row[8])), session_id)
        )
        newest_first = connection.execute(
            f"SELECT position, stable_id, {KIND_SQL} FROM materialized_transcript_items"
            " WHERE session_id = ? ORDER BY position DESC, stable_id DESC",
            (session_id,),
        )
        start = latest_turn_start(
            (int(position), str(stable_id), kind) for position, stable_id, kind in newest_first
        )
    return ProjectionTail(
        session=session,
        omitted_items=max(0, int(total) - len(session.transcript)),
        provisional_title=title,
        latest_turn_start_position=start,
    )
