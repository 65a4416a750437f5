"""Paging: the limits every page shares and the cursor a page hands on.

Owns the page rules that the feed, the transcript, history and usage pages, the command
line and the HTTP routes all follow, stated once:

* **limits**: a page holds :data:`DEFAULT_PAGE_LIMIT` (200) items unless told otherwise;
  an "earlier messages" page :data:`DEFAULT_HISTORY_LIMIT` (128); a whole-items page
  :data:`DEFAULT_ITEMS_LIMIT` (512). Every limit is clamped to
  ``1..=``:data:`MAX_PAGE_LIMIT` (1000) by :func:`clamp_page_limit`: asking for more
  gives the ceiling, not an error.
* **the next cursor** (:func:`next_page_cursor`): the last returned seq, or
  ``max(latest_seq, after_seq)`` for an empty page, so a cursor never moves back and an
  empty filtered page fast-forwards to the newest seq.

Pure: it reads no store and must not; storage, the actors and the routes call it.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "DEFAULT_ITEMS_LIMIT",
    "DEFAULT_PAGE_LIMIT",
    "MAX_PAGE_LIMIT",
    "clamp_page_limit",
    "next_page_cursor",
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
