"""The wire conventions every relaystore type follows, and the shared codec.

The origin writes JSON with serde; relaystore must write the same bytes. The rules:

* Every type derives from :class:`Wire` (``omit_defaults=True``) and repeats
  ``kw_only=True`` (msgspec applies it per class): construction is by keyword. A field whose
  default is ``None``, ``False`` or an empty collection is left out when it has that
  value: serde's ``skip_serializing_if``.
* A field that serde always writes but also defaults on read (``Option`` without a
  skip rule, ``#[serde(default)]`` scalars) takes its default from :func:`emitted`.
  msgspec only omits a value identical to a plain default, never one made by a
  factory, so such fields are always written and still optional on read.
* ``forbid_unknown_fields=True`` exactly where the origin says ``deny_unknown_fields``.
* Adjacently tagged enums (``{"type": .., "data": {..}}``) are one Struct per variant,
  tagged on ``type`` and holding a ``data`` Struct; unit variants have no ``data``.

msgspec escapes strings exactly as serde_json does and formats floats like ryu
(``1e16``, ``1e-7``); ``tests/domain/test_wire.py`` pins both.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Self, TypeVar

import msgspec

from .errors import InvalidInput

__all__ = [
    "JSON",
    "Variant",
    "Wire",
    "decode_json",
    "emitted",
    "encode",
    "json_value",
    "variant_type",
]

T = TypeVar("T")

JSON = Any
"""An opaque JSON value (ACP payloads): dicts keep the key order they were read in."""

_ENCODER = msgspec.json.Encoder()


class Wire(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Base of every wire type: keyword construction, serde skip rules."""


class Variant(Wire, kw_only=True):
    """One variant of an adjacently tagged enum: tagged on ``type``, fields in ``data``.

    Subclasses set ``tag=...`` and, unless they are unit variants, a ``data`` field.
    """

    @classmethod
    def data_type(cls) -> type[Any] | None:
        """The Struct of ``data``, or None for a unit variant."""
        try:
            return _data_types[cls]
        except KeyError:
            found = next((f.type for f in msgspec.structs.fields(cls) if f.name == "data"), None)
            data_type = found if isinstance(found, type) and found is not type(None) else None
            _data_types[cls] = data_type
            return data_type

    @classmethod
    def of(cls, **fields: Any) -> Self:
        """Build the variant from its data fields (``data`` is made for you).

        Every field is checked against its declared type, as decoding would check it (no
        coercion: ``"1"`` is not an ``int``; a wire-shaped dict or enum value is taken
        for the Struct or enum it spells). An unknown, missing or ill-typed field raises
        :class:`InvalidInput` naming the variant and the field.
        """
        data_type = cls.data_type()
        if data_type is None:
            if fields:
                raise InvalidInput(f"{variant_type(cls)} takes no data, got {sorted(fields)}")
            return cls()
        names = _field_names(data_type)
        unknown = [name for name in fields if name not in names]
        if unknown:
            raise InvalidInput(
                f"invalid {variant_type(cls)} ({cls.__name__}.of): unknown field"
                f"{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"its fields are {', '.join(names)}"
            )
        try:
            data = msgspec.convert(fields, data_type, strict=True)
        except msgspec.ValidationError as exc:
            text = str(exc).replace("`$", "`data", 1)
            raise InvalidInput(f"invalid {variant_type(cls)} ({cls.__name__}.of): {text}") from exc
        return cls(data=data)


_data_types: dict[type[Variant], type[Any] | None] = {}
_data_fields: dict[type[Any], tuple[str, ...]] = {}


def _field_names(data_type: type[Any]) -> tuple[str, ...]:
    names = _data_fields.get(data_type)
    if names is None:
        names = tuple(field.name for field in msgspec.structs.fields(data_type))
        _data_fields[data_type] = names
    return names


def variant_type(value: msgspec.Struct | type[msgspec.Struct]) -> str:
    """The wire ``type`` of a variant or variant class."""
    tag = value.__struct_config__.tag
    if not isinstance(tag, str):
        raise TypeError(f"{value!r} is not a tagged variant")
    return tag


def emitted(default: T) -> T:
    """Default for a field serde always writes: optional on read, present on write.

    A list or dict default is copied for each instance, never shared.
    """
    factory: Callable[[], T]
    if isinstance(default, list | dict):
        template = default
        factory = lambda: copy.copy(template)  # noqa: E731
    else:
        factory = lambda: default  # noqa: E731
    return msgspec.field(default_factory=factory)


def encode(value: object) -> bytes:
    """Encode any relaystore type (or plain JSON value) as compact serde-style JSON."""
    return _ENCODER.encode(value)


def json_value(value: object) -> JSON:
    """Convert a Struct into plain JSON values (dicts keep the wire key order)."""
    return msgspec.json.decode(_ENCODER.encode(value))


_decoders: dict[object, msgspec.json.Decoder[Any]] = {}


def decode_json(data: bytes | str, kind: type[T], *, what: str | None = None) -> T:
    """Decode ``data`` as ``kind``, raising :class:`InvalidInput` that names the field.

    ``what`` names the input in the message (for example ``"session record"``).
    """
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = msgspec.json.Decoder(kind)
        _decoders[kind] = decoder
    try:
        result: T = decoder.decode(data)
    except msgspec.DecodeError as exc:
        name = what or getattr(kind, "__name__", str(kind))
        raise InvalidInput(f"invalid {name}: {exc}") from exc
    return result
