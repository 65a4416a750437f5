"""Checking an answer to an elicitation against the request's own schema.

:func:`validate_response` checks a whole answer, :func:`validate_field_value` one value,
each as the origin's controller does before it forwards an answer to the agent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..errors import InvalidInput
from ..text_formats import RUST_WHITESPACE, is_date, is_rfc3339_date_time, is_uri
from .forms import (
    ElicitationAccept,
    ElicitationField,
    ElicitationFieldKind,
    ElicitationRequest,
    ElicitationResponse,
    ElicitationValue,
    finite_float,
    shown,
)

__all__ = ["validate_field_value", "validate_response"]


def validate_response(request: ElicitationRequest, response: ElicitationResponse) -> None:
    """Raise :class:`InvalidInput` unless ``response`` answers ``request``'s own schema.

    Decline and cancel always pass. An accept answer must name only fields of the
    request; every required field must be answered with a non-blank value, unless a field
    that is its custom-answer partner carries a non-blank string; each value must satisfy
    its field (see :func:`validate_field_value`).
    """
    if not isinstance(response, ElicitationAccept):
        return
    content = response.content
    known = {field.id for field in request.fields}
    for field_id in content:
        if field_id not in known:
            raise InvalidInput(
                f"answer names {shown(field_id)}, which is not a field of elicitation "
                f"{shown(request.id)}"
            )
    for field in request.fields:
        value = content.get(field.id)
        if value is None:
            if field.required and not _custom_answer_present(request, field, content):
                raise InvalidInput(f"{_label(field)} is required")
            continue
        if field.required and isinstance(value, str) and _is_blank(value):
            raise InvalidInput(f"{_label(field)} is required; the answer is blank")
        validate_field_value(field, value)


def validate_field_value(field: ElicitationField, value: ElicitationValue) -> None:
    """Raise :class:`InvalidInput` unless ``value`` is one ``field`` allows.

    Presence and required-ness are the caller's business. Text: length in characters,
    ``pattern`` (searched, not anchored) and ``format`` (``email``, ``uri``, ``date``,
    ``date-time``; other formats pass). Selects: membership and item counts. Integer and
    number: range; a whole-number integer answers a number field.

    Messages name the field; they quote the refused answer only when the field is not
    ``secret``: a secret answer (a password, a PIN) never appears in any message.
    """
    kind = field.kind
    label = _label(field)
    if kind is ElicitationFieldKind.TEXT and isinstance(value, str):
        length = len(value)
        if field.min_length is not None and length < field.min_length:
            raise InvalidInput(f"{label} is too short; use at least {field.min_length} characters")
        if field.max_length is not None and length > field.max_length:
            raise InvalidInput(f"{label} is too long; use at most {field.max_length} characters")
        if field.pattern is not None:
            try:
                matched = re.search(field.pattern, value) is not None
            except re.error as exc:
                raise InvalidInput(f"{label} has an invalid pattern: {exc}") from exc
            if not matched:
                raise InvalidInput(
                    f"{label} does not match the required format (pattern {field.pattern!r})"
                )
        if field.format is not None:
            problem = _format_problem(value, field.format)
            if problem is not None:
                raise InvalidInput(f"{label} {problem}")
        return
    if kind is ElicitationFieldKind.SINGLE_SELECT and isinstance(value, str):
        if not any(option.value == value for option in field.options or ()):
            raise InvalidInput(f"{label} is not one of the offered options{_echo(field, value)}")
        return
    if kind is ElicitationFieldKind.MULTI_SELECT and isinstance(value, list):
        if field.min_items is not None and len(value) < field.min_items:
            raise InvalidInput(f"{label} needs more selections; choose at least {field.min_items}")
        if field.max_items is not None and len(value) > field.max_items:
            raise InvalidInput(f"{label} has too many selections; choose at most {field.max_items}")
        offered = {option.value for option in field.options or ()}
        for choice in value:
            if choice not in offered:
                raise InvalidInput(
                    f"{label} is not one of the offered options{_echo(field, choice)}"
                )
        return
    if kind is ElicitationFieldKind.BOOLEAN and isinstance(value, bool):
        return
    if isinstance(value, bool):
        raise InvalidInput(f"{label} has an incompatible value: expected {_EXPECTED[kind]}")
    if kind is ElicitationFieldKind.INTEGER and isinstance(value, int):
        _check_range(field, value, label)
        return
    if kind is ElicitationFieldKind.NUMBER and isinstance(value, (int, float)):
        number = finite_float(value)
        if number is None:
            raise InvalidInput(f"{label} is outside the allowed range; use a finite number")
        _check_range(field, number, label)
        return
    raise InvalidInput(f"{label} has an incompatible value: expected {_EXPECTED[kind]}")


def _echo(field: ElicitationField, value: str | int | float) -> str:
    """``": <value>"`` to end a message with the offending answer; nothing for a secret field.

    A secret answer (a password, a PIN) never appears in a message: the field is named
    by the label, the value is not.
    """
    if field.secret:
        return " (the answer is not shown: the field is secret)"
    return f": {shown(value) if isinstance(value, str) else value}"


def _label(field: ElicitationField) -> str:
    if field.title == field.id:
        return f"field {shown(field.id)}"
    return f"{shown(field.title)} (field {shown(field.id)})"


_EXPECTED = {
    ElicitationFieldKind.TEXT: "a string",
    ElicitationFieldKind.SINGLE_SELECT: "one option value (a string)",
    ElicitationFieldKind.MULTI_SELECT: "an array of option values",
    ElicitationFieldKind.BOOLEAN: "true or false",
    ElicitationFieldKind.INTEGER: "an integer",
    ElicitationFieldKind.NUMBER: "a number",
}
"""What an answer to each kind must be, for messages."""


def _is_blank(text: str) -> bool:
    return not text.strip(RUST_WHITESPACE)


def _custom_answer_present(
    request: ElicitationRequest, field: ElicitationField, content: Mapping[str, ElicitationValue]
) -> bool:
    for candidate in request.fields:
        if candidate.custom_answer_for == field.id:
            value = content.get(candidate.id)
            if isinstance(value, str) and not _is_blank(value):
                return True
    return False


def _check_range(field: ElicitationField, value: int | float, label: str) -> None:
    low, high = field.minimum, field.maximum
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
        raise InvalidInput(f"{label} is outside the allowed range {bounds}{_echo(field, value)}")


def _format_problem(value: str, fmt: str) -> str | None:
    if fmt == "email":
        local, at, domain = value.partition("@")
        if not (at and local and "." in domain and not domain.startswith(".")):
            return "must be an email address"
    elif fmt == "uri":
        if not is_uri(value):
            return "must be a URI"
    elif fmt == "date":
        if not is_date(value):
            return "must be a YYYY-MM-DD date"
    elif fmt == "date-time" and not is_rfc3339_date_time(value):
        return "must be an RFC 3339 date-time"
    return None
