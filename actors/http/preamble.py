"""``relaystore serve``: the one preamble every route goes through, and the error body.

Owns what every route of :func:`~relaystore.actors.http.app.create_app` does before (and
around) its own work, stated once:

* **the error body** (:func:`error`): ``{"error": TEXT, "code": CODE}``, the code named
  by the status (400 ``bad_request``, 401 ``unauthorized``, 403 ``forbidden``, 404
  ``not_found``, 405 ``method_not_allowed``, 500 ``storage_failure``, 503
  ``unavailable``); a 401 names the scheme (``WWW-Authenticate: Bearer``).
* **the token** (:meth:`Preamble.route`): a route that needs it answers 401
  ``missing or wrong bearer token`` unless ``authorized(request)`` (the bearer header or a
  sign-in cookie: :class:`~relaystore.actors.http.viewer.Access`), before anything else.
* **the store**: a route over the store answers 503 ``the server is shutting down`` once
  the server let go of it.
* **failures**: inside a route, :class:`InvalidInput` answers 400 with its detail,
  :class:`StoreClosed` 503, any other :class:`StoreError` 500 ``reading the store
  failed: ...``; :class:`SessionNotFound` answers 404 with the one wording of
  :func:`~relaystore.domain.reads.unknown_session_text`.
* **parameters**: each is given at most once (:func:`once`; a repeat is 400, never
  overridden); integers and cursors are ASCII digits within SQLite's range
  (:func:`query_integer`); an id in the query is a valid id (:func:`valid_id`; an id
  in a path reaches the store inside its message, whose validation names the field); a
  feed's cursor is ``after_seq`` or ``Last-Event-ID``, agreeing when both are given
  (:func:`requested_feed_cursor`), and never ahead of the store's newest event
  (:func:`feed_after`, which calls the domain's
  :func:`~relaystore.domain.validation.check_cursor`).

Must not: know a route's path or reply shape (the route modules), or the server's socket
and protocol (:mod:`relaystore.actors.http.server`). It holds no state of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ...domain.errors import InvalidInput, StoreClosed, StoreError
from ...domain.ids import validate_id
from ...domain.integers import INT64_MAX
from ...domain.paging import check_cursor
from ...domain.reads import unknown_session_text
from ..aio import AsyncEventStore

__all__ = [
    "Answer",
    "Page",
    "Preamble",
    "SessionNotFound",
    "error",
    "feed_after",
    "once",
    "query_flag",
    "query_integer",
    "query_text",
    "requested_feed_cursor",
    "valid_id",
]

Answer = Callable[[Request, AsyncEventStore], Awaitable[Response]]
"""A route over the store: its request and the store, after the preamble."""
Page = Callable[[Request], Awaitable[Response]]
"""A route that reads no store (the viewer's files, sign-in and sign-out)."""

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    500: "storage_failure",
    503: "unavailable",
}
"""The ``code`` of each error status."""
_SHUTTING_DOWN = "the server is shutting down"
_MAX_DIGITS = len(str(INT64_MAX))


def error(status: int, text: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The error body ``{"error": text, "code": ...}`` (a 401 names the scheme)."""
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer", **(headers or {})}
    code = _CODES.get(status, "error")
    return JSONResponse({"error": text, "code": code}, status_code=status, headers=headers)


class SessionNotFound(Exception):
    """Raised by a route for a session the store lacks: the preamble answers 404."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id


class Preamble:
    """Wraps each route's answer in the rules above; one per application.

    ``state["store"]`` is the store the routes read (absent: the server is shutting
    down); ``authorized(request)`` is the token check.
    """

    def __init__(self, state: Mapping[str, Any], authorized: Callable[[Request], bool]) -> None:
        self._state = state
        self._authorized = authorized

    def route(self, path: str, answer: Answer, *, token: bool = True) -> Route:
        """``GET path`` over the store: the token (when ``token``), the store, failures."""

        async def endpoint(request: Request) -> Response:
            if token and not self._authorized(request):
                return error(401, "missing or wrong bearer token")
            store: AsyncEventStore | None = self._state.get("store")
            if store is None:
                return error(503, _SHUTTING_DOWN)
            return await _failures(answer(request, store))

        return Route(path, endpoint, methods=["GET"])

    def page(self, path: str, answer: Page, *, methods: Sequence[str] = ("GET",)) -> Route:
        """A route without token or store (what a browser loads before signing in)."""

        async def endpoint(request: Request) -> Response:
            return await _failures(answer(request))

        return Route(path, endpoint, methods=list(methods))


async def _failures(answering: Awaitable[Response]) -> Response:
    """The route's answer, or the error body of what it raised."""
    try:
        return await answering
    except SessionNotFound as exc:
        return error(404, unknown_session_text(exc.session_id))
    except InvalidInput as exc:
        return error(400, exc.detail)
    except StoreClosed:
        return error(503, _SHUTTING_DOWN)
    except StoreError as exc:
        return error(500, f"reading the store failed: {exc}")


def once(name: str, values: list[str]) -> str | None:
    """The one value of a parameter or header given at most once: a repeated one is
    refused (``InvalidInput``), never overridden, as the origin's query parser does."""
    if len(values) > 1:
        raise InvalidInput(f"{name} was given {len(values)} times; give it once")
    return values[0] if values else None


def query_text(request: Request, name: str) -> str | None:
    """The query parameter ``name``, given at most once (:func:`once`)."""
    return once(name, request.query_params.getlist(name))


def query_flag(name: str, raw: str | None) -> bool:
    """The flag query parameter ``name`` given as ``raw``: absent or ``false`` is False,
    ``true`` is True; anything else is refused (``InvalidInput``)."""
    if raw is None or raw == "false":
        return False
    if raw == "true":
        return True
    raise InvalidInput(f"{name} must be true or false, got {raw[:40]!r}")


def valid_id(kind: str, value: str | None) -> None:
    """Refuse (``InvalidInput``) a given ``value`` that is no valid ``kind`` id."""
    if value is not None:
        validate_id(kind, value)


def _shown_raw(raw: str) -> str:
    return repr(raw) if len(raw) <= 40 else f"{raw[:40]!r}... ({len(raw)} characters)"


def query_integer(name: str, raw: str | None, default: int | None = None) -> int | None:
    """A non-negative integer query parameter (``default`` when absent).

    Raises :class:`InvalidInput` for anything but ASCII digits or a value beyond
    SQLite's INTEGER range (its length is checked before converting: Python refuses to
    convert more than 4,300 digits).
    """
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit():
        raise InvalidInput(f"{name} must be a non-negative integer, got {_shown_raw(raw)}")
    digits = raw.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS or int(digits) > INT64_MAX:
        raise InvalidInput(f"{name} {_shown_raw(raw)} is beyond the largest integer {INT64_MAX}")
    return int(digits)


def requested_feed_cursor(request: Request) -> int | None:
    """The cursor a feed resumes after (None: none given): ``after_seq`` or the SSE
    ``Last-Event-ID`` header, each at most once; when both are given they must agree."""
    after_seq = query_text(request, "after_seq")
    header = once("Last-Event-ID", request.headers.getlist("last-event-id"))
    cursors = [
        cursor
        for name, raw in (("after_seq", after_seq), ("Last-Event-ID", header))
        if (cursor := query_integer(name, raw)) is not None
    ]
    if len(set(cursors)) > 1:
        raise InvalidInput(
            f"after_seq {cursors[0]} and Last-Event-ID {cursors[1]} disagree; send one"
        )
    return cursors[0] if cursors else None


def feed_after(given: int | None, latest_seq: int) -> int:
    """Where a feed starts: after ``given``, or at the newest event without a cursor;
    a cursor past the newest event is refused by the domain's rule (``check_cursor``)."""
    after = latest_seq if given is None else given
    check_cursor(after, latest_seq)
    return after
