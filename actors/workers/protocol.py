"""The pipe between the store and a projection worker: the messages that cross it, and
how relay events are encoded for it.

A conversation is strictly request and reply, one message at a time: the store's proxy
(:mod:`~relaystore.actors.workers.proxy`) sends :class:`Observe` (the events as msgpack:
:func:`encode_events`) or :class:`Run`; the worker (:mod:`~relaystore.actors.workers.child`)
answers its callbacks' requests with :class:`PageOut` (a page for the writer, not
waited on) or :class:`Call` (answered by one :class:`CallResult`), beats (:class:`Beat`)
while it projects, and ends with :class:`Done`, which carries the message's last page:
the proxy commits it and the reply stands only if it committed as sent (else the
message runs again, see :class:`Done`), so a one-page message crosses the pipe twice.
Pages cross sealed, as msgpack (:mod:`~relaystore.domain.projection.page_wire`), so a
page's events cross as their packed relay log row. :class:`Start` opens a worker's
pipe; :class:`Park` keeps a session's projection when its projector stops (the next
projector of the session finds it), :class:`Forget` drops it (something out of band
changed the session, or the store stopped routing the session to this worker), and
:class:`Census` asks how many the worker holds.

Owns the message types, the event encoding (:func:`encode_events`,
:func:`decode_events`) and what an error becomes to cross the pipe (:func:`sendable`).
Must not: read or write a pipe, start a process or project anything: both sides import
it, and it is all they share.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ...domain.relay.events import RelayEvent, RelayLine

__all__ = [
    "Beat",
    "Call",
    "CallResult",
    "Census",
    "Done",
    "Forget",
    "Observe",
    "Park",
    "PageOut",
    "Run",
    "Start",
    "decode_events",
    "encode_events",
    "sendable",
]


@dataclass(frozen=True, slots=True)
class Start:
    """The first message a worker gets: how to build its projectors."""

    hold_unknown: bool
    """The store keeps a relay log: keep lines of unknown kinds, and log every page."""
    limit: int
    """The most sessions it keeps a projection of (the store's ``max_projectors``)."""
    beat_seconds: float
    """How often it beats while a conversation is under way (:class:`Beat`; a tenth of
    the store's :data:`~relaystore.actors.workers.pool.SILENCE_SECONDS`)."""
    park_limit: int = 0
    """The most parked projections it keeps (:class:`Park`); the oldest go first."""
    park_bytes: int = 0
    """The most estimated bytes its parked projections may hold together."""


@dataclass(frozen=True, slots=True)
class Run:
    """Project ``message`` (an ``ObserveRelayEvents`` or a ``Reproject``) for its session."""

    session_id: str
    message: Any
    defer: bool = True
    """Hand the message's last page back with :class:`Done` (see there)."""


@dataclass(frozen=True, slots=True)
class Observe:
    """Project relay events for their session: an ``ObserveRelayEvents`` whose events
    cross as msgpack (:func:`encode_events`), which costs the embedding process a
    twentieth of pickling them."""

    session_id: str
    events: bytes
    defer: bool = True
    """Hand the message's last page back with :class:`Done` (see there)."""


_OnWire = tuple[list[RelayEvent | None], list[tuple[int, RelayLine]]]
"""Events on the pipe: the decoded events in order (None where a line of an unknown kind
stands) and those lines by position."""

_EVENTS = msgspec.msgpack.Decoder(_OnWire)


def encode_events(events: list[RelayEvent | RelayLine]) -> bytes:
    """``events`` as :class:`Observe` carries them."""
    lines = [(at, event) for at, event in enumerate(events) if isinstance(event, RelayLine)]
    decoded = events if not lines else [e if isinstance(e, RelayEvent) else None for e in events]
    return msgspec.msgpack.encode((decoded, lines))


def decode_events(data: bytes) -> list[RelayEvent | RelayLine]:
    """The events :func:`encode_events` encoded, in order."""
    decoded, lines = _EVENTS.decode(data)
    events: list[RelayEvent | RelayLine | None] = list(decoded)
    for at, line in lines:
        events[at] = line
    return events  # type: ignore[return-value]  # every None was a line's place


@dataclass(frozen=True, slots=True)
class Forget:
    """Drop the session's projection (active or parked)."""

    session_id: str


@dataclass(frozen=True, slots=True)
class Park:
    """The session's projector stopped: keep its projection, out of active use, for the
    session's next projector (within ``Start.park_limit`` and ``Start.park_bytes``)."""

    session_id: str


@dataclass(frozen=True, slots=True)
class Census:
    """How many sessions' projections the worker holds (answered by :class:`Done`)."""


@dataclass(frozen=True, slots=True)
class PageOut:
    """A page for the writer, not waited on (``Call("wait", number)`` waits)."""

    number: int
    page: bytes
    """The page, sealed, as :func:`~relaystore.domain.projection.page_wire.encode_page`
    encodes it (a fraction of pickling it)."""


@dataclass(frozen=True, slots=True)
class Call:
    """A callback the worker needs the embedding process for; one :class:`CallResult` answers."""

    what: Literal["wait", "ask", "load", "load_paged"]
    argument: Any


@dataclass(frozen=True, slots=True)
class CallResult:
    """The answer to a :class:`Call` (``error`` set: it raised)."""

    value: Any
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Beat:
    """The worker is alive and conversing (sent every ``Start.beat_seconds``; the proxy
    skips it)."""


@dataclass(frozen=True, slots=True)
class Done:
    """The end of a conversation: the message's reply, or the error it raised.

    With ``page`` set (the message was sent with ``defer``), the reply assumed that page,
    the message's last, committed as sent: the proxy commits it, and only if the writer
    applied all of it and stored its end does the reply stand. Otherwise the proxy has
    the worker forget the session and sends the message again without ``defer``, so
    the core's own rules settle it (the page's commit failing with another error is
    that error, as in the thread path). This saves the two pipe crossings of waiting
    for the last commit in the worker.
    """

    value: Any
    error: BaseException | None = None
    page: bytes | None = None
    """The deferred last page, encoded as :attr:`PageOut.page` is."""


def sendable(error: BaseException) -> BaseException:
    """``error`` if it pickles, else a plain error with its text (a bug's exception may
    hold what cannot cross the pipe)."""
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - whatever pickling raises, send the text instead
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error
