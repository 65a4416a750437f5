"""``GET /api/v1/search``: the viewer's search box, over the full-text index.

``GET /api/v1/search?q=QUERY[&session_id=&role=&limit=&cursor=&plain=true]`` answers
:class:`~relaystore.domain.search.SearchTranscripts`: a
:class:`~relaystore.domain.search.SearchPage` (``query``, ``hits``, ``next_cursor``) as
JSON. Each parameter at most once; ``q`` is required; ``plain=true`` takes ``q`` as the
words a person typed (what a search box sends), not FTS5 syntax. A bad value is the preamble's
400 whose ``error`` names the parameter (``q: ...``, ``limit must be ...``); unknown
parameters are refused, so a misspelt filter never widens a search silently. The token
and the error bodies are the preamble's (:mod:`relaystore.actors.http.preamble`), the
path the application's (:mod:`relaystore.actors.http.app`).

Must not: check the token or map failures to statuses (the preamble does).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...domain.errors import InvalidInput
from ...domain.search import DEFAULT_SEARCH_LIMIT, SearchTranscripts
from ...domain.validation import validate_message
from ...domain.wire import encode
from ..aio import AsyncEventStore
from .preamble import query_flag, query_integer, query_text

__all__ = ["search"]

_PARAMETERS = {
    "q": "query",
    "session_id": "session_id",
    "role": "role",
    "limit": "limit",
    "cursor": "cursor",
    "plain": "plain",
}
"""Each query parameter and the message field it fills."""


def _message(request: Request) -> SearchTranscripts:
    unknown = sorted(set(request.query_params) - set(_PARAMETERS))
    if unknown:
        raise InvalidInput(f"unknown query parameter {unknown[0][:40]!r}")
    query = query_text(request, "q")
    if query is None:
        raise InvalidInput("q: the search query is required (GET /api/v1/search?q=...)")
    message = SearchTranscripts(
        query=query,
        session_id=query_text(request, "session_id"),
        role=query_text(request, "role"),  # type: ignore[arg-type]
        limit=query_integer("limit", query_text(request, "limit"), DEFAULT_SEARCH_LIMIT) or 0,
        cursor=query_integer("cursor", query_text(request, "cursor")),
        plain=query_flag("plain", query_text(request, "plain")),
    )
    validate_message(message)
    return message


async def search(request: Request, store: AsyncEventStore) -> Response:
    """``GET /api/v1/search``."""
    try:
        page = await store.ask(_message(request))
    except InvalidInput as exc:
        raise _by_parameter(exc) from exc
    return Response(encode(page), media_type="application/json")


def _by_parameter(exc: InvalidInput) -> InvalidInput:
    """``exc`` saying the query parameter before the message's field it names."""
    for parameter, field in _PARAMETERS.items():
        prefix = f"SearchTranscripts.{field}"
        if exc.detail.startswith(prefix):
            return InvalidInput(f"{parameter}: {exc.detail.removeprefix(prefix).lstrip(': ')}")
    return exc
