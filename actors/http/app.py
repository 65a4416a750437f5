"""``relaystore serve``: the application, every route in one table behind one preamble.

:func:`create_app` is the ASGI application over one store (open read-only; closing it
ends every stream). Each route below goes through the
:class:`~relaystore.actors.http.preamble.Preamble`: ``route`` for a route over the store
(the token unless marked, the store, the failures, the 404), ``page`` for what a browser
loads before signing in (the failures only). What each route answers is its topic
module's: the feed :mod:`relaystore.actors.http.events`, the reads
:mod:`relaystore.actors.http.reads` and :mod:`relaystore.actors.http.search`, the viewer
:mod:`relaystore.actors.http.viewer`.

Around every response, the envelope:

* ``Mj-Api-Version: 1``, ``Cache-Control: no-store`` and the browser security headers
  (:data:`~relaystore.actors.http.viewer.SECURITY_HEADERS`: a strict
  Content-Security-Policy and others), replacing any a route set;
* a request from another web origin is refused (403,
  :class:`~relaystore.actors.http.viewer.OriginGuard`) unless ``cors_origins`` names it
  (those get CORS headers: ``GET`` with ``Authorization`` and ``Last-Event-ID``);
* a path no route serves is 404 ``no route PATH``; a method a route does not take is 405
  ``method_not_allowed`` with ``Allow``; both in the preamble's error body.

Must not: touch the socket, TLS or the connections (:mod:`relaystore.actors.http.server`), or
answer a route itself.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...domain.origins import validate_origins
from ..aio import AsyncEventStore
from . import reads
from .events import KEEPALIVE_SECONDS, LiveStreams, events
from .preamble import Page, Preamble, error
from .search import search
from .viewer import SECURITY_HEADERS, Access, OriginGuard, sign_in, sign_out, viewer_files

__all__ = ["API_VERSION", "CONTRACT_HEADERS", "KEEPALIVE_SECONDS", "create_app", "read_routes"]

API_VERSION = "1"
"""The value of the ``Mj-Api-Version`` header (a wire constant of the origin's API)."""

CONTRACT_HEADERS = (
    (b"mj-api-version", API_VERSION.encode()),
    (b"cache-control", b"no-store"),
    *SECURITY_HEADERS,
)
"""The headers of every answer (the server's own, to a malformed request, too)."""
_HEADERS = list(CONTRACT_HEADERS)
_HEADER_NAMES = frozenset(name for name, _ in _HEADERS)
_SESSION = "/api/v1/sessions/{session_id}"


def _read_routes(preamble: Preamble) -> list[Route]:
    return [
        preamble.route("/healthz", reads.healthz, token=False),
        preamble.route("/metrics", reads.metrics_text),
        preamble.route("/stats", reads.stats),
        preamble.route("/api/v1/workspaces", reads.workspaces),
        preamble.route("/api/v1/sessions", reads.sessions),
        preamble.route(_SESSION, reads.session_detail),
        preamble.route(_SESSION + "/subagents", reads.subagents),
        preamble.route(_SESSION + "/transcript", reads.transcript),
        preamble.route(_SESSION + "/history", reads.history),
        preamble.route(_SESSION + "/items", reads.items),
        preamble.route(_SESSION + "/usage", reads.usage),
        preamble.route(_SESSION + "/elicitations", reads.elicitations),
        preamble.route(_SESSION + "/answers", reads.answers),
        preamble.route("/api/v1/search", search),
    ]


def read_routes(state: Mapping[str, Any], authorized: Callable[[Request], bool]) -> list[Route]:
    """The read routes, ``/healthz`` and ``/metrics``, over the store in ``state["store"]``
    (none: every one answers 503); ``authorized(request)`` checks the token."""
    return _read_routes(Preamble(state, authorized))


def _routes(preamble: Preamble, access: Access, keepalive: float) -> list[Route]:
    """Every route of the application, in matching order."""
    streams = LiveStreams(access.authorized)
    return [
        preamble.route("/api/v1/events", events(keepalive, streams)),
        *_read_routes(preamble),
        *(preamble.page(path, answer) for path, answer in viewer_files().items()),
        preamble.page("/session", _rechecking(sign_in(access), streams), methods=["POST"]),
        preamble.page("/session/end", _rechecking(sign_out(access), streams), methods=["POST"]),
    ]


def _rechecking(answer: Page, streams: LiveStreams) -> Page:
    """``answer`` (a sign-in or sign-out), then the end of every stream whose sign-in it
    ended (a sign-out's, or the oldest one a sign-in forgot)."""

    async def rechecked(request: Request) -> Response:
        try:
            return await answer(request)
        finally:
            streams.recheck()

    return rechecked


class _ContractHeaders:
    """Adds ``Mj-Api-Version``, ``Cache-Control: no-store`` and the security headers
    (:data:`~relaystore.actors.http.viewer.SECURITY_HEADERS`) to every response; the
    outermost layer, so Starlette's own 500 carries them too."""

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
                    if name.lower() not in _HEADER_NAMES
                ]
                message = {**message, "headers": headers + _HEADERS}
            await send(message)

        await self.app(scope, receive, with_headers)


class _App(Starlette):
    """Starlette with :class:`_ContractHeaders` around everything, its error layer too."""

    def build_middleware_stack(self) -> ASGIApp:
        return _ContractHeaders(super().build_middleware_stack())


def create_app(
    store: AsyncEventStore,
    token: str,
    *,
    keepalive: float = KEEPALIVE_SECONDS,
    cors_origins: Collection[str] = (),
) -> Starlette:
    """The ASGI application serving ``store`` (open read-only; closing it ends every stream).

    ``cors_origins`` are the other web origins allowed to call it (CORS headers for them
    only); a request from any other origin is refused. Raises :class:`InvalidInput` for
    one that is no web origin.
    """
    allowed = validate_origins(cors_origins)
    access = Access(token)
    cors = [
        Middleware(
            CORSMiddleware,
            allow_origins=allowed,
            allow_methods=["GET"],
            allow_headers=["Authorization", "Last-Event-ID"],
            expose_headers=["Mj-Api-Version"],
        )
    ]

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no route {request.url.path}")

    async def http_error(request: Request, exc: Exception) -> Response:
        if not isinstance(exc, HTTPException):  # pragma: no cover - Starlette passes one
            return error(500, str(exc))
        return error(exc.status_code, str(exc.detail), exc.headers)

    return _App(
        routes=_routes(Preamble({"store": store}, access.authorized), access, keepalive),
        middleware=[
            Middleware(OriginGuard, allowed=allowed),
            *(cors if allowed else []),
        ],
        exception_handlers={404: not_found, HTTPException: http_error},
    )
