"""A session's structured questions: the pending ones, typed or as stored, and the
answers recorded for them.

Owns the statement reading ``materialized_sessions.pending_elicitations_json`` and its
two replies: decoded (:func:`load_elicitations`) or passed through as the stored JSON
array (:func:`load_raw_elicitations`, what ``GET .../elicitations`` answers). ``None``:
no projection of the session; a stored value that does not decode (or is not an array,
for the raw reply) raises :class:`~relaystore.domain.errors.ProjectionError`. And
:func:`load_elicitation_answers`: who answered each question, when and what (as
:mod:`relaystore.storage.answers` stored it, secret fields masked), what
``GET .../answers`` answers. It decides nothing about the questions themselves.
"""

from __future__ import annotations

import apsw

from ...domain.elicitation.answered import answer_text
from ...domain.elicitation.forms import ElicitationAccept
from ...domain.read_replies import (
    ElicitationAnswer,
    ElicitationAnswerList,
    ElicitationList,
    RawElicitationList,
)
from ..answers import decode_answer
from ..stored_columns import ELICITATIONS_DECODER, decode_stored, raw_stored
from ..transaction import transaction

__all__ = ["load_elicitation_answers", "load_elicitations", "load_raw_elicitations"]


def _stored_elicitations(connection: apsw.Connection, session_id: str) -> str | None:
    with transaction(connection, f"load the elicitations of session {session_id}"):
        value = connection.execute(
            "SELECT pending_elicitations_json FROM materialized_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    return None if value is None else str(value[0])


def load_elicitations(connection: apsw.Connection, session_id: str) -> ElicitationList | None:
    """The session's pending structured questions, or ``None`` without a projection."""
    stored = _stored_elicitations(connection, session_id)
    if stored is None:
        return None
    return ElicitationList(
        elicitations=decode_stored(ELICITATIONS_DECODER, stored, "pending elicitations", session_id)
    )


def load_raw_elicitations(
    connection: apsw.Connection, session_id: str
) -> RawElicitationList | None:
    """:func:`load_elicitations` with the stored array passed through untouched."""
    stored = _stored_elicitations(connection, session_id)
    if stored is None:
        return None
    return RawElicitationList(
        elicitations=raw_stored(stored, "pending elicitations", session_id, array=True)
    )


def load_elicitation_answers(
    connection: apsw.Connection, session_id: str
) -> ElicitationAnswerList | None:
    """Every answer recorded for the session's questions, in the order recorded, in one
    read transaction; ``None`` when the store lacks the session."""
    with transaction(connection, f"load the answers of session {session_id}"):
        if (
            connection.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).get
            is None
        ):
            return None
        rows = connection.execute(
            "SELECT elicitation_id, answered_by, answered_at_ms, response_json "
            "FROM elicitation_answers WHERE session_id = ? ORDER BY answered_at_ms, rowid",
            (session_id,),
        ).fetchall()
    answers = []
    for ident, by, at, response_json in rows:
        assert isinstance(at, int)  # the table's STRICT INTEGER column
        recorded = decode_answer(session_id, str(ident), str(by), at, str(response_json))
        response = recorded.response
        answers.append(
            ElicitationAnswer(
                elicitation_id=recorded.elicitation_id,
                action=response.action_name,
                answered_by=recorded.answered_by,
                answered_at_ms=recorded.answered_at_ms,
                answer=answer_text(response),
                content=response.content if isinstance(response, ElicitationAccept) else {},
            )
        )
    return ElicitationAnswerList(session_id=session_id, answers=answers)
