"""``relaystore serve``: the origin's ``GET /api/v1/events`` server-sent-event stream.

The contract is ``origin-http-events.md``: optional ``session_id``, ``workspace_id`` and
``after_seq`` (and relaystore's ``command_id``: only that command's events,
:class:`~relaystore.domain.api_events.ApiEventFilter`) (or the SSE ``Last-Event-ID`` header), each at most once (other parameters
are ignored, as the origin does); without a cursor the stream starts at the current
frontier. Each event is one frame: ``id`` its ``seq``, ``event`` its ``type``, ``data``
the line ``relaystore events`` prints for it (the stored bytes, nothing decoded or
re-encoded). ``: keepalive`` comments while nothing happens; a storage failure sends one
``event: stream_error`` frame and ends the stream. Before the stream starts: ``after_seq``
and ``Last-Event-ID`` must agree, an unknown session is 404, a cursor ahead of the store
is 400 (the preamble's rules: :mod:`relaystore.actors.http.preamble`).

A stream lasts as long as the access it was opened with: :class:`LiveStreams` holds the
open streams with their requests, and :meth:`LiveStreams.recheck` (run after every
sign-in and sign-out) ends, with a complete response, each stream whose request is no
longer authorized (its sign-in cookie was signed out or forgotten). A stream opened with
the bearer token goes on.

A stream reads pages from SQLite at its own client's pace, so a slow client holds at most
one page in memory and never blocks the writer or another stream; idle streams cost no
threads. Must not: cut off slow clients or close connections (the server's protocol does,
:mod:`relaystore.actors.http.server`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ...domain.api_events import ApiEventFilter
from ...domain.errors import StoreError
from ...domain.reads import LoadSessionDetail
from ..aio import AsyncEventStore
from .preamble import (
    Answer,
    SessionNotFound,
    feed_after,
    query_text,
    requested_feed_cursor,
    valid_id,
)

__all__ = ["KEEPALIVE_SECONDS", "LiveStreams", "events"]

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
"""The default interval of an idle stream's keepalive comments."""


class LiveStreams:
    """The open streams of one application, each ended once its request's access ends.

    ``authorized(request)`` is the application's one access check. Holds one entry per
    open stream (bounded by the open connections); a stream removes its own on ending.
    """

    def __init__(self, authorized: Callable[[Request], bool]) -> None:
        self._authorized = authorized
        self._open: dict[asyncio.Event, Request] = {}

    @contextlib.contextmanager
    def opened(self, request: Request) -> Iterator[asyncio.Event]:
        """While a stream is open: the event set when its access ended."""
        ended = asyncio.Event()
        self._open[ended] = request
        try:
            yield ended
        finally:
            del self._open[ended]

    def recheck(self) -> None:
        """End every open stream whose request is no longer authorized."""
        for ended, request in self._open.items():
            if not self._authorized(request):
                ended.set()


class _Stream(EventSourceResponse):
    """An SSE response that also ends, completely, when its access ends (``ended``).

    Through the ASGI interface alone: ``ended`` reads, to the response, as the client
    going away (so it stops its tasks), and the closing empty body it then leaves out is
    sent here (so the client sees a complete response, not a cut connection).
    """

    def __init__(self, *args: Any, streams: LiveStreams, request: Request, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._streams = streams
        self._request = request

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        complete = False
        client_gone = False

        async def sending(message: Message) -> None:
            nonlocal complete
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                complete = True

        with self._streams.opened(self._request) as ended:

            async def receiving() -> Message:
                nonlocal client_gone
                if ended.is_set():
                    return {"type": "http.disconnect"}
                message_task = asyncio.ensure_future(receive())
                ended_task = asyncio.ensure_future(ended.wait())
                try:
                    await asyncio.wait(
                        (message_task, ended_task), return_when=asyncio.FIRST_COMPLETED
                    )
                finally:  # whichever is left: nothing outlives this call
                    ended_task.cancel()
                    access_ended = not message_task.done()
                    if access_ended:
                        message_task.cancel()
                if access_ended:
                    return {"type": "http.disconnect"}
                message = message_task.result()
                client_gone = message["type"] == "http.disconnect"
                return message

            await super().__call__(scope, receiving, sending)
        if not complete and not client_gone and ended.is_set():
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})


def events(keepalive: float, streams: LiveStreams) -> Answer:
    """``GET /api/v1/events``, with keepalive comments every ``keepalive`` seconds; each
    stream ends when its access does (``streams``)."""

    async def answer(request: Request, store: AsyncEventStore) -> Response:
        session_id = query_text(request, "session_id")
        workspace_id = query_text(request, "workspace_id")
        command_id = query_text(request, "command_id")
        cursor = requested_feed_cursor(request)
        valid_id("session", session_id)
        if (
            session_id is not None
            and await store.ask(LoadSessionDetail(session_id=session_id)) is None
        ):
            raise SessionNotFound(session_id)
        valid_id("workspace", workspace_id)
        after = feed_after(cursor, await store.fetch_latest_seq())
        event_filter = ApiEventFilter(
            session_id=session_id, workspace_id=workspace_id, command_id=command_id
        )
        event_filter.validate()
        return _Stream(
            _frames(store, after, event_filter),
            streams=streams,
            request=request,
            sep="\n",
            ping=keepalive,
            ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
            # No send timeout: the server's protocol cuts a stalled client off (Timeouts).
        )

    return answer


async def _frames(
    store: AsyncEventStore, after: int, event_filter: ApiEventFilter
) -> AsyncIterator[ServerSentEvent]:
    try:
        # The stored bytes in the ApiEvent wire shape: nothing decoded or re-encoded.
        async for event in store.follow_raw(after_seq=after, filter=event_filter):
            yield ServerSentEvent(
                data=event.json.decode(), event=event.kind, id=str(event.seq), sep="\n"
            )
    except StoreError as exc:
        logger.warning("a stream ended on a storage failure: %s", exc)
        yield ServerSentEvent(
            data=json.dumps({"error": f"reading the store failed: {exc}"}),
            event="stream_error",
            sep="\n",
        )
