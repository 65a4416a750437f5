"""The relay chain rule: where an incoming event stands against a frontier.

This module is the only statement of the rule. The journal reader (``verify`` and
``replay``), the projector and the stored projection all ask :func:`advance` (or
:func:`advance_from`, the same rule given the frontier's two fields), so they agree on
every input and word every fault the same way.

Given the frontier (the last event applied: ordinal and digest; ordinal 0 with the
genesis digest before any event) and an incoming event, in this order:

==========================================  ======================================
incoming event                              result
==========================================  ======================================
ordinal outside 1 .. 2**63-1                ``ORDINAL_OUT_OF_RANGE``
a format other than 1 or 2                  ``UNKNOWN_FORMAT``
ordinal below the frontier                  :attr:`Step.ALREADY_APPLIED`
ordinal at the frontier, same digest        :attr:`Step.ALREADY_APPLIED`
ordinal at the frontier, another digest     ``FORK``
ordinal past the next one                   ``GAP``
the next ordinal, format 1, linking         ``FORK``
elsewhere than the frontier's digest
the next ordinal, digest not its content's  ``BAD_DIGEST``
the next ordinal otherwise                  :attr:`Step.NEXT`
==========================================  ======================================

An event below the frontier cannot be compared with anything kept, so it counts as
already applied (a re-delivery), as the origin does. Format 2 events carry no link, so a
format 2 fork is seen only where digests are compared: at the frontier itself.
"""

from __future__ import annotations

import enum

from .digests import (
    RELAY_EVENT_FORMATS,
    check_format,
    validate_frontier,
    validate_relay_event_self,
)
from .errors import ChainFault, RelayChainError
from .hashing import RELAY_EVENT_FORMAT_V1, RELAY_EVENT_GENESIS_DIGEST
from .integers import INT64_MAX
from .relay.events import RelayEvent, RelayLine
from .relay.payloads import RelayCursor

__all__ = [
    "GENESIS",
    "MAX_ORDINAL",
    "Step",
    "advance",
    "advance_from",
    "check_ordinal",
    "check_own_digest",
    "checked_frontier",
]

MAX_ORDINAL = INT64_MAX
"""The largest ordinal a store can hold (SQLite's INTEGER)."""

GENESIS = RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST)
"""The frontier before any event."""


class Step(enum.Enum):
    """What :func:`advance` found; every other outcome raises :class:`RelayChainError`."""

    NEXT = "next"
    """The event directly follows the frontier and verifies: apply it."""
    ALREADY_APPLIED = "already_applied"
    """The event is at or below the frontier (a re-delivery): skip it."""


def check_ordinal(ordinal: int, *, session_id: str | None = None) -> None:
    """The table's first row on its own: raise :class:`RelayChainError`
    (``ORDINAL_OUT_OF_RANGE``) unless ``ordinal`` is in 1..:data:`MAX_ORDINAL`. The facade
    asks it of every event before any actor sees the message (an ordinal past SQLite's
    INTEGER cannot even cross to a worker process), with these words in both
    projection modes."""
    if not 1 <= ordinal <= MAX_ORDINAL:
        raise RelayChainError(
            ChainFault.ORDINAL_OUT_OF_RANGE,
            f"relay event ordinal {ordinal} is outside 1..{MAX_ORDINAL}",
            session_id=session_id,
            ordinal=ordinal,
        )


def _in_range(event: RelayEvent | RelayLine, session_id: str | None) -> None:
    check_ordinal(event.ordinal, session_id=session_id)
    check_format(event.format, ordinal=event.ordinal, session_id=session_id)


def check_own_digest(event: RelayEvent | RelayLine, *, session_id: str | None = None) -> None:
    """Check an event on its own (range, format, digest), where no frontier is known.

    Used for the first event of a journal whose earlier events are gone.
    """
    _in_range(event, session_id)
    validate_relay_event_self(event, session_id=session_id)


def advance(
    frontier: RelayCursor,
    event: RelayEvent | RelayLine,
    *,
    session_id: str | None = None,
    digest_checked: bool = False,
) -> Step:
    """Where ``event`` stands against ``frontier`` (see the module's table).

    ``digest_checked`` skips hashing an event whose digest the caller already verified
    (with :func:`check_own_digest`). Raises :class:`RelayChainError` whose ``fault``
    names the break, with the session and the event's ordinal.
    """
    return advance_from(
        frontier.ordinal,
        frontier.digest,
        event,
        session_id=session_id,
        digest_checked=digest_checked,
    )


def advance_from(
    frontier_ordinal: int,
    frontier_digest: str,
    event: RelayEvent | RelayLine,
    *,
    session_id: str | None = None,
    digest_checked: bool = False,
) -> Step:
    """:func:`advance` against the frontier ``(frontier_ordinal, frontier_digest)``: the
    same rule, for a caller that keeps its frontier as the two fields (a projection,
    once an event) rather than a cursor."""
    ordinal = event.ordinal
    if not (0 < ordinal <= MAX_ORDINAL and event.format in RELAY_EVENT_FORMATS):
        _in_range(event, session_id)  # raises the fault, worded where the rule is
    if ordinal <= frontier_ordinal:
        if ordinal == frontier_ordinal and event.digest != frontier_digest:
            raise RelayChainError(
                ChainFault.FORK,
                f"relay event fork at ordinal {ordinal}: the chain has "
                f"{frontier_digest[:12]}…, this event has {event.digest[:12]}…",
                session_id=session_id,
                ordinal=ordinal,
            )
        return Step.ALREADY_APPLIED
    expected = frontier_ordinal + 1
    if ordinal != expected:
        raise RelayChainError(
            ChainFault.GAP,
            f"relay event gap: expected ordinal {expected}, found {ordinal}",
            session_id=session_id,
            ordinal=ordinal,
        )
    if event.format == RELAY_EVENT_FORMAT_V1 and event.previous_digest != frontier_digest:
        raise RelayChainError(
            ChainFault.FORK,
            f"relay event fork at ordinal {ordinal}: it follows "
            f"{event.previous_digest[:12]}…, but ordinal {frontier_ordinal} has "
            f"{frontier_digest[:12]}…",
            session_id=session_id,
            ordinal=ordinal,
        )
    if not digest_checked:
        validate_relay_event_self(event, session_id=session_id)
    return Step.NEXT


def checked_frontier(ordinal: int, digest: str, *, session_id: str | None = None) -> RelayCursor:
    """A frontier read from outside (a store, a seed file), checked to be well formed."""
    if not 0 <= ordinal <= MAX_ORDINAL:
        raise RelayChainError(
            ChainFault.ORDINAL_OUT_OF_RANGE,
            f"relay frontier ordinal {ordinal} is outside 0..{MAX_ORDINAL}",
            session_id=session_id,
            ordinal=ordinal,
        )
    validate_frontier(ordinal, digest, session_id=session_id)
    return RelayCursor(ordinal=ordinal, digest=digest)
