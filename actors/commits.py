"""The commit watch: the newest committed ``seq``, and a way to wait for it without polling.

The writer publishes after each commit (a read-only store's WAL watcher publishes what
it sees other processes commit); ``wait_for`` sleeps on a condition until then. Both
facades wait through it: the blocking one in ``wait_for``, the asyncio one through a
listener that wakes its loop (:meth:`CommitWatch.subscribe`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from ..domain.errors import StoreClosed

__all__ = ["CLOSED_WHILE_WAITING", "CommitWatch"]

logger = logging.getLogger(__name__)

CLOSED_WHILE_WAITING = "the store closed while waiting for a commit"
"""What a wait that the store's close ended raises (as :class:`StoreClosed`)."""


class CommitWatch:
    """The newest committed ``seq``; waiters wake on each advance and on :meth:`close`.

    A waiter woken by :meth:`close` raises :class:`StoreClosed`.

    A waiter holds no lock the publisher takes: it puts a one-shot lock of its own (its
    bell) in a ``deque`` (one C call), checks, and waits on the bell, which the next
    :meth:`publish` or :meth:`close` releases. So a signal handler that runs in the main
    thread while it waits here (Python runs handlers there between any two bytecodes)
    may ask the writer for a commit: the writer publishes without waiting for anything
    the interrupted wait holds. Publishers (the writer; in a read-only store, the
    waiters' WAL watcher) take :attr:`_publishing`, reentrant so that a handler's own
    wait may publish while the wait it interrupted was publishing.
    """

    def __init__(self, latest: int) -> None:
        self._latest = latest
        self._closed = False
        self._publishing = threading.RLock()
        self._bells: deque[threading.Lock] = deque()
        self._listeners: list[Callable[[int], None]] = []

    @property
    def latest(self) -> int:
        """The newest committed ``seq`` seen."""
        return self._latest

    @property
    def waiting(self) -> int:
        """How many threads wait in :meth:`wait_for` now."""
        return len(self._bells)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(latest)`` after every advance of ``latest`` and once on close.

        Listeners are few (one per asyncio facade) and live as long as the store.
        """
        self._listeners.append(listener)  # one C call: no lock a handler could meet

    def publish(self, latest: int) -> None:
        """Record a commit (called by the writer after each one)."""
        with self._publishing:
            if latest <= self._latest:
                return
            self._latest = latest
        self._ring()
        self._tell(list(self._listeners), latest)

    def close(self) -> None:
        """Wake every waiter for good."""
        self._closed = True
        self._ring()
        self._tell(list(self._listeners), self._latest)

    def wait_for(self, seq: int, timeout: float | None) -> bool:
        """True once ``seq`` is committed; False after ``timeout``; StoreClosed on close."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            bell = threading.Lock()
            bell.acquire()
            self._bells.append(bell)  # first the bell, then the check: no advance is missed
            if self._latest >= seq:
                self._forget(bell)
                return True
            if self._closed:
                self._forget(bell)
                raise StoreClosed(CLOSED_WHILE_WAITING)
            if deadline is None:
                bell.acquire()
            elif not bell.acquire(timeout=max(0.0, deadline - time.monotonic())):
                self._forget(bell)
                if self._latest >= seq:
                    return True
                if self._closed:
                    raise StoreClosed(CLOSED_WHILE_WAITING)
                return False

    def _forget(self, bell: threading.Lock) -> None:
        """Take back a bell nobody rang (a ring may have taken it meanwhile)."""
        with contextlib.suppress(ValueError):
            self._bells.remove(bell)

    def _ring(self) -> None:
        """Release every bell waiting now (each is taken out once, by one ring)."""
        while True:
            try:
                bell = self._bells.popleft()
            except IndexError:
                return
            bell.release()

    @staticmethod
    def _tell(listeners: list[Callable[[int], None]], latest: int) -> None:
        for listener in listeners:
            try:
                listener(latest)
            except Exception:
                logger.exception("a commit listener failed")
