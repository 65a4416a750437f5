"""Relay event digests, and the checks of one event's digest and of a frontier.

The chain rule (how an event stands against a frontier) lives in
:mod:`relaystore.domain.chain`, which uses these.

The digest itself is :func:`relaystore.domain.hashing.envelope_digest`; its observation
part is the event's own observation bytes, so a journal line verifies whatever encoder
wrote it.
"""

from __future__ import annotations

from .errors import ChainFault, RelayChainError
from .hashing import (
    RELAY_EVENT_DIGEST_DOMAIN_V1,
    RELAY_EVENT_DIGEST_DOMAIN_V2,
    RELAY_EVENT_FORMATS,
    RELAY_EVENT_GENESIS_DIGEST,
    check_format,
    envelope_digest,
    is_relay_digest,
)
from .relay.events import RelayEvent, RelayLine
from .relay.observations import SessionOpened
from .wire import encode

__all__ = [
    "RELAY_EVENT_DIGEST_DOMAIN_V1",
    "RELAY_EVENT_DIGEST_DOMAIN_V2",
    "RELAY_EVENT_FORMATS",
    "check_format",
    "is_relay_digest",
    "relay_event_digest",
    "validate_frontier",
    "validate_relay_event_self",
]


def relay_event_digest(event: RelayEvent | RelayLine, *, session_id: str | None = None) -> str:
    """The digest the worker would write for ``event`` (or an undecoded line).

    Raises :class:`RelayChainError` for an unknown format or a malformed previous digest.
    """
    return envelope_digest(event, event.observation_json, session_id)


def _legacy_session_opened(event: RelayEvent | RelayLine) -> bytes | None:
    # Builds of 2026-09-15 digested session_opened with an explicit
    # "native_continuity_lost":false; the origin accepts either encoding.
    if isinstance(event, RelayLine):
        return None
    observation = event.observation
    if not isinstance(observation, SessionOpened):
        return None
    data = observation.data
    if data.native_continuity_lost or data.replaced_unused_native_session_id is not None:
        return None
    return (
        b'{"type":"session_opened","data":{"native_session_id":'
        + encode(data.native_session_id)
        + b',"resumed":'
        + (b"true" if data.resumed else b"false")
        + b',"native_continuity_lost":false}}'
    )


def validate_relay_event_self(
    event: RelayEvent | RelayLine, *, session_id: str | None = None
) -> None:
    """Check that ``event.digest`` is well formed and matches its content.

    ``event`` may be a :class:`RelayLine` too: the digest covers the observation's bytes,
    so a line of a kind this build cannot decode still verifies or not.
    """
    # Hashing first: a digest equal to a computed one is well formed, so the common case
    # skips the form check; a failure reports the form first, as the order of the rules says.
    try:
        computed = envelope_digest(event, event.observation_json, session_id)
    except RelayChainError:
        computed = None
    if computed == event.digest:
        return
    if not is_relay_digest(event.digest):
        raise RelayChainError(
            ChainFault.BAD_DIGEST,
            f"digest {event.digest!r} is not 64 lowercase hexadecimal characters",
            session_id=session_id,
            ordinal=event.ordinal,
        )
    if computed is None:
        computed = envelope_digest(event, event.observation_json, session_id)  # raises again
    legacy = _legacy_session_opened(event)
    if legacy is not None and envelope_digest(event, legacy, session_id) == event.digest:
        return
    raise RelayChainError(
        ChainFault.BAD_DIGEST,
        f"digest does not match the event: recorded {event.digest}, computed {computed}",
        session_id=session_id,
        ordinal=event.ordinal,
    )


def validate_frontier(ordinal: int, digest: str, *, session_id: str | None = None) -> None:
    """A frontier is well formed, and ordinal 0 holds exactly the genesis digest."""
    if not is_relay_digest(digest):
        raise RelayChainError(
            ChainFault.BAD_DIGEST,
            "relay event frontier must be a lowercase SHA-256 digest "
            f"(64 lowercase hexadecimal characters), got {digest!r}",
            session_id=session_id,
            ordinal=ordinal,
        )
    if (ordinal == 0) != (digest == RELAY_EVENT_GENESIS_DIGEST):
        raise RelayChainError(
            ChainFault.BAD_DIGEST,
            f"relay event frontier has inconsistent ordinal {ordinal} and digest {digest}; "
            "only ordinal 0 has the genesis digest",
            session_id=session_id,
            ordinal=ordinal,
        )
