"""``relaystore serve``: the origin's read routes under ``/api/v1/``, health and metrics.

Every route answers JSON in the origin's shapes (``encode`` of the reply types of
:mod:`relaystore.domain.reads`); the token, the store, the 404 and the error bodies are
the preamble's (:mod:`relaystore.actors.http.preamble`), the paths the application's
(:mod:`relaystore.actors.http.app`). The answers:

=====================================================  =================================
``GET /api/v1/workspaces``                             :class:`ListWorkspaces`
``GET /api/v1/sessions[?workspace_id=&all=]``          :class:`ListSessions`
``GET /api/v1/sessions/{id}``                          :class:`LoadSessionDetail`
``GET .../{id}/subagents``                             :class:`ListSubagents` (404: no such parent)
``GET .../{id}/transcript?after_seq&limit&role&finished_only``  :class:`LoadRawTranscriptPage`
``GET .../{id}/history?before_position&before_id&limit``        :class:`LoadTranscriptHistory`
``GET .../{id}/items?before_position&before_id|after_position&after_id&limit``  the viewer's window (below)
``GET .../{id}/usage?after_seq&limit``                 :class:`LoadRawUsagePage`
``GET .../{id}/elicitations``                          :class:`LoadRawElicitations`
``GET .../{id}/answers``                               :class:`LoadElicitationAnswers` (relaystore's own)
``GET /healthz``                                       no token: ``{"status": "ok", ...}``
``GET /stats``                                         :class:`LoadStats` (``stats --json``)
``GET /metrics``                                       Prometheus text (``relaystore[metrics]``): :mod:`relaystore.actors.prometheus`
=====================================================  =================================

``/transcript``, ``/usage`` and ``/elicitations`` answer the raw reads: the stored item
bodies, turns and questions pass through undecoded, the bytes the typed replies encode
to; ``/elicitations`` answers
the bare array of questions, as the origin's handler does. ``role`` may repeat.
``finished_only=true`` implies ``role=agent`` (another role is 400). A reply of None
(no such session, or no transcript recorded for it) is the preamble's 404. The session
list refuses unknown parameters, as the origin's does; the other routes ignore them; ids
are checked by the store, with the message (its field named in the 400).

``/answers`` is relaystore's own (the origin keeps no answers): every answer recorded
for the session's questions (:class:`~relaystore.domain.read_replies.ElicitationAnswerList`),
who gave it, when and what, a secret field's value masked; ``/elicitations`` stays the
origin's bare array of pending questions.

``/items`` is relaystore's own (the viewer pages a long transcript with it): whole items
in position order, each in the ``/transcript`` item shape, ``limit`` (default 50, at most
999) of them: without a cursor the newest (with ``total``, the session's item count, and
``follow_after_seq``, the seq a ``/transcript`` poll resumes after to see every later
change); with ``before_position&before_id`` those just before that item, with
``after_position&after_id`` those just after it. ``older`` and ``newer`` say whether items
lie beyond the page's ends. Each page costs its own rows (the history's and the items'
keyset reads), not the session's.

Must not: check the token or map failures to statuses (the preamble does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...domain.errors import InvalidInput, StoreError
from ...domain.materialized import TranscriptItem
from ...domain.messages import LoadStats
from ...domain.paging import DEFAULT_HISTORY_LIMIT, DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT
from ...domain.read_replies import RawElicitationList, TranscriptItemView
from ...domain.reads import (
    ListSessions,
    ListSubagents,
    ListWorkspaces,
    LoadElicitationAnswers,
    LoadProjectionTail,
    LoadRawElicitations,
    LoadRawTranscriptPage,
    LoadRawUsagePage,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptItems,
)
from ...domain.reports import StoreStats, stats_document
from ...domain.roles import TranscriptRole
from ...domain.transcript_views import item_role, item_text, transcript_seq
from ...domain.wire import encode
from ...domain.wording import install_extra
from ..aio import AsyncEventStore
from .preamble import Answer, SessionNotFound, error, query_flag, query_integer, query_text

__all__ = [
    "answers",
    "elicitations",
    "healthz",
    "history",
    "items",
    "metrics_text",
    "session_detail",
    "sessions",
    "stats",
    "subagents",
    "transcript",
    "usage",
    "workspaces",
]

_TRANSCRIPT_ROLES = frozenset(get_args(TranscriptRole))


def _asking(build: Callable[[Request], Any]) -> Answer:
    """An answer: build the message from the request, ask it, answer its reply (None:
    the preamble's 404 for the path's session)."""

    async def answer(request: Request, store: AsyncEventStore) -> Response:
        reply = await store.ask(build(request))
        if reply is None:
            raise SessionNotFound(request.path_params.get("session_id", ""))
        if isinstance(reply, StoreStats):
            return JSONResponse(stats_document(reply))
        if isinstance(reply, RawElicitationList):
            # The origin answers ``Json<Vec<ElicitationRequest>>``: the bare array.
            return _json(reply.elicitations)
        return _json(reply)

    return answer


def _json(reply: object) -> Response:
    return Response(encode(reply), media_type="application/json")


def _limit(request: Request, default: int) -> int:
    """A page limit: a non-negative integer, clamped later by the read (0 gives 1)."""
    value = query_integer("limit", query_text(request, "limit"), default)
    assert value is not None
    return value


def _after_seq(request: Request) -> int:
    return query_integer("after_seq", query_text(request, "after_seq"), 0) or 0


def _list_sessions(request: Request) -> ListSessions:
    params = request.query_params
    unknown = sorted(set(params) - {"workspace_id", "all"})
    if unknown:
        raise InvalidInput(f"unknown query parameter {unknown[0]!r}")
    every = query_text(request, "all")
    return ListSessions(
        workspace_id=query_text(request, "workspace_id"),
        all=every is None or query_flag("all", every),
    )


def _load_transcript(request: Request) -> LoadRawTranscriptPage:
    roles = request.query_params.getlist("role")
    for role in roles:
        if role not in _TRANSCRIPT_ROLES:
            raise InvalidInput(
                f"role {role[:40]!r} is not one of {', '.join(sorted(_TRANSCRIPT_ROLES))}"
            )
    return LoadRawTranscriptPage(
        session_id=request.path_params["session_id"],
        after_seq=_after_seq(request),
        limit=_limit(request, DEFAULT_PAGE_LIMIT),
        roles=tuple(dict.fromkeys(roles)),  # type: ignore[arg-type]
        finished_only=query_flag("finished_only", query_text(request, "finished_only")),
    )


def _load_history(request: Request) -> LoadTranscriptHistory:
    return LoadTranscriptHistory(
        session_id=request.path_params["session_id"],
        before_position=query_integer("before_position", query_text(request, "before_position")),
        before_id=query_text(request, "before_id"),
        limit=_limit(request, DEFAULT_HISTORY_LIMIT),
    )


def _load_usage(request: Request) -> LoadRawUsagePage:
    return LoadRawUsagePage(
        session_id=request.path_params["session_id"],
        after_seq=_after_seq(request),
        limit=_limit(request, DEFAULT_PAGE_LIMIT),
    )


stats = _asking(lambda _: LoadStats())
"""``GET /stats``."""
workspaces = _asking(lambda _: ListWorkspaces())
"""``GET /api/v1/workspaces``."""
sessions = _asking(_list_sessions)
"""``GET /api/v1/sessions``."""
session_detail = _asking(lambda r: LoadSessionDetail(session_id=r.path_params["session_id"]))
"""``GET /api/v1/sessions/{session_id}``."""
subagents = _asking(lambda r: ListSubagents(parent_session_id=r.path_params["session_id"]))
"""``GET .../{session_id}/subagents``."""
transcript = _asking(_load_transcript)
"""``GET .../{session_id}/transcript``."""
history = _asking(_load_history)
"""``GET .../{session_id}/history``."""
usage = _asking(_load_usage)
"""``GET .../{session_id}/usage``."""
elicitations = _asking(lambda r: LoadRawElicitations(session_id=r.path_params["session_id"]))
"""``GET .../{session_id}/elicitations``."""
answers = _asking(lambda r: LoadElicitationAnswers(session_id=r.path_params["session_id"]))
"""``GET .../{session_id}/answers`` (relaystore's own)."""


WINDOW_LIMIT = 50
"""``/items``' page size unless ``limit`` says otherwise."""


class _Window(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``GET .../items``: a page of whole items in position order (module docstring)."""

    session_id: str
    items: list[TranscriptItemView]
    older: bool
    newer: bool
    total: int | None = None
    follow_after_seq: int | None = None


def _view(item: TranscriptItem) -> TranscriptItemView:
    """The ``/transcript`` shape of a stored item (the domain's seq, role and text)."""
    return TranscriptItemView(
        stable_id=item.stable_id,
        position=item.position,
        seq=transcript_seq(item.position, item.latest_content_event_ordinal),
        role=item_role(item.body),
        text=item_text(item.body),
        created_at_ms=item.created_at_ms,
        last_changed_at_ms=item.last_changed_at_ms,
        body=item.body,
    )


def _item_cursor(request: Request, side: str) -> tuple[int, str] | None:
    """The ``{side}_position&{side}_id`` cursor: both or neither."""
    position = query_integer(f"{side}_position", query_text(request, f"{side}_position"))
    stable_id = query_text(request, f"{side}_id")
    if (position is None) != (stable_id is None):
        raise InvalidInput(f"give {side}_position and {side}_id together (the item's), or neither")
    return None if position is None or stable_id is None else (position, stable_id)


async def items(request: Request, store: AsyncEventStore) -> Response:
    """``GET .../{session_id}/items``: the viewer's window of whole items."""
    session_id = request.path_params["session_id"]
    limit = max(1, min(_limit(request, WINDOW_LIMIT), MAX_PAGE_LIMIT - 1))
    before, after = _item_cursor(request, "before"), _item_cursor(request, "after")
    if before is not None and after is not None:
        raise InvalidInput("give a before cursor or an after cursor, not both")
    if after is not None:
        page = await store.ask(
            LoadTranscriptItems(
                session_id=session_id, after_position=after[0], after_id=after[1], limit=limit
            )
        )
        if page is None:
            raise SessionNotFound(session_id)
        window = _Window(
            session_id=session_id,
            items=[_view(item) for item in page.items],
            older=True,
            newer=page.more,
        )
    elif before is not None:
        # The items before the cursor, and the one before them (where the whole read starts).
        history = await store.ask(
            LoadTranscriptHistory(
                session_id=session_id,
                before_position=before[0],
                before_id=before[1],
                limit=limit + 1,
            )
        )
        if history is None:
            raise SessionNotFound(session_id)
        older = len(history.items) > limit
        start = history.items[0] if older else None
        page = await store.ask(
            LoadTranscriptItems(
                session_id=session_id,
                after_position=None if start is None else start.position,
                after_id=None if start is None else start.stable_id,
                limit=limit,
            )
        )
        if page is None:
            raise SessionNotFound(session_id)
        window = _Window(
            session_id=session_id,
            items=[_view(item) for item in page.items if (item.position, item.stable_id) < before],
            older=older,
            newer=True,
        )
    else:
        tail = await store.ask(LoadProjectionTail(session_id=session_id, limit=limit))
        if tail is None:
            raise SessionNotFound(session_id)
        window = _Window(
            session_id=session_id,
            items=[_view(item) for item in tail.session.transcript],
            older=tail.omitted_items > 0,
            newer=False,
            total=tail.omitted_items + len(tail.session.transcript),
            follow_after_seq=tail.session.applied_event_ordinal,
        )
    return _json(window)


async def healthz(request: Request, store: AsyncEventStore) -> Response:
    """``GET /healthz`` (no token): the store answers, with its newest seq."""
    try:
        latest = await store.fetch_latest_seq()
    except StoreError as exc:
        return error(503, f"the store does not answer: {exc}")
    return JSONResponse({"status": "ok", "latest_seq": latest})


async def metrics_text(request: Request, store: AsyncEventStore) -> Response:
    """``GET /metrics``: one Prometheus scrape of the store."""
    try:
        from ..prometheus import prometheus_text

        text = prometheus_text(store.sync)
    except ImportError:
        return error(503, f"metrics need prometheus-client: {install_extra('metrics')}")
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")
