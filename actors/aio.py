"""relaystore for asyncio: :class:`AsyncEventStore`, whose awaits never block the loop.

An ``AsyncEventStore`` wraps an :class:`~relaystore.EventStore` (the same actors, the
same guarantees) and differs only in how the loop waits:

* ``await store.ask(message)`` hands the message to its actor with a reply sink that
  resolves an asyncio future through ``loop.call_soon_threadsafe``: no thread waits for
  the answer. Only when the actor's inbox is full (backpressure) does the hand-over wait
  in a worker thread, so the loop never blocks on a full inbox either.
* ``async for event in store.follow(...)`` waits on an :class:`asyncio.Condition` that
  one **commit bridge** per store notifies. With a writable store the bridge is the
  writer's own commit callback (no thread at all); a read-only store has one thread
  that watches the file for other processes' commits. Idle followers cost no threads.
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
from typing import Any, TypeVar

import msgspec

from relaystore.actors.store import EventStore
from relaystore.actors.told import ExcInfo
from relaystore.domain.api_events import (
    ApiEvent,
    ApiEventFilter,
    ApiEventPage,
    RawApiEvent,
    RawApiEventPage,
)
from relaystore.domain.errors import AskTimeout, InvalidInput, StoreClosed
from relaystore.domain.messages import (
    DeleteSession,
    LoadApiEvents,
    LoadRawApiEvents,
    Request,
    SeedProjection,
)
from relaystore.domain.reports import StoreMetrics
from relaystore.domain.validation import validate_message
from relaystore.storage.paging import MAX_PAGE_LIMIT

__all__ = ["AsyncEventStore"]

R = TypeVar("R")


class _LoopReply:
    """A reply sink that resolves an asyncio future from an actor's thread."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> None:
        self._loop = loop
        self._future = future

    def set(self, value: Any | None = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            self._loop.call_soon_threadsafe(_resolve, self._future, value, None)

    def set_exception(self, exc_info: ExcInfo | None = None) -> None:
        error = exc_info[1] if exc_info is not None else RuntimeError("no exception given")
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(_resolve, self._future, None, error)


def _resolve(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled or timed out: the answer has nowhere to go
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)


class AsyncEventStore:
    """An open relaystore for asyncio code; open with ``async with AsyncEventStore.open(...)``."""

    def __init__(self, store: EventStore, loop: asyncio.AbstractEventLoop) -> None:
        self._store = store
        self._loop = loop
        self._commits = asyncio.Condition()
        self._latest = store.latest_seq
        self._closed = False
        self._bridge: threading.Thread | None = None
        if store.read_only:
            self._bridge = threading.Thread(
                target=self._watch_other_processes, name="relaystore-commit-bridge", daemon=True
            )
            self._bridge.start()
        else:
            store._on_commit(self._published)

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Any) -> _Opening:
        """Open the store at ``path`` (the options of :meth:`EventStore.open`).

        Use as ``async with AsyncEventStore.open(path) as store:``, or
        ``store = await AsyncEventStore.open(path)``.
        """
        return _Opening(path, options)

    @property
    def sync(self) -> EventStore:
        """The blocking facade underneath (for code running in worker threads)."""
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
        if self._closed:
            raise StoreClosed("the store is closed; open it again to send messages")
        validate_message(message)
        if timeout is not None and (type(timeout) not in (int, float) or not 0 <= timeout < 1e12):
            raise InvalidInput("timeout must be None or a finite number of seconds >= 0")
        future: asyncio.Future[R] = self._loop.create_future()
        reply = _LoopReply(self._loop, future)
        await self._send(message, reply)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise AskTimeout(
                f"{type(message).__name__} got no reply within {timeout} s; it was handed "
                "over and may still take effect"
            ) from None

    async def tell(self, message: Request[Any]) -> None:
        """Send ``message`` without waiting for its reply; a failure is logged."""
        if self._closed:
            raise StoreClosed("the store is closed; open it again to send messages")
        validate_message(message)
        await self._send(message, None)

    async def _send(self, message: Request[Any], reply: _LoopReply | None) -> None:
        store = self._store
        if isinstance(message, DeleteSession | SeedProjection):  # may wait for a projector
            await asyncio.to_thread(store._send, message, reply)
            return
        actor = store._route(message)
        if actor.actor_inbox.full():  # type: ignore[attr-defined]
            # Backpressure: wait for room in a worker thread, never in the loop.
            await asyncio.to_thread(store._send, message, reply, actor)
        else:
            store._send(message, reply, actor)

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures (see :meth:`EventStore.metrics`); never blocks."""
        return self._store.metrics()

    async def wait_for(self, seq: int, timeout: float | None = None) -> bool:
        """Wait until an API event with ``seq`` or higher is committed (False on timeout)."""
        try:
            async with asyncio.timeout(timeout), self._commits:
                await self._commits.wait_for(lambda: self._closed or self._latest >= seq)
        except TimeoutError:
            return False
        if self._latest >= seq:
            return True
        raise StoreClosed("the store closed while waiting for a commit")

    def follow(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> AsyncIterator[ApiEvent]:
        """Committed API events after ``after_seq`` in ``seq`` order, waiting for more.

        Ends when ``timeout`` passes with nothing new (``None``: never) or the store
        closes. Cancelling the iterating task is clean: nothing is left waiting.
        """
        return self._follow(LoadApiEvents, after_seq, filter, timeout)

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
        return self._follow(LoadRawApiEvents, after_seq, filter, timeout)

    async def _follow(
        self,
        kind: type[LoadApiEvents] | type[LoadRawApiEvents],
        after_seq: int,
        filter: ApiEventFilter | None,
        timeout: float | None,
    ) -> AsyncIterator[Any]:
        """The events of ``kind``'s pages after ``after_seq``, waiting for commits."""
        request = kind(
            filter=filter if filter is not None else ApiEventFilter(),
            after_seq=after_seq,
            limit=MAX_PAGE_LIMIT,
        )
        validate_message(request)
        with self._store._following():
            cursor = request.after_seq or 0
            while True:
                following: Request[Any] = msgspec.structs.replace(request, after_seq=cursor)
                try:
                    page: ApiEventPage | RawApiEventPage = await self.ask(following)
                except StoreClosed:
                    return
                for event in page.events:
                    yield event
                cursor = max(cursor, page.events[-1].seq if page.events else page.latest_seq)
                if page.events and page.events[-1].seq < page.latest_seq:
                    continue
                try:
                    if not await self.wait_for(cursor + 1, timeout):
                        return
                except StoreClosed:
                    return

    async def close(self) -> None:
        """Close the store (the writer finishes what it accepted) and end every follower."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._store.close)
        async with self._commits:
            self._commits.notify_all()
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
        """Called in the writer's thread after each commit."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake, latest)

    def _wake(self, latest: int) -> None:
        if latest > self._latest:
            self._latest = latest
            self._loop.create_task(self._notify())

    async def _notify(self) -> None:
        async with self._commits:
            self._commits.notify_all()

    def _watch_other_processes(self) -> None:
        """The read-only store's bridge: one thread watching for other processes' commits."""
        latest = self._store.latest_seq
        while not self._closed:
            try:
                if self._store.wait_for(latest + 1, timeout=0.5):
                    latest = self._store.latest_seq
                    self._published(latest)
            except StoreClosed:
                break


class _Opening:
    """``AsyncEventStore.open(...)``: awaitable, and an async context manager."""

    def __init__(self, path: str | os.PathLike[str], options: dict[str, Any]) -> None:
        self._path = path
        self._options = options
        self._store: AsyncEventStore | None = None

    def __await__(self) -> Any:
        return self._open().__await__()

    async def _open(self) -> AsyncEventStore:
        loop = asyncio.get_running_loop()
        store = await asyncio.to_thread(EventStore.open, self._path, **self._options)
        return AsyncEventStore(store, loop)

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
