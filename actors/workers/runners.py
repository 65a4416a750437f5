"""Sessions projected in worker processes without a thread each.

With ``projection="process"`` a session's projection lives in a worker process (see
:mod:`~relaystore.actors.workers.pool`), so a live session needs no thread of its own in
the embedding process: it is a small entry (:class:`_LiveSession`: the messages waiting for
it and the :class:`~relaystore.actors.workers.proxy.RemoteProjection` that converses
with its worker). :data:`RUNNERS_PER_WORKER` runner threads per worker take the ready
sessions of their worker in turn, one message each: while one waits for the writer to
commit a session's last page, the other converses with the worker for another session.
So the threads this costs follow the workers, not the sessions.

Guarantees:

* A session's messages are projected one at a time, in the order they were handed over:
  a session is run by one runner at a time and is ready again only once its message was
  answered.
* Every message handed over is answered (its value or its error), also when the store
  closes: :meth:`SessionRunners.stop_all` takes no more and waits until the runners have
  answered every message they hold.
* A session holds at most ``capacity`` waiting messages: a full one blocks the sender
  (``wait``) or takes nothing (see :meth:`SessionRunners.take`).
* At most ``limit`` sessions are live (their projection active in their worker): a
  session made live parks the least recently used idle one (its projection stays in
  its worker for its next message, see :mod:`~relaystore.actors.workers.pool`), any
  idle for ``idle_seconds`` is parked too, and while every live session is busy the
  sender of a message to another waits (or, not waiting, takes nothing), so a flood of
  tells to new sessions cannot grow the live set. :meth:`SessionRunners.retire` parks
  one once it finished what it was sent (before ``DeleteSession`` or
  ``SeedProjection``, after which the store has the pool forget it).

Owns the entries, the ready queues and the runner threads. Must not: converse with a
worker (the proxy does), start processes (the pool does) or route messages (the core
does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from ...domain.errors import StoreClosed
from ..envelope import Envelope
from .proxy import RemoteProjection

__all__ = ["RUNNERS_PER_WORKER", "SessionRunners"]

logger = logging.getLogger(__name__)

RUNNERS_PER_WORKER = 2
"""Runner threads per worker process: one converses with the worker while the other
waits for the writer to commit the page its session's message ended with."""


class _LiveSession:
    """A live session: its waiting messages (at most ``capacity``) and its proxy."""

    __slots__ = ("proxy", "running", "used", "waiting")

    def __init__(self, proxy: RemoteProjection, now: float) -> None:
        self.proxy = proxy
        self.waiting: deque[Envelope] = deque()
        self.running = False
        """A runner holds one of its messages."""
        self.used = now
        """When a message was last handed over or answered (for idling)."""

    @property
    def idle(self) -> bool:
        return not self.running and not self.waiting


class SessionRunners:
    """The live sessions of a store projecting in worker processes, run by a few threads
    (see the module doc)."""

    def __init__(
        self,
        start: Callable[[str], RemoteProjection],
        *,
        workers: int,
        limit: int,
        idle_seconds: float,
        capacity: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._start = start
        """A session's proxy, attached to its worker (the one holding its projection)."""
        self._limit = limit
        self._idle = idle_seconds
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        """Notified when a message was answered or taken (room, an idle session)."""
        self._work = [threading.Condition(self._lock) for _ in range(workers)]
        """Per worker, notified when one of its sessions is ready (one runner wakes)."""
        self._entries: OrderedDict[str, _LiveSession] = OrderedDict()
        """Live sessions, least recently used first."""
        self._ready: list[deque[str]] = [deque() for _ in range(workers)]
        """Per worker, the sessions with a waiting message and no runner, in turn."""
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._stopped = False
        self.started = 0
        """Sessions made live (a first message, or one after its entry was parked)."""

    def __len__(self) -> int:
        return len(self._entries)

    def is_alive(self) -> bool:
        """Whether messages handed over may still be answered (until :meth:`stop_all`
        finished: it answers every one first)."""
        return not self._stopped

    def take(self, session_id: str, envelope: Envelope, *, wait: bool) -> SessionRunners | None:
        """Hand ``envelope`` to the session (made live if needed): waits while its
        queue is full, or while it is not live and every one of the ``limit`` live
        sessions is busy, when ``wait``; else takes nothing and returns None. Returns
        what :meth:`is_alive` tells a waiting asker.

        Raises :class:`StoreClosed` once :meth:`stop_all` began.
        """
        parked: list[RemoteProjection] = []
        try:
            with self._cond:
                while True:
                    if self._closed:
                        raise StoreClosed()
                    now = self._clock()
                    entry = self._entries.get(session_id)
                    if entry is None:
                        parked += self._victims(now, room=1)
                        if len(self._entries) >= self._limit:  # every live one is busy
                            if not wait:
                                return None
                            self._cond.wait()
                            continue
                        entry = _LiveSession(self._start(session_id), now)
                        self._entries[session_id] = entry
                        self.started += 1
                        if not self._threads:
                            self._spawn()
                    if len(entry.waiting) < self._capacity:
                        break
                    if not wait:
                        return None
                    self._cond.wait()
                entry.waiting.append(envelope)
                entry.used = now
                self._entries.move_to_end(session_id)
                if not entry.running and len(entry.waiting) == 1:
                    index = entry.proxy.worker_index
                    self._ready[index].append(session_id)
                    self._work[index].notify()
                parked += self._victims(now)
            return self
        finally:
            for proxy in parked:
                proxy.close()

    def retire(self, session_id: str) -> None:
        """Park the session once it answered what it was sent (a message being handed
        over first goes in)."""
        with self._cond:
            self._cond.wait_for(
                lambda: (entry := self._entries.get(session_id)) is None or entry.idle
            )
            entry = self._entries.pop(session_id, None)
        if entry is not None:
            entry.proxy.close()

    def stop_all(self) -> None:
        """Take no more messages, answer every one held, stop the runners and park every
        session (the store is closing)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            for work in self._work:
                work.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        with self._cond:
            self._stopped = True
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.proxy.close()

    def _spawn(self) -> None:
        """Start the runners (with the first live session; the lock held)."""
        for index in range(len(self._ready)):
            for n in range(RUNNERS_PER_WORKER):
                thread = threading.Thread(
                    target=self._run,
                    args=(index,),
                    name=f"relaystore-runner-{index}.{n}",
                    daemon=True,
                )
                thread.start()
                self._threads.append(thread)

    def _victims(self, now: float, *, room: int = 0) -> list[RemoteProjection]:
        """Take out the idle sessions to park: idle too long, then the least recently
        used idle ones while past the limit, less ``room`` for sessions about to be made
        live (the lock held)."""
        doomed: list[str] = []
        over = len(self._entries) + room - self._limit
        for session_id, entry in self._entries.items():
            if not entry.idle:
                continue
            if now - entry.used >= self._idle or over > 0:
                doomed.append(session_id)
                over -= 1
            elif over <= 0:
                break  # in use order: every later entry was used more recently
        return [self._entries.pop(session_id).proxy for session_id in doomed]

    def _run(self, index: int) -> None:
        """A runner of worker ``index``: a ready session's next message at a time, until
        the store closes and nothing is ready."""
        ready, work = self._ready[index], self._work[index]
        while True:
            with self._lock:
                while not ready:
                    if self._closed:
                        return
                    work.wait()
                session_id = ready.popleft()
                entry = self._entries[session_id]
                entry.running = True
                envelope = entry.waiting.popleft()
                self._cond.notify_all()  # room in the session's queue
            try:
                value = entry.proxy.handle(envelope.message)
            except BaseException as exc:  # noqa: BLE001 - answered: a runner never dies
                envelope.answer(None, exc)
            else:
                envelope.answer(value, None)
            with self._lock:
                entry.running = False
                entry.used = self._clock()
                if entry.waiting:
                    ready.append(session_id)
                    work.notify()
                self._cond.notify_all()
