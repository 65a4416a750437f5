"""Paging: the limits every page shares and the cursor a page hands on.

Owns the page rules that the feed, the transcript, history and usage pages, the command
line and the HTTP routes all follow, stated once:

* **limits**: a page holds :data:`DEFAULT_PAGE_LIMIT` (200) items unless told otherwise;
  an "earlier messages" page :data:`DEFAULT_HISTORY_LIMIT` (128); a whole-items page
  :data:`DEFAULT_ITEMS_LIMIT` (512). Every limit is clamped to
  ``1..=``:data:`MAX_PAGE_LIMIT` (1000) by :func:`clamp_page_limit`: asking for more
  gives the ceiling, not an error.
* **the cursor asked for**: 0 or more (:func:`check_after_seq`); none means "from now",
  the newest seq (:func:`feed_cursor`); a cursor past the newest event the store ever
  wrote is refused (:func:`check_cursor`: the HTTP feed answers 400, ``relaystore
  events`` exits 1), as its reader is talking to another store.
* **the next cursor** (:func:`next_page_cursor`): the last returned seq, or
  ``max(latest_seq, after_seq)`` for an empty page, so a cursor never moves back and an
  empty filtered page fast-forwards to the newest seq. The feed and usage pages follow it
  as it is; a transcript page (:func:`transcript_page_cursor`) hands on its last seq only
  while more matching items follow, and a ``finished_only`` page stops just before the
  earliest agent item still open.

Pure: it reads no store and must not; storage, the actors and the routes call it.
"""

from __future__ import annotations

from .errors import InvalidInput

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_ITEMS_LIMIT",
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "check_after_seq",
    "check_cursor",
    "clamp_page_limit",
    "feed_cursor",
    "next_page_cursor",
    "transcript_page_cursor",
]

DEFAULT_PAGE_LIMIT = 200
"""Items (or turns) a feed, transcript or usage page holds when the caller names no limit."""

MAX_PAGE_LIMIT = 1000
"""The most a page holds; a larger limit gives this many."""

DEFAULT_HISTORY_LIMIT = 128
"""Items an "earlier messages" page holds when the caller names no limit."""

DEFAULT_ITEMS_LIMIT = 512
"""How many whole items a ``LoadTranscriptItems`` page holds unless told."""


def clamp_page_limit(limit: int) -> int:
    """``limit`` clamped to ``1..=MAX_PAGE_LIMIT`` (0 or less gives 1)."""
    return max(1, min(limit, MAX_PAGE_LIMIT))


def next_page_cursor(after_seq: int, latest_seq: int, last_seq: int | None) -> int:
    """The ``next_after_seq`` of a page that returned items up to ``last_seq`` (``None``:
    none): that seq, else ``max(latest_seq, after_seq)``, never behind ``after_seq``."""
    return last_seq if last_seq is not None else max(latest_seq, after_seq)


def transcript_page_cursor(
    after_seq: int, latest_seq: int, last_seq: int | None, *, full: bool, barrier: int | None = None
) -> int:
    """The ``next_after_seq`` of a transcript page that returned items up to ``last_seq``
    (``None``: none).

    ``full``: more matching items follow the page (it stopped at its limit); then the
    cursor is the last returned seq. Otherwise, on a ``finished_only`` page with an open
    agent item at seq ``barrier``, the cursor moves through the filtered rows to just
    before it, so that item is delivered once it finishes; with none open it
    fast-forwards as :func:`next_page_cursor` does for an empty page. It never moves back
    from ``after_seq``.
    """
    if full and last_seq is not None:
        return last_seq
    if barrier is not None:
        return max(after_seq, barrier - 1)
    return next_page_cursor(after_seq, latest_seq, None)


def check_after_seq(after_seq: int | None) -> None:
    """Refuse a negative cursor (``None``, "from now", is accepted)."""
    if after_seq is not None and after_seq < 0:
        raise InvalidInput(f"after_seq must be 0 or more, not {after_seq}")


def feed_cursor(after_seq: int | None, latest_seq: int) -> int:
    """The cursor a feed page reads after: ``after_seq``, or ``latest_seq`` ("from now")
    when none is given."""
    return latest_seq if after_seq is None else after_seq


def check_cursor(after_seq: int, latest_seq: int) -> None:
    """Refuse a feed cursor past the store's newest event: a reader that asks for what
    comes after an event the store never wrote is talking to another store (the HTTP
    feed answers 400, ``relaystore events`` exits 1)."""
    if after_seq > latest_seq:
        raise InvalidInput(
            f"cursor {after_seq} is ahead of this database's newest event ({latest_seq})"
        )
