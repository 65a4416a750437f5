"""Reading an ACP ``elicitation/create`` request into an :class:`ElicitationRequest`.

Owns the supported subset of ACP form elicitations and its size limits
(:data:`MAX_ELICITATION_BYTES`, :data:`MAX_FIELDS`, :data:`MAX_OPTIONS`,
:data:`MAX_TEXT_BYTES`): :func:`parse_acp_request` reads the raw params (already decoded
JSON) property by property, with the agents' custom-answer and option-preview hints, and
refuses anything else with an :class:`~relaystore.domain.errors.InvalidInput` naming the
offending property. It is the one way in: the wire types (:mod:`.forms`) never call it.

Pure: it reads decoded JSON and builds the wire types; it must not define them
(:mod:`.forms`) or check an answer (:mod:`.answers`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast

from ..errors import InvalidInput
from ..integers import INT64_MAX, INT64_MIN
from ..wire import encode
from .forms import (
    U64_MAX,
    ElicitationField,
    ElicitationFieldKind,
    ElicitationOption,
    ElicitationRequest,
    finite_float,
    is_int_in,
    shown,
)

__all__ = [
    "MAX_ELICITATION_BYTES",
    "MAX_FIELDS",
    "MAX_OPTIONS",
    "MAX_TEXT_BYTES",
    "parse_acp_request",
]

MAX_ELICITATION_BYTES = 64 * 1024
"""Largest accepted ACP elicitation params, as compact JSON bytes."""
MAX_FIELDS = 32
"""Most properties (fields) one elicitation may ask for."""
MAX_OPTIONS = 100
"""Most options one select field may offer."""
MAX_TEXT_BYTES = 16 * 1024
"""Largest message, title, description, default, pattern, preview or field id (UTF-8 bytes)."""


def parse_acp_request(request_id: str, params: object) -> ElicitationRequest:
    """Parse ACP ``elicitation/create`` params (already decoded JSON) into a request.

    Refuses, with an :class:`InvalidInput` naming the offending property: params over
    64 KiB of compact JSON, non-form modes, a missing ``sessionId``/``requestId`` scope,
    more than 32 properties or 100 options, texts over 16 KiB, unsupported property
    types, patterns that do not compile (Python ``re`` stands in for Rust ``regex``),
    and numbers that are not finite.

    Field order: relaystore keeps the order in which ``properties`` was received
    (dicts keep JSON key order). The origin iterates a serde_json ``Map``, which keeps
    that order only with serde_json's ``preserve_order`` feature. The one stored origin
    ``Cargo.lock`` (release 1.10.0) resolves serde_json with its optional ``indexmap``
    dependency, so that feature is on in the origin's build graph; this is not
    proven for every build of the exact origin commit.
    """
    try:
        size = len(encode(params))
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(f"elicitation params are not plain JSON: {exc}") from exc
    if size > MAX_ELICITATION_BYTES:
        raise InvalidInput(
            f"elicitation request is {size} bytes; relaystore accepts at most "
            f"{MAX_ELICITATION_BYTES} bytes of ACP elicitation params"
        )
    body = _object(params, "elicitation params")
    mode = _string(body, "mode", "elicitation params")
    if mode != "form":
        raise InvalidInput(
            f"relaystore only supports form elicitations; mode {shown(mode)} is not supported"
        )
    if not isinstance(body.get("sessionId"), str) and "requestId" not in body:
        raise InvalidInput(
            "elicitation has no sessionId or requestId scope; send a string sessionId "
            "or a requestId"
        )
    message = _string(body, "message", "elicitation params")
    _check_text(message, "elicitation message")
    if "requestedSchema" not in body:
        raise InvalidInput("form elicitation has no requestedSchema")
    schema = _object(body["requestedSchema"], "requestedSchema")
    schema_type = schema.get("type")
    if isinstance(schema_type, str) and schema_type != "object":
        raise InvalidInput(
            f'requestedSchema type must be "object", not {shown(schema_type)}; '
            "nested or scalar schemas are not supported"
        )
    title = _optional_text(schema, "title", "requestedSchema")
    description = _optional_text(schema, "description", "requestedSchema")
    properties: Mapping[str, Any] = {}
    if "properties" in schema:
        properties = _object(schema["properties"], "requestedSchema.properties")
    if len(properties) > MAX_FIELDS:
        raise InvalidInput(
            f"elicitation has {len(properties)} fields; at most {MAX_FIELDS} are allowed"
        )
    required = _string_set(schema, "required", "requestedSchema")
    fields = [
        _parse_field(field_id, field_schema, field_id in required)
        for field_id, field_schema in properties.items()
    ]
    return ElicitationRequest(
        id=request_id,
        message=message,
        title=title,
        description=description,
        fields=fields,
    )


def _parse_field(field_id: str, value: object, required: bool) -> ElicitationField:
    _check_text(field_id, f"elicitation field id {shown(field_id)}")
    where = f"requestedSchema.properties[{shown(field_id)}]"
    schema = _object(value, where)
    title = _optional_text(schema, "title", where)
    description = _optional_text(schema, "description", where)
    meta = _as_object(schema.get("_meta"))
    codex = _as_object(meta.get("codex")) if meta is not None else None
    secret = codex is not None and codex.get("isSecret") is True
    custom_answer_for = _custom_answer_for(meta, codex)
    field_type = _string(schema, "type", where)
    variant: dict[str, Any]
    if field_type == "string":
        options = _string_options(schema, where)
        if options:
            kind = ElicitationFieldKind.SINGLE_SELECT
            variant = {
                "options": options,
                "default": _optional_text(schema, "default", where),
            }
        else:
            pattern = _optional_text(schema, "pattern", where)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise InvalidInput(
                        f"field {shown(field_id)} has an invalid pattern {pattern!r}: {exc}"
                    ) from exc
            kind = ElicitationFieldKind.TEXT
            variant = {
                "default": _optional_text(schema, "default", where),
                "min_length": _optional_count(schema, "minLength", where),
                "max_length": _optional_count(schema, "maxLength", where),
                "pattern": pattern,
                "format": _optional_text(schema, "format", where),
            }
    elif field_type == "array":
        if "items" not in schema:
            raise InvalidInput(f"multi-select field {shown(field_id)} has no items schema")
        items_where = f"{where}.items"
        items = _object(schema["items"], items_where)
        try:
            options = _options(items, "anyOf", items_where)
        except InvalidInput as anyof_error:
            # The origin falls back to `enum` whenever `anyOf` does not parse; when there
            # is no `enum` either, the `anyOf` problem is the one worth reporting.
            if "anyOf" in items and "enum" not in items:
                raise anyof_error from None
            options = _enum_options(items, items_where)
        if not options:
            raise InvalidInput(
                f"multi-select field {shown(field_id)} has no options; give items.anyOf "
                "or items.enum"
            )
        kind = ElicitationFieldKind.MULTI_SELECT
        variant = {
            "options": options,
            "default": _optional_string_list(schema, "default", where),
            "min_items": _optional_count(schema, "minItems", where),
            "max_items": _optional_count(schema, "maxItems", where),
        }
    elif field_type == "boolean":
        kind = ElicitationFieldKind.BOOLEAN
        variant = {"default": _optional_bool(schema, "default", where)}
    elif field_type == "integer":
        kind = ElicitationFieldKind.INTEGER
        variant = {
            name: _optional_i64(schema, name, where) for name in ("default", "minimum", "maximum")
        }
    elif field_type == "number":
        kind = ElicitationFieldKind.NUMBER
        variant = {
            name: _optional_f64(schema, name, where) for name in ("default", "minimum", "maximum")
        }
    else:
        raise InvalidInput(
            f"field {shown(field_id)} has unsupported type {shown(field_type)}; use string, "
            "array, boolean, integer or number"
        )
    return ElicitationField(
        id=field_id,
        title=field_id if title is None else title,
        description=description,
        required=required,
        secret=secret,
        custom_answer_for=custom_answer_for,
        custom_answer_option=None,
        kind=kind,
        **variant,
    )


def _custom_answer_for(
    meta: Mapping[str, Any] | None, codex: Mapping[str, Any] | None
) -> str | None:
    # Codex marks a free-text "other" answer with isOtherAnswer (older bridges) or
    # role "user_note" (newer); Claude uses _askUserQuestionCustomAnswer.isCustomAnswer.
    if codex is not None and (
        codex.get("isOtherAnswer") is True or codex.get("role") == "user_note"
    ):
        question = codex.get("questionId")
        if isinstance(question, str):
            return question
    claude = _as_object(meta.get("_askUserQuestionCustomAnswer")) if meta is not None else None
    if claude is not None and claude.get("isCustomAnswer") is True:
        question = claude.get("questionId")
        if isinstance(question, str):
            return question
    return None


def _string_options(schema: Mapping[str, Any], where: str) -> list[ElicitationOption]:
    if "oneOf" in schema:
        return _options(schema, "oneOf", where)
    if "enum" in schema:
        return _enum_options(schema, where)
    return []


def _option_list(schema: Mapping[str, Any], key: str, where: str) -> list[Any]:
    values = schema.get(key)
    if not isinstance(values, list):
        raise InvalidInput(f"{where}.{key} must be an array")
    if len(values) > MAX_OPTIONS:
        raise InvalidInput(
            f"{where}.{key} has {len(values)} options; at most {MAX_OPTIONS} are allowed"
        )
    return values


def _options(schema: Mapping[str, Any], key: str, where: str) -> list[ElicitationOption]:
    options: list[ElicitationOption] = []
    for index, entry in enumerate(_option_list(schema, key, where)):
        option_where = f"{where}.{key}[{index}]"
        option = _object(entry, option_where)
        value = _string(option, "const", option_where)
        title = _optional_text(option, "title", option_where)
        description = _optional_text(option, "description", option_where)
        meta = _as_object(option.get("_meta"))
        claude = _as_object(meta.get("_claude/askUserQuestionOption")) if meta else None
        preview = claude.get("preview") if claude is not None else None
        if not isinstance(preview, str):
            preview = None
        else:
            _check_text(preview, f"{option_where} preview")
        options.append(
            ElicitationOption(
                value=value,
                title=value if title is None else title,
                description=description,
                preview=preview,
            )
        )
    return options


def _enum_options(schema: Mapping[str, Any], where: str) -> list[ElicitationOption]:
    options: list[ElicitationOption] = []
    for index, value in enumerate(_option_list(schema, "enum", where)):
        if not isinstance(value, str):
            raise InvalidInput(f"{where}.enum[{index}] must be a string")
        options.append(ElicitationOption(value=value, title=value))
    return options


def _as_object(value: object) -> Mapping[str, Any] | None:
    return cast("Mapping[str, Any]", value) if isinstance(value, Mapping) else None


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{where} must be an object")
    return cast("Mapping[str, Any]", value)


def _string(body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key} must be a string")
    return value


def _check_text(value: str, what: str) -> None:
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_TEXT_BYTES:
        raise InvalidInput(f"{what} is too long ({size} bytes; at most {MAX_TEXT_BYTES})")


def _optional_text(body: Mapping[str, Any], key: str, where: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key} must be a string")
    _check_text(value, f"{where}.{key}")
    return value


def _optional_count(body: Mapping[str, Any], key: str, where: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not is_int_in(value, 0, U64_MAX):
        raise InvalidInput(f"{where}.{key} must be a non-negative integer")
    return value


def _optional_i64(body: Mapping[str, Any], key: str, where: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not is_int_in(value, INT64_MIN, INT64_MAX):
        raise InvalidInput(f"{where}.{key} must be an integer that fits 64 bits")
    return value


def _optional_f64(body: Mapping[str, Any], key: str, where: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{where}.{key} must be a number")
    number = finite_float(value)
    if number is None:
        raise InvalidInput(f"{where}.{key} must be finite")
    return number


def _optional_bool(body: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidInput(f"{where}.{key} must be a boolean")
    return value


def _optional_string_list(body: Mapping[str, Any], key: str, where: str) -> list[str] | None:
    value = body.get(key)
    return None if value is None else _string_list(value, key, where)


def _string_set(body: Mapping[str, Any], key: str, where: str) -> set[str]:
    return set(_string_list(body[key], key, where)) if key in body else set()


def _string_list(value: object, key: str, where: str) -> list[str]:
    if not isinstance(value, list):
        raise InvalidInput(f"{where}.{key} must be an array")
    if not all(isinstance(entry, str) for entry in value):
        raise InvalidInput(f"{where}.{key} entries must be strings")
    return list(value)
