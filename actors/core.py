"""The facade core: what :class:`~relaystore.EventStore` and
:class:`~relaystore.aio.AsyncEventStore` share (in the spirit of httpx's ``BaseClient``).

:class:`StoreCore` holds an open store's actors and does two things for both facades:

* **routing** a checked message to the actor that owns it (which one, the table in
  :mod:`~relaystore.actors.routing` says), and handing it over (a session's messages
  to its projector actor through the :class:`~relaystore.actors.live.LiveProjectors`,
  or with ``projection="process"`` to its entry in the
  :class:`~relaystore.actors.workers.runners.SessionRunners`);
* **waiting** for a blocking reply (with the dead-actor check) and for a commit (the
  :class:`~relaystore.actors.commits.CommitWatch`, or in a read-only store the
  :class:`~relaystore.actors.wal_watch.WalWatcher`).

It starts the store's parts in order and stops them in the reverse order, and each
part keeps its own rules: the options and checks in :mod:`~relaystore.actors.settings`;
the writer and the readers open their own connections (``WriterActor.open``,
``ReaderActor.open``); the projectors' loads and page commits in
:mod:`~relaystore.actors.projector_wiring` (with ``projection="process"`` on the store's
:class:`~relaystore.actors.workers.pool.WorkerPool`); the follow pager in
:mod:`~relaystore.actors.pager`; the figures in :mod:`~relaystore.actors.metrics`; the
exit hook and the fork check in :mod:`~relaystore.actors.exit_hook`; the maintenance
requests in a writable store's :class:`~relaystore.actors.maintenance.desk.MaintenanceDesk`;
the main thread's hand-overs in its :class:`~relaystore.actors.courier.Courier`.

The two facades compose one core and differ only where blocking and awaiting differ:
``EventStore`` waits in the calling thread, ``AsyncEventStore`` resolves a future from
the actor's thread and hands over in a worker thread only when that would block.

Must not: open a storage connection (the actors do) or hold a rule another module
states; it calls that module instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from itertools import count
from typing import Any, TypeVar, Unpack

import pykka
from pykka import ActorDeadError, ActorRef

from ..domain.errors import InvalidInput, StoreClosed
from ..domain.messages import DeleteSession, LoadApiEvents, LoadRawApiEvents, SeedProjection
from ..domain.reports import StoreMetrics
from .commits import CommitWatch
from .courier import Courier
from .envelope import Answering, Envelope, OneShotReply, Reply, answers_here
from .exit_hook import OwningProcess
from .inbox import inbox_of
from .live import LiveProjectors
from .maintenance.desk import MaintenanceDesk
from .metrics import Followers, StoreReadings, WriterStats, store_metrics
from .pager import FollowPager
from .projector_wiring import ProjectorWiring
from .reader import ReaderActor, ReaderDesk
from .routing import Owner, owner_of
from .settings import (
    OpenOptions,
    Settings,
    ask_timeout,
    check_message,
    check_seq,
    check_timeout,
)
from .wal_watch import WalWatcher
from .workers.pool import WorkerPool
from .workers.runners import SessionRunners
from .writer import WriterActor
from .writer_pen import WriterPen

__all__ = ["CLOSED_BEFORE_ANSWER", "StoreCore"]

logger = logging.getLogger(__name__)

P = TypeVar("P", LoadApiEvents, LoadRawApiEvents)

CLOSED_BEFORE_ANSWER = "the store closed before answering"
"""What a blocking ask raises (as :class:`StoreClosed`) when its actor stopped first."""

_DEAD_CHECK_SECONDS = 0.5  # how often a blocking ask checks that its actor is alive


class StoreCore:
    """An open store's actors, routed to and waited on for both facades (see the module)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Unpack[OpenOptions]) -> StoreCore:
        """Check the options (:meth:`Settings.check`; :meth:`EventStore.open` documents
        them and their defaults) and open the store: what both facades start from."""
        return cls(Settings.check(path, **options))

    def __init__(self, settings: Settings) -> None:
        self.path = settings.path
        self.read_only = settings.read_only
        self.relay_log = settings.relay_log
        self._closed = False
        self._owner = OwningProcess(self.close)
        """The process that opened the store: the only one its actors and workers serve."""
        self._closing = threading.Lock()  # taken once, by the first close, never released
        self._workers = (
            WorkerPool(hold_unknown=settings.relay_log, limit=settings.max_projectors)
            if settings.projection == "process" and not settings.read_only
            else None
        )
        wiring = ProjectorWiring(
            ask=self.ask_blocking,
            ask_writer=self._ask_writer,
            workers=self._workers,
            relay_log=settings.relay_log,
            capacity=settings.capacity,
        )
        self._wiring = wiring
        self._projectors: LiveProjectors | SessionRunners
        if self._workers is not None:
            self._projectors = SessionRunners(
                wiring.remote,
                workers=len(self._workers),
                limit=settings.max_projectors,
                idle_seconds=settings.projector_idle_seconds,
                capacity=settings.capacity,
            )
        else:
            self._projectors = LiveProjectors(
                wiring.start,
                limit=settings.max_projectors,
                idle_seconds=settings.projector_idle_seconds,
            )
        self.writer: ActorRef[WriterActor] | None = None
        self._pen: WriterPen | None = None  # the fast path (see ask_blocking)
        self._readers: list[ActorRef[ReaderActor]] = []
        self._desks: list[ReaderDesk] = []  # the read fast path (see ask_blocking)
        self._next_reader = count()
        self._stats = WriterStats()
        self._followers = Followers()
        self._wal: WalWatcher | None = None
        self._readings: StoreReadings | None = None
        """A read-only store's figures read from the store (another process writes it)."""
        self._desk: MaintenanceDesk | None = None
        started: list[ActorRef[Any]] = []
        self._courier = Courier("relaystore-courier")
        try:
            if not settings.read_only:
                opened = WriterActor.open(
                    settings.path,
                    synchronous=settings.synchronous,
                    capacity=settings.capacity,
                    stats=self._stats,
                    max_batch=settings.max_batch,
                )
                self.commits = opened.commits
                self.store_id = opened.store_id
                self.writer = opened.ref
                self._pen = opened.pen
                started.append(self.writer)
            for _ in range(settings.readers):
                identify = settings.read_only and not self._readers
                opened_reader = ReaderActor.open(
                    settings.path, capacity=settings.capacity, identify=identify
                )
                if opened_reader.store_id is not None:
                    self.store_id = opened_reader.store_id
                started.append(opened_reader.ref)
                self._readers.append(opened_reader.ref)
                self._desks.append(opened_reader.desk)
            if settings.read_only:
                self.commits = CommitWatch(self._read_latest())
                self._wal = WalWatcher(settings.path, self.commits, self._read_latest)
                self._readings = StoreReadings.open(settings.path)
            else:
                self._desk = MaintenanceDesk(self)
                self._desk.start()
                opened.take_requests()
        except BaseException:
            for ref in started:
                _stop(ref)
            self._courier.close()
            raise
        self._owner.register()
        logger.info(
            "opened %s%s at seq %d",
            settings.path,
            " read-only" if settings.read_only else "",
            self.commits.latest,
        )

    # -- checks --------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` began."""
        return self._closed

    def check_open(self) -> None:
        """Raise :class:`StoreClosed` after :meth:`close`, or in a process forked from
        the one that opened the store (:meth:`check_process`)."""
        self.check_process()
        if self._closed:
            raise StoreClosed()

    def check_process(self) -> None:
        """Raise :class:`StoreClosed` in a process forked after the store opened: its
        actors are threads of the parent process, which the child does not have."""
        self._owner.check()

    @staticmethod
    def check_message(message: object) -> None:
        """Raise :class:`InvalidInput` unless ``message`` is a well-formed public message
        (:func:`~relaystore.actors.settings.check_message`)."""
        check_message(message)

    def check_ask(self, message: object, timeout: object) -> None:
        """Every check of ``ask``: open, the message, the timeout (in that order)."""
        self.check_open()
        check_message(message)
        check_timeout(timeout)

    def check_tell(self, message: object) -> None:
        """Every check of ``tell``: open, the message."""
        self.check_open()
        check_message(message)

    def check_wait(self, seq: object, timeout: object) -> None:
        """Every check of ``wait_for``: open, ``seq`` an int >= 0, the timeout."""
        self.check_open()
        check_seq(seq)
        check_timeout(timeout)

    def follow_pager(
        self,
        kind: type[P],
        after_seq: object,
        filter: object,
        timeout: object,
    ) -> FollowPager[P]:
        """A checked follow's pager (``InvalidInput`` naming what is wrong)."""
        pager = FollowPager.checked(kind, after_seq, filter, timeout)
        self.check_process()
        return pager

    # -- routing -------------------------------------------------------------------

    @staticmethod
    def routing_may_block(message: object) -> bool:
        """Whether :meth:`send` may wait before it hands over (it retires the session's
        projector first)."""
        return isinstance(message, DeleteSession | SeedProjection)

    def _route(self, message: Any, owner: Owner) -> ActorRef[Any]:
        """The actor that answers a checked message of ``owner``
        (:func:`~relaystore.actors.routing.owner_of`) that no projector takes: a reader,
        else the writer (:meth:`_hand_over_here` hands a projector's message to the
        session's projector)."""
        if owner == "reader":
            return self._reader()
        if self.writer is None:
            raise InvalidInput(
                f"{type(message).__name__} needs the writer, but the store was opened read_only"
            )
        if isinstance(message, DeleteSession | SeedProjection):  # see routing_may_block
            # The session's projector holds its projection in memory: retire it first,
            # so the session's next event starts from what the store then holds.
            self._projectors.retire(message.session_id)
            if self._workers is not None:  # nor may a worker keep it parked
                self._workers.forget(message.session_id)
        return self.writer

    @staticmethod
    def deliver(ref: ActorRef[Any], envelope: Envelope) -> None:
        """Hand ``envelope`` to ``ref``; blocks while its inbox is full."""
        try:
            ref.tell(envelope)
        except ActorDeadError as exc:
            raise StoreClosed("the store's actors have stopped") from exc

    def send(self, message: Any, reply: Reply | None) -> Answering:
        """Route and hand over ``message`` with its reply sink (waiting for room in a
        full inbox); return what answers it."""
        ref = self._hand_over(message, Envelope(message, reply), wait=True)
        assert ref is not None  # waiting for room, it always hands over
        return ref

    def send_now(self, message: Any, reply: Reply | None) -> bool:
        """Route and hand over ``message`` if that does not wait (the actor's inbox has
        room, and routing retires no projector); False: nothing was handed over."""
        if self.routing_may_block(message):
            return False
        return self._hand_over(message, Envelope(message, reply), wait=False) is not None

    def _hand_over(self, message: Any, envelope: Envelope, *, wait: bool) -> Answering | None:
        """Hand ``envelope`` to what owns ``message`` (None: its inbox is full and not
        ``wait``). A session's projector takes its message even if it is stopped for
        room or idles out meanwhile (see :meth:`LiveProjectors.take`,
        :meth:`SessionRunners.take`). In the main thread the courier does it (see
        :mod:`~relaystore.actors.courier`: a signal handler may hand over in its turn)."""
        return self._courier.run(lambda: self._hand_over_here(message, envelope, wait=wait))

    def _hand_over_here(self, message: Any, envelope: Envelope, *, wait: bool) -> Answering | None:
        owner = owner_of(message)
        if owner == "projector" and self.writer is not None:
            self.check_open()
            return self._projectors.take(message.session_id, envelope, wait=wait)
        ref = self._route(message, owner)
        if not wait and inbox_of(ref).full():
            return None
        self.deliver(ref, envelope)
        return ref

    # -- blocking waits ------------------------------------------------------------

    def wait_reply(
        self,
        reply: OneShotReply,
        timeout: float | None,
        actor: Answering | None,
        message: object,
    ) -> Any:
        """Wait for ``reply``: raise AskTimeout past ``timeout``, StoreClosed when
        ``actor`` dies first (checked every ``_DEAD_CHECK_SECONDS``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = _DEAD_CHECK_SECONDS
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                return reply.get(timeout=wait)
            except ActorDeadError as exc:
                raise StoreClosed(CLOSED_BEFORE_ANSWER) from exc
            except pykka.Timeout:
                if actor is not None and not actor.is_alive():
                    raise StoreClosed(CLOSED_BEFORE_ANSWER) from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise ask_timeout(message, timeout) from None

    def ask_blocking(self, message: Any, timeout: float | None = None) -> Any:
        """Hand over a checked (or internal) message and wait for its answer here; asked
        without a timeout from a thread other than the main one, a read is answered in
        this thread by an idle reader's desk (``ReaderDesk.read_now``) and a writer
        message runs in this thread if the writer is idle (``WriterPen.write_now``)."""
        owner = owner_of(message)
        if timeout is None and owner == "reader" and answers_here():
            for _ in self._desks:  # each desk at most once, from the next in turn
                desk = self._desks[next(self._next_reader) % len(self._desks)]
                done, value = desk.read_now(message)
                if done:
                    return value
        pen = self._pen
        if (
            timeout is None
            and pen is not None
            and owner == "writer"
            and not self.routing_may_block(message)  # _route retires a projector first
        ):
            reply = OneShotReply()
            envelope = Envelope(message, reply)
            if pen.write_now(envelope):
                return reply.get()
            actor = self._hand_over(message, envelope, wait=True)  # the same envelope
            return self.wait_reply(reply, None, actor, message)
        return self.ask_later(message, timeout)()

    def ask_later(self, message: Any, timeout: float | None = None) -> Callable[[], Any]:
        """Hand over a checked (or internal) message now; the returned call waits for its
        answer (``timeout`` counts from that call)."""
        reply = OneShotReply()
        actor = self.send(message, reply)
        return lambda: self.wait_reply(reply, timeout, actor, message)

    def wait_commit(self, seq: int, timeout: float | None) -> bool:
        """Block until ``seq`` is committed (False after ``timeout``; StoreClosed on close).

        Woken by the writer's commits; a read-only store watches the WAL file instead.
        """
        if self._wal is not None:
            return self._wal.wait_for(seq, timeout)
        return self.commits.wait_for(seq, timeout)

    @property
    def wal(self) -> WalWatcher | None:
        """The read-only store's WAL watcher (None when this process has the writer)."""
        return self._wal

    # -- followers and metrics -----------------------------------------------------

    def following(self) -> contextlib.AbstractContextManager[None]:
        """Counts a follower (for :meth:`metrics`) while it iterates."""
        return self._followers.following()

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures; never blocks on an actor (a read-only store
        reads ``latest_seq`` and ``sessions_behind`` from the store, see
        :class:`~relaystore.actors.metrics.StoreReadings`); in the main thread the
        courier reads them (their locks are the writer's too, see :meth:`_hand_over`)."""
        return self._courier.run(self._metrics)

    def _metrics(self) -> StoreMetrics:
        latest, behind = self.commits.latest, self._stats.sessions_behind
        if self._readings is not None:
            latest, behind = self._readings.read()
        return store_metrics(
            self._stats,
            store_id=self.store_id,
            writer_inbox_depth=inbox_of(self.writer).qsize() if self.writer is not None else 0,
            followers=self._followers.count,
            latest_seq=latest,
            sessions_behind=behind,
            live_projectors=len(self._projectors),
            projector_loads=self._wiring.loads,
            projector_starts=self._projectors.started,
            worker_restarts=0 if self._workers is None else self._workers.restarts,
        )

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop taking messages, let the writer finish what it accepted, stop everything.

        In a process forked after the store opened it does nothing: the store, its
        threads and its workers are the parent's (so a forked child exits at once, and
        leaves them to the parent)."""
        if self._owner.forked():
            return
        if not self._closing.acquire(blocking=False):  # one C call: a handler may close too
            return
        self._closed = True
        self._owner.unregister()
        if self._desk is not None:
            self._desk.stop()
        self.commits.close()
        self._projectors.stop_all()
        if self._workers is not None:
            self._workers.close()
        for reader in self._readers:
            _stop(reader)
        if self._readings is not None:
            self._readings.close()
        if self.writer is not None:
            _stop(self.writer)
        self._courier.close()
        figures = self._stats
        logger.info(
            "closed %s at seq %d after %d commits (%d messages, %d relay events applied)",
            self.path,
            self.commits.latest,
            figures.commits,
            figures.messages,
            figures.relay_events,
        )

    # -- internals -----------------------------------------------------------------

    def _reader(self) -> ActorRef[ReaderActor]:
        return self._readers[next(self._next_reader) % len(self._readers)]

    def _read_latest(self) -> int:
        page = self.ask_blocking(LoadApiEvents(limit=1))
        latest: int = page.latest_seq
        return latest

    def _ask_writer(self, message: Any) -> Callable[[], Any]:
        """Hand ``message`` to the writer actor now (not routed: the projectors' loads
        and pages); the returned call waits for its answer."""
        writer = self.writer
        assert writer is not None  # projectors run only in a store with a writer
        reply = OneShotReply()
        self.deliver(writer, Envelope(message, reply))  # from a projector's thread
        return lambda: self.wait_reply(reply, None, writer, message)


def _stop(ref: ActorRef[Any]) -> None:
    with contextlib.suppress(ActorDeadError):
        ref.stop(block=True)
