"""The :class:`EventStore` facade: what a supervisor embeds.

``EventStore.open`` starts one writer actor (the only write connection), ``readers``
reader actors and, on first use, one projector actor per session. ``ask`` routes a
message by its type and returns its typed reply or raises its typed error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from itertools import count
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, get_args

import apsw
import pykka
from pykka import ActorDeadError, ActorRef, ThreadingFuture

from relaystore.actors.projector import ProjectorActor
from relaystore.actors.reader import ReaderActor
from relaystore.actors.told import Told
from relaystore.actors.writer import Job, WriterActor
from relaystore.domain.errors import InvalidInput, StoreClosed, UnknownSession
from relaystore.domain.materialized import MaterializedSession, MaterializedSessionMutation
from relaystore.domain.messages import (
    BeginCheckpoint,
    CorrelateCheckpointBarrier,
    DeleteSession,
    FinishFailedCheckpoint,
    LoadApiEvents,
    ObserveRelayEvents,
    ReaderMessage,
    RecordActivities,
    RecordStartupFault,
    RecoverInterruptedCheckpoints,
    Request,
    SaveLifecycleSession,
    SaveRequestedCheckpoint,
    SaveSession,
    WriterMessage,
)
from relaystore.domain.relay import RelayEvent
from relaystore.storage import activity, checkpoints, sessions
from relaystore.storage.connection import Synchronous, open_reader, open_writer
from relaystore.storage.materialized import load_materialized_session
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.projection import ApplyOutcome, apply_projection_page

__all__ = ["EventStore", "Synchronous"]

logger = logging.getLogger(__name__)

R = TypeVar("R")

_READER_TYPES: tuple[type[Request[Any]], ...] = get_args(ReaderMessage)
_WRITER_TYPES: tuple[type[Request[Any]], ...] = get_args(WriterMessage)


def _writer_operation(message: Request[Any]) -> Callable[[apsw.Connection], Any]:
    match message:
        case SaveSession(record=record):
            return lambda c: sessions.save_session(c, record)
        case SaveLifecycleSession(record=record):
            return lambda c: sessions.save_lifecycle_session(c, record)
        case DeleteSession(session_id=session_id):
            return lambda c: sessions.delete_session(c, session_id)
        case RecordActivities(activities=items, recorded_at_ms=at_ms):
            return lambda c: activity.record_activities(c, items, at_ms)
        case RecordStartupFault(session_id=session_id, message=text):
            return lambda c: activity.record_startup_fault(c, session_id, text)
        case BeginCheckpoint(session=record, command_id=command_id):
            return lambda c: checkpoints.begin_checkpoint(c, record, command_id)
        case SaveRequestedCheckpoint(session=record, command_id=command_id):
            return lambda c: checkpoints.save_requested_checkpoint(c, record, command_id)
        case FinishFailedCheckpoint(
            session=record, command_id=command_id, deferred=deferred, message=text
        ):
            return lambda c: checkpoints.finish_failed_checkpoint(
                c, record, command_id, deferred, text
            )
        case CorrelateCheckpointBarrier(
            session_id=session_id, operation_id=operation_id, command_id=command_id
        ):
            return lambda c: checkpoints.correlate_checkpoint_barrier(
                c, session_id, operation_id, command_id
            )
        case RecoverInterruptedCheckpoints(updated_at=updated_at):
            return lambda c: checkpoints.recover_interrupted_checkpoints(c, updated_at)
    raise InvalidInput(f"{type(message).__name__} is not a writer message")


class _Commits:
    """The newest committed ``seq``, and a way to wait for it without polling."""

    def __init__(self, latest: int) -> None:
        self._latest = latest
        self._changed = threading.Condition()

    def publish(self, latest: int) -> None:
        with self._changed:
            if latest > self._latest:
                self._latest = latest
                self._changed.notify_all()

    @property
    def latest(self) -> int:
        return self._latest

    def wait_for(self, seq: int, timeout: float | None) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._latest >= seq, timeout)


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
        group_commit: bool = True,
    ) -> EventStore:
        """Open (creating or migrating) the store at ``path``.

        Raises ``SchemaMismatch`` for a store this build must not touch and
        ``StoreLocked`` when another process (or another ``open`` in this one) holds it
        for writing. ``read_only`` starts readers only: no migration, no lock.
        """
        if readers < 1:
            raise InvalidInput(f"readers must be at least 1, got {readers}")
        if queue_capacity < 1:
            raise InvalidInput(f"queue_capacity must be at least 1, got {queue_capacity}")
        return cls(Path(path), readers, queue_capacity, synchronous, read_only, group_commit)

    def __init__(
        self,
        path: Path,
        readers: int,
        capacity: int,
        synchronous: Synchronous,
        read_only: bool,
        group_commit: bool,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._closed = False
        self._lock = threading.Lock()
        self._projectors: dict[str, ActorRef[ProjectorActor]] = {}
        self._writer: ActorRef[WriterActor] | None = None
        self._readers: list[ActorRef[ReaderActor]] = []
        self._next_reader = count()
        started: list[ActorRef[Any]] = []
        try:
            if not read_only:
                handle = open_writer(path, synchronous=synchronous)
                self._commits = _Commits(load_latest_seq(handle.connection))
                self._writer = WriterActor.start(
                    handle,
                    capacity=capacity,
                    group_commit=group_commit,
                    on_commit=self._commits.publish,
                )
                started.append(self._writer)
            for _ in range(readers):
                reader = ReaderActor.start(open_reader(path))
                started.append(reader)
                self._readers.append(reader)
            if read_only:
                self._commits = _Commits(self._ask_reader(LoadApiEvents(limit=1)).latest_seq)
        except BaseException:
            for ref in started:
                ref.stop()
            raise

    # -- routing -------------------------------------------------------------------

    def ask(self, message: Request[R], timeout: float | None = None) -> R:
        """Send ``message`` to the actor that owns it and return its typed reply."""
        self._check_open()
        if isinstance(message, _READER_TYPES):
            return self._ask_reader(message, timeout)  # type: ignore[no-any-return]
        if isinstance(message, ObserveRelayEvents):
            ref = self._projector(message.session_id)
            return self._get(ref.ask(message, block=False), timeout)  # type: ignore[no-any-return]
        if isinstance(message, _WRITER_TYPES):
            future: pykka.Future[Any] = ThreadingFuture()
            self._submit(Job(type(message).__name__, _writer_operation(message), future))
            return self._get(future, timeout)  # type: ignore[no-any-return]
        raise InvalidInput(f"{type(message).__name__} is not a relaystore message")

    def tell(self, message: Request[Any]) -> None:
        """Send ``message`` without waiting; a failure is logged and stops nothing."""
        self._check_open()
        if isinstance(message, _WRITER_TYPES):
            self._submit(Job(type(message).__name__, _writer_operation(message)))
        elif isinstance(message, ObserveRelayEvents):
            self._projector(message.session_id).tell(Told(message))
        elif isinstance(message, _READER_TYPES):
            self._reader().tell(Told(message))
        else:
            raise InvalidInput(f"{type(message).__name__} is not a relaystore message")

    def wait_for(self, seq: int, timeout: float | None = None) -> bool:
        """Block until an API event with ``seq`` or higher is committed.

        Woken by the writer's commits. In a read-only store (the writer is another
        process) it watches the store's WAL file for changes instead.
        """
        if not self.read_only:
            return self._commits.wait_for(seq, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        wal = Path(f"{self.path}-wal")
        last_stamp: tuple[float, int] | None = None
        while True:
            stamp = _file_stamp(wal)
            if stamp != last_stamp:
                last_stamp = stamp
                latest = self._ask_reader(LoadApiEvents(limit=1)).latest_seq
                self._commits.publish(latest)
                if latest >= seq:
                    return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    @property
    def latest_seq(self) -> int:
        """The newest committed API event ``seq`` this store has seen."""
        return self._commits.latest

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop taking messages, let the writer finish what it accepted, stop everything."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            projectors = list(self._projectors.values())
        for projector in projectors:
            _stop(projector)
        if self._writer is not None:
            _stop(self._writer)
        for reader in self._readers:
            _stop(reader)

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
        return self._get(self._reader().ask(message, block=False), timeout)

    def _submit(self, job: Job) -> None:
        writer = self._writer
        if writer is None:
            raise InvalidInput(f"{job.label} needs the writer, but the store was opened read_only")
        try:
            writer.tell(job)  # blocks while the inbox is full
        except ActorDeadError as exc:
            raise StoreClosed("the store's writer has stopped") from exc

    def _get(self, future: pykka.Future[Any], timeout: float | None) -> Any:
        try:
            return future.get(timeout=timeout)
        except ActorDeadError as exc:
            raise StoreClosed("the store closed before answering") from exc

    def _projector(self, session_id: str) -> ActorRef[ProjectorActor]:
        if self._writer is None:
            raise InvalidInput(
                "ObserveRelayEvents needs the writer, but the store was opened read_only"
            )
        with self._lock:
            self._check_open()
            ref = self._projectors.get(session_id)
            if ref is None or not ref.is_alive():
                # A projector that died is restarted from the stored projection.
                ref = ProjectorActor.start(
                    session_id, load=self._load_projection, write_page=self._write_page
                )
                self._projectors[session_id] = ref
            return ref

    def _writer_call(self, label: str, run: Callable[[apsw.Connection], R]) -> R:
        future: pykka.Future[Any] = ThreadingFuture()
        self._submit(Job(label, run, future))
        return self._get(future, None)  # type: ignore[no-any-return]

    def _load_projection(self, session_id: str) -> MaterializedSession:
        def load(connection: apsw.Connection) -> MaterializedSession:
            session = load_materialized_session(connection, session_id)
            if session is None:
                raise UnknownSession(session_id)
            return session

        return self._writer_call("load_projection", load)

    def _write_page(
        self, session_id: str, page: list[tuple[RelayEvent, MaterializedSessionMutation]]
    ) -> tuple[int, int]:
        def write(connection: apsw.Connection) -> tuple[int, int]:
            def fill(projection_page: Any) -> tuple[int, int]:
                applied = 0
                for event, mutation in page:
                    outcome = projection_page.apply(
                        event.ordinal,
                        event.previous_digest,
                        event.digest,
                        mutation,
                    )
                    if outcome is ApplyOutcome.APPLIED:
                        applied += 1
                return projection_page.frontier.ordinal, applied

            result: tuple[int, int] = apply_projection_page(connection, session_id, fill)
            return result

        return self._writer_call("apply_projection_page", write)


def _stop(ref: ActorRef[Any]) -> None:
    with contextlib.suppress(ActorDeadError):
        ref.stop(block=True)


def _file_stamp(path: Path) -> tuple[float, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return (info.st_mtime, info.st_size)
