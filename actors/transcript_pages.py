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

from relaystore.actors.internal import LoadIndexEntries
from relaystore.domain.materialized import TranscriptItem
from relaystore.domain.projection.index import ColdEntry, ItemFacts
from relaystore.domain.reads import DEFAULT_ITEMS_LIMIT, LoadTranscriptItems
from relaystore.domain.relay import RelayCursor

__all__ = ["SessionMoved", "reloaded_entries", "stored_items"]


class SessionMoved(Exception):
    """The session's frontier moved between two pages (or the session went away): what
    was read so far is not one projection. The callers turn it into their own answer."""


def stored_items(
    ask: Callable[[Any], Any],
    session_id: str,
    frontier: RelayCursor,
    *,
    limit: int = DEFAULT_ITEMS_LIMIT,
    after: tuple[int, str] | None = None,
) -> Iterator[TranscriptItem]:
    """Every stored item of the session after ``after`` (a ``(position, stable_id)``
    cursor; None: from the first), in the store's order, read ``limit`` at a time
    through ``ask``; raises :class:`SessionMoved` when a page was read at another
    frontier than ``frontier``."""
    while True:
        page = ask(
            LoadTranscriptItems(
                session_id=session_id,
                after_position=None if after is None else after[0],
                after_id=None if after is None else after[1],
                limit=limit,
            )
        )
        if page is None or (page.frontier_ordinal, page.frontier_digest) != (
            frontier.ordinal,
            frontier.digest,
        ):
            raise SessionMoved(session_id)
        yield from page.items
        if not page.more or not page.items:
            return
        last = page.items[-1]
        after = (last.position, last.stable_id)


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
    held: deque[tuple[str, int, ItemFacts]] = deque()
    last_cold: tuple[int, str] | None = None
    after: tuple[int, str] | None = None
    while True:
        page = ask(
            LoadIndexEntries(
                session_id=session_id,
                after_position=None if after is None else after[0],
                after_id=None if after is None else after[1],
                limit=limit,
            )
        )
        if page is None or page.frontier != frontier:
            raise SessionMoved(session_id)
        for entry in page.entries:
            held.append(entry)
            if len(held) > window:
                stable_id, position, facts = held.popleft()
                last_cold = (position, stable_id)
                yield stable_id, facts
        if not page.more or not page.entries:
            break
        stable_id, position, _ = page.entries[-1]
        after = (position, stable_id)
    if not held:
        return
    tail = list(stored_items(ask, session_id, frontier, limit=items_limit, after=last_cold))
    if [item.stable_id for item in tail] != [stable_id for stable_id, _, _ in held]:
        raise SessionMoved(session_id)
    yield from tail
