"""Maintenance beside a live writer: the store's desk takes requests, a command waits.

One process writes a store (its ``flock``). ``relaystore compact``, ``reproject``,
``prune-log``, ``vacuum``, ``delete`` and ``checkpoint`` change it, so while a
supervisor holds it they do not open a second writer: they leave a request in the
store's ``maintenance_requests`` table (:mod:`relaystore.storage.requests`), and the
supervisor's own store runs it and records the answer, which the command prints.

Why a table the writer polls, not a socket the embedder opts into: it needs nothing of
the embedder. Every writable ``EventStore`` (and ``AsyncEventStore``) of this build has
a :class:`MaintenanceDesk`, so the command works beside any supervisor as it is, with no
listening socket to secure, name or clean up; the request, its state and its answer are
rows in the same file, so a killed command, a restarted supervisor or a second command
all see one truth, and a request is run once (by its id, in one store's one desk). The
cost is a poll: the desk reads the open requests through a reader every
:data:`REQUEST_POLL_SECONDS` (one indexed query; no write, no commit, when there are none), so
a request waits up to that long to be taken. The command's connection writes nothing
but its request row (one short transaction; it takes no lock file and never migrates):
every change to the store's data is still made by its one writer.

Must not: import the store's core. The core starts the desk and hands itself in (a
:class:`~relaystore.actors.maintenance.runs.MaintainedStore`); a command hands
:func:`maintain` the opener of its own store.

Guarantees:

* When no writer holds the store, the command opens it itself and runs the request
  there (:func:`maintain`), as before; with ``request_id`` an answer already recorded
  under that id is printed instead of running again.
* When a writer of this build holds it (its lock file says it takes requests and its
  process runs), the request is recorded ``pending`` and the command waits. If no
  writer takes it within ``timeout`` seconds, the command withdraws it (a conditional
  delete: withdrawn or taken, never both) and raises :class:`RequestUnanswered`;
  nothing of it was done. Once taken, the command waits for the answer while the
  process that took it runs (a long ``vacuum`` is not cut short); if that process
  ends first, the command says so, and the next writer fails the request as
  interrupted (each of its steps was one transaction: whole, or not done).
* Once: a request id names one request for good; submitting the same id again (the
  command killed and run again with ``--request-id``) waits for, or prints, that
  request's answer, and an identical request submitted while one is open joins it
  (the command run again without the id). The desk runs requests one at a time, oldest
  first, and skips (fails as abandoned) a pending one whose command is gone.
* Never stuck: a row that does not read is answered failed and skipped; a run failed by
  a foreign SQLite lock is run again after each of :data:`LOCK_RETRY_SECONDS`, then
  answered; an answer the store could not record is recorded at the next poll the lock
  allows, before another request is taken; a row left ``running`` by an earlier writer
  is answered interrupted at the next poll. A failure is logged once, not every poll.
* A holder that takes no requests (an older build, or a bare ``open_writer``) is
  refused in one line naming its process (pid and name), as is any other refusal to
  open (``StoreLocked.holder_pid``).
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from ...domain.errors import (
    InvalidInput,
    RequestUnanswered,
    StoreClosed,
    StoreError,
    StoreLocked,
    WriterStopped,
)
from ...domain.maintenance import (
    ABANDONED,
    INTERRUPTED,
    MaintenanceAnswer,
    MaintenanceRequest,
    StoredRequest,
    decode_request,
    encode_request,
    failed_for_a_lock,
    request_kind,
)
from ...storage.connection import open_requester
from ...storage.requests import load_request, submit_request, withdraw_request
from ...storage.write_lock import LockHolder, process_alive, read_lock_holder
from ..internal import (
    ClaimRequest,
    FinishRequest,
    LoadOpenRequests,
)
from .runs import MaintainedStore, failed_answer, run_request

__all__ = [
    "LOCK_RETRY_SECONDS",
    "REQUEST_POLL_SECONDS",
    "REQUEST_TIMEOUT_SECONDS",
    "MaintenanceDesk",
    "maintain",
]

logger = logging.getLogger(__name__)

REQUEST_POLL_SECONDS = 0.2
"""How often a store's desk looks for requests (the longest a request waits to be taken
by an idle desk)."""
REQUEST_TIMEOUT_SECONDS = 30.0
"""How long a command waits, by default, for a writer to take its request."""
_WAIT_SECONDS = 0.05
"""How often a waiting command reads its request's row."""
_BATCH = 8
"""How many open requests the desk reads at a time."""
LOCK_RETRY_SECONDS = (1.0, 2.0, 4.0)
"""A request whose run failed because another connection held the SQLite lock past
its busy timeout (``StoreBusy``, as the writer refuses a batch, or ``StoreLocked``:
:func:`~relaystore.domain.maintenance.failed_for_a_lock`) is run again after each of these waits (each step is
one transaction, so the failed one did nothing); failing still, it is answered failed."""
_DESK_STOP_SECONDS = 1.0
"""How long closing the store waits for the desk to finish the step it is in."""

Announce = Callable[[str, LockHolder], None]
"""Told the request id and the holder once a request is handed to a writer."""


class MaintenanceDesk:
    """Takes the maintenance requests of one writable store, one at a time (see the
    module). A daemon thread owned by the store's core, started when the store opens
    and stopped when it closes."""

    def __init__(self, core: MaintainedStore) -> None:
        self._core = core
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name="relaystore-maintenance", daemon=True
        )
        self._unrecorded: tuple[str, MaintenanceAnswer] | None = None
        """The answer of the request last run, until the store records it."""
        self._warned: str | None = None
        """The last failure logged: the same one again is not logged every poll."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop taking requests; waits up to a second for the step in progress (a
        request still running when the store closes is failed as interrupted by the
        next writer)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(_DESK_STOP_SECONDS)

    def _serve(self) -> None:
        while True:
            try:
                self._step()
            except StoreClosed:
                return
            except StoreError as exc:  # the next poll tries again
                if self._fresh(f"maintenance requests: {exc}"):
                    logger.warning(
                        "%s (tried again every %g s)", self._warned, REQUEST_POLL_SECONDS
                    )
            except Exception as exc:  # a bug must not end the desk silently
                if self._fresh(f"maintenance requests: unexpected failure: {exc!r}"):
                    logger.exception("%s", self._warned)
            else:
                self._warned = None
            if self._stop.wait(REQUEST_POLL_SECONDS):
                return

    def _fresh(self, line: str) -> bool:
        """Whether ``line`` is not the failure logged last (then it is, from now)."""
        fresh = line != self._warned
        self._warned = line
        return fresh

    def _step(self) -> None:
        """Record the last answer if it is not yet, then go through the open requests:
        fail a damaged row, fail a running one (this desk runs one request at a time,
        here, and the writer is this process's: a running row is one an earlier writer
        left), take a pending one."""
        if self._unrecorded is not None:
            request_id, answer = self._unrecorded
            self._ask(FinishRequest(request_id=request_id, answer=answer))
            self._unrecorded = None
        for stored in self._ask(LoadOpenRequests(limit=_BATCH)):
            if self._stop.is_set():
                return
            if stored.damaged is not None:
                damaged = MaintenanceAnswer(
                    failed=True, error=stored.damaged, error_type="InvalidInput"
                )
                self._finish(stored, damaged)
                logger.warning("maintenance requests: %s; answered failed", stored.damaged)
            elif stored.state == "running":
                interrupted = MaintenanceAnswer(
                    failed=True, error=INTERRUPTED, error_type="WriterStopped"
                )
                self._finish(stored, interrupted)
            else:
                self._take(stored)

    def _finish(self, stored: StoredRequest, answer: MaintenanceAnswer) -> None:
        self._ask(
            FinishRequest(
                request_id=stored.request_id,
                answer=answer,
                from_state=stored.state,
                rowid=stored.rowid,
            )
        )

    def _ask(self, message: object) -> Any:
        self._core.check_open()
        return self._core.ask_blocking(message)

    def _take(self, stored: StoredRequest) -> None:
        request_id = stored.request_id
        if not process_alive(stored.requester_pid):
            abandoned = MaintenanceAnswer(failed=True, error=ABANDONED)
            self._ask(
                FinishRequest(
                    request_id=request_id,
                    answer=abandoned,
                    from_state="pending",
                    requester_pid=stored.requester_pid,
                )
            )
            return
        if not self._ask(ClaimRequest(request_id=request_id, pid=os.getpid())):
            return  # withdrawn meanwhile
        try:
            request = decode_request(stored.request_json)
        except StoreError as exc:
            answer = failed_answer(exc)
        else:
            logger.info("maintenance request %s: %s", request_id, request_kind(request))
            answer = self._run(request)
            for wait in LOCK_RETRY_SECONDS:  # a foreign SQLite lock passes: run it again
                if not failed_for_a_lock(answer) or self._stop.wait(wait):
                    break
                logger.info("maintenance request %s: run again after %g s", request_id, wait)
                answer = self._run(request)
        # The answer says whose desk ran it (the command's --json reports it).
        self._unrecorded = (request_id, msgspec.structs.replace(answer, writer_pid=os.getpid()))
        self._ask(FinishRequest(request_id=request_id, answer=self._unrecorded[1]))
        self._unrecorded = None

    def _run(self, request: MaintenanceRequest) -> MaintenanceAnswer:
        try:
            return run_request(self._core, str(self._core.path), request)
        except StoreClosed:
            raise
        except Exception as exc:  # answered, never left running
            logger.exception("maintenance request failed unexpectedly")
            return MaintenanceAnswer(
                failed=True,
                error=f"the request failed unexpectedly: {exc!r}",
                error_type=type(exc).__name__,
            )


def maintain(
    path: str | os.PathLike[str],
    request: MaintenanceRequest,
    *,
    open_store: Callable[[str | os.PathLike[str]], MaintainedStore],
    timeout: float = REQUEST_TIMEOUT_SECONDS,
    request_id: str | None = None,
    announce: Announce | None = None,
) -> MaintenanceAnswer:
    """Run ``request`` on the store at ``path``: itself when no writer holds the store,
    else through the holder's desk (see the module). ``open_store`` opens the store here
    (the command's own; it raises :class:`StoreLocked` while a writer holds it). Raises
    :class:`StoreLocked` naming a holder that takes no requests,
    :class:`RequestUnanswered` when none took it in ``timeout`` seconds, and the store's
    typed errors."""
    text = encode_request(request)
    for _ in range(2):  # a holder that is gone before it takes the request: open it here
        try:
            core = open_store(path)
        except StoreLocked as locked:
            holder = read_lock_holder(path)
            if holder is None or not holder.takes_requests or not holder.alive():
                raise _holder_refusal(locked, holder) from None
            answer = _ask_holder(path, request_id, request, text, holder, timeout, announce)
            if answer is not None:
                return answer
            continue
        try:
            if request_id is not None:
                recorded = _recorded(path, request_id, text)
                if recorded is not None:
                    return recorded
            return run_request(core, os.fspath(path), request)
        finally:
            core.close()
    raise StoreLocked(  # pragma: no cover - a holder came and went twice meanwhile
        "the store's writer changed twice while the request waited; run the command again",
        path=os.fspath(path),
    )


def _holder_refusal(locked: StoreLocked, holder: LockHolder | None) -> StoreLocked:
    if holder is None or not holder.alive():
        return locked
    return StoreLocked(
        f"the store is open for writing by {holder.describe()}, which takes no maintenance "
        "requests (a writer older than relaystore 0.4, or one opened without an EventStore); "
        "stop it first, or run this where its own store is open",
        holder_pid=holder.pid,
        path=locked.path,
    )


def _recorded(path: str | os.PathLike[str], request_id: str, text: str) -> MaintenanceAnswer | None:
    """The answer recorded under ``request_id`` (None: none yet)."""
    connection = open_requester(path)
    try:
        stored = load_request(connection, request_id)
    finally:
        connection.close()
    if stored is None:
        return None
    _same_request(stored, request_id, text)
    return stored.answer


def _same_request(stored: StoredRequest, request_id: str, text: str) -> None:
    if stored.request_json != text:
        raise InvalidInput(
            f"request id {request_id} names another request ({stored.kind}); give a new id, or none"
        )


def _ask_holder(
    path: str | os.PathLike[str],
    request_id: str | None,
    request: MaintenanceRequest,
    text: str,
    holder: LockHolder,
    timeout: float,
    announce: Announce | None,
) -> MaintenanceAnswer | None:
    """Hand the request to ``holder``'s desk and wait for its answer (see the module);
    None: the holder was gone before it took the request, which was withdrawn."""
    connection = open_requester(path)
    try:
        wanted = request_id or secrets.token_hex(16)
        stored = submit_request(connection, wanted, request_kind(request), text, os.getpid())
        if request_id is not None:
            _same_request(stored, request_id, text)
        request_id = stored.request_id
        if announce is not None:
            announce(request_id, holder)
        deadline = time.monotonic() + timeout
        while True:
            current = load_request(connection, request_id)
            if current is None:
                raise StoreError(
                    f"maintenance request {request_id} was removed before it was answered"
                )
            if current.answer is not None:
                return current.answer
            if current.state == "pending":
                gone = not holder.alive()
                if gone or time.monotonic() >= deadline:
                    if withdraw_request(connection, request_id):
                        if gone:
                            return None
                        raise RequestUnanswered(
                            f"no writer took maintenance request {request_id} within "
                            f"{timeout:g} s ({holder.describe()} holds the store); it was "
                            "withdrawn and nothing was done: run the command again",
                            request_id=request_id,
                            path=os.fspath(Path(path)),
                        )
                    continue  # taken meanwhile: wait for its answer
            elif current.taken_by_pid is not None and not process_alive(current.taken_by_pid):
                raise WriterStopped(
                    f"process {current.taken_by_pid} took maintenance request {request_id} "
                    "and ended before answering; what it did is whole (each step is one "
                    "transaction): run the command again"
                )
            time.sleep(_WAIT_SECONDS)
    finally:
        connection.close()
