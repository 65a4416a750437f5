"""The relay event digest over an envelope's fields and an observation's bytes.

The formats, the digest domains and the genesis digest are wire constants: real
journals verify only while they stay exactly as the worker writes them. A digest is the
lowercase hex SHA-256 of a domain string and a compact JSON payload:
``hel-relay-event-v1\\0`` + ``{ordinal, previous_digest, recorded_at_ms, command_id?,
observation}`` for format 1 (chained), ``hel-relay-event-v2\\0`` + ``{ordinal,
recorded_at_ms, command_id?, observation}`` for format 2 (self-describing).

This module imports no relay type, so :mod:`relaystore.domain.relay` (which builds
events) and :mod:`relaystore.domain.digests` (which checks them) both build on it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from .errors import ChainFault, RelayChainError
from .wire import encode

__all__ = [
    "RELAY_EVENT_DIGEST_DOMAIN_V1",
    "RELAY_EVENT_DIGEST_DOMAIN_V2",
    "RELAY_EVENT_FORMATS",
    "RELAY_EVENT_FORMAT_V1",
    "RELAY_EVENT_FORMAT_V2",
    "RELAY_EVENT_GENESIS_DIGEST",
    "LineEnvelope",
    "check_format",
    "envelope_digest",
    "is_relay_digest",
]

RELAY_EVENT_FORMAT_V1 = 1
RELAY_EVENT_FORMAT_V2 = 2
RELAY_EVENT_FORMATS = (RELAY_EVENT_FORMAT_V1, RELAY_EVENT_FORMAT_V2)
"""The event formats this build reads and writes: 1 (chained) and 2 (self-describing)."""
RELAY_EVENT_GENESIS_DIGEST = "0" * 64
RELAY_EVENT_DIGEST_DOMAIN_V1 = b"hel-relay-event-v1\x00"
RELAY_EVENT_DIGEST_DOMAIN_V2 = b"hel-relay-event-v2\x00"

_DIGEST = re.compile("[0-9a-f]{64}").fullmatch


class LineEnvelope(Protocol):
    """The fields of a journal line a digest covers, besides its observation."""

    @property
    def format(self) -> int: ...
    @property
    def ordinal(self) -> int: ...
    @property
    def previous_digest(self) -> str: ...
    @property
    def recorded_at_ms(self) -> int: ...
    @property
    def command_id(self) -> str | None: ...


def is_relay_digest(value: str) -> bool:
    """True for exactly 64 lowercase hexadecimal characters."""
    return _DIGEST(value) is not None


def check_format(format: int, *, ordinal: int, session_id: str | None = None) -> None:
    """Raise :class:`RelayChainError` (``UNKNOWN_FORMAT``) for a format not in
    :data:`RELAY_EVENT_FORMATS`: the one statement of which formats exist."""
    if format not in RELAY_EVENT_FORMATS:
        raise RelayChainError(
            ChainFault.UNKNOWN_FORMAT,
            f"unknown relay event format {format}; this build reads formats 1 and 2",
            session_id=session_id,
            ordinal=ordinal,
        )


def envelope_digest(
    envelope: LineEnvelope, observation: bytes, session_id: str | None = None
) -> str:
    """The digest a worker writes for ``envelope`` around ``observation``.

    Raises :class:`RelayChainError` for an unknown format (``UNKNOWN_FORMAT``), a format 1
    event without a well-formed previous digest or a format 2 event with one
    (``BAD_DIGEST``).
    """
    check_format(envelope.format, ordinal=envelope.ordinal, session_id=session_id)
    if envelope.format == RELAY_EVENT_FORMAT_V1:
        if not is_relay_digest(envelope.previous_digest):
            raise RelayChainError(
                ChainFault.BAD_DIGEST,
                f"format 1 event has previous_digest {envelope.previous_digest!r}; "
                "expected 64 lowercase hexadecimal characters",
                session_id=session_id,
                ordinal=envelope.ordinal,
            )
        domain = RELAY_EVENT_DIGEST_DOMAIN_V1
        head = b'{"ordinal":%d,"previous_digest":"%s","recorded_at_ms":%d' % (
            envelope.ordinal,
            envelope.previous_digest.encode(),
            envelope.recorded_at_ms,
        )
    else:
        if envelope.previous_digest:
            raise RelayChainError(
                ChainFault.BAD_DIGEST,
                "format 2 event carries a previous_digest; only format 1 events are chained",
                session_id=session_id,
                ordinal=envelope.ordinal,
            )
        domain = RELAY_EVENT_DIGEST_DOMAIN_V2
        head = b'{"ordinal":%d,"recorded_at_ms":%d' % (envelope.ordinal, envelope.recorded_at_ms)
    digest = hashlib.sha256(domain)
    digest.update(head)
    if envelope.command_id is not None:
        digest.update(b',"command_id":' + encode(envelope.command_id))
    digest.update(b',"observation":')
    digest.update(observation)
    digest.update(b"}")
    return digest.hexdigest()
