"""ACP form elicitations: the question an agent asks, and the answer sent back.

An agent asks the user for structured input with an ACP ``elicitation/create`` request.
:meth:`ElicitationRequest.from_acp_params` turns the raw ACP params into an
:class:`ElicitationRequest` (refusing anything outside the supported subset and its size
limits); :func:`validate_response` checks an answer against the fields that request
published, so a stale or malformed answer is refused instead of being forwarded.

Wire notes (serde parity):

* :class:`ElicitationField` is one flat Struct. The origin flattens its ``kind`` enum after
  the common fields; the declaration order below reproduces every variant's key order.
  Unknown keys are refused: the origin's flattened enum is ``deny_unknown_fields``.
* :class:`ElicitationResponse` is tagged on ``action``. ``accept`` refuses unknown keys;
  ``decline`` and ``cancel`` ignore extra keys, as serde does for the unit variants of an
  internally tagged enum even under ``deny_unknown_fields``.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, TypeAlias, TypeGuard, cast

import msgspec

from .errors import InvalidInput
from .integers import INT64_MAX, INT64_MIN
from .text_formats import is_rfc3339_date_time
from .wire import Wire, decode_json, emitted, encode, variant_type

__all__ = [
    "MAX_ELICITATION_BYTES",
    "MAX_FIELDS",
    "MAX_OPTIONS",
    "MAX_TEXT_BYTES",
    "ElicitationAccept",
    "ElicitationCancel",
    "ElicitationDecline",
    "ElicitationField",
    "ElicitationFieldKind",
    "ElicitationOption",
    "ElicitationRequest",
    "ElicitationResponse",
    "ElicitationValue",
    "decode_elicitation_response",
    "finite_float",
    "is_int_in",
    "is_rfc3339_date_time",
    "shown",
]

MAX_ELICITATION_BYTES = 64 * 1024
"""Largest accepted ACP elicitation params, as compact JSON bytes."""
MAX_FIELDS = 32
"""Most properties (fields) one elicitation may ask for."""
MAX_OPTIONS = 100
"""Most options one select field may offer."""
MAX_TEXT_BYTES = 16 * 1024
"""Largest message, title, description, default, pattern, preview or field id (UTF-8 bytes)."""

_U64_MAX = 2**64 - 1

ElicitationValue: TypeAlias = str | int | float | bool | list[str]
"""One answered value (untagged on the wire): string, integer, number, boolean or strings."""


class _ShapeError(InvalidInput, ValueError):
    """A Struct whose contents break its wire shape.

    It is an :class:`InvalidInput` for callers that build values directly, and a
    ``ValueError`` so msgspec reports it as a ``ValidationError`` (with the JSON path)
    while decoding; :func:`relaystore.domain.wire.decode_json` turns that into ``InvalidInput``.
    """


class ElicitationFieldKind(enum.Enum):
    """What a field asks for (the ``kind`` key on the wire)."""

    TEXT = "text"
    SINGLE_SELECT = "single_select"
    MULTI_SELECT = "multi_select"
    BOOLEAN = "boolean"
    INTEGER = "integer"
    NUMBER = "number"


class ElicitationOption(Wire, kw_only=True, forbid_unknown_fields=True):
    """One choice of a select field: ``value`` is what the answer carries."""

    value: str
    title: str
    description: str | None = None
    preview: str | None = None


_KIND_FIELDS: dict[ElicitationFieldKind, frozenset[str]] = {
    ElicitationFieldKind.TEXT: frozenset(
        {"default", "min_length", "max_length", "pattern", "format"}
    ),
    ElicitationFieldKind.SINGLE_SELECT: frozenset({"options", "default"}),
    ElicitationFieldKind.MULTI_SELECT: frozenset({"options", "default", "min_items", "max_items"}),
    ElicitationFieldKind.BOOLEAN: frozenset({"default"}),
    ElicitationFieldKind.INTEGER: frozenset({"default", "minimum", "maximum"}),
    ElicitationFieldKind.NUMBER: frozenset({"default", "minimum", "maximum"}),
}


class ElicitationField(Wire, kw_only=True, forbid_unknown_fields=True):
    """One question of a form: the common fields, then ``kind`` and that kind's fields.

    Guarantees (checked on construction and on decode): only the fields of ``kind`` are
    set; selects have ``options``; text/select defaults are strings, a multi-select default
    is a list of strings (an empty one is normalised to ``None``, as serde skips it),
    boolean defaults are booleans; integer values fit an i64; number values are finite
    floats (whole numbers are converted, so they re-encode as ``1.0``); lengths and item
    counts fit a u64.
    """

    id: str
    title: str
    description: str | None = None
    required: bool
    secret: bool = emitted(False)
    custom_answer_for: str | None = None
    custom_answer_option: str | None = None
    kind: ElicitationFieldKind
    options: list[ElicitationOption] | None = None
    default: str | bool | int | float | list[str] | None = None
    min_length: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_length: Annotated[int, msgspec.Meta(ge=0)] | None = None
    pattern: str | None = None
    format: str | None = None
    min_items: Annotated[int, msgspec.Meta(ge=0)] | None = None
    max_items: Annotated[int, msgspec.Meta(ge=0)] | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None

    def __post_init__(self) -> None:
        kind = self.kind
        allowed = _KIND_FIELDS[kind]
        for name in _VARIANT_FIELDS:
            if name not in allowed and getattr(self, name) is not None:
                raise _ShapeError(
                    f"field {shown(self.id)}: a {kind.value} field has no `{name}`; "
                    f"its fields are {', '.join(sorted(allowed))}"
                )
        for name in ("min_length", "max_length", "min_items", "max_items"):
            count = getattr(self, name)
            if count is not None and not is_int_in(count, 0, _U64_MAX):
                raise _ShapeError(
                    f"field {shown(self.id)}: `{name}` must be a non-negative integer"
                )
        selects = (ElicitationFieldKind.SINGLE_SELECT, ElicitationFieldKind.MULTI_SELECT)
        if kind in selects and self.options is None:
            raise _ShapeError(f"field {shown(self.id)}: a {kind.value} field needs `options`")
        if kind in (ElicitationFieldKind.TEXT, ElicitationFieldKind.SINGLE_SELECT):
            if self.default is not None and not isinstance(self.default, str):
                raise _ShapeError(f"field {shown(self.id)}: `default` must be a string")
        elif kind is ElicitationFieldKind.MULTI_SELECT:
            default = self.default
            if default is not None:
                if not isinstance(default, list) or not all(isinstance(v, str) for v in default):
                    raise _ShapeError(
                        f"field {shown(self.id)}: `default` must be an array of strings"
                    )
                if not default:
                    self.default = None
        elif kind is ElicitationFieldKind.BOOLEAN:
            if self.default is not None and not isinstance(self.default, bool):
                raise _ShapeError(f"field {shown(self.id)}: `default` must be a boolean")
        elif kind is ElicitationFieldKind.INTEGER:
            for name in ("default", "minimum", "maximum"):
                value = getattr(self, name)
                if value is not None and not is_int_in(value, INT64_MIN, INT64_MAX):
                    raise _ShapeError(
                        f"field {shown(self.id)}: `{name}` must be an integer that fits 64 bits"
                    )
        else:
            for name in ("default", "minimum", "maximum"):
                value = getattr(self, name)
                if value is None:
                    continue
                number = finite_float(value)
                if number is None:
                    raise _ShapeError(f"field {shown(self.id)}: `{name}` must be a finite number")
                setattr(self, name, number)


_VARIANT_FIELDS = ElicitationField.__struct_fields__[
    ElicitationField.__struct_fields__.index("kind") + 1 :
]
"""The fields of some kinds only, in declaration (wire) order: those after ``kind``."""


class ElicitationRequest(Wire, kw_only=True, forbid_unknown_fields=True):
    """A validated form elicitation: its message, optional heading, and ordered fields."""

    id: str
    message: str
    title: str | None = None
    description: str | None = None
    fields: list[ElicitationField]

    @classmethod
    def from_acp_params(cls, request_id: str, params: object) -> ElicitationRequest:
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
        return cls(
            id=request_id,
            message=message,
            title=title,
            description=description,
            fields=fields,
        )


class _Response(Wire, kw_only=True):
    """Base of the response variants, which are tagged on ``action``."""

    @property
    def action_name(self) -> str:
        """The wire tag: ``"accept"``, ``"decline"`` or ``"cancel"``."""
        return variant_type(self)


class ElicitationAccept(
    _Response, kw_only=True, tag_field="action", tag="accept", forbid_unknown_fields=True
):
    """The user answered: field id → value. ``content`` is omitted when empty.

    Keys are kept sorted (the origin holds a ``BTreeMap``), and integers outside the i64
    range become floats (the origin's untagged value falls back to ``f64``).
    """

    content: dict[str, ElicitationValue] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        content: dict[str, ElicitationValue] = {}
        for key in sorted(self.content):
            value = self.content[key]
            if (
                isinstance(value, int)
                and not isinstance(value, bool)
                and not INT64_MIN <= value <= INT64_MAX
            ):
                try:
                    value = float(value)
                except OverflowError:
                    raise _ShapeError(f"answer {shown(key)} is out of range") from None
            content[key] = value
        self.content = content


class ElicitationDecline(_Response, kw_only=True, tag_field="action", tag="decline"):
    """The user declined to answer (extra keys are ignored on read, as serde does)."""


class ElicitationCancel(_Response, kw_only=True, tag_field="action", tag="cancel"):
    """The user dismissed the form (extra keys are ignored on read, as serde does)."""


ElicitationResponse: TypeAlias = ElicitationAccept | ElicitationDecline | ElicitationCancel
"""The answer to an elicitation, tagged on ``action``."""


def decode_elicitation_response(data: bytes | str) -> ElicitationResponse:
    """Decode an :data:`ElicitationResponse`, raising :class:`InvalidInput` naming the field."""
    kind = cast("type[ElicitationResponse]", ElicitationResponse)
    return decode_json(data, kind, what="elicitation response")


# --- ACP parsing helpers -------------------------------------------------------------------


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
    if not is_int_in(value, 0, _U64_MAX):
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


def is_int_in(value: object, low: int, high: int) -> TypeGuard[int]:
    """An integer (not a boolean) within ``low..=high``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def finite_float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def shown(text: str, limit: int = 60) -> str:
    """Quote ``text`` for a message, shortened when long."""
    return repr(text if len(text) <= limit else text[:limit] + "…")
