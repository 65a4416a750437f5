"""The :class:`EventStore` facade: what a supervisor embeds.

``EventStore.open`` starts one writer actor (the only write connection), ``readers``
reader actors and, on first use, one projector actor per session. ``ask`` checks a
message (:func:`~relaystore.domain.validation.validate_message`), routes it by its type
and returns its typed reply or raises its typed error. The facade only routes: what a
message does lives in the actor that owns it and the storage function it calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, get_args

import pykka
from pykka import ActorDeadError, ActorRef

from relaystore.actors.live import LiveProjectors
from relaystore.actors.metrics import WriterStats, percentile
from relaystore.actors.projector import PageCommit, ProjectorActor
from relaystore.actors.reader import ReaderActor
from relaystore.actors.told import Envelope, OneShotReply, Reply
from relaystore.actors.writer import WriterActor
from relaystore.domain.api_events import ApiEvent, ApiEventFilter
from relaystore.domain.errors import AskTimeout, InvalidInput, StoreClosed
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import (
    CommitPage,
    DeleteSession,
    LoadApiEvents,
    LoadProjection,
    ObserveRelayEvents,
    ProjectorWriterMessage,
    ReaderMessage,
    Request,
    SeedProjection,
)
from relaystore.domain.projection import PageDelta
from relaystore.domain.relay import RelayCursor
from relaystore.domain.reports import StoreMetrics
from relaystore.domain.validation import validate_message
from relaystore.storage.connection import Synchronous, open_reader, open_writer
from relaystore.storage.paging import MAX_PAGE_LIMIT, load_latest_seq

__all__ = ["EventStore", "Synchronous"]

logger = logging.getLogger(__name__)

R = TypeVar("R")

_READER_TYPES: tuple[type[Request[Any]], ...] = get_args(ReaderMessage)

_DEAD_CHECK_SECONDS = 0.5
"""How often a waiting ``ask`` checks that the actor it waits on is still alive."""


class CommitWatch:
    """The newest committed ``seq``, and a way to wait for it without polling.

    :meth:`close` wakes every waiter, which then raises :class:`StoreClosed`.
    """

    def __init__(self, latest: int) -> None:
        self._latest = latest
        self._closed = False
        self._changed = threading.Condition()
        self._listeners: list[Callable[[int], None]] = []

    @property
    def latest(self) -> int:
        """The newest committed ``seq`` seen."""
        return self._latest

    def subscribe(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(latest)`` after every commit that advances ``latest``."""
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
        for listener in listeners:
            try:
                listener(latest)
            except Exception:
                logger.exception("a commit listener failed")

    def close(self) -> None:
        """Wake every waiter for good."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def wait_for(self, seq: int, timeout: float | None) -> bool:
        """True once ``seq`` is committed; False after ``timeout``; StoreClosed on close."""
        with self._changed:
            reached = self._changed.wait_for(lambda: self._closed or self._latest >= seq, timeout)
            if self._latest >= seq:
                return True
            if self._closed:
                raise StoreClosed("the store closed while waiting for a commit")
            return bool(reached)


class EventStore:
    """An open relaystore: one writer, some readers, a projector per session.

    Use :meth:`open`; close with :meth:`close` or by leaving a ``with`` block.
    """

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readers: int = 2,
        queue_capacity: int = 256,
        synchronous: Synchronous = "FULL",
        read_only: bool = False,
        max_batch: int = 256,
        max_projectors: int = 256,
        projector_idle_seconds: float = 300.0,
    ) -> EventStore:
        """Open (creating or migrating) the store at ``path``.

        Raises ``SchemaMismatch`` for a store this build must not touch and
        ``StoreLocked`` when another process (or another ``open`` in this one) holds it
        for writing. ``read_only`` starts readers only: no migration, no lock.
        ``max_batch`` caps how many waiting messages one commit takes (1 turns group
        commit off). ``queue_capacity`` bounds every actor's inbox: the writer's, each
        reader's and each projector's; a full inbox blocks the sender. At most
        ``max_projectors`` sessions keep a projector (a thread and the session's
        projection in memory); the least recently used idle one, and any unused for
        ``projector_idle_seconds``, is stopped and reloads from the store on its next
        event.
        """
        try:
            where = Path(path)
            if "\x00" in str(where):
                raise ValueError("embedded null byte")
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"EventStore.open: path must name a file ({exc})") from exc
        for name, value in (
            ("readers", readers),
            ("queue_capacity", queue_capacity),
            ("max_batch", max_batch),
            ("max_projectors", max_projectors),
        ):
            if type(value) is not int or value < 1:
                raise InvalidInput(f"EventStore.open: {name} must be an int of at least 1")
        if synchronous not in get_args(Synchronous):
            raise InvalidInput(
                f"EventStore.open: synchronous must be one of {', '.join(get_args(Synchronous))}"
            )
        if type(projector_idle_seconds) not in (int, float) or not projector_idle_seconds > 0:
            raise InvalidInput("EventStore.open: projector_idle_seconds must be a number > 0")
        return cls(
            where,
            readers,
            queue_capacity,
            synchronous,
            bool(read_only),
            max_batch,
            max_projectors,
            float(projector_idle_seconds),
        )

    def __init__(
        self,
        path: Path,
        readers: int,
        capacity: int,
        synchronous: Synchronous,
        read_only: bool,
        max_batch: int,
        max_projectors: int,
        projector_idle_seconds: float,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._capacity = capacity
        self._closed = False
        self._lock = threading.Lock()
        self._projectors = LiveProjectors(
            self._start_projector, limit=max_projectors, idle_seconds=projector_idle_seconds
        )
        self._writer: ActorRef[WriterActor] | None = None
        self._readers: list[ActorRef[ReaderActor]] = []
        self._next_reader = count()
        self._stats = WriterStats()
        self._followers = 0
        started: list[ActorRef[Any]] = []
        try:
            if not read_only:
                handle = open_writer(path, synchronous=synchronous)
                self._commits = CommitWatch(load_latest_seq(handle.connection))
                self._writer = WriterActor.start(
                    handle,
                    capacity=capacity,
                    on_commit=self._commits.publish,
                    stats=self._stats,
                    max_batch=max_batch,
                )
                started.append(self._writer)
            for _ in range(readers):
                reader = ReaderActor.start(open_reader(path), capacity=capacity)
                started.append(reader)
                self._readers.append(reader)
            if read_only:
                self._commits = CommitWatch(self._ask_reader(LoadApiEvents(limit=1)).latest_seq)
        except BaseException:
            for ref in started:
                _stop(ref)
            raise
        logger.info(
            "opened %s%s at seq %d", path, " read-only" if read_only else "", self._commits.latest
        )

    # -- routing -------------------------------------------------------------------

    def ask(self, message: Request[R], timeout: float | None = None) -> R:
        """Send ``message`` to the actor that owns it and return its typed reply.

        Raises :class:`InvalidInput` for a malformed message (nothing is sent),
        :class:`AskTimeout` when ``timeout`` runs out (the message may still take effect),
        :class:`StoreClosed` after :meth:`close`, and the message's own typed errors.
        """
        self._check_open()
        validate_message(message)
        if timeout is not None:
            _check_timeout(timeout)
        reply = OneShotReply()
        actor = self._send(message, reply)
        return self._get(reply, timeout, actor, message)  # type: ignore[no-any-return]

    def tell(self, message: Request[Any]) -> None:
        """Send ``message`` without waiting; a failure is logged and stops nothing.

        A malformed message raises :class:`InvalidInput` here, before anything is sent.
        """
        self._check_open()
        validate_message(message)
        self._send(message, None)

    def _route(self, message: Request[Any]) -> ActorRef[Any]:
        """The actor that owns a checked message."""
        if isinstance(message, _READER_TYPES):
            return self._reader()
        if isinstance(message, ObserveRelayEvents):
            return self._projector(message.session_id)
        if self._writer is None:
            raise InvalidInput(
                f"{type(message).__name__} needs the writer, but the store was opened read_only"
            )
        if isinstance(message, DeleteSession | SeedProjection):
            # The session's projector holds its projection in memory: retire it first,
            # so the session's next event starts from what the store then holds.
            self._retire_projector(message.session_id)
        return self._writer

    def _send(
        self, message: Request[Any], reply: Reply | None, to: ActorRef[Any] | None = None
    ) -> ActorRef[Any]:
        """Hand a checked message (with its reply sink) to its actor; return that actor.

        Blocks while the actor's inbox is full. ``to`` skips routing (``relaystore.aio``
        routes first, to learn whether the hand-over would block).
        """
        ref = self._route(message) if to is None else to
        _deliver(ref, Envelope(message, reply))
        return ref

    def _on_commit(self, callback: Callable[[int], None]) -> None:
        """Call ``callback(latest_seq)`` after every commit (in the writer's thread)."""
        self._commits.subscribe(callback)

    def wait_for(self, seq: int, timeout: float | None = None) -> bool:
        """Block until an API event with ``seq`` or higher is committed.

        Woken by the writer's commits. In a read-only store (the writer is another
        process) it watches the store's WAL file for changes instead. Returns False when
        ``timeout`` passes first; raises :class:`StoreClosed` when the store closes.
        """
        if type(seq) is not int:
            raise InvalidInput("EventStore.wait_for: seq must be an int")
        _check_timeout(timeout)
        self._check_open()
        if not self.read_only:
            return self._commits.wait_for(seq, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        wal = Path(f"{self.path}-wal")
        last_stamp: tuple[float, int] | None = None
        while True:
            stamp = _file_stamp(wal)
            if stamp != last_stamp:
                last_stamp = stamp
                self._commits.publish(self._ask_reader(LoadApiEvents(limit=1)).latest_seq)
            pause = 0.05
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            if self._commits.wait_for(seq, pause):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def follow(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> Iterator[ApiEvent]:
        """Iterate committed API events after ``after_seq`` in ``seq`` order, waiting for more.

        This process's commits wake it at once; opened read-only, it sees other
        processes' commits too. It ends when ``timeout`` seconds pass with nothing new
        (``None``: never) or when the store closes.
        """
        request = LoadApiEvents(
            filter=filter if filter is not None else ApiEventFilter(),
            after_seq=after_seq,
            limit=MAX_PAGE_LIMIT,
        )
        validate_message(request)
        _check_timeout(timeout)
        return self._follow(request, timeout)

    def _follow(self, request: LoadApiEvents, timeout: float | None) -> Iterator[ApiEvent]:
        with self._following():
            yield from self._pages(request, timeout)

    @contextlib.contextmanager
    def _following(self) -> Iterator[None]:
        """Counts a follower (for :meth:`metrics`) while it iterates."""
        with self._lock:
            self._followers += 1
        try:
            yield
        finally:
            with self._lock:
                self._followers -= 1

    def _pages(self, request: LoadApiEvents, timeout: float | None) -> Iterator[ApiEvent]:
        cursor = request.after_seq or 0
        while True:
            try:
                page = self.ask(
                    LoadApiEvents(filter=request.filter, after_seq=cursor, limit=request.limit)
                )
            except StoreClosed:
                return
            yield from page.events
            cursor = max(cursor, page.latest_seq if not page.events else page.events[-1].seq)
            if page.events and page.events[-1].seq < page.latest_seq:
                continue  # more are committed already: read on without waiting
            try:
                if not self.wait_for(cursor + 1, timeout):
                    return
            except StoreClosed:
                return

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures; cheap enough to poll every second."""
        latencies, batches = self._stats.window()
        writer = self._writer
        depth = writer.actor_inbox.qsize() if writer is not None else 0  # type: ignore[attr-defined]
        with self._lock:
            followers = self._followers
        live = len(self._projectors)
        return StoreMetrics(
            writer_inbox_depth=depth,
            live_projectors=live,
            followers=followers,
            commits=self._stats.commits,
            commit_latency_p50_ms=percentile(latencies, 0.5) * 1000,
            commit_latency_p99_ms=percentile(latencies, 0.99) * 1000,
            batch_size_mean=sum(batches) / len(batches) if batches else 0.0,
            batch_size_max=max(batches, default=0),
            messages_written=self._stats.messages,
            relay_events_applied=self._stats.relay_events,
            api_events_written=self._stats.api_events,
            latest_seq=self._commits.latest,
        )

    @property
    def latest_seq(self) -> int:
        """The newest committed API event ``seq`` this store has seen."""
        return self._commits.latest

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop taking messages, let the writer finish what it accepted, stop everything.

        Every ``wait_for`` and ``follow`` ends at once (``wait_for`` raises
        :class:`StoreClosed`). The writer checkpoints on its way out, so the main
        database file alone holds every committed event.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._commits.close()
        self._projectors.stop_all()
        for reader in self._readers:
            _stop(reader)
        if self._writer is not None:
            _stop(self._writer)
        figures = self._stats
        logger.info(
            "closed %s at seq %d after %d commits (%d messages, %d relay events applied)",
            self.path,
            self._commits.latest,
            figures.commits,
            figures.messages,
            figures.relay_events,
        )

    def __enter__(self) -> EventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the store is closed; open it again to send messages")

    def _reader(self) -> ActorRef[ReaderActor]:
        return self._readers[next(self._next_reader) % len(self._readers)]

    def _ask_reader(self, message: Any, timeout: float | None = None) -> Any:
        reply = OneShotReply()
        ref = self._reader()
        _deliver(ref, Envelope(message, reply))
        return self._get(reply, timeout, ref, message)

    def _get(
        self,
        future: OneShotReply,
        timeout: float | None,
        actor: ActorRef[Any] | None,
        message: object,
    ) -> Any:
        """Wait for ``future``'s answer: raise AskTimeout past ``timeout``, StoreClosed
        when ``actor`` dies first (checked every ``_DEAD_CHECK_SECONDS``)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = _DEAD_CHECK_SECONDS
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            try:
                return future.get(timeout=wait)
            except ActorDeadError as exc:
                raise StoreClosed("the store closed before answering") from exc
            except pykka.Timeout:
                if actor is not None and not actor.is_alive():
                    raise StoreClosed("the store closed before answering") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise AskTimeout(
                        f"{type(message).__name__} got no reply within {timeout} s; it was "
                        "handed over and may still take effect"
                    ) from None

    def _projector(self, session_id: str) -> ActorRef[ProjectorActor]:
        if self._writer is None:
            raise InvalidInput(
                "ObserveRelayEvents needs the writer, but the store was opened read_only"
            )
        self._check_open()
        return self._projectors.get(session_id)

    def _start_projector(self, session_id: str) -> ActorRef[ProjectorActor]:
        return ProjectorActor.start(
            session_id,
            load=self._load_projection,
            send_page=self._send_page,
            capacity=self._capacity,
        )

    def _retire_projector(self, session_id: str) -> None:
        self._projectors.retire(session_id)

    def _writer_ask(self, message: ProjectorWriterMessage) -> Any:
        reply = OneShotReply()
        return self._get(reply, None, self._send(message, reply), message)

    def _load_projection(self, session_id: str) -> MaterializedSession:
        session: MaterializedSession = self._writer_ask(LoadProjection(session_id=session_id))
        return session

    def _send_page(self, session_id: str, page: PageDelta) -> PageCommit:
        """Hand ``page`` to the writer; the returned call waits for its commit."""
        message = CommitPage(session_id=session_id, page=page)
        reply = OneShotReply()
        writer = self._send(message, reply)

        def wait() -> tuple[RelayCursor, int]:
            result: tuple[RelayCursor, int] = self._get(reply, None, writer, message)
            return result

        return wait


def _deliver(ref: ActorRef[Any], envelope: Envelope) -> None:
    try:
        ref.tell(envelope)  # blocks while the actor's inbox is full
    except ActorDeadError as exc:
        raise StoreClosed("the store's actors have stopped") from exc


def _check_timeout(timeout: object) -> None:
    if timeout is not None and (
        type(timeout) not in (int, float) or not 0 <= timeout < float("inf")  # type: ignore[operator]
    ):
        raise InvalidInput("timeout must be None or a finite number of seconds >= 0")


def _stop(ref: ActorRef[Any]) -> None:
    with contextlib.suppress(ActorDeadError):
        ref.stop(block=True)


def _file_stamp(path: Path) -> tuple[float, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime, info.st_size)
