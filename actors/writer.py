"""The writer actor: the only place the write connection is used.

Messages arrive FIFO through a bounded inbox (a full inbox blocks the sender), each
in an :class:`~relaystore.actors.envelope.Envelope` that carries where its answer goes. The
writer matches each typed message to the storage function that performs it. With group commit on, it
keeps taking messages while more are already waiting (up to ``max_batch``), runs them
in one :class:`~relaystore.storage.batch.Batch` (a savepoint each; a batch of one
message needs none), commits once, and only then replies to each sender: a failing
message rolls back only its own savepoint.

Waiting for company. The senders with an ``ask`` in flight at the end of a commit (the
ones it answered, and the ones whose asks arrived meanwhile) are all about to send
again; committing before they have would pay an fsync for a fraction of them. So while
a batch holds fewer asks than that count, the writer waits for the next message, up to
the average COMMIT's duration (at most :data:`COMPANY_WAIT_SECONDS`) from the batch's
first message, then commits what it has. The count follows the senders: a batch that
waited in vain answers fewer asks, so the next one expects fewer. A lone sender (one ask
in flight) never waits, and messages nobody waits for (``tell``) never count.

If a commit fails, nobody can tell what was written, so the writer answers that batch
and every later message with ``WriterStopped``. A batch that cannot begin because another
connection holds SQLite's write lock past the busy timeout (an operator's ``sqlite3``
shell, a backup tool) is different: nothing was written, so the writer answers that
batch with the retryable ``StoreBusy``, counts it (``StoreMetrics.busy_refusals``) and
serves on; its next batch waits for the lock again. Messages nobody waits for (``tell``)
that fail are logged.

The fast path. A blocking ``ask`` (no timeout) from a thread other than the main one
(see below) that finds the writer idle (its inbox empty, no message in its hands) runs
its message as a batch of its own in the asking thread, sparing the two thread hops of
the hand-over (:meth:`WriterPen.write_now <relaystore.actors.writer_pen.WriterPen.write_now>`). The
connection still has one user at a time: the writer holds the :class:`~relaystore.actors.writer_pen.WriterPen` from
each message it takes to the end of its batch, and the fast path only try-acquires it;
"idle" is one check under the inbox's mutex (:class:`~relaystore.actors.inbox.HeldInbox`),
so a ``tell`` the same thread sent before still runs first. The batch is the writer's
own (:meth:`WriterActor._commit`): same commit, same answers, same figures. Concurrent
senders find the pen taken or the inbox busy and hand over as before, and while the
last commit saw other asks in flight the fast path stays shut (they are about to send
again: the writer waits for them, as above), so group commit still gathers them.
Stopping, the writer takes the pen before it closes the connection (waiting for a
fast-path batch in flight) and retires it, so no later ask runs here.

Never in the main thread. Python runs signal handlers, and raises ``KeyboardInterrupt``,
only in the main thread, between any two of its bytecodes: a batch there could be left
half done (a transaction open on the shared connection, the pen locked, a commit
unannounced) or re-entered (a handler that calls ``close`` or ``ask`` while the batch
holds the pen deadlocks). So the main thread always hands over, as it did before, and
waits in :meth:`~relaystore.actors.envelope.OneShotReply.get`, where an interrupt only
leaves its answer unread. Another thread meets no signal; what can still end its batch
early is an exception the batch's own code raises outside a step (a ``BaseException``
from a logging handler or a commit listener; a step's own exceptions are its answer,
:meth:`Batch.run <relaystore.storage.batch.Batch.run>`), or one planted by
``PyThreadState_SetAsyncExc``, which CPython itself never calls. For those, the pen is
released in a ``finally`` and :meth:`WriterActor._write_alone` settles the connection
(:func:`~relaystore.storage.batch.settle_batch`: no transaction left open, a commit that
ran announced) before the exception goes on to the asker. pykka never interrupts a
thread (stopping an actor is a message), and apsw raises only ``apsw.Error`` s or what a
callback of ours raised (the write connection has none).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pykka import ActorRef

from ..domain.errors import StoreBusy, StoreError, UnknownSession, WriterStopped
from ..domain.messages import (
    BeginCheckpoint,
    CompactStore,
    CompactTranscript,
    CorrelateCheckpointBarrier,
    DeleteSession,
    FinishFailedCheckpoint,
    PruneRelayLog,
    RecordActivities,
    RecordElicitationAnswer,
    RecordStartupFault,
    RecoverInterruptedCheckpoints,
    SaveLifecycleSession,
    SaveRequestedCheckpoint,
    SaveSession,
    SaveSubagent,
    SeedProjection,
)
from ..storage import (
    activity,
    answers,
    checkpoints,
    projection,
    relay_log,
    reproject,
    requests,
    retention,
    sessions,
    subagents,
)
from ..storage.batch import Batch, BatchLost, settle_batch
from ..storage.connection import Synchronous, WriterConnection, open_writer
from ..storage.maintenance import vacuum_store
from ..storage.materialized import load_materialized_session
from ..storage.paging import load_latest_seq
from ..storage.schema import read_store_id
from ..storage.stats import count_sessions_behind
from ..storage.transaction import Connection
from .commits import CommitWatch
from .envelope import Envelope, Unanswerable
from .inbox import BoundedActor, HeldInbox
from .internal import (
    ClaimRequest,
    CommitPage,
    CommitReprojection,
    FinishRequest,
    LoadLoggedLine,
    LoadProjection,
    RecordCheckpoint,
    RecoverRequests,
)
from .metrics import WriterStats
from .routing import WriterTakes
from .writer_pen import WriterPen

__all__ = ["COMPANY_WAIT_SECONDS", "OpenedWriter", "WriterActor", "perform"]

logger = logging.getLogger(__name__)

COMPANY_WAIT_SECONDS = 0.002
"""The longest a batch waits for company (see above); it never waits longer than a
COMMIT takes on average either, since waiting longer would cost more than the commit
it saves (so at ``synchronous=OFF`` it hardly waits)."""


def perform(connection: Connection, message: WriterTakes) -> Any:
    """Carry out one writer message on the write connection (inside its savepoint)."""
    match message:
        case SaveSession(record=record):
            return sessions.save_session(connection, record)
        case SaveLifecycleSession(record=record):
            return sessions.save_lifecycle_session(connection, record)
        case DeleteSession(session_id=session_id):
            return sessions.delete_session(connection, session_id)
        case SaveSubagent(record=record):
            return subagents.save_subagent(connection, record)
        case RecordActivities(activities=items, recorded_at_ms=at_ms):
            return activity.record_activities(connection, items, at_ms)
        case RecordStartupFault(session_id=session_id, message=text):
            return activity.record_startup_fault(connection, session_id, text)
        case RecordElicitationAnswer():
            return answers.record_answer(connection, message)
        case BeginCheckpoint(session=record, command_id=command_id):
            return checkpoints.begin_checkpoint(connection, record, command_id)
        case SaveRequestedCheckpoint(session=record, command_id=command_id):
            return checkpoints.save_requested_checkpoint(connection, record, command_id)
        case FinishFailedCheckpoint(
            session=record, command_id=command_id, deferred=deferred, message=text
        ):
            return checkpoints.finish_failed_checkpoint(
                connection, record, command_id, deferred, text
            )
        case CorrelateCheckpointBarrier(
            session_id=session_id, operation_id=operation_id, command_id=command_id
        ):
            return checkpoints.correlate_checkpoint_barrier(
                connection, session_id, operation_id, command_id
            )
        case RecoverInterruptedCheckpoints(updated_at=updated_at):
            return checkpoints.recover_interrupted_checkpoints(connection, updated_at)
        case LoadProjection(session_id=session_id, transcript=whole):
            session = load_materialized_session(
                connection, session_id, transcript_limit=None if whole else 0
            )
            if session is None:
                raise UnknownSession(session_id)
            return session
        case CommitPage(session_id=session_id, page=page, log=log):
            return projection.commit_page(connection, session_id, page, log=log)
        case CompactTranscript(session_id=session_id):
            return retention.compact_transcript(connection, session_id)
        case SeedProjection(
            session_id=session_id, start=start, queued_prompts=queue, source=source
        ):
            return projection.seed_projection(connection, session_id, start, queue, source)
        case CommitReprojection(session_id=session_id, page=page):
            return reproject.commit_reprojection(connection, session_id, page)
        case LoadLoggedLine(session_id=session_id, ordinal=ordinal):
            return relay_log.load_logged_line(connection, session_id, ordinal)
        case PruneRelayLog(session_id=session_id, through_ordinal=through):
            return relay_log.prune_relay_log(connection, session_id, through)
        case RecordCheckpoint(session_id=session_id, checkpoint=checkpoint):
            return checkpoints.record_checkpoint(connection, session_id, checkpoint)
        case ClaimRequest(request_id=request_id, pid=pid):
            return requests.claim_request(connection, request_id, pid)
        case FinishRequest(request_id=request_id, answer=answer, from_state=state):
            return requests.finish_request(
                connection,
                request_id,
                answer,
                from_state=state,
                requester_pid=message.requester_pid,
                rowid=message.rowid,
            )
        case RecoverRequests(answer=answer):
            return requests.recover_requests(connection, answer)
    raise Unanswerable("writer", message)


@dataclass(frozen=True, slots=True)
class OpenedWriter:
    """A started writer, and what it read from the store as it opened it."""

    ref: ActorRef[WriterActor]
    commits: CommitWatch
    """The newest committed seq, published by the writer after each commit."""
    store_id: str
    take_requests: Callable[[], None]
    """Say in the store's lock file that this writer takes maintenance requests (once
    the store's desk runs)."""
    pen: WriterPen
    """The fast path to this writer (:meth:`WriterPen.write_now <relaystore.actors.writer_pen.WriterPen.write_now>`)."""


class WriterActor(BoundedActor):
    """Runs enveloped writer messages on the single write connection, FIFO, group-committed.

    ``on_commit`` gets the newest committed API event ``seq`` after every commit.
    Everything it does with a message happens holding ``pen``'s lock (see the module).
    """

    inbox_class = HeldInbox

    def __init__(
        self,
        writer: WriterConnection,
        *,
        capacity: int,
        on_commit: Callable[[int], None],
        stats: WriterStats,
        max_batch: int = 256,
        pen: WriterPen | None = None,
    ) -> None:
        super().__init__(capacity=capacity)
        self._writer = writer
        self._on_commit = on_commit
        self._stats = stats
        self._latest = load_latest_seq(writer.connection)
        stats.set_sessions_behind(count_sessions_behind(writer.connection))
        self._max_batch = max_batch
        self._pending: list[Envelope] = []
        self._pending_asks = 0
        """How many of ``_pending`` have a sender waiting for the answer."""
        self._expected_asks = 0
        """How many asks were in flight when the last commit ended (see the module doc)."""
        self._company_deadline = 0.0
        self._commit_seconds = 0.0
        """A running average of how long COMMIT takes (the fsync, at FULL)."""
        self._stopped_by: str | None = None
        self._held: HeldInbox = self.actor_inbox  # type: ignore[assignment]
        self._pen = WriterPen() if pen is None else pen
        self._pen.attach(self._held, self._write_alone)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous,
        capacity: int,
        stats: WriterStats,
        max_batch: int,
    ) -> OpenedWriter:
        """Open the store's write connection (:func:`~relaystore.storage.connection.open_writer`:
        creating or migrating it; its refusals raise here, in the caller's thread), read
        the newest committed seq and the store's id from it, and start the writer on it,
        publishing each commit to the returned :class:`OpenedWriter`'s commit watch."""
        handle = open_writer(path, synchronous=synchronous)
        try:
            commits = CommitWatch(load_latest_seq(handle.connection))
            store_id = read_store_id(handle.connection)
        except BaseException:
            handle.close()
            raise
        pen = WriterPen()
        ref = cls.start(
            handle,
            capacity=capacity,
            on_commit=commits.publish,
            stats=stats,
            max_batch=max_batch,
            pen=pen,
        )
        return OpenedWriter(ref, commits, store_id, handle.take_requests, pen)

    def on_receive(self, message: Any) -> None:
        with self._pen.lock:
            self._receive(message)

    def _receive(self, message: Any) -> None:
        if not isinstance(message, Envelope):
            logger.warning("writer ignored an unexpected message %r", message)
            self._held.finish(1)
            return
        if isinstance(message.message, CompactStore):
            self._flush()  # everything before it commits first, in order
            try:
                self._compact(message)
            finally:
                self._held.finish(1)
            return
        pending = self._pending
        pending.append(message)
        if message.reply is not None:
            self._pending_asks += 1
        if len(pending) >= self._max_batch:
            self._flush()
            return
        waiting_for = self._expected_asks - self._pending_asks
        if len(pending) == 1 and waiting_for > 0:
            wait = min(COMPANY_WAIT_SECONDS, self._commit_seconds)
            self._company_deadline = time.monotonic() + wait
        inbox = self.inbox
        # Group commit: while more messages already wait, take them into this batch.
        if inbox.qsize():
            return
        if waiting_for > 0:
            # The senders of the asks in flight are about to send again: wait for them,
            # briefly (see the module docstring). A lone sender never gets here.
            remaining = self._company_deadline - time.monotonic()
            if remaining > 0 and inbox.wait_for_message(remaining):
                return
        self._flush()

    def on_stop(self) -> None:
        with self._pen.lock:  # waits for a fast-path batch in flight
            try:
                self._flush()
            finally:
                self._pen.retire()
                self._writer.close()

    def on_failure(self, *_: object) -> None:
        with self._pen.lock:
            self._pen.retire()
            self._writer.close()

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if not batch:
            return
        # Until the commit says otherwise (it counts the asks that came in meanwhile).
        self._expected_asks, self._pending_asks = self._pending_asks, 0
        try:
            self._commit(batch)
        finally:
            self._held.finish(len(batch))

    def _write_alone(self, item: Envelope) -> bool:
        """The fast path's batch (the caller holds the pen, the inbox is idle): what
        :meth:`_flush` does with a batch of one that never was in the inbox. False when
        other senders had asks in flight at the last commit: they are about to send
        again, and the writer's own thread waits for them (group commit).

        An exception that escapes the batch (not a step's own: see the module) leaves
        no transaction open and no commit unannounced (:meth:`_settle`); it then goes
        on to the asker, whose message may or may not have been committed."""
        if self._expected_asks > 1:
            return False
        self._expected_asks = 0 if item.reply is None else 1
        try:
            self._commit([item])
        except BaseException:
            self._settle()
            raise
        # What the writer took meanwhile (it waits for the pen) was in flight too.
        self._expected_asks += self._held.held()
        return True

    def _settle(self) -> None:
        """After an exception escaped a batch: roll back what it left open and publish a
        commit it made (:func:`~relaystore.storage.batch.settle_batch`), so the next
        batch begins and every waiter for that commit wakes; when even that fails,
        nobody can tell what the store holds, and the writer stops as after a failed
        commit."""
        try:
            latest = settle_batch(self._writer)
        except BatchLost as exc:
            self._stopped_by = exc.detail + "; the writer accepts no more work"
            logger.error("writer stopped: %s", self._stopped_by)
            return
        if latest > self._latest:
            self._latest = latest
            try:
                self._on_commit(latest)
            except Exception:
                logger.exception("commit notification failed")

    def _commit(self, batch: list[Envelope]) -> None:
        if self._stopped_by is not None:
            _answer_all(batch, WriterStopped(self._stopped_by))
            return
        results: list[tuple[Envelope, Any, Exception | None]] = []
        started = time.perf_counter()
        try:
            with Batch(self._writer) as transaction:
                if len(batch) == 1:  # no savepoint: a failure rolls back the transaction
                    item = batch[0]
                    value, error = transaction.run(perform, item.message, alone=True)
                    results.append((item, value, error))
                else:
                    for item in batch:
                        value, error = transaction.run(perform, item.message)
                        results.append((item, value, error))
                committing = time.perf_counter()
                latest = transaction.commit()
                took = time.perf_counter() - committing
                self._commit_seconds += (took - self._commit_seconds) / 4
        except BatchLost as exc:
            self._stopped_by = exc.detail + "; the writer accepts no more work"
            logger.error("writer stopped: %s", self._stopped_by)
            _answer_all(batch, WriterStopped(self._stopped_by))
            return
        except StoreBusy as exc:  # nothing began: refuse this batch, serve the next
            self._stats.record_busy()
            logger.warning("writer refused a batch of %d: %s", len(batch), exc)
            _answer_all(batch, exc)
            return
        except StoreError as exc:  # the schema check refused the whole batch
            _answer_all(batch, exc)
            return
        self._stats.record(
            messages=len(batch),
            seconds=time.perf_counter() - started,
            relay_events=sum(
                value[1]
                for item, value, error in results
                if error is None and isinstance(item.message, CommitPage)
            ),
            api_events=latest - self._latest,
            held=sum(
                item.message.page.held
                for item, value, error in results
                if error is None and isinstance(item.message, CommitPage) and value[1]
            ),
            sessions_behind=(
                count_sessions_behind(self._writer.connection)
                if any(_may_change_behind(item.message) for item in batch)
                else None
            ),
        )
        self._latest = latest
        try:
            self._on_commit(latest)
        except Exception:
            logger.exception("commit notification failed")
        # Counted before answering, so no answered sender's next ask counts twice.
        self._expected_asks += self.inbox.count_waiting(_is_ask)
        for item, value, error in results:
            _answer(item, value, error)

    def _compact(self, item: Envelope) -> None:
        if self._stopped_by is not None:
            item.answer(None, WriterStopped(self._stopped_by))
            return
        try:
            report = vacuum_store(self._writer.connection)
        except StoreError as exc:
            item.answer(None, exc)
            return
        logger.info("compacted the store: %d pages -> %d", report.pages_before, report.pages_after)
        item.answer(report, None)


def _may_change_behind(message: object) -> bool:
    """Whether committing ``message`` may change which sessions are behind their log."""
    if isinstance(message, CommitPage):
        return message.page.held > 0
    return isinstance(message, CommitReprojection | DeleteSession)


def _is_ask(item: Any) -> bool:
    """Whether an inbox item (pykka's envelope around ours) has a sender waiting."""
    told = getattr(item, "message", None)
    return isinstance(told, Envelope) and told.reply is not None


def _answer(item: Envelope, value: Any, error: Exception | None) -> None:
    if error is not None and not isinstance(error, StoreError):
        name = type(item.message).__name__
        logger.error("writer failed on %s", name, exc_info=error)
        error = WriterStopped(f"{name} failed unexpectedly: {error!r}")
    item.answer(value, error)


def _answer_all(batch: list[Envelope], error: StoreError) -> None:
    for item in batch:
        item.answer(None, error)
