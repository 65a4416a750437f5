"""Checking a message at the boundary, before any actor sees it.

msgspec checks types when it decodes, not when a Struct is built in code, so a message
an embedder builds may hold anything. :func:`validate_message` checks every field of
every message against its declared type (no coercion: ``"1"`` is not an ``int`` and
``b"x"`` is not a ``str``), every integer against SQLite's INTEGER range and every id
field against the id rule, and raises :class:`InvalidInput` naming the message and the
field. Nothing it refuses reaches a store.

Relay events are checked field by field instead of by a round trip (a replay sends
thousands of them): the envelope's fields one by one, every ordinal by the chain rule's
own range check (:func:`~relaystore.domain.chain.check_ordinal`, so an ordinal out of
range is the same :class:`RelayChainError` whichever path would have projected it), and
the observations of a message in one msgpack round trip through their declared types
(types without coercion, every typed integer in SQLite's range; 2.8 µs an event). The
chain rule checks digests and the rest of the chain where the session's frontier is known.
"""

from __future__ import annotations

import datetime
import decimal
import re
import uuid
from collections.abc import Iterable
from typing import Any, cast

import msgspec

from .api_events import ApiEventFilter
from .chain import check_ordinal
from .errors import InvalidInput, StoreError
from .ids import validate_id
from .integers import INT64_MAX, INT64_MIN
from .messages import ObserveRelayEvents, RecoverInterruptedCheckpoints, Request
from .relay.events import (
    MAX_RELAY_LINE_BYTES,
    MIN_RECORDED_AT_MS,
    RelayEvent,
    RelayLine,
    encode_relay_event,
    line_too_long,
)
from .relay.observations import RelayObservation
from .sessions.checks import validate_timestamp

__all__ = ["OBSERVATION_TYPES", "validate_message"]


_KEPT_AS_IS = (
    bytes,
    bytearray,
    memoryview,
    datetime.datetime,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    decimal.Decimal,
)
OBSERVATION_TYPES: tuple[type[Any], ...] = RelayObservation.__args__
"""The observation variants a relay event may carry (the members of ``RelayObservation``)."""


def validate_message(message: object) -> None:
    """Raise :class:`InvalidInput` unless ``message`` is a well-formed relaystore message."""
    if not isinstance(message, Request):
        raise InvalidInput(f"{type(message).__name__} is not a relaystore message")
    name = type(message).__name__
    session_id = getattr(message, "session_id", None)
    if isinstance(message, ObserveRelayEvents):
        if type(session_id) is not str:
            raise InvalidInput(
                f"{name}.session_id: expected a str, got {type(session_id).__name__}"
            )
        _check_events(f"{name}.events", session_id, message.events)
    else:
        _check_fields(name, message)
    if isinstance(message, RecoverInterruptedCheckpoints) and message.updated_at.strip():
        try:  # (a blank one is the storage layer's "checkpoint recovery timestamp is empty")
            validate_timestamp("updated_at", message.updated_at)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}.updated_at: {exc.detail}") from exc
    if session_id is not None:
        _check_id(f"{name}.session_id", "session", session_id)
    workspace_id = getattr(message, "workspace_id", None)
    if workspace_id is not None:
        _check_id(f"{name}.workspace_id", "workspace", workspace_id)
    check = getattr(message, "check", None)
    if callable(check):  # the message's own rules (ranges, pairs), stated beside it
        check()
    wanted = getattr(message, "filter", None)
    if isinstance(wanted, ApiEventFilter):  # a page query: its ids follow the id rule too
        for field, kind in (("session_id", "session"), ("workspace_id", "workspace")):
            value = getattr(wanted, field)
            if value is not None:
                _check_id(f"{name}.filter.{field}", kind, value)


_AT_PATH = re.compile(r"(.*) - at `\$((?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*)`$", re.DOTALL)
"""msgspec's ``... - at `$.record.additional_mounts[0].access``` suffix: the text, the path."""


def _check_fields(name: str, message: object) -> None:
    """Round-trip the whole message through its own type: msgspec checks every field."""
    try:
        plain = msgspec.to_builtins(message, builtin_types=_KEPT_AS_IS)
        out_of_range = _integer_out_of_range(plain)
        if out_of_range is not None:
            raise InvalidInput(f"{name}.{out_of_range}: integer outside SQLite's INTEGER range")
        converted = msgspec.convert(plain, type(message), strict=True)
        if converted != message:
            # The plain form converts, but a value is of another type than declared (a
            # str for an enum, a dict for a struct, a tuple for a list): name the first
            # such field, however deep inside the message it is.
            where, expected, given = _first_type_difference(converted, message)
            raise InvalidInput(f"{name}{where}: expected {expected}, got {given}")
    except msgspec.ValidationError as exc:
        text = str(exc)
        at = _AT_PATH.fullmatch(text)
        if at is None:
            raise InvalidInput(f"{name}: {text}") from exc
        raise InvalidInput(f"{name}{at.group(2)}: {at.group(1)}") from exc
    except InvalidInput as exc:
        if exc.detail.startswith(f"{name}."):
            raise
        raise InvalidInput(f"{name}: {exc.detail}") from exc
    except StoreError as exc:  # a type's own check (e.g. an id inside a record)
        raise InvalidInput(f"{name}: {exc.detail}") from exc
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidInput(f"{name}: a field holds a value of no relaystore type ({exc})") from exc


def _first_type_difference(declared: object, given: object) -> tuple[str, str, str]:
    """Where ``given`` first differs from ``declared`` (its value as the declared types
    hold it): the path (``.record.harness_kind``), the declared and the given type."""
    if type(declared) is type(given):
        if isinstance(declared, msgspec.Struct):
            for field in declared.__struct_fields__:
                inner, outer = getattr(declared, field), getattr(given, field)
                if inner != outer or type(inner) is not type(outer):
                    where, expected, got = _first_type_difference(inner, outer)
                    return f".{field}{where}", expected, got
        elif isinstance(declared, list | tuple) and len(declared) == len(cast(Any, given)):
            for index, (inner, outer) in enumerate(zip(declared, cast(Any, given), strict=True)):
                if inner != outer or type(inner) is not type(outer):
                    where, expected, got = _first_type_difference(inner, outer)
                    return f"[{index}]{where}", expected, got
        elif isinstance(declared, dict) and declared.keys() == cast(Any, given).keys():
            for key, inner in declared.items():
                outer = cast(Any, given)[key]
                if inner != outer or type(inner) is not type(outer):
                    where, expected, got = _first_type_difference(inner, outer)
                    return f"[{key!r}]{where}", expected, got
    return "", type(declared).__name__, type(given).__name__


def _integer_out_of_range(value: object) -> str | None:
    """The path (``field[0].key``) of an integer outside SQLite's range, or None.

    Most messages hold none: a flat walk (no paths kept) says so; the path is traced
    only when one is found (a message of 100 activities: 0.75 ms walked with paths)."""
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return _path_of_integer_out_of_range(value)
        elif kind is dict:
            push(item.values())
        elif kind is list or kind is tuple:
            push(item)
    return None


def _path_of_integer_out_of_range(value: object) -> str | None:
    """The path (``field[0].key``) of an integer outside SQLite's range, or None."""
    kind = type(value)
    if kind is int:
        return None if INT64_MIN <= cast(int, value) <= INT64_MAX else ""
    if kind is dict:
        entries: Iterable[tuple[str, Any]] = (
            (f"{key}", item) for key, item in cast(dict[Any, Any], value).items()
        )
    elif kind is list or kind is tuple:  # to_builtins keeps tuples
        entries = ((f"[{index}]", item) for index, item in enumerate(cast(list[Any], value)))
    else:
        return None
    # Leaves are checked here, not by a call each: most of a message is leaves.
    for label, item in entries:
        sub = type(item)
        if sub is int:
            if not INT64_MIN <= item <= INT64_MAX:
                return label
        elif sub is dict or sub is list or sub is tuple:
            found = _path_of_integer_out_of_range(item)
            if found is not None:
                return f"{label}{found}" if found[:1] in ("", "[") else f"{label}.{found}"
    return None


def _check_id(where: str, kind: str, value: str) -> None:
    try:
        validate_id(kind, value)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc.detail}") from exc


def _check_int(where: str, value: object, low: int | None) -> None:
    if type(value) is not int:
        raise InvalidInput(f"{where}: expected an int, got {type(value).__name__}")
    if low is not None and not low <= value <= INT64_MAX:
        raise InvalidInput(f"{where}: {value} is outside {low}..{INT64_MAX}")


def _check_events(where: str, session_id: str, events: object) -> None:
    if not isinstance(events, list):
        raise InvalidInput(f"{where}: expected a list of RelayEvent, got {type(events).__name__}")
    observations: list[object] = []
    for index, event in enumerate(events):
        at = f"{where}[{index}]"
        if type(event) is RelayLine:
            _check_envelope(at, session_id, event)
            observations.append(None)
            for text in ("kind", "position", "path"):
                value = getattr(event, text)
                if type(value) is not str or not value:
                    raise InvalidInput(
                        f"{at}.{text}: a RelayLine must name the kind this build does not "
                        "know in it (decode it with decode_relay_line)"
                    )
            continue
        if type(event) is not RelayEvent:
            raise InvalidInput(f"{at}: expected a RelayEvent, got {type(event).__name__}")
        _check_envelope(at, session_id, event)
        if not isinstance(event.observation, OBSERVATION_TYPES):
            raise InvalidInput(
                f"{at}.observation: expected a relay observation, "
                f"got {type(event.observation).__name__}"
            )
        observations.append(event.observation)
    _check_observations(where, observations)


_OBSERVATIONS_OUT = msgspec.msgpack.Encoder()
_OBSERVATIONS_IN = msgspec.msgpack.Decoder(list[RelayObservation | None])
_AT_EVENT = re.compile(r"\[([0-9]+)\](.*)", re.DOTALL)


def _check_observations(where: str, observations: list[object]) -> None:
    """Every observation against its declared type, in one round trip (None stands for
    a line of a kind this build does not know): a wrong type, a typed integer outside
    SQLite's INTEGER range and any integer msgpack cannot carry are refused, naming the
    event and the field (``events[3].observation.data.started_at_ms``)."""

    def at(path: str) -> str:  # "[3].data.x" (a path into the list) -> "[3].observation.data.x"
        found = _AT_EVENT.fullmatch(path)
        return path if found is None else f"[{found.group(1)}].observation{found.group(2)}"

    try:
        decoded = _OBSERVATIONS_IN.decode(_OBSERVATIONS_OUT.encode(observations))
    except (msgspec.ValidationError, OverflowError) as exc:
        # OverflowError: an integer past what msgpack carries (2**64 - 1, -2**63).
        try:
            path = _integer_out_of_range(msgspec.to_builtins(observations))
        except (TypeError, ValueError, RecursionError):
            path = None  # another value msgpack could not carry came first
        if path is not None:  # worded as every other message's integer out of range
            raise InvalidInput(
                f"{where}{at(path)}: integer outside SQLite's INTEGER range"
            ) from None
        text = str(exc)
        found = _AT_PATH.fullmatch(text)
        if found is None:
            raise InvalidInput(f"{where}: {text}") from None
        raise InvalidInput(f"{where}{at(found.group(2))}: {found.group(1)}") from None
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(
            f"{where}: an observation holds a value of no relaystore type ({exc})"
        ) from None
    if decoded != observations:  # a value of another type than declared (a tuple for a list)
        path, expected, given = _first_type_difference(decoded, observations)
        raise InvalidInput(f"{where}{at(path)}: expected {expected}, got {given}")


def _check_envelope(at: str, session_id: str, event: RelayEvent | RelayLine) -> None:
    """The fields a relay event and an undecoded line share."""
    _check_int(f"{at}.format", event.format, 0)
    _check_int(f"{at}.ordinal", event.ordinal, None)
    check_ordinal(event.ordinal, session_id=session_id)  # the chain rule's range, its words
    _check_int(f"{at}.recorded_at_ms", event.recorded_at_ms, MIN_RECORDED_AT_MS)
    for text in ("digest", "previous_digest"):
        if type(getattr(event, text)) is not str:
            raise InvalidInput(f"{at}.{text}: expected a str")
    if event.command_id is not None and type(event.command_id) is not str:
        raise InvalidInput(f"{at}.command_id: expected a str or None")
    if type(event.observation_json) is not bytes:
        raise InvalidInput(f"{at}.observation_json: expected bytes")
    # The line it is logged as must read back (audit, reproject): the journal's limit.
    # Escaped, a str takes at most 6 bytes a character; only a line that may be over
    # the limit is encoded to measure it.
    texts = len(event.digest) + len(event.previous_digest) + len(event.command_id or "")
    if len(event.observation_json) + 6 * texts + 256 > MAX_RELAY_LINE_BYTES:
        size = len(encode_relay_event(event))
        if size > MAX_RELAY_LINE_BYTES:
            raise InvalidInput(f"{at}: {line_too_long(size).detail}")
