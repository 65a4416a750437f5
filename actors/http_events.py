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
is 400 (the preamble's rules: :mod:`relaystore.actors.http_preamble`).

A stream reads pages from SQLite at its own client's pace, so a slow client holds at most
one page in memory and never blocks the writer or another stream; idle streams cost no
threads. Must not: cut off slow clients or close connections (the server's protocol does,
:mod:`relaystore.actors.http`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from ..domain.api_events import ApiEventFilter
from ..domain.errors import StoreError
from ..domain.reads import LoadSessionDetail
from .aio import AsyncEventStore
from .http_preamble import Answer, UnknownSession, feed_after, feed_cursor, query_text, valid_id

__all__ = ["KEEPALIVE_SECONDS", "events"]

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
"""The default interval of an idle stream's keepalive comments."""


def events(keepalive: float) -> Answer:
    """``GET /api/v1/events``, with keepalive comments every ``keepalive`` seconds."""

    async def answer(request: Request, store: AsyncEventStore) -> Response:
        session_id = query_text(request, "session_id")
        workspace_id = query_text(request, "workspace_id")
        command_id = query_text(request, "command_id")
        cursor = feed_cursor(request)
        valid_id("session", session_id)
        if (
            session_id is not None
            and await store.ask(LoadSessionDetail(session_id=session_id)) is None
        ):
            raise UnknownSession(session_id)
        valid_id("workspace", workspace_id)
        after = feed_after(cursor, await store.fetch_latest_seq())
        event_filter = ApiEventFilter(
            session_id=session_id, workspace_id=workspace_id, command_id=command_id
        )
        event_filter.validate()
        return EventSourceResponse(
            _frames(store, after, event_filter),
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
