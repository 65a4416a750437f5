"""``relaystore serve``: the origin's read routes under ``/api/v1/``, health and metrics.

Every route answers JSON in the origin's shapes (``encode`` of the reply types of
:mod:`relaystore.domain.reads`), with the bearer token :mod:`relaystore.actors.http` checks. The routes:

=====================================================  =================================
``GET /api/v1/workspaces``                             :class:`ListWorkspaces`
``GET /api/v1/sessions[?workspace_id=&all=]``          :class:`ListSessions`
``GET /api/v1/sessions/{id}``                          :class:`LoadSessionDetail`
``GET .../{id}/transcript?after_seq&limit&role&finished_only``  :class:`LoadTranscriptPage`
``GET .../{id}/history?before_position&before_id&limit``        :class:`LoadTranscriptHistory`
``GET .../{id}/usage?after_seq&limit``                 :class:`LoadRawUsagePage`
``GET .../{id}/elicitations``                          :class:`LoadRawElicitations`
``GET /healthz``                                       no token: ``{"status": "ok", ...}``
``GET /stats``                                         :class:`LoadStats` (``stats --json``)
``GET /metrics``                                       Prometheus text (``relaystore[metrics]``): :mod:`relaystore.actors.prometheus`
=====================================================  =================================

``/usage`` and ``/elicitations`` answer the raw reads: the stored turns and questions
pass through undecoded, the bytes the typed replies encode to; ``/elicitations`` answers
the bare array of questions, as the origin's handler does. ``role`` may repeat.
``finished_only=true`` implies ``role=agent`` (another role is 400).
Errors are ``{"error": ..., "code": ...}``: 400 ``bad_request``
(a malformed parameter or id), 401 ``unauthorized``, 404 ``not_found`` (no such
session, or no transcript recorded for it), 500 ``storage_failure``, 503
``unavailable`` (shutting down). The session list refuses unknown parameters, as the
origin's does; the other routes ignore them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, get_args

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..domain.errors import InvalidInput, StoreClosed, StoreError
from ..domain.integers import INT64_MAX
from ..domain.messages import LoadStats
from ..domain.paging import DEFAULT_HISTORY_LIMIT, DEFAULT_PAGE_LIMIT
from ..domain.read_replies import RawElicitationList
from ..domain.reads import (
    ListSessions,
    ListWorkspaces,
    LoadRawElicitations,
    LoadRawUsagePage,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptPage,
    unknown_session_text,
)
from ..domain.reports import StoreStats, stats_document
from ..domain.roles import TranscriptRole
from ..domain.wire import encode
from .aio import AsyncEventStore

__all__ = ["failure", "once", "query_integer", "read_routes"]

_ROLES = frozenset(get_args(TranscriptRole))
_MAX_DIGITS = len(str(INT64_MAX))
_Handler = Callable[[Request], Awaitable[Response]]


def failure(status: int, code: str, text: str) -> JSONResponse:
    """The origin's error body ``{"error": text, "code": code}`` (a 401 names the scheme)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": text, "code": code}, status_code=status, headers=headers)


def _shutting_down() -> JSONResponse:
    """503: the server is closing its store."""
    return failure(503, "unavailable", "the server is shutting down")


def once(name: str, values: list[str]) -> str | None:
    """The one value of a parameter or header given at most once: a repeated one is
    refused (``InvalidInput``), never overridden, as the origin's query parser does."""
    if len(values) > 1:
        raise InvalidInput(f"{name} was given {len(values)} times; give it once")
    return values[0] if values else None


def _shown(raw: str) -> str:
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
        raise InvalidInput(f"{name} must be a non-negative integer, got {_shown(raw)}")
    digits = raw.lstrip("0") or "0"
    if len(digits) > _MAX_DIGITS or int(digits) > INT64_MAX:
        raise InvalidInput(f"{name} {_shown(raw)} is beyond the largest integer {INT64_MAX}")
    return int(digits)


def _flag(name: str, raw: str | None) -> bool:
    if raw is None or raw == "false":
        return False
    if raw == "true":
        return True
    raise InvalidInput(f"{name} must be true or false, got {raw[:40]!r}")


def _json(reply: object) -> Response:
    return Response(encode(reply), media_type="application/json")


def read_routes(state: Mapping[str, Any], authorized: Callable[[Request], bool]) -> list[Route]:
    """The read routes, ``/healthz`` and ``/metrics``, over the store in ``state["store"]``.

    ``authorized(request)`` checks the bearer token.
    """

    def serving(request: Request, *, token: bool = True) -> AsyncEventStore | Response:
        """The store to answer from, or the refusal: a wrong token (401, when ``token``),
        a server shutting down (503)."""
        if token and not authorized(request):
            return failure(401, "unauthorized", "missing or wrong bearer token")
        store: AsyncEventStore | None = state.get("store")
        if store is None:
            return _shutting_down()
        return store

    def guarded(build: Callable[[Request], Any]) -> _Handler:
        """A handler: token, store, build the message, ask it, answer its reply or 404."""

        async def handle(request: Request) -> Response:
            store = serving(request)
            if isinstance(store, Response):
                return store
            try:
                reply = await store.ask(build(request))
            except InvalidInput as exc:
                return failure(400, "bad_request", exc.detail)
            except StoreClosed:
                return _shutting_down()
            except StoreError as exc:
                return failure(500, "storage_failure", f"reading the store failed: {exc}")
            if reply is None:
                session_id = request.path_params.get("session_id", "")
                return failure(404, "not_found", unknown_session_text(session_id))
            if isinstance(reply, StoreStats):
                return JSONResponse(stats_document(reply))
            if isinstance(reply, RawElicitationList):
                # The origin answers ``Json<Vec<ElicitationRequest>>``: the bare array.
                return _json(reply.elicitations)
            return _json(reply)

        return handle

    def sessions(request: Request) -> ListSessions:
        params = request.query_params
        unknown = sorted(set(params) - {"workspace_id", "all"})
        if unknown:
            raise InvalidInput(f"unknown query parameter {unknown[0]!r}")
        every = once("all", params.getlist("all"))
        return ListSessions(
            workspace_id=once("workspace_id", params.getlist("workspace_id")),
            all=every is None or _flag("all", every),
        )

    def transcript(request: Request) -> LoadTranscriptPage:
        params = request.query_params
        roles = params.getlist("role")
        for role in roles:
            if role not in _ROLES:
                raise InvalidInput(f"role {role[:40]!r} is not one of {', '.join(sorted(_ROLES))}")
        return LoadTranscriptPage(
            session_id=request.path_params["session_id"],
            after_seq=query_integer("after_seq", once("after_seq", params.getlist("after_seq")), 0)
            or 0,
            limit=_limit(once("limit", params.getlist("limit")), DEFAULT_PAGE_LIMIT),
            roles=tuple(dict.fromkeys(roles)),  # type: ignore[arg-type]
            finished_only=_flag(
                "finished_only", once("finished_only", params.getlist("finished_only"))
            ),
        )

    def history(request: Request) -> LoadTranscriptHistory:
        params = request.query_params
        return LoadTranscriptHistory(
            session_id=request.path_params["session_id"],
            before_position=query_integer(
                "before_position", once("before_position", params.getlist("before_position"))
            ),
            before_id=once("before_id", params.getlist("before_id")),
            limit=_limit(once("limit", params.getlist("limit")), DEFAULT_HISTORY_LIMIT),
        )

    def usage(request: Request) -> LoadRawUsagePage:
        params = request.query_params
        return LoadRawUsagePage(
            session_id=request.path_params["session_id"],
            after_seq=query_integer("after_seq", once("after_seq", params.getlist("after_seq")), 0)
            or 0,
            limit=_limit(once("limit", params.getlist("limit")), DEFAULT_PAGE_LIMIT),
        )

    async def healthz(request: Request) -> Response:
        store = serving(request, token=False)
        if isinstance(store, Response):
            return store
        try:
            latest = await store.fetch_latest_seq()
        except StoreError as exc:
            return failure(503, "unavailable", f"the store does not answer: {exc}")
        return JSONResponse({"status": "ok", "latest_seq": latest})

    async def metrics_text(request: Request) -> Response:
        store = serving(request)
        if isinstance(store, Response):
            return store
        try:
            from .prometheus import prometheus_text

            text = prometheus_text(store.sync)
        except ImportError:
            return failure(
                503,
                "unavailable",
                'metrics need prometheus-client: pip install "relaystore[metrics]"',
            )
        return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")

    session = "/api/v1/sessions/{session_id}"
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_text, methods=["GET"]),
        Route("/stats", guarded(lambda _: LoadStats()), methods=["GET"]),
        Route("/api/v1/workspaces", guarded(lambda _: ListWorkspaces()), methods=["GET"]),
        Route("/api/v1/sessions", guarded(sessions), methods=["GET"]),
        Route(
            session,
            guarded(lambda r: LoadSessionDetail(session_id=r.path_params["session_id"])),
            methods=["GET"],
        ),
        Route(session + "/transcript", guarded(transcript), methods=["GET"]),
        Route(session + "/history", guarded(history), methods=["GET"]),
        Route(session + "/usage", guarded(usage), methods=["GET"]),
        Route(
            session + "/elicitations",
            guarded(lambda r: LoadRawElicitations(session_id=r.path_params["session_id"])),
            methods=["GET"],
        ),
    ]


def _limit(raw: str | None, default: int) -> int:
    """A page limit: a non-negative integer, clamped later by the read (0 gives 1)."""
    value = query_integer("limit", raw, default)
    assert value is not None
    return value
