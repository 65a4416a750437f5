"""``relaystore serve``: the origin's ``GET /api/v1/events`` server-sent-event stream.

Built on Starlette (routing, responses), sse-starlette (SSE framing, keepalives, send
timeouts) and uvicorn (the server), installed with ``pip install "relaystore[http]"``.
The contract is ``origin-http-events.md``:

* ``GET /api/v1/events`` with optional ``session_id``, ``workspace_id`` and
  ``after_seq`` (or the SSE ``Last-Event-ID`` header); without a cursor the stream
  starts at the current frontier. Each event is one frame: ``id`` its ``seq``,
  ``event`` its ``type``, ``data`` the line ``relaystore events`` prints for it.
* A bearer token from a 0600 file, created on first start; 401 without it.
* Every response carries ``Mj-Api-Version: 1`` and ``Cache-Control: no-store``; errors
  are ``{"error": "..."}`` with 400, 401, 404, 500 or 503.
* ``: keepalive`` comments while nothing happens; a storage failure sends one
  ``event: stream_error`` frame and ends the stream.

Guarantees: the store is opened read-only (the supervisor or ``relaystore replay``
writes it); a stream reads pages from SQLite at its own client's pace, so a slow client
holds at most one page in memory and never blocks the writer or another stream; a
client that accepts nothing for ``send_timeout`` seconds is disconnected and resumes by
reconnecting with its cursor. Idle streams cost no threads.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relaystore.actors.aio import AsyncEventStore
from relaystore.actors.http_reads import read_routes
from relaystore.domain.api_events import ApiEventFilter
from relaystore.domain.errors import InvalidInput, StoreClosed, StoreError
from relaystore.domain.sessions import validate_id
from relaystore.domain.validation import INT64_MAX

__all__ = ["API_VERSION", "create_app", "ensure_token", "serve"]

logger = logging.getLogger(__name__)

API_VERSION = "1"
"""The value of the ``Mj-Api-Version`` header (a wire constant of the origin's API)."""

_HEADERS = [(b"mj-api-version", API_VERSION.encode()), (b"cache-control", b"no-store")]
KEEPALIVE_SECONDS = 15.0
SEND_TIMEOUT_SECONDS = 30.0


def ensure_token(path: Path) -> str:
    """The bearer token in ``path``, created (mode 0600) with a new token if missing."""
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        token = ""
    if token:
        return token
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(token + "\n")
    return token


class _ContractHeaders:
    """Adds ``Mj-Api-Version`` and ``Cache-Control: no-store`` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() not in {b"mj-api-version", b"cache-control"}
                ]
                message = {**message, "headers": headers + _HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)


def _error(status: int, text: str) -> JSONResponse:
    return JSONResponse({"error": text}, status_code=status)


def _cursor(name: str, raw: str) -> int:
    if not raw.isascii() or not raw.isdigit():
        raise InvalidInput(f"{name} must be a non-negative integer, got {raw[:40]!r}")
    value = int(raw)
    if value > INT64_MAX:
        raise InvalidInput(f"{name} {raw[:40]} is beyond the largest sequence id")
    return value


def create_app(store_path: Path, token: str, *, keepalive: float = KEEPALIVE_SECONDS) -> Starlette:
    """The ASGI application serving the store at ``store_path`` (opened read-only)."""
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with AsyncEventStore.open(store_path, read_only=True, readers=2) as store:
            state["store"] = store
            yield
            state.pop("store", None)

    def authorized(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            presented.strip().encode(), token.encode()
        )

    async def events(request: Request) -> Response:
        if not authorized(request):
            return _error(401, "missing or wrong bearer token")
        store: AsyncEventStore | None = state.get("store")
        if store is None:
            return _error(503, "the server is shutting down")
        params = request.query_params
        try:
            for name in params:
                if name not in ("session_id", "workspace_id", "after_seq"):
                    raise InvalidInput(f"unknown query parameter {name!r}")
            cursors = [
                _cursor(name, raw)
                for name, raw in (
                    ("after_seq", params.get("after_seq")),
                    ("Last-Event-ID", request.headers.get("last-event-id")),
                )
                if raw is not None
            ]
            if len(set(cursors)) > 1:
                raise InvalidInput(
                    f"after_seq {cursors[0]} and Last-Event-ID {cursors[1]} disagree; send one"
                )
            session_id = params.get("session_id")
            workspace_id = params.get("workspace_id")
            if session_id is not None:
                validate_id("session", session_id)
            if workspace_id is not None:
                validate_id("workspace", workspace_id)
            latest = await store.fetch_latest_seq()
            after = cursors[0] if cursors else latest
            if after > latest:
                raise InvalidInput(
                    f"cursor {after} is ahead of this database's newest event ({latest})"
                )
        except InvalidInput as exc:
            return _error(400, exc.detail)
        except StoreClosed:
            return _error(503, "the server is shutting down")
        except StoreError as exc:
            return _error(500, f"reading the store failed: {exc}")
        event_filter = ApiEventFilter(session_id=session_id, workspace_id=workspace_id)
        return EventSourceResponse(
            _frames(store, after, event_filter),
            sep="\n",
            ping=keepalive,
            ping_message_factory=lambda: ServerSentEvent(comment="keepalive", sep="\n"),
            send_timeout=SEND_TIMEOUT_SECONDS,
        )

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, f"no route {request.url.path}")

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error(status, str(getattr(exc, "detail", exc)))

    return Starlette(
        routes=[Route("/api/v1/events", events, methods=["GET"]), *read_routes(state, authorized)],
        middleware=[Middleware(_ContractHeaders)],
        exception_handlers={404: not_found, HTTPException: http_error},
        lifespan=lifespan,
    )


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


def serve(
    store_path: Path,
    *,
    host: str,
    port: int,
    token_file: Path | None,
    keepalive: float = KEEPALIVE_SECONDS,
) -> None:
    """Run the server until SIGINT/SIGTERM (streams are ended within a couple of seconds).

    ``keepalive`` is the interval, in seconds, of the keepalive comments of idle streams.
    """
    import uvicorn

    token = ensure_token(token_file or Path(f"{store_path}.api-token"))
    config = uvicorn.Config(
        create_app(store_path, token, keepalive=keepalive),
        host=host,
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=1,
        lifespan="on",
    )
    uvicorn.Server(config).run()
