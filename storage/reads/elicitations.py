"""A session's pending structured questions, typed or as stored.

Owns the statement reading ``materialized_sessions.pending_elicitations_json`` and its
two replies: decoded (:func:`load_elicitations`) or passed through as the stored JSON
array (:func:`load_raw_elicitations`, what ``GET .../elicitations`` answers). ``None``:
no projection of the session; a stored value that does not decode (or is not an array,
for the raw reply) raises :class:`~relaystore.domain.errors.ProjectionError`. It decides
nothing about the questions themselves.
"""

from __future__ import annotations

import apsw

from ...domain.read_replies import ElicitationList, RawElicitationList
from ..materialized import ELICITATIONS_DECODER, decode_stored, raw_stored
from ..transaction import transaction

__all__ = ["load_elicitations", "load_raw_elicitations"]


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
