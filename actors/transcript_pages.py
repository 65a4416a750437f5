"""Reading a session's stored transcript a page at a time, as one snapshot.

:func:`stored_items` walks ``LoadTranscriptItems`` pages (whole items in the store's
order) and checks every page against the frontier the caller read the session at: pages
read at one frontier belong to one projection. A projector loading its session and
``relaystore show`` both read a long transcript this way, so neither holds it whole.
:func:`reloaded_entries` is what a projector reloads: the old items' index facts
(``LoadIndexEntries``) and only the newest items whole.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from ..domain.materialized import TranscriptItem
from ..domain.paging import DEFAULT_ITEMS_LIMIT
from ..domain.projection.index import ColdEntry, ItemFacts
from ..domain.read_replies import TranscriptItems
from ..domain.reads import LoadTranscriptItems
from ..domain.relay.payloads import RelayCursor
from ..storage.materialized import IndexEntries
from .internal import LoadIndexEntries

__all__ = ["SessionMoved", "reloaded_entries", "stored_items"]


class SessionMoved(Exception):
    """The session's frontier moved between two pages (or the session went away): what
    was read so far is not one projection. The callers turn it into their own answer."""


_Cursor = tuple[int, str]
"""A ``(position, stable_id)`` cursor: the last item a page held."""

_PageView = tuple[RelayCursor, list[Any], bool, _Cursor | None]
"""What the walk needs of a reply page: its frontier, rows, whether more follow, and the
cursor after its last row."""


def _walk(
    ask: Callable[[Any], Any],
    session_id: str,
    frontier: RelayCursor,
    after: _Cursor | None,
    request: Callable[[int | None, str | None], Any],
    view: Callable[[Any], _PageView],
) -> Iterator[list[Any]]:
    """The rows of each page ``request(after_position, after_id)`` answers through
    ``ask``, from ``after`` on, until one says no more follow; raises
    :class:`SessionMoved` when a page was read at another frontier than ``frontier``."""
    while True:
        page = ask(request(None, None) if after is None else request(*after))
        if page is None:
            raise SessionMoved(session_id)
        read_at, rows, more, last = view(page)
        if read_at != frontier:
            raise SessionMoved(session_id)
        yield rows
        if not more or last is None:
            return
        after = last


def _items_view(page: TranscriptItems) -> _PageView:
    last = page.items[-1] if page.items else None
    return (
        RelayCursor(ordinal=page.frontier_ordinal, digest=page.frontier_digest),
        page.items,
        page.more,
        None if last is None else (last.position, last.stable_id),
    )


def _entries_view(page: IndexEntries) -> _PageView:
    last = page.entries[-1] if page.entries else None
    return (page.frontier, page.entries, page.more, None if last is None else (last[1], last[0]))


def stored_items(
    ask: Callable[[Any], Any],
    session_id: str,
    frontier: RelayCursor,
    *,
    limit: int = DEFAULT_ITEMS_LIMIT,
    after: _Cursor | None = None,
) -> Iterator[TranscriptItem]:
    """Every stored item of the session after ``after`` (a ``(position, stable_id)``
    cursor; None: from the first), in the store's order, read ``limit`` at a time
    through ``ask``; raises :class:`SessionMoved` when a page was read at another
    frontier than ``frontier``."""

    def request(position: int | None, stable_id: str | None) -> LoadTranscriptItems:
        return LoadTranscriptItems(
            session_id=session_id, after_position=position, after_id=stable_id, limit=limit
        )

    for items in _walk(ask, session_id, frontier, after, request, _items_view):
        yield from items


def reloaded_entries(
    ask: Callable[[Any], Any],
    session_id: str,
    frontier: RelayCursor,
    *,
    window: int,
    limit: int,
    items_limit: int = DEFAULT_ITEMS_LIMIT,
) -> Iterator[TranscriptItem | ColdEntry]:
    """The session's transcript as a reloading projector enters it: every item but the
    newest ``window`` as its stable id and index facts (``LoadIndexEntries`` pages of
    ``limit``, no body decoded where the store kept the facts), then the newest
    ``window`` whole (pages of ``items_limit``).

    Holds at most ``window`` entries back at a time; raises :class:`SessionMoved` when a
    page was read at another frontier than ``frontier``.
    """

    def request(position: int | None, stable_id: str | None) -> LoadIndexEntries:
        return LoadIndexEntries(
            session_id=session_id, after_position=position, after_id=stable_id, limit=limit
        )

    held: deque[tuple[str, int, ItemFacts]] = deque()
    last_cold: _Cursor | None = None
    for entries in _walk(ask, session_id, frontier, None, request, _entries_view):
        for entry in entries:
            held.append(entry)
            if len(held) > window:
                stable_id, position, facts = held.popleft()
                last_cold = (position, stable_id)
                yield stable_id, facts
    if not held:
        return
    tail = list(stored_items(ask, session_id, frontier, limit=items_limit, after=last_cold))
    if [item.stable_id for item in tail] != [stable_id for stable_id, _, _ in held]:
        raise SessionMoved(session_id)
    yield from tail
