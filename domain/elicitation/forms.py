"""ACP form elicitations: the question an agent asks, and the answer sent back.

An agent asks the user for structured input with an ACP ``elicitation/create`` request.
:func:`~relaystore.domain.elicitation.acp.parse_acp_request` turns the raw ACP params
into an :class:`ElicitationRequest` (refusing anything outside the supported subset and
its size limits); :func:`~relaystore.domain.elicitation.answers.validate_response` checks
an answer against the fields that request published, so a stale or malformed answer is
refused instead of being forwarded.

Wire notes (serde parity):

* :class:`ElicitationField` is one flat Struct. The origin flattens its ``kind`` enum after
  the common fields; the declaration order below reproduces every variant's key order.
  Unknown keys are refused: the origin's flattened enum is ``deny_unknown_fields``.
* :class:`ElicitationResponse` is tagged on ``action``. ``accept`` refuses unknown keys;
  ``decline`` and ``cancel`` ignore extra keys, as serde does for the unit variants of an
  internally tagged enum even under ``deny_unknown_fields``.

This module owns the wire types and the shape each guarantees. Reading ACP params (and
their size limits) is :mod:`.acp`'s, which builds these types; checking an answer is
:mod:`.answers`'s. Pure: no I/O; it must not read raw ACP JSON itself, nor import the
parser (the parser imports this module).
"""

from __future__ import annotations

import enum
import math
from typing import Annotated, TypeAlias, TypeGuard, cast

import msgspec

from ..errors import InvalidInput
from ..integers import INT64_MAX, INT64_MIN
from ..text_formats import is_rfc3339_date_time
from ..wire import Wire, decode_json, emitted, variant_type

__all__ = [
    "U64_MAX",
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


U64_MAX = 2**64 - 1
"""The largest Rust ``u64``: lengths and item counts of a field fit it."""

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
            if count is not None and not is_int_in(count, 0, U64_MAX):
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
