"""The follow pager: which page a follow asks for next, and what it waits for.

Owns :class:`FollowPager`, the cursor both facades' ``follow`` and ``follow_raw`` move
on ``page.next_after_seq``, and the check of a follow's arguments
(:meth:`FollowPager.checked`).

Must not: ask, wait or iterate (sans I/O): the facade asks for the request, yields the
page's events and waits for the commit the pager names.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from ..domain.api_events import ApiEventFilter
from ..domain.messages import LoadApiEvents, LoadRawApiEvents
from ..domain.paging import MAX_PAGE_LIMIT
from ..domain.validation import validate_message
from .settings import check_timeout

__all__ = ["FollowPager"]

P = TypeVar("P", LoadApiEvents, LoadRawApiEvents)


class FollowPager(Generic[P]):
    """The cursor of a follow: which page to ask for next, and what to wait for.

    Sans I/O: the facade asks for :meth:`request`, yields the page's events, and
    :meth:`advance` tells it to read on at once (``None``: more are committed already)
    or which ``seq`` to wait for. The cursor is the page's ``next_after_seq``.
    """

    def __init__(self, request: P, timeout: float | None) -> None:
        self._request: P = request
        self._cursor = request.after_seq or 0
        self.timeout = timeout

    @classmethod
    def checked(
        cls, kind: type[P], after_seq: object, filter: object, timeout: object
    ) -> FollowPager[P]:
        """A follow's pager, its arguments checked (``InvalidInput`` naming what is wrong)."""
        request = kind(
            filter=filter if filter is not None else ApiEventFilter(),  # type: ignore[arg-type]
            after_seq=after_seq,  # type: ignore[arg-type]
            limit=MAX_PAGE_LIMIT,
        )
        validate_message(request)
        check_timeout(timeout)
        return cls(request, timeout)  # type: ignore[arg-type]

    def request(self) -> P:
        """The next page's request."""
        following: P = msgspec.structs.replace(self._request, after_seq=self._cursor)
        return following

    def advance(self, page: Any) -> int | None:
        """Move past ``page``; ``None`` to read on at once, else the ``seq`` to wait for."""
        self._cursor = page.next_after_seq
        if page.events and page.events[-1].seq < page.latest_seq:
            return None
        return self._cursor + 1
