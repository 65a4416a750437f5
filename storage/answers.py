"""Recorded answers to a session's questions: who answered and what.

``elicitation_answers`` (schema revision
:data:`~relaystore.storage.schema.ANSWERS_REVISION`, :data:`ANSWERS_DDL`) holds one row
per answered question: who answered, when, and the response as JSON with every
``secret`` field already masked (:func:`~relaystore.domain.elicitation.answered.masked_response`),
so the file itself never holds a secret answer. The session id references ``sessions``
``ON DELETE CASCADE``: deleting a session deletes its answers in the same transaction.
Every change to a row numbers a ``record`` change of its session in ``store_changes``
(the triggers here), so ``publish`` carries a session's answers with its record
(:func:`load_answer_rows`) and ``restore``/``mirror`` write them back
(:func:`apply_answer_rows`).

:func:`record_answer` finds the question the session asked (its pending list, else the
``input_required`` event of its feed that asked it), checks the answer against it and
applies the domain's lifecycle rule (one answer per question), in one transaction.
Reading the answers is :mod:`.reads.elicitations`'.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.elicitation.answered import RecordedAnswer, admit_answer, checked_answer
from ..domain.elicitation.forms import ElicitationRequest, ElicitationResponse, shown
from ..domain.errors import InvalidInput, ProjectionError, UnknownSession
from ..domain.messages import RecordElicitationAnswer
from ..domain.replication import AnswerRow
from ..domain.wire import encode
from .transaction import transaction

__all__ = [
    "ANSWERS_DDL",
    "apply_answer_rows",
    "decode_answer",
    "load_answer_rows",
    "record_answer",
]

ANSWERS_DDL = """
CREATE TABLE IF NOT EXISTS elicitation_answers (
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    elicitation_id TEXT NOT NULL CHECK(length(trim(elicitation_id)) > 0),
    answered_by TEXT NOT NULL CHECK(length(trim(answered_by)) > 0),
    answered_at_ms INTEGER NOT NULL CHECK(answered_at_ms >= 0),
    response_json TEXT NOT NULL CHECK(json_valid(response_json)),
    PRIMARY KEY(session_id, elicitation_id)
) STRICT;
""" + "".join(
    f"CREATE TRIGGER IF NOT EXISTS store_changes_elicitation_answers_{when.lower()} "
    f"AFTER {when} ON elicitation_answers BEGIN INSERT INTO store_changes(kind, session_id) "
    f"VALUES ('record', {row}.session_id); END;\n"
    for when, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))
)
"""The answers table and the triggers numbering its changes as its session's record's."""

_QUESTIONS = msgspec.json.Decoder(list[ElicitationRequest])
_QUESTION = msgspec.json.Decoder(ElicitationRequest)
_RESPONSE = msgspec.json.Decoder(ElicitationResponse)


def _asked(
    connection: apsw.Connection, session_id: str, elicitation_id: str
) -> ElicitationRequest | None:
    """The question ``elicitation_id`` of the session: pending, or asked by its feed."""
    pending = connection.execute(
        "SELECT pending_elicitations_json FROM materialized_sessions WHERE session_id = ?",
        (session_id,),
    ).get
    if pending is not None:
        try:
            for request in _QUESTIONS.decode(str(pending)):
                if request.id == elicitation_id:
                    return request
        except msgspec.DecodeError as exc:
            raise ProjectionError(
                f"stored pending elicitations do not decode: {exc}", session_id=session_id
            ) from exc
    asked = connection.execute(
        "SELECT json_extract(body, '$.data.request') FROM api_events "
        "WHERE session_id = ? AND json_extract(body, '$.type') = 'input_required' "
        "AND json_extract(body, '$.data.request.id') = ? ORDER BY seq DESC LIMIT 1",
        (session_id, elicitation_id),
    ).get
    if asked is None:
        return None
    try:
        return _QUESTION.decode(str(asked))
    except msgspec.DecodeError as exc:
        raise ProjectionError(
            f"the stored question {shown(elicitation_id)} does not decode: {exc}",
            session_id=session_id,
        ) from exc


def decode_answer(
    session_id: str, elicitation_id: str, answered_by: str, at_ms: int, response_json: str
) -> RecordedAnswer:
    """A stored row as a :class:`RecordedAnswer` (:class:`ProjectionError` when its
    response does not decode: written by another tool)."""
    try:
        response = _RESPONSE.decode(response_json)
    except msgspec.DecodeError as exc:
        raise ProjectionError(
            f"the stored answer to {shown(elicitation_id)} does not decode: {exc}",
            session_id=session_id,
        ) from exc
    return RecordedAnswer(
        elicitation_id=elicitation_id,
        answered_by=answered_by,
        answered_at_ms=at_ms,
        response=response,
    )


def record_answer(connection: apsw.Connection, message: RecordElicitationAnswer) -> None:
    """Keep ``message``'s answer (see the module doc); nothing is written when it is
    refused: :class:`UnknownSession`, or :class:`InvalidInput` naming the field."""
    session_id, elicitation_id = message.session_id, message.elicitation_id
    name = type(message).__name__
    with transaction(connection, f"record the answer to {shown(elicitation_id)}"):
        if (
            connection.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).get
            is None
        ):
            raise UnknownSession(session_id)
        request = _asked(connection, session_id, elicitation_id)
        if request is None:
            raise InvalidInput(
                f"{name}.elicitation_id: the session asked no question "
                f"{shown(elicitation_id)}; record an answer once the store holds the "
                "relay event that asks it",
                session_id=session_id,
            )
        incoming = checked_answer(
            f"{name}.response",
            request,
            elicitation_id=elicitation_id,
            answered_by=message.answered_by,
            answered_at_ms=message.answered_at_ms,
            response=message.response,
        )
        held = connection.execute(
            "SELECT answered_by, answered_at_ms, response_json FROM elicitation_answers "
            "WHERE session_id = ? AND elicitation_id = ?",
            (session_id, elicitation_id),
        ).fetchone()
        recorded = (
            None
            if held is None
            else decode_answer(session_id, elicitation_id, str(held[0]), int(held[1]), held[2])
        )
        try:
            if not admit_answer(recorded, incoming):
                return
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: {exc.detail}", session_id=session_id) from None
        connection.execute(
            "INSERT INTO elicitation_answers(session_id, elicitation_id, answered_by, "
            "answered_at_ms, response_json) VALUES (?, ?, ?, ?, ?)",
            (
                session_id,
                elicitation_id,
                incoming.answered_by,
                incoming.answered_at_ms,
                encode(incoming.response).decode(),
            ),
        )


def load_answer_rows(connection: apsw.Connection, session_id: str) -> list[AnswerRow]:
    """The session's answers as stored, in the order recorded (for a ``record`` change)."""
    return [
        AnswerRow(str(ident), str(by), int(at), str(response))
        for ident, by, at, response in connection.execute(
            "SELECT elicitation_id, answered_by, answered_at_ms, response_json "
            "FROM elicitation_answers WHERE session_id = ? ORDER BY answered_at_ms, rowid",
            (session_id,),
        )
    ]


def apply_answer_rows(connection: apsw.Connection, local: str, rows: list[AnswerRow]) -> None:
    """Make the answers of the replicated session ``local`` the published ``rows``
    (the rows it holds that are not published are deleted; an unchanged row is left as
    it is, so it numbers no change)."""
    kept = [row.elicitation_id for row in rows]
    connection.execute(
        "DELETE FROM elicitation_answers WHERE session_id = ? "
        "AND elicitation_id NOT IN (SELECT value FROM json_each(?))",
        (local, msgspec.json.encode(kept).decode()),
    )
    connection.executemany(
        "INSERT INTO elicitation_answers(session_id, elicitation_id, answered_by, "
        "answered_at_ms, response_json) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(session_id, elicitation_id) DO UPDATE SET "
        "answered_by = excluded.answered_by, answered_at_ms = excluded.answered_at_ms, "
        "response_json = excluded.response_json WHERE answered_by IS NOT excluded.answered_by "
        "OR answered_at_ms IS NOT excluded.answered_at_ms "
        "OR response_json IS NOT excluded.response_json",
        [
            (local, row.elicitation_id, row.answered_by, row.answered_at_ms, row.response_json)
            for row in rows
        ],
    )
