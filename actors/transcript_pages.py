"""Reading a session's stored transcript a page at a time, as one snapshot.

:func:`stored_items` walks ``LoadTranscriptItems`` pages (whole items in the store's
order) and checks every page against the frontier the caller read the session at: pages
read at one frontier belong to one projection. A projector loading its session and
``relaystore show`` both read a long transcript this way, so neither holds it whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from relaystore.domain.materialized import TranscriptItem
from relaystore.domain.reads import DEFAULT_ITEMS_LIMIT, LoadTranscriptItems
from relaystore.domain.relay import RelayCursor

__all__ = ["SessionMoved", "stored_items"]


class SessionMoved(Exception):
    """The session's frontier moved between two pages (or the session went away): what
    was read so far is not one projection. The callers turn it into their own answer."""


def stored_items(
    ask: Callable[[Any], Any],
    session_id: str,
    frontier: RelayCursor,
    *,
    limit: int = DEFAULT_ITEMS_LIMIT,
) -> Iterator[TranscriptItem]:
    """Every stored item of the session, in the store's order, read ``limit`` at a time
    through ``ask``; raises :class:`SessionMoved` when a page was read at another
    frontier than ``frontier``."""
    after: tuple[int, str] | None = None
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
