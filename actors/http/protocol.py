"""``relaystore serve``: the connections: uvicorn's h11 protocol with the server's cut-offs.

:func:`protocol` is the protocol class :mod:`relaystore.actors.http.server` gives uvicorn, with
the :class:`Timeouts` it keeps: a connection that has not sent a whole request head
within ``Timeouts.header`` seconds is closed; a client the server could not write to for
``Timeouts.stall`` seconds is disconnected (one log line; the socket is reset, its unsent
bytes dropped); on stop, what is still open after ``Timeouts.shutdown`` is closed; a
request h11 cannot parse is answered 400 with the error body and every answer's headers
(:data:`~relaystore.actors.http.app.CONTRACT_HEADERS`), as a route's 400 is.

Must not: know a route, the store, TLS or the listening socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from dataclasses import dataclass
from typing import Any, cast

from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import CONTRACT_HEADERS, KEEPALIVE_SECONDS
from .preamble import error

__all__ = ["Timeouts", "protocol"]

# The server's log lines (a stalled client) are the server module's, configured there.
logger = logging.getLogger("relaystore.actors.http.server")


@dataclass(frozen=True, slots=True)
class Timeouts:
    """How long the server waits for a client, in seconds."""

    keepalive: float = KEEPALIVE_SECONDS
    """Interval of the keepalive comments of an idle stream."""
    header: float = 10.0
    """A connection must send a whole request head within this (also between requests)."""
    stall: float = 30.0
    """A client the server cannot write to for this long is disconnected."""
    shutdown: float = 0.5
    """On stop, connections still open this long after their streams ended are closed."""


class _QuietTransport:
    """A connection's transport that drops writes once it is closing.

    A stream writes a page of frames without pausing; after the client went away,
    asyncio would log ``socket.send() raised exception.`` for each of them until the
    protocol hears of the loss. Writes before the close are never dropped.
    """

    __slots__ = ("_transport",)

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


_LINGER_RESET = struct.pack("ii", 1, 0)


def _reset(transport: asyncio.Transport) -> None:
    """Close the connection at once, its queued bytes dropped, the kernel's included.

    A plain close keeps sending what the kernel holds (megabytes to a client that reads
    nothing, for minutes); linger 0 makes the close a reset.
    """
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    transport.abort()


def protocol(timeouts: Timeouts) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a request-head timeout and a stalled-client cut-off."""

    class Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _stall_timer: asyncio.TimerHandle | None = None
        _lost = False

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            quiet = cast(asyncio.Transport, _QuietTransport(cast(asyncio.Transport, transport)))
            super().connection_made(quiet)
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._lost = True
            for timer in (self._head_timer, self._stall_timer):
                if timer is not None:
                    timer.cancel()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()  # the next request's head, on a kept-alive connection

        def _await_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
            waiting_in = self.cycle
            self._head_timer = self.loop.call_later(timeouts.header, self._no_head, waiting_in)

        def _no_head(self, waiting_in: object) -> None:
            self._head_timer = None
            if self.cycle is waiting_in:  # no request began since the timer was set
                _reset(self.transport)

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stall_timer is None:
                self._stall_timer = self.loop.call_later(timeouts.stall, self._stalled)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._stall_timer is not None:
                self._stall_timer.cancel()
                self._stall_timer = None

        def _stalled(self) -> None:
            self._stall_timer = None
            client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
            logger.warning(
                "disconnected %s, which accepted nothing for %g s; it resumes by reconnecting "
                "with its cursor",
                client,
                timeouts.stall,
            )
            _reset(self.transport)

        def send_400_response(self, msg: str) -> None:
            # A request h11 cannot parse, answered before any route: the error body and
            # every answer's headers, as a route's 400 has them.
            # The connection closes after it, so h11's state of it no longer matters.
            answer = error(400, msg)
            headers = [*answer.raw_headers, (b"connection", b"close"), *CONTRACT_HEADERS]
            head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
            self.transport.write(
                b"HTTP/1.1 400 Bad Request\r\n" + head + b"\r\n" + bytes(answer.body)
            )
            self.transport.close()

        def shutdown(self) -> None:
            super().shutdown()
            self.loop.call_later(timeouts.shutdown, self._close_if_open)

        def _close_if_open(self) -> None:
            if not self._lost:
                _reset(self.transport)

    return Protocol
