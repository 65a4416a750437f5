"""One relay journal line: the event envelope, its codec, and a line kept undecoded.

Owns :class:`RelayEvent` (a journal record, keeping the bytes its observation was read
from, so its digest never depends on re-encoding: :mod:`relaystore.domain.digests`),
:class:`RelayLine` (a line whose observation this build cannot decode, kept as its
bytes), :func:`decode_relay_event` / :func:`decode_relay_line` / :func:`encode_relay_event`
(byte for byte as the worker writes a line), and the line limits every reader shares
(:data:`MAX_RELAY_LINE_BYTES`, :data:`MIN_RECORDED_AT_MS`).

Pure: it decodes and encodes one line and must not check the chain (the digests and
:mod:`relaystore.domain.chain` do) nor define the catalogue of commands, outcomes and
observations (:mod:`.relay_commands`, :mod:`.relay_outcomes`, :mod:`.relay_observations`).
Its names are offered under the catalogue's one path too, :mod:`relaystore.domain.relay`.
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from ..errors import InvalidInput, UnknownRelayKind
from ..hashing import RELAY_EVENT_FORMAT_V1, RELAY_EVENT_FORMAT_V2, envelope_digest
from ..integers import INT64_MAX
from ..wire import encode
from .observations import RelayObservation
from .payloads import RelayCursor

__all__ = [
    "MAX_RELAY_LINE_BYTES",
    "MIN_RECORDED_AT_MS",
    "RelayEvent",
    "RelayLine",
    "decode_relay_event",
    "decode_relay_line",
    "encode_relay_event",
    "line_too_long",
]

MAX_RELAY_LINE_BYTES = 2 * 1024 * 1024
"""The longest relay line relaystore reads, or takes in a message: a journal line, an
event sent to the facade (as :func:`encode_relay_event` writes it) and a relay log row
read back for ``audit`` and ``reproject`` keep the same limit."""
MIN_RECORDED_AT_MS = 0
"""The earliest ``recorded_at_ms`` a relay event may carry, read from a journal, sent in
a message or built by the test kit alike. The origin's field is an i64, but no worker's
clock reads before 1970: a negative time is damage, refused where it is read."""


# -- events ---------------------------------------------------------------------------


class RelayEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One journal record.

    ``observation_json`` holds the observation's bytes exactly as they were read (or as
    they were encoded, for an event built in code); digests are computed over them.
    Build events in code with :meth:`create`; read them with :func:`decode_relay_event`.
    """

    format: int = RELAY_EVENT_FORMAT_V1
    ordinal: int
    previous_digest: str = ""
    digest: str
    recorded_at_ms: int
    command_id: str | None = None
    observation: RelayObservation
    observation_json: bytes = b""

    def __post_init__(self) -> None:
        if not self.observation_json:
            msgspec.structs.force_setattr(self, "observation_json", encode(self.observation))

    @classmethod
    def create(
        cls,
        *,
        ordinal: int,
        recorded_at_ms: int,
        observation: RelayObservation,
        format: int = RELAY_EVENT_FORMAT_V2,
        previous_digest: str = "",
        command_id: str | None = None,
    ) -> RelayEvent:
        """Build an event in code and compute its digest."""

        draft = cls(
            format=format,
            ordinal=ordinal,
            previous_digest=previous_digest,
            digest="",
            recorded_at_ms=recorded_at_ms,
            command_id=command_id,
            observation=observation,
        )
        return msgspec.structs.replace(draft, digest=envelope_digest(draft, draft.observation_json))

    @property
    def cursor(self) -> RelayCursor:
        """The cursor that points at this event."""
        return RelayCursor(ordinal=self.ordinal, digest=self.digest)


class _RelayEventWire(msgspec.Struct, kw_only=True):
    format: Annotated[int, msgspec.Meta(ge=0, le=255)] = RELAY_EVENT_FORMAT_V1  # u8
    ordinal: Annotated[int, msgspec.Meta(ge=0)]  # u64
    previous_digest: str = ""
    digest: str
    recorded_at_ms: Annotated[int, msgspec.Meta(ge=MIN_RECORDED_AT_MS, le=INT64_MAX)]
    command_id: str | None = None
    observation: msgspec.Raw


_EVENT_DECODER = msgspec.json.Decoder(_RelayEventWire)
_LEADING_ORDINAL = re.compile(rb'\s*\{[^\[\]{}]*?"ordinal"\s*:\s*(\d+)')
"""The ordinal of a line too deeply nested to decode, when it comes before any nesting
(as the worker writes it): only to say where the refused line is."""
_OBSERVATION_DECODER: msgspec.json.Decoder[RelayObservation] = msgspec.json.Decoder(
    RelayObservation
)


def decode_relay_event(line: bytes | str) -> RelayEvent:
    """Decode one journal line (a trailing newline is allowed).

    Raises :class:`~relaystore.domain.errors.UnknownRelayKind` for an observation this
    build cannot decode: a command, command kind, outcome, observation or reason it does
    not know, or any other shape it does not read (a field it does not know where the
    origin denies unknown fields, an unknown variant at any depth, a wrong type, an
    integer past what it reads; position ``shape``). Such a line is a newer worker's: its
    envelope stays readable, and its digest tells it from damage. Raises
    :class:`InvalidInput` naming the field for a line that is not JSON, an envelope this
    build cannot read (a ``recorded_at_ms`` outside SQLite's INTEGER range, say), JSON
    nested deeper than the decoder can follow, or a line over 2 MiB. The digest is not
    checked here.
    """
    raw = line.encode() if isinstance(line, str) else line
    if len(raw) > MAX_RELAY_LINE_BYTES:
        raise line_too_long(len(raw))
    try:
        wire = _EVENT_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid relay event: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"relay line is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        ordinal = _LEADING_ORDINAL.match(raw)
        raise InvalidInput(
            f"relay line is nested too deeply to decode: {exc}",
            ordinal=None if ordinal is None else int(ordinal.group(1)),
        ) from None
    try:
        observation = _OBSERVATION_DECODER.decode(wire.observation)
    except RecursionError as exc:
        raise InvalidInput(
            f"invalid relay observation: nested too deeply to decode ({exc}) - at `$.observation`",
            ordinal=wire.ordinal,
        ) from None
    except msgspec.DecodeError as exc:
        # The observation is JSON (the envelope's decoder read it as such): whatever this
        # build cannot decode in it is a shape a newer worker writes, not damage.
        unknown = _unknown_kind(str(exc))
        raise UnknownRelayKind(
            *unknown,
            _unknown_kind_line(wire, bytes(wire.observation), unknown),
            ordinal=wire.ordinal,
        ) from None
    return RelayEvent(
        format=wire.format,
        ordinal=wire.ordinal,
        previous_digest=wire.previous_digest,
        digest=wire.digest,
        recorded_at_ms=wire.recorded_at_ms,
        command_id=wire.command_id,
        observation=observation,
        observation_json=bytes(wire.observation),
    )


def decode_relay_line(line: bytes | str) -> RelayEvent | RelayLine:
    """:func:`decode_relay_event`, except that a line of a kind this build does not know
    comes back as its :class:`RelayLine` (naming the kind) instead of raising; every
    other refusal is the same. The digest is not checked here."""
    try:
        return decode_relay_event(line)
    except UnknownRelayKind as exc:
        envelope = exc.envelope
        assert isinstance(envelope, RelayLine)
        return envelope


class RelayLine(msgspec.Struct, frozen=True, kw_only=True):
    """A journal line's envelope with its observation as the bytes read, undecoded.

    What a line of a kind this build does not know still offers: its place in the chain
    and the bytes its digest covers (:func:`relaystore.domain.digests.validate_relay_event_self`).
    """

    format: int
    ordinal: int
    previous_digest: str
    digest: str
    recorded_at_ms: int
    command_id: str | None
    observation_json: bytes
    kind: str = ""
    """What in the observation this build does not know (empty: not said), as
    :class:`~relaystore.domain.errors.UnknownRelayKind` names it; with ``position`` and
    ``path``."""
    position: str = ""
    path: str = ""

    @property
    def cursor(self) -> RelayCursor:
        """The cursor that points at this line."""
        return RelayCursor(ordinal=self.ordinal, digest=self.digest)


def _unknown_kind_line(
    wire: _RelayEventWire, observation: bytes, unknown: tuple[str, str, str]
) -> RelayLine:
    kind, position, path = unknown
    return RelayLine(
        kind=kind,
        position=position,
        path=path,
        format=wire.format,
        ordinal=wire.ordinal,
        previous_digest=wire.previous_digest,
        digest=wire.digest,
        recorded_at_ms=wire.recorded_at_ms,
        command_id=wire.command_id,
        observation_json=observation,
    )


_KIND_POSITIONS = {
    "$.type": "observation",
    "$.data.command.type": "command",
    "$.data.command": "command kind",
    "$.data.outcome.type": "command outcome",
    "$.data.reason": "reason",
}
"""Where in an observation a kind is named, and what it names: an unknown value at one
of these is a newer protocol's kind, not damage."""

_UNKNOWN_VALUE = re.compile(r"Invalid (?:enum )?value '(.*)' - at `(\$[.a-z_]*)`")
_AT = re.compile(r"(.*) - at `(\$[^`]*)`", re.DOTALL)


def _unknown_kind(message: str) -> tuple[str, str, str]:
    """``(kind, position, path)`` of what a decode error says this build does not know.

    An unknown tag or kind value at a kind position of :data:`_KIND_POSITIONS` is that
    kind; anything else (a field this build does not know where the origin denies unknown
    fields, a variant or type unknown at any depth, an integer past what it reads) is a
    ``shape``, named by the decoder's own words."""
    found = _UNKNOWN_VALUE.fullmatch(message)
    if found is not None:
        path = found.group(2)
        position = _KIND_POSITIONS.get(path)
        if position is not None:
            return found.group(1), position, "$.observation" + path[1:]
    at = _AT.fullmatch(message)
    if at is None:
        return message, "shape", "$.observation"
    return at.group(1), "shape", "$.observation" + at.group(2)[1:]


def line_too_long(size: int) -> InvalidInput:
    """The refusal of a relay line of ``size`` bytes, over :data:`MAX_RELAY_LINE_BYTES`."""
    return InvalidInput(f"relay line is {size} bytes, over the {MAX_RELAY_LINE_BYTES}-byte limit")


def encode_relay_event(event: RelayEvent | RelayLine) -> bytes:
    """Encode an event (or an undecoded line) as the worker writes it (without the
    trailing newline)."""
    if (
        event.command_id is None
        and not event.previous_digest
        and event.format != RELAY_EVENT_FORMAT_V1
    ):
        # The usual shape (format 2, no command) in one formatting: a page's log row
        # encodes every event of the page.
        return b'{"format":%d,"ordinal":%d,"digest":%b,"recorded_at_ms":%d,"observation":%b}' % (
            event.format,
            event.ordinal,
            encode(event.digest),
            event.recorded_at_ms,
            event.observation_json,
        )
    parts = [b"{"]
    if event.format != RELAY_EVENT_FORMAT_V1:
        parts.append(b'"format":%d,' % event.format)
    parts.append(b'"ordinal":%d,' % event.ordinal)
    if event.previous_digest:
        parts.append(b'"previous_digest":' + encode(event.previous_digest) + b",")
    parts.append(b'"digest":' + encode(event.digest) + b",")
    parts.append(b'"recorded_at_ms":%d,' % event.recorded_at_ms)
    if event.command_id is not None:
        parts.append(b'"command_id":' + encode(event.command_id) + b",")
    parts.append(b'"observation":' + event.observation_json + b"}")
    return b"".join(parts)
