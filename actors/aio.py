"""relaystore for asyncio: :class:`AsyncEventStore`, whose awaits never block the loop.

An ``AsyncEventStore`` shares its :class:`~relaystore.actors.core.StoreCore` with an
:class:`~relaystore.EventStore` (the same actors, checks, routing, follow pager and
guarantees; :attr:`AsyncEventStore.sync` is that blocking facade) and differs only in
how the loop waits:

* ``await store.ask(message)`` hands the message to its actor with a reply sink that
  resolves an asyncio future through ``loop.call_soon_threadsafe``: no thread waits for
  the answer. Only when the actor's inbox is full (backpressure) does the hand-over wait
  in a worker thread, so the loop never blocks on a full inbox either.
* ``async for event in store.follow(...)`` waits on an :class:`asyncio.Condition` that
  one **commit bridge** per store notifies: a listener of the store's commit watch
  (called in the writer's thread, and on close). A read-only store also has one thread
  that drives the WAL watcher, which publishes other processes' commits into that
  watch. Idle followers cost no threads.
* ``await store.close()`` closes in a worker thread (the writer drains what it
  accepted) and ends every follower.

Guarantees: the same as :class:`~relaystore.EventStore`'s; cancelling an ``ask`` stops
the wait, not the message (it may still take effect, as with :class:`AskTimeout`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar, Unpack

from ..domain.api_events import ApiEvent, ApiEventFilter, RawApiEvent
from ..domain.errors import StoreClosed
from ..domain.messages import LoadApiEvents, LoadRawApiEvents, Request
from .commits import CLOSED_WHILE_WAITING
from .core import StoreCore
from .envelope import ExcInfo
from .facts import StoreFacts
from .pager import FollowPager
from .settings import OpenOptions, ask_timeout
from .store import EventStore

__all__ = ["AsyncEventStore"]

R = TypeVar("R")

_BRIDGE_POLL_SECONDS = 0.5
"""How long the read-only bridge thread waits at a time before it checks for close."""


class _LoopReply:
    """A reply sink that resolves an asyncio future from an actor's thread."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self._loop = loop
        self._future = future

    def set(self, value: Any | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(_answer_future, self._future, value, None)

    def set_exception(self, exc_info: ExcInfo | None = None) -> None:
        error = exc_info[1] if exc_info is not None else RuntimeError("no exception given")
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_answer_future, self._future, None, error)


def _answer_future(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled or timed out: the answer has nowhere to go
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class AsyncEventStore(StoreFacts):
    """An open relaystore for asyncio code; open with ``async with AsyncEventStore.open(...)``."""

    def __init__(self, core: StoreCore, loop: asyncio.AbstractEventLoop) -> None:
        self._core = core
        self._store = EventStore(core)
        self._loop = loop
        self._commits = asyncio.Condition()
        self._latest = self._core.commits.latest
        self._bridge: threading.Thread | None = None
        self._core.commits.subscribe(self._published)
        wal = self._core.wal
        if wal is not None:
            self._bridge = threading.Thread(
                target=self._watch_other_processes,
                name="relaystore-commit-bridge",
                daemon=True,
            )
            self._bridge.start()

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Unpack[OpenOptions]) -> _Opening:
        """Open the store at ``path``; the options (and their defaults) are
        :meth:`EventStore.open`'s.

        Use as ``async with AsyncEventStore.open(path) as store:``, or
        ``store = await AsyncEventStore.open(path)``.
        """
        return _Opening(path, options)

    @property
    def sync(self) -> EventStore:
        """The blocking facade on the same core (for code running in worker threads)."""
        return self._store

    @property
    def latest_seq(self) -> int:
        """The newest committed API event ``seq`` this store has seen."""
        return self._latest

    async def fetch_latest_seq(self) -> int:
        """The newest committed API event ``seq``, read from the store now."""
        page = await self.ask(LoadApiEvents(limit=1))
        self._latest = max(self._latest, page.latest_seq)
        return page.latest_seq

    async def ask(self, message: Request[R], timeout: float | None = None) -> R:
        """Send ``message`` to its actor and await the typed reply (see ``EventStore.ask``)."""
        self._core.check_ask(message, timeout)
        future: asyncio.Future[R] = self._loop.create_future()
        await self._send(message, _LoopReply(self._loop, future))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise ask_timeout(message, timeout) from None

    async def tell(self, message: Request[Any]) -> None:
        """Send ``message`` without waiting for its reply; a failure is logged."""
        self._core.check_tell(message)
        await self._send(message, None)

    async def _send(self, message: Request[Any], reply: _LoopReply | None) -> None:
        """Hand over a checked message; wait in a worker thread, never in the loop."""
        core = self._core
        if not core.send_now(message, reply):  # it would wait: wait in a worker thread
            await asyncio.to_thread(core.send, message, reply)

    async def wait_for(self, seq: int, timeout: float | None = None) -> bool:
        """Wait until an API event with ``seq`` or higher is committed (False on timeout).

        Raises :class:`StoreClosed` when the store closes first.
        """
        core = self._core
        core.check_wait(seq, timeout)
        try:
            async with asyncio.timeout(timeout), self._commits:
                await self._commits.wait_for(lambda: core.closed or self._latest >= seq)
        except TimeoutError:
            return False
        if self._latest >= seq:
            return True
        raise StoreClosed(CLOSED_WHILE_WAITING)

    def follow(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> AsyncIterator[ApiEvent]:
        """Committed API events after ``after_seq`` in ``seq`` order, waiting for more.

        Ends when ``timeout`` passes with nothing new (``None``: never) or the store
        closes. Cancelling the iterating task is clean: nothing is left waiting. A bad
        argument raises :class:`InvalidInput` here, as :meth:`EventStore.follow` does.
        """
        return self._follow(self._core.follow_pager(LoadApiEvents, after_seq, filter, timeout))

    def follow_raw(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> AsyncIterator[RawApiEvent]:
        """What :meth:`follow` yields, each event as its wire bytes (``LoadRawApiEvents``).

        The same events, order, waiting and ending as :meth:`follow`; nothing is decoded.
        """
        pager = self._core.follow_pager(LoadRawApiEvents, after_seq, filter, timeout)
        return self._follow(pager)

    async def _follow(self, pager: FollowPager[Any]) -> AsyncIterator[Any]:
        """The events of the pager's pages, waiting for commits (see the core's pager)."""
        with self._core.following():
            while True:
                try:
                    page = await self.ask(pager.request())
                except StoreClosed:
                    return
                for event in page.events:
                    yield event
                wait = pager.advance(page)
                if wait is None:
                    continue
                try:
                    if not await self.wait_for(wait, pager.timeout):
                        return
                except StoreClosed:
                    return

    async def close(self) -> None:
        """Close the store (the writer finishes what it accepted) and end every follower."""
        if self._core.closed:
            return
        await asyncio.to_thread(self._core.close)  # wakes the loop through the bridge
        if self._bridge is not None:
            await asyncio.to_thread(self._bridge.join, 5)

    async def __aenter__(self) -> AsyncEventStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the commit bridge ---------------------------------------------------------

    def _published(self, latest: int) -> None:
        """Called in the publishing thread after each commit, and once on close."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(self._wake, latest)

    def _wake(self, latest: int) -> None:
        self._latest = max(self._latest, latest)
        self._loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self._commits:
            self._commits.notify_all()

    def _watch_other_processes(self) -> None:
        """The read-only store's bridge: drives the WAL watcher while the store is open."""
        core = self._core
        wal = core.wal
        assert wal is not None
        while not core.closed:
            try:
                wal.wait_for(core.commits.latest + 1, _BRIDGE_POLL_SECONDS)
            except StoreClosed:
                break


class _Opening:
    """``AsyncEventStore.open(...)``: awaitable, and an async context manager."""

    def __init__(self, path: str | os.PathLike[str], options: OpenOptions) -> None:
        self._path = path
        self._options = options
        self._store: AsyncEventStore | None = None

    def __await__(self) -> Any:
        return self._open().__await__()

    async def _open(self) -> AsyncEventStore:
        loop = asyncio.get_running_loop()
        core = await asyncio.to_thread(StoreCore.open, self._path, **self._options)
        return AsyncEventStore(core, loop)

    async def __aenter__(self) -> AsyncEventStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()
