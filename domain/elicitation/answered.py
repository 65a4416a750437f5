"""Who answered a question and what: the record relaystore keeps itself.

The origin journals how a question was resolved (``ElicitationResolved``: its id and
action) and nothing else, so the answer's content and who gave it reach the store only
from the embedder that forwarded the answer to the worker
(:class:`~relaystore.domain.messages.RecordElicitationAnswer`). This module owns what
such a record may be and how it is shown:

* :func:`check_answerer` and :func:`check_elicitation_id`: the person's name and the
  question's id, at the boundary (non-empty, bounded, no control characters);
* :func:`masked_response`: the answer as it is stored and shown, every ``secret``
  field's value replaced by :data:`~relaystore.domain.redaction.MASK` (a password or a
  PIN is never kept, so no read, export, replica or log can show it);
* :func:`answer_text`: the answer as one line for a person;
* :func:`admit_answer`: the lifecycle rule, **one answer per question**. The first
  record is the answer the worker was given; the same record again (a retried ask) is
  accepted and changes nothing; a different one is refused, naming who answered first.

Checking an answer against its question is :func:`~.answers.validate_response`'s (the
one rule); this module calls it and adds nothing to it. Pure: no I/O.
"""

from __future__ import annotations

import unicodedata

import msgspec

from ..errors import InvalidInput
from ..redaction import MASK
from .answers import validate_response
from .forms import (
    ElicitationAccept,
    ElicitationRequest,
    ElicitationResponse,
    ElicitationValue,
    shown,
)

__all__ = [
    "MAX_ANSWERER_CHARS",
    "MAX_ELICITATION_ID_CHARS",
    "RecordedAnswer",
    "admit_answer",
    "answer_text",
    "check_answerer",
    "check_elicitation_id",
    "checked_answer",
    "masked_response",
]

MAX_ANSWERER_CHARS = 200
"""The longest ``answered_by`` (characters): a name, an e-mail address or an account id."""

MAX_ELICITATION_ID_CHARS = 256
"""The longest elicitation id a record may name (the agent's ACP request id)."""


class RecordedAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """One question's recorded answer, as stored: ``response`` is already masked."""

    elicitation_id: str
    answered_by: str
    answered_at_ms: int
    response: ElicitationResponse


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


def _check_plain_text(where: str, what: str, value: str, limit: int) -> None:
    if not value.strip():
        raise InvalidInput(f"{where}: {what} is empty; give it")
    if len(value) > limit:
        raise InvalidInput(f"{where}: {what} is {len(value)} characters long; use at most {limit}")
    if _has_control(value):
        raise InvalidInput(f"{where}: {what} holds a control character; use plain text")


def check_answerer(where: str, answered_by: str) -> None:
    """Raise :class:`InvalidInput` (naming ``where``) unless ``answered_by`` names a
    person: not blank, at most :data:`MAX_ANSWERER_CHARS`, no control characters."""
    _check_plain_text(where, "who answered", answered_by, MAX_ANSWERER_CHARS)


def check_elicitation_id(where: str, elicitation_id: str) -> None:
    """Raise :class:`InvalidInput` (naming ``where``) unless ``elicitation_id`` may name
    a question: not blank, at most :data:`MAX_ELICITATION_ID_CHARS`, no control
    characters (whether the session asked it is the store's to say)."""
    _check_plain_text(where, "the elicitation id", elicitation_id, MAX_ELICITATION_ID_CHARS)


def masked_response(
    request: ElicitationRequest, response: ElicitationResponse
) -> ElicitationResponse:
    """``response`` with the value of every ``secret`` field of ``request`` replaced by
    :data:`~relaystore.domain.redaction.MASK` (a decline or cancel has none)."""
    if not isinstance(response, ElicitationAccept):
        return response
    secret = {field.id for field in request.fields if field.secret}
    if not secret & response.content.keys():
        return response
    content: dict[str, ElicitationValue] = {
        key: MASK if key in secret else value for key, value in response.content.items()
    }
    return ElicitationAccept(content=content)


def checked_answer(
    where: str,
    request: ElicitationRequest,
    *,
    elicitation_id: str,
    answered_by: str,
    answered_at_ms: int,
    response: ElicitationResponse,
) -> RecordedAnswer:
    """The record to keep of an answer to ``request``: checked against the question
    (:func:`~.answers.validate_response`; its refusal is prefixed with ``where``) and
    masked (:func:`masked_response`)."""
    try:
        validate_response(request, response)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.detail}") from None
    return RecordedAnswer(
        elicitation_id=elicitation_id,
        answered_by=answered_by,
        answered_at_ms=answered_at_ms,
        response=masked_response(request, response),
    )


def admit_answer(recorded: RecordedAnswer | None, incoming: RecordedAnswer) -> bool:
    """The lifecycle rule (one answer per question): ``True`` to write ``incoming``,
    ``False`` when it is the record held already (a retry: nothing to write).

    Raises :class:`InvalidInput` for a second, different answer: the worker was given
    the first one, so the store keeps it.
    """
    if recorded is None:
        return True
    if recorded == incoming:
        return False
    raise InvalidInput(
        f"elicitation {shown(incoming.elicitation_id)} was answered already, by "
        f"{shown(recorded.answered_by)} at {recorded.answered_at_ms} ms; a question keeps "
        "its first answer (the one its worker was given)"
    )


def _value_text(value: ElicitationValue) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(value) if value else "(none)"
    return str(value)


def answer_text(response: ElicitationResponse) -> str:
    """The answer on one line: ``declined``, ``cancelled``, or ``accepted: id = value;
    ...`` in field order as stored (a masked secret shows as the mask)."""
    if not isinstance(response, ElicitationAccept):
        return "declined" if response.action_name == "decline" else "cancelled"
    if not response.content:
        return "accepted (no fields answered)"
    parts = [f"{key} = {_value_text(value)}" for key, value in response.content.items()]
    return "accepted: " + "; ".join(parts)
