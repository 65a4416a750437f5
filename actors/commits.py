"""The commit watch: the newest committed ``seq``, and a way to wait for it without polling.

The writer publishes after each commit (a read-only store's WAL watcher publishes what
it sees other processes commit); ``wait_for`` sleeps on a condition until then. Both
facades wait through it: the blocking one in ``wait_for``, the asyncio one through a
listener that wakes its loop (:meth:`CommitWatch.subscribe`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..domain.errors import StoreClosed

__all__ = ["CLOSED_WHILE_WAITING", "CommitWatch"]

logger = logging.getLogger(__name__)

CLOSED_WHILE_WAITING = "the store closed while waiting for a commit"
"""What a wait that the store's close ended raises (as :class:`StoreClosed`)."""


class CommitWatch:
    """The newest committed ``seq``; waiters wake on each advance and on :meth:`close`.

    A waiter woken by :meth:`close` raises :class:`StoreClosed`.
    """

    def __init__(self, latest: int) -> None:
        self._latest = latest
        self._closed = False
        self._changed = threading.Condition()
        self._listeners: list[Callable[[int], None]] = []
        self._waiting = 0

    @property
    def latest(self) -> int:
        """The newest committed ``seq`` seen."""
        return self._latest

    @property
    def waiting(self) -> int:
        """How many threads wait in :meth:`wait_for` now."""
        return self._waiting

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(latest)`` after every advance of ``latest`` and once on close.

        Listeners are few (one per asyncio facade) and live as long as the store.
        """
        with self._changed:
            self._listeners.append(listener)

    def publish(self, latest: int) -> None:
        """Record a commit (called by the writer after each one)."""
        with self._changed:
            if latest <= self._latest:
                return
            self._latest = latest
            self._changed.notify_all()
            listeners = list(self._listeners)
        self._tell(listeners, latest)

    def close(self) -> None:
        """Wake every waiter for good."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
            listeners = list(self._listeners)
        self._tell(listeners, self._latest)

    def wait_for(self, seq: int, timeout: float | None) -> bool:
        """True once ``seq`` is committed; False after ``timeout``; StoreClosed on close."""
        with self._changed:
            self._waiting += 1
            try:
                reached = self._changed.wait_for(
                    lambda: self._closed or self._latest >= seq, timeout
                )
            finally:
                self._waiting -= 1
            if self._latest >= seq:
                return True
            if self._closed:
                raise StoreClosed(CLOSED_WHILE_WAITING)
            return bool(reached)

    @staticmethod
    def _tell(listeners: list[Callable[[int], None]], latest: int) -> None:
        for listener in listeners:
            try:
                listener(latest)
            except Exception:
                logger.exception("a commit listener failed")
