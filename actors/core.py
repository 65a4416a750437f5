"""The facade core: what :class:`~relaystore.EventStore` and
:class:`~relaystore.aio.AsyncEventStore` share (in the spirit of httpx's ``BaseClient``).

:class:`StoreCore` owns the store's actors and every rule of the facade, once:

* **starting and stopping** the writer, the readers and the live projectors, and closing
  a store nobody closed when the interpreter exits (see *Exit* below);
* **checks**, each with one wording: open or closed (:meth:`StoreCore.check_open`),
  a message (public types only: the actors' own messages of
  :mod:`relaystore.actors.internal` are refused by type, then
  :func:`~relaystore.domain.validation.validate_message`), a timeout
  (:func:`check_timeout`: ``None`` or ``0 <= t <= MAX_TIMEOUT``), a ``wait_for`` seq,
  a follow request;
* **routing** a checked message to the actor that owns it, and handing it over;
* **the follow pager** (:class:`FollowPager`), which moves on ``page.next_after_seq``;
* **waiting** for a blocking reply (with the dead-actor check) and for a commit (the
  :class:`~relaystore.actors.commits.CommitWatch`, or in a read-only store the
  :class:`~relaystore.actors.wal_watch.WalWatcher`);
* **maintenance requests** a command leaves for the writer: a writable store's
  :class:`~relaystore.actors.maintenance_requests.MaintenanceDesk`, started with the
  store and stopped first when it closes;
* **metrics** and the projectors' wiring to the writer: in their own threads, or with
  ``projection="process"`` through the store's
  :class:`~relaystore.actors.projection_worker.WorkerPool` (each worker started with
  the first projector it serves, all closed with the store).

The two facades compose one core and differ only where blocking and awaiting differ:
``EventStore`` waits in the calling thread, ``AsyncEventStore`` resolves a future from
the actor's thread and hands over in a worker thread only when that would block.

Exit. Actor threads are daemon threads (:mod:`relaystore.actors.inbox`), so a store
nobody closed never keeps the process alive (a supervisor that crashes exits; nothing
acknowledged is lost, since an ask returns only after its commit). A clean interpreter
exit closes every store still open: each core registers its own :meth:`StoreCore.close`
with :mod:`atexit` when it opens and unregisters it when it closes. That registry is
atexit's own; relaystore keeps no module-level list of open stores. A process forked
after a store opened inherits the store but none of its threads: there the exit hook
(and :meth:`StoreCore.close`) does nothing, so the child exits at once and leaves the
parent's store, workers and files alone, and any other use raises :class:`StoreClosed`
naming the process the store belongs to.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any, Generic, Literal, TypedDict, TypeVar, Unpack, get_args

import msgspec
import pykka
from pykka import ActorDeadError, ActorRef

from ..domain.api_events import ApiEventFilter
from ..domain.errors import AskTimeout, InvalidInput, ProjectionError, StoreClosed
from ..domain.materialized import MaterializedSession, TranscriptItem
from ..domain.messages import (
    PUBLIC_MESSAGES,
    DeleteSession,
    LoadApiEvents,
    LoadRawApiEvents,
    ObserveRelayEvents,
    ReaderMessage,
    Reproject,
    Request,
    SeedProjection,
)
from ..domain.paging import MAX_PAGE_LIMIT
from ..domain.projection import PageDelta, frozen
from ..domain.projection.index import ColdEntry
from ..domain.reports import StoreMetrics
from ..domain.validation import validate_message
from ..storage.connection import Synchronous, open_reader, open_writer
from ..storage.paging import load_latest_seq
from ..storage.schema import read_store_id
from .commits import CommitWatch
from .envelope import Envelope, OneShotReply, Reply
from .inbox import inbox_of
from .internal import (
    INTERNAL_MESSAGES,
    CommitPage,
    LoadAuditView,
    LoadIndexEntries,
    LoadOpenRequests,
    LoadProjection,
    LoadReplicationRound,
    LoadTranscriptItem,
)
from .live import LiveProjectors
from .maintenance_requests import MaintenanceDesk
from .metrics import StoreReadings, WriterStats, percentile
from .projection_worker import RemoteProjection, WorkerPool
from .projector import PageCommit, Projection, ProjectorActor, ProjectorCore
from .reader import ReaderActor
from .transcript_pages import SessionMoved, reloaded_entries
from .wal_watch import WalWatcher
from .writer import WriterActor

__all__ = [
    "CLOSED_BEFORE_ANSWER",
    "MAX_TIMEOUT",
    "FollowPager",
    "OpenOptions",
    "Settings",
    "StoreCore",
    "ask_timeout",
    "check_timeout",
]

logger = logging.getLogger(__name__)

P = TypeVar("P", LoadApiEvents, LoadRawApiEvents)

MAX_TIMEOUT = threading.TIMEOUT_MAX
MAX_READERS = 64
"""The most reader actors one store starts."""
"""The longest timeout either facade takes, in seconds: the longest a thread can wait."""

CLOSED_BEFORE_ANSWER = "the store closed before answering"
"""What a blocking ask raises (as :class:`StoreClosed`) when its actor stopped first."""

_DEAD_CHECK_SECONDS = 0.5
"""How often a waiting blocking ``ask`` checks that the actor it waits on is still alive."""

LOAD_PAGE_ITEMS = 512
"""How many whole transcript items a projector reads at a time when it loads its session."""

RELOAD_ITEMS = 32
"""How many of its newest items a projector reloading its session reads whole; the
others enter cold (their id and index facts) and are fetched if an event names them.
Events name the newest few items almost always, and decoding the whole window of
:data:`~relaystore.domain.projection.frozen.WINDOW` items made a reload of a
400-item session cost about twice as much (the ``sessions`` benchmark's defaults row,
300 sessions round robin over 256 projectors: 1,510 against 2,565 events/s with 32,
medians of 4 interleaved rounds)."""

LOAD_PAGE_ENTRIES = 4096
"""How many index entries (an item's id and facts) a projector reads at a time when it
loads its session."""

ProjectionMode = Literal["thread", "process"]
"""Where projectors project: in their actor's thread, or in a worker process
(:mod:`relaystore.actors.projection_worker`)."""

_READER_TYPES: tuple[type[Request[Any]], ...] = get_args(ReaderMessage)
_READER_ROUTED: tuple[type[Any], ...] = (
    *_READER_TYPES,
    LoadTranscriptItem,
    LoadIndexEntries,
    LoadAuditView,
    LoadOpenRequests,
    LoadReplicationRound,
)
"""What readers answer: the reader messages, and what projectors read back from the store."""


DEFAULT_READERS = 2
DEFAULT_QUEUE_CAPACITY = 256
DEFAULT_SYNCHRONOUS: Synchronous = "FULL"
DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_PROJECTORS = 256
DEFAULT_PROJECTOR_IDLE_SECONDS = 300.0
DEFAULT_PROJECTION: ProjectionMode = "process"
"""The defaults of :meth:`EventStore.open`'s options, the one place they are written (its
signature and :meth:`Settings.check` both name these)."""


class OpenOptions(TypedDict, total=False):
    """The keyword options of :meth:`EventStore.open` (``AsyncEventStore.open`` takes the same).

    Defaults and their meaning: see :meth:`relaystore.EventStore.open`.
    """

    readers: int
    queue_capacity: int
    synchronous: Synchronous
    read_only: bool
    max_batch: int
    max_projectors: int
    projector_idle_seconds: float
    relay_log: bool
    projection: ProjectionMode


@dataclass(frozen=True, slots=True)
class Settings:
    """Checked options of an open store."""

    path: Path
    readers: int
    capacity: int
    synchronous: Synchronous
    read_only: bool
    max_batch: int
    max_projectors: int
    projector_idle_seconds: float
    relay_log: bool = True
    projection: ProjectionMode = "process"

    @classmethod
    def check(
        cls,
        path: object,
        *,
        readers: object = DEFAULT_READERS,
        queue_capacity: object = DEFAULT_QUEUE_CAPACITY,
        synchronous: object = DEFAULT_SYNCHRONOUS,
        read_only: object = False,
        max_batch: object = DEFAULT_MAX_BATCH,
        max_projectors: object = DEFAULT_MAX_PROJECTORS,
        projector_idle_seconds: object = DEFAULT_PROJECTOR_IDLE_SECONDS,
        relay_log: object = True,
        projection: object = DEFAULT_PROJECTION,
    ) -> Settings:
        """The settings, or :class:`InvalidInput` naming the first bad option."""
        try:
            where = Path(path)  # type: ignore[arg-type]
            if "\x00" in str(where):
                raise ValueError("embedded null byte")
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"EventStore.open: path must name a file ({exc})") from exc
        counts: dict[str, int] = {}
        for name, value in (
            ("readers", readers),
            ("queue_capacity", queue_capacity),
            ("max_batch", max_batch),
            ("max_projectors", max_projectors),
        ):
            if type(value) is not int or value < 1:
                raise InvalidInput(f"EventStore.open: {name} must be an int of at least 1")
            counts[name] = value
        if counts["readers"] > MAX_READERS:
            # Each reader is a thread with its own connection and file handles.
            raise InvalidInput(f"EventStore.open: readers must be at most {MAX_READERS}")
        for name, flag in (("read_only", read_only), ("relay_log", relay_log)):
            if type(flag) is not bool:
                raise InvalidInput(f"EventStore.open: {name} must be True or False")
        modes: tuple[Synchronous, ...] = get_args(Synchronous)
        if synchronous not in modes:
            raise InvalidInput(f"EventStore.open: synchronous must be one of {', '.join(modes)}")
        projections: tuple[ProjectionMode, ...] = get_args(ProjectionMode)
        if projection not in projections:
            raise InvalidInput(
                f"EventStore.open: projection must be one of {', '.join(projections)}"
            )
        idle = projector_idle_seconds
        if type(idle) not in (int, float) or not idle > 0:  # type: ignore[operator]
            raise InvalidInput("EventStore.open: projector_idle_seconds must be a number > 0")
        return cls(
            where,
            counts["readers"],
            counts["queue_capacity"],
            synchronous,
            read_only is True,
            counts["max_batch"],
            counts["max_projectors"],
            float(idle),  # type: ignore[arg-type]
            relay_log is True,
            projection,
        )


def check_timeout(timeout: object) -> None:
    """Raise :class:`InvalidInput` unless ``timeout`` is ``None`` or 0..MAX_TIMEOUT seconds."""
    if timeout is not None and (
        type(timeout) not in (int, float) or not 0 <= timeout <= MAX_TIMEOUT  # type: ignore[operator]
    ):
        raise InvalidInput(
            f"timeout must be None or a number of seconds from 0 to {MAX_TIMEOUT:.0f}"
        )


def ask_timeout(message: object, timeout: float | None) -> AskTimeout:
    """The error of an ask whose reply did not come within ``timeout``."""
    return AskTimeout(
        f"{type(message).__name__} got no reply within {timeout} s; it was handed over and "
        "may still take effect"
    )


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


class StoreFacts:
    """What both facades say about the open store, read from the core they share (one
    wording for :class:`~relaystore.EventStore` and :class:`~relaystore.aio.AsyncEventStore`)."""

    _core: StoreCore

    @property
    def path(self) -> Path:
        """The store's file."""
        return self._core.path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened ``read_only`` (readers only)."""
        return self._core.read_only

    @property
    def relay_log(self) -> bool:
        """Whether the store keeps the relay log (and so keeps lines of kinds this build
        does not know, holding their session behind, instead of refusing them)."""
        return self._core.relay_log

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures; never blocks on an actor, cheap enough to
        poll every second."""
        return self._core.metrics()


class StoreCore:
    """An open store's actors and the facade rules both facades share (see the module)."""

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Unpack[OpenOptions]) -> StoreCore:
        """Check the options (:meth:`Settings.check`; :meth:`EventStore.open` documents
        them and their defaults) and open the store: what both facades start from."""
        return cls(Settings.check(path, **options))

    def __init__(self, settings: Settings) -> None:
        self.path = settings.path
        self.read_only = settings.read_only
        self._capacity = settings.capacity
        self.relay_log = settings.relay_log
        self._closed = False
        self._pid = os.getpid()
        """The process that opened the store: the only one its actors and workers serve."""
        self._lock = threading.Lock()
        self._workers = (
            WorkerPool(hold_unknown=settings.relay_log, limit=settings.max_projectors)
            if settings.projection == "process" and not settings.read_only
            else None
        )
        self._projectors = LiveProjectors(
            self._start_projector,
            limit=settings.max_projectors,
            idle_seconds=settings.projector_idle_seconds,
        )
        self.writer: ActorRef[WriterActor] | None = None
        self._readers: list[ActorRef[ReaderActor]] = []
        self._next_reader = count()
        self._stats = WriterStats()
        self._followers = 0
        self._wal: WalWatcher | None = None
        self._readings: StoreReadings | None = None
        """A read-only store's figures read from the store (another process writes it)."""
        self._desk: MaintenanceDesk | None = None
        started: list[ActorRef[Any]] = []
        try:
            if not settings.read_only:
                handle = open_writer(settings.path, synchronous=settings.synchronous)
                try:
                    self.commits = CommitWatch(load_latest_seq(handle.connection))
                    self.store_id = read_store_id(handle.connection)
                except BaseException:
                    handle.close()
                    raise
                self.writer = WriterActor.start(
                    handle,
                    capacity=settings.capacity,
                    on_commit=self.commits.publish,
                    stats=self._stats,
                    max_batch=settings.max_batch,
                )
                started.append(self.writer)
            for _ in range(settings.readers):
                connection = open_reader(settings.path)
                if settings.read_only and not self._readers:
                    try:  # read before the reader actor owns the connection
                        self.store_id = read_store_id(connection)
                    except BaseException:
                        connection.close()
                        raise
                reader = ReaderActor.start(connection, capacity=settings.capacity)
                started.append(reader)
                self._readers.append(reader)
            if settings.read_only:
                self.commits = CommitWatch(self._read_latest())
                self._wal = WalWatcher(settings.path, self.commits, self._read_latest)
                self._readings = StoreReadings(open_reader(settings.path))
            else:
                self._desk = MaintenanceDesk(self)
                self._desk.start()
                handle.take_requests()
        except BaseException:
            for ref in started:
                _stop(ref)
            raise
        atexit.register(self.close)
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
        if self._forked():
            raise StoreClosed(
                f"the store belongs to process {self._pid}, which opened it; this process "
                f"({os.getpid()}) was forked from it and cannot use it (open it here instead)"
            )

    @staticmethod
    def check_message(message: object) -> None:
        """Raise :class:`InvalidInput` unless ``message`` is a well-formed public message."""
        if isinstance(message, INTERNAL_MESSAGES):
            raise InvalidInput(
                f"{type(message).__name__} is internal to relaystore's actors; "
                "ask and tell take only the public messages"
            )
        if isinstance(message, Request) and not isinstance(message, PUBLIC_MESSAGES):
            raise InvalidInput(f"{type(message).__name__} is not a relaystore message")
        validate_message(message)

    def check_ask(self, message: object, timeout: object) -> None:
        """Every check of ``ask``: open, the message, the timeout (in that order)."""
        self.check_open()
        self.check_message(message)
        check_timeout(timeout)

    def check_tell(self, message: object) -> None:
        """Every check of ``tell``: open, the message."""
        self.check_open()
        self.check_message(message)

    def check_wait(self, seq: object, timeout: object) -> None:
        """Every check of ``wait_for``: open, ``seq`` an int >= 0, the timeout."""
        self.check_open()
        if type(seq) is not int or seq < 0:
            raise InvalidInput("wait_for: seq must be an int >= 0")
        check_timeout(timeout)

    def follow_pager(
        self,
        kind: type[P],
        after_seq: object,
        filter: object,
        timeout: object,
    ) -> FollowPager[P]:
        """A checked follow's pager (``InvalidInput`` naming what is wrong)."""
        request = kind(
            filter=filter if filter is not None else ApiEventFilter(),  # type: ignore[arg-type]
            after_seq=after_seq,  # type: ignore[arg-type]
            limit=MAX_PAGE_LIMIT,
        )
        validate_message(request)
        check_timeout(timeout)
        self.check_process()
        return FollowPager(request, timeout)  # type: ignore[arg-type]

    # -- routing -------------------------------------------------------------------

    @staticmethod
    def routing_may_block(message: object) -> bool:
        """Whether :meth:`send` may wait before it hands over (it retires the session's
        projector first)."""
        return isinstance(message, DeleteSession | SeedProjection)

    def _route(self, message: Request[Any]) -> ActorRef[Any]:
        """The actor that owns a checked message no projector takes (:meth:`send` hands
        those to the session's projector)."""
        if isinstance(message, _READER_ROUTED):
            return self._reader()
        if self.writer is None:
            raise InvalidInput(
                f"{type(message).__name__} needs the writer, but the store was opened read_only"
            )
        if isinstance(message, DeleteSession | SeedProjection):  # see routing_may_block
            # The session's projector holds its projection in memory: retire it first,
            # so the session's next event starts from what the store then holds.
            self._projectors.retire(message.session_id)
        return self.writer

    @staticmethod
    def deliver(ref: ActorRef[Any], envelope: Envelope) -> None:
        """Hand ``envelope`` to ``ref``; blocks while its inbox is full."""
        try:
            ref.tell(envelope)
        except ActorDeadError as exc:
            raise StoreClosed("the store's actors have stopped") from exc

    def send(self, message: Any, reply: Reply | None) -> ActorRef[Any]:
        """Route and hand over ``message`` with its reply sink (waiting for room in a
        full inbox); return the actor."""
        ref = self._hand_over(message, Envelope(message, reply), wait=True)
        assert ref is not None  # waiting for room, it always hands over
        return ref

    def send_now(self, message: Any, reply: Reply | None) -> bool:
        """Route and hand over ``message`` if that does not wait (the actor's inbox has
        room, and routing retires no projector); False: nothing was handed over."""
        if self.routing_may_block(message):
            return False
        return self._hand_over(message, Envelope(message, reply), wait=False) is not None

    def _hand_over(self, message: Any, envelope: Envelope, *, wait: bool) -> ActorRef[Any] | None:
        """Hand ``envelope`` to the actor that owns ``message`` (None: its inbox is full
        and not ``wait``). A session's projector takes its message even if it is stopped
        for room or idles out meanwhile (see :meth:`LiveProjectors.hand_over`)."""

        def room(ref: ActorRef[Any]) -> bool:
            return wait or not inbox_of(ref).full()

        if self.writer is not None and isinstance(message, ObserveRelayEvents | Reproject):
            self.check_open()

            def put(ref: ActorRef[Any]) -> bool:
                if room(ref):
                    ref.tell(envelope)  # ActorDeadError: the projector set starts another
                    return True
                return False

            return self._projectors.hand_over(message.session_id, put)
        ref = self._route(message)
        if not room(ref):
            return None
        self.deliver(ref, envelope)
        return ref

    # -- blocking waits ------------------------------------------------------------

    def wait_reply(
        self,
        reply: OneShotReply,
        timeout: float | None,
        actor: ActorRef[Any] | None,
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
        """Hand over a checked (or internal) message and wait for its answer here."""
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

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """Counts a follower (for :meth:`metrics`) while it iterates."""
        with self._lock:
            self._followers += 1
        try:
            yield
        finally:
            with self._lock:
                self._followers -= 1

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures; never blocks on an actor (a read-only store
        reads ``latest_seq`` and ``sessions_behind`` from the store, see
        :class:`~relaystore.actors.metrics.StoreReadings`)."""
        stats = self._stats
        latencies, batches = stats.window()
        depth = inbox_of(self.writer).qsize() if self.writer is not None else 0
        with self._lock:
            followers = self._followers
        latest, behind = self.commits.latest, stats.sessions_behind
        if self._readings is not None:
            latest, behind = self._readings.read()
        return StoreMetrics(
            store_id=self.store_id,
            writer_inbox_depth=depth,
            live_projectors=len(self._projectors),
            followers=followers,
            commits=stats.commits,
            commit_latency_p50_ms=percentile(latencies, 0.5) * 1000,
            commit_latency_p99_ms=percentile(latencies, 0.99) * 1000,
            batch_size_mean=sum(batches) / len(batches) if batches else 0.0,
            batch_size_max=max(batches, default=0),
            messages_written=stats.messages,
            relay_events_applied=stats.relay_events,
            api_events_written=stats.api_events,
            latest_seq=latest,
            writer_busy=stats.busy,
            busy_refusals=stats.busy_refusals,
            sessions_behind=behind,
            relay_lines_held=stats.relay_lines_held,
            projector_loads=self._projectors.started,
            worker_restarts=0 if self._workers is None else self._workers.restarts,
        )

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop taking messages, let the writer finish what it accepted, stop everything.

        In a process forked after the store opened it does nothing: the store, its
        threads and its workers are the parent's (so a forked child exits at once, and
        leaves them to the parent)."""
        if self._forked():
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
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

    def _forked(self) -> bool:
        """Whether this is a process forked after the store opened (not its own)."""
        return os.getpid() != self._pid

    def _reader(self) -> ActorRef[ReaderActor]:
        return self._readers[next(self._next_reader) % len(self._readers)]

    def _read_latest(self) -> int:
        page = self.ask_blocking(LoadApiEvents(limit=1))
        latest: int = page.latest_seq
        return latest

    def _start_projector(self, session_id: str) -> ActorRef[ProjectorActor]:
        projection: Projection
        if self._workers is not None:
            projection = RemoteProjection(
                session_id,
                self._workers,
                load=self._load_projection,
                send_page=self._send_page,
                ask=self.ask_blocking,
                load_paged=self._load_projection_paged,
            )
        else:
            projection = ProjectorCore(
                session_id,
                load=self._load_projection,
                send_page=self._send_page,
                ask=self.ask_blocking,
                hold_unknown=self.relay_log,
                load_paged=self._load_projection_paged,
            )
        return ProjectorActor.start(projection, capacity=self._capacity)

    def _load_projection(self, session_id: str) -> MaterializedSession:
        session: MaterializedSession = self.ask_blocking(LoadProjection(session_id=session_id))
        return session

    def _load_projection_paged(
        self, session_id: str
    ) -> tuple[MaterializedSession, Iterator[TranscriptItem | ColdEntry]]:
        """The session without its transcript (through the writer), and its transcript
        through readers as a reloading projector enters it: the old items' ids and index
        facts, the newest :data:`RELOAD_ITEMS` (at most the window) whole. A
        page read at another frontier (the session moved while it was loaded) raises
        :class:`ProjectionError`."""
        session: MaterializedSession = self.ask_blocking(
            LoadProjection(session_id=session_id, transcript=False)
        )
        frontier = session.kept_frontier

        def entries() -> Iterator[TranscriptItem | ColdEntry]:
            try:
                yield from reloaded_entries(
                    self.ask_blocking,
                    session_id,
                    frontier,
                    window=min(frozen.WINDOW, RELOAD_ITEMS),
                    limit=LOAD_PAGE_ENTRIES,
                    items_limit=LOAD_PAGE_ITEMS,
                )
            except SessionMoved:
                raise ProjectionError(
                    "the session moved while its projection was loaded; it is loaded "
                    "again with the next event",
                    session_id=session_id,
                ) from None

        return session, entries()

    def _send_page(self, session_id: str, page: PageDelta) -> PageCommit:
        """Hand ``page`` to the writer; the returned call waits for its commit."""
        wait: PageCommit = self.ask_later(
            CommitPage(session_id=session_id, page=page, log=self.relay_log)
        )
        return wait


def _stop(ref: ActorRef[Any]) -> None:
    with contextlib.suppress(ActorDeadError):
        ref.stop(block=True)
