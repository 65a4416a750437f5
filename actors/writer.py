"""The writer actor: the only place a write connection is used.

Jobs arrive FIFO through a bounded inbox (a full inbox blocks the sender). With group
commit on, the writer takes every job already waiting (up to ``max_batch``), runs them
in one IMMEDIATE transaction with a savepoint each, commits once, and only then replies
to each sender: a failing job rolls back only its own savepoint. The schema is checked
under the write lock before any job runs. If a commit fails, nobody can tell what was
written, so the writer answers that batch and every later job with ``WriterStopped``.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw
import pykka
from pykka import ThreadingActor

from relaystore.domain.errors import StoreError, WriterStopped
from relaystore.storage.connection import WriterConnection
from relaystore.storage.paging import load_latest_seq

__all__ = ["Job", "WriterActor", "blocking_job"]

logger = logging.getLogger(__name__)

Operation = Callable[[apsw.Connection], Any]


@dataclass(slots=True)
class Job:
    """One unit of work for the writer: ``run`` gets the connection inside a savepoint.

    ``reply`` (if any) gets the result or the error after the enclosing commit.
    """

    label: str
    run: Operation
    reply: pykka.Future[Any] | None = None


class WriterActor(ThreadingActor):
    """Runs :class:`Job` s on the single write connection, FIFO, with group commit.

    ``on_commit`` gets the newest committed API event ``seq`` after every commit.
    """

    def __init__(
        self,
        writer: WriterConnection,
        *,
        capacity: int,
        group_commit: bool,
        on_commit: Callable[[int], None],
        max_batch: int = 256,
    ) -> None:
        self._capacity = capacity
        super().__init__()
        self._writer = writer
        self._on_commit = on_commit
        self._max_batch = max_batch if group_commit else 1
        self._stopped_by: str | None = None

    def _create_actor_inbox(self) -> queue.Queue[Any]:  # type: ignore[override]
        # pykka's inbox hook: a bounded queue makes a full inbox block the sender.
        return queue.Queue(maxsize=self._capacity)

    def on_stop(self) -> None:
        self._writer.close()

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, Job):
            logger.warning("writer ignored an unexpected message %r", message)
            return None
        batch = [message]
        held_back = None  # a pykka message (stop) found while draining keeps its place
        while len(batch) < self._max_batch:
            try:
                envelope = self.actor_inbox.get_nowait()  # type: ignore[attr-defined]
            except queue.Empty:
                break
            if not isinstance(envelope.message, Job):
                held_back = envelope
                break
            batch.append(envelope.message)
        self._run_batch(batch)
        if held_back is not None:
            try:
                result = self._handle_receive(held_back.message)
            except Exception:  # noqa: BLE001 - handed to the waiting caller
                if held_back.reply_to is not None:
                    held_back.reply_to.set_exception()
            else:
                if held_back.reply_to is not None:
                    held_back.reply_to.set(result)
        return None

    def _run_batch(self, batch: list[Job]) -> None:
        if self._stopped_by is not None:
            _answer_all(batch, WriterStopped(self._stopped_by))
            return
        connection = self._writer.connection
        try:
            connection.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            _answer_all(batch, WriterStopped(f"writer could not begin a transaction: {exc}"))
            return
        try:
            self._writer.check_schema()
        except StoreError as exc:
            connection.execute("ROLLBACK")
            _answer_all(batch, exc)
            return
        results: list[tuple[Job, Any, StoreError | None]] = []
        for job in batch:
            try:
                with connection:  # a savepoint: a failure undoes only this job
                    value = job.run(connection)
            except StoreError as exc:
                results.append((job, None, exc))
            except Exception as exc:
                logger.exception("writer job %s failed unexpectedly", job.label)
                results.append((job, None, WriterStopped(f"{job.label} failed: {exc!r}")))
            else:
                results.append((job, value, None))
        try:
            connection.execute("COMMIT")
        except apsw.Error as exc:
            self._stopped_by = (
                f"commit failed ({exc}); the store may or may not hold the last batch, "
                "so the writer accepts no more work"
            )
            logger.error("writer stopped: %s", self._stopped_by)
            with contextlib.suppress(apsw.Error):
                connection.execute("ROLLBACK")
            _answer_all(batch, WriterStopped(self._stopped_by))
            return
        try:
            self._on_commit(load_latest_seq(connection))
        except Exception:
            logger.exception("commit notification failed")
        for job, value, error in results:
            _answer(job, value, error)


def _answer(job: Job, value: Any, error: StoreError | None) -> None:
    """Reply to the job's sender, or log the failure of a job nobody waits for."""
    if error is None:
        if job.reply is not None:
            job.reply.set(value)
    elif job.reply is None:
        logger.error("writer job %s failed: %s", job.label, error)
    else:
        job.reply.set_exception(exc_info=(type(error), error, error.__traceback__))


def _answer_all(batch: list[Job], error: StoreError) -> None:
    for job in batch:
        _answer(job, None, error)


def blocking_job(gate: threading.Event, entered: threading.Event) -> Job:
    """A job that sets ``entered`` and holds the writer until ``gate`` is set.

    For tests of backpressure and shutdown.
    """

    def wait(_connection: apsw.Connection) -> None:
        entered.set()
        gate.wait()

    return Job(label="blocking", run=wait)
