"""The store's projection worker processes: starting, holding, replacing and closing them.

A store runs one worker per core (:class:`WorkerPool`, at most :data:`POOL_LIMIT`);
each projector is given the least busy one when it starts, or the one that holds its
session's projection. A :class:`ProjectionWorker`
is started with the first projector it serves (:meth:`ProjectionWorker.warm`) and again
after it dies, as ``python -P -c`` (``sys.executable``) running the child of
:mod:`~relaystore.actors.workers.child`, so it imports relaystore, never the embedder's
``__main__``. One conversation holds a worker at a time
(:meth:`ProjectionWorker.conversation`), so a session's events are projected in order.

When a session's projector stops, its projection stays *parked* in its worker (``Park``)
and the pool remembers where: the session's next projector is given that worker and
finds its projection there, loading nothing. The pool forgets a parked session (its
worker drops the projection: ``Forget``) when something out of band changes the session
(:meth:`WorkerPool.forget`: a delete or a seed), and past its bounds, oldest first: at
most :data:`PARKED_PER_PROJECTOR` parked sessions per projector of the store's
``max_projectors``, and each worker keeps its parked projections within its share of
:data:`PARKED_BYTES_PER_PROJECTOR` per projector (by estimate) by dropping its oldest.
So a worker holds a session's projection only while the pool routes that session to it:
a ``Forget`` is queued, under the pool's lock, whenever the pool stops routing a session
to the worker that holds it, and a worker sends what is queued for it before its next
conversation (or at once when it is idle). A projection a worker dropped on its own is
loaded again by the next projector of its session.

A worker that says nothing for :data:`SILENCE_SECONDS` in a conversation (it beats every
tenth of that while it projects, so only one that does not run: stopped, hung) or takes
no message for as long is presumed lost (a worker just started has
:data:`~relaystore.actors.workers.pipe.BOOT_SECONDS` for its first word: it imports first, which a busy machine slows): it is killed and :class:`WorkerDied` raised,
as for a broken pipe. Closing waits :data:`_STOP_SECONDS` for all the workers together,
then kills those left.

Owns the processes, their pipes and the sessions to forget. Must not: project, commit
or retry a message (the proxy of :mod:`~relaystore.actors.workers.proxy` does), or decide
what crosses the pipe (:mod:`~relaystore.actors.workers.protocol`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path

from ...domain.errors import StoreClosed, WorkerLost
from .pipe import WorkerDied, WorkerPipe, WorkerStart
from .protocol import Census, Done, Forget, Park, Start

__all__ = [
    "PARKED_BYTES_PER_PROJECTOR",
    "PARKED_PER_PROJECTOR",
    "POOL_LIMIT",
    "SILENCE_SECONDS",
    "ProjectionWorker",
    "WorkerDied",  # re-exported from worker_pipe, where the pipe raises it
    "WorkerPool",
]

logger = logging.getLogger(__name__)

_STOP_SECONDS = 5.0
"""How long closing waits for the workers to exit before they are killed."""

SILENCE_SECONDS = 10.0
"""How long the store waits, in a conversation, for the worker's next word (or for room
to write to it) before it presumes the worker lost (stopped, hung) and kills it. A
working worker beats every tenth of that (:class:`~relaystore.actors.workers.protocol.Beat`), so only one that does not run
is taken for lost, however long its projection takes."""

_BOOT = """\
import sys
try:
    from relaystore.actors.workers.child import main
except BaseException as exc:
    sys.stderr.write(f"relaystore projection worker: cannot import relaystore: {exc}\\n")
    raise SystemExit(70) from None
main(int(sys.argv[1]))
"""
"""The worker's program (``python -P -c``): an import failure is one line, too."""


PARKED_PER_PROJECTOR = 4
"""Parked sessions the pool keeps per projector of ``max_projectors`` (1,024 by
default): a supervisor feeding 1,000 sessions round robin over 256 projectors finds
every session's projection parked when it comes back."""

PARKED_BYTES_PER_PROJECTOR = 512 * 1024
"""Estimated bytes of parked projections the workers keep per projector of
``max_projectors`` (128 MiB by default, shared equally by the workers). A parked
projection keeps its newest items decoded and the rest cold (see
:meth:`~relaystore.domain.projection.SessionProjection.park`): a 400-item session is
estimated at about 80 KiB."""


class ProjectionWorker:
    """A worker process projecting the store's sessions, started when its first
    projector does (:meth:`warm`), and again after it dies; one conversation at a
    time (see the module doc).

    Owns the process, its pipe and what is queued for it (a ``Park`` or ``Forget`` a
    session, at most one each: at most the sessions the pool routes or parks).
    """

    def __init__(
        self, *, hold_unknown: bool, limit: int, park_limit: int = 0, park_bytes: int = 0
    ) -> None:
        self._silence = SILENCE_SECONDS
        self._start = Start(
            hold_unknown=hold_unknown,
            limit=limit,
            beat_seconds=self._silence / 10,
            park_limit=park_limit,
            park_bytes=park_bytes,
        )
        self._lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queued: dict[str, Park | Forget] = {}
        """What to tell the worker of a session before its next conversation, oldest first."""
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self._closed = False
        self.restarts = 0
        """How many times a worker was started again after one died (counted as it
        starts, however its death was noticed: a conversation, a queued message)."""
        self._started = False
        self._run = WorkerStart()
        """The running worker's start (a new one each spawn)."""

    @property
    def pid(self) -> int | None:
        """The worker process's id (None before it is first needed)."""
        return None if self._process is None else self._process.pid

    def forget(self, session_id: str) -> None:
        """Drop the session's projection: now when no conversation holds the worker,
        else before the next one."""
        self.queue(Forget(session_id))
        self.flush()

    def queue(self, message: Park | Forget) -> None:
        """Tell the worker ``message`` before its next conversation; never waits for the
        worker. A later message of the same session replaces a queued one, except that
        a ``Park`` never replaces a ``Forget`` (the projection it would keep is the one
        to drop)."""
        session_id = message.session_id
        with self._queue_lock:
            queued = self._queued.pop(session_id, None)
            if isinstance(message, Park) and isinstance(queued, Forget):
                message = queued
            self._queued[session_id] = message

    def flush(self) -> None:
        """Send what is queued now if no conversation holds the worker (else the next
        one sends it first)."""
        if not self._queued or not self._lock.acquire(blocking=False):
            return
        try:
            if self._connection is not None:
                with contextlib.suppress(WorkerDied):  # a dead worker holds nothing
                    self._send_queued(self._pipe(self._connection))
        finally:
            self._lock.release()

    def _send_queued(self, pipe: WorkerPipe) -> None:
        with self._queue_lock:
            queued, self._queued = self._queued, {}
        for message in queued.values():
            pipe.send(message)

    @contextlib.contextmanager
    def conversation(self) -> Iterator[WorkerPipe]:
        """Hold the worker (started if needed) for one conversation."""
        with self._lock:
            if self._closed:
                raise StoreClosed()
            pipe = self._pipe(self._connection or self._spawn())
            self._send_queued(pipe)
            yield pipe

    def warm(self) -> None:
        """Start the worker now if it is not running and no conversation holds it (it
        imports while its first projector starts); one that cannot start is left to
        the first message, which raises :class:`~relaystore.domain.errors.WorkerLost`."""
        if not self._lock.acquire(blocking=False):
            return  # a conversation holds it: it is running
        try:
            if self._closed or self._connection is not None:
                return
            try:
                self._spawn()
            except (WorkerLost, WorkerDied) as exc:
                logger.warning("projection worker did not start: %s", exc)
        finally:
            self._lock.release()

    def held(self) -> tuple[int, int]:
        """How many sessions' projections the worker holds for running projectors, and
        how many parked ((0, 0) when it is not running)."""
        if self._connection is None:
            return 0, 0
        with self.conversation() as pipe:
            pipe.send(Census())
            done: Done = pipe.recv()
        active, parked = done.value
        return active, parked

    def hang_up(self) -> None:
        """Close the pipe (the worker exits when it reads that) and start no more
        (waits for a conversation under way: at most :data:`SILENCE_SECONDS` if the
        worker does not run)."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
            if connection is not None:
                connection.close()

    def close(self, until: float | None = None) -> None:
        """Hang up and wait for the worker to exit until ``until`` (a ``time.monotonic``
        instant; by default :data:`_STOP_SECONDS` from now); kill it past that."""
        self.hang_up()
        with self._lock:
            self._reap(until=until)

    @staticmethod
    def command(fd: int) -> list[str]:
        """The worker's command line: this interpreter, serving the pipe at ``fd``
        (``-P``: no script directory on its path, so it imports relaystore, never the
        embedder's modules)."""
        return [sys.executable, "-P", "-c", _BOOT, str(fd)]

    def _spawn(self) -> Connection:
        if getattr(sys, "frozen", False):
            raise WorkerLost(
                "the projection worker could not start: this interpreter is a frozen "
                "application (its executable would not run Python); open the store with "
                'projection="thread"'
            )
        if not sys.executable:
            raise WorkerLost(
                "the projection worker could not start: this interpreter does not know its "
                "Python executable (sys.executable is empty); open the store with "
                'projection="thread"'
            )
        ours, theirs = socket.socketpair()
        with ours, theirs:
            # A write the worker does not read within the silence bound fails (see WorkerPipe).
            seconds = int(self._silence)
            timeval = struct.pack("ll", seconds, int((self._silence - seconds) * 1e6))
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (_package_root(), env.get("PYTHONPATH")) if p
            )
            try:
                self._process = subprocess.Popen(
                    self.command(theirs.fileno()),
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    env=env,
                )
            except OSError as exc:
                raise WorkerLost(
                    f"the projection worker could not start: {exc}; open the store with "
                    'projection="thread" to project in this process'
                ) from None
            connection = Connection(ours.detach())
        self._connection = connection
        self._run = WorkerStart()
        if self._started:
            self.restarts += 1
        self._started = True
        self._pipe(connection).send(self._start)
        logger.info("started projection worker %d", self._process.pid)
        return connection

    def _pipe(self, connection: Connection) -> WorkerPipe:
        return WorkerPipe(connection, lambda lost: self._reap(kill=lost), self._silence, self._run)

    def _reap(self, *, kill: bool = False, until: float | None = None) -> str:
        """Close the pipe and wait for the worker until ``until`` (default
        :data:`_STOP_SECONDS` from now), killed past that, or at once when ``kill``; how
        it ended."""
        connection, self._connection = self._connection, None
        process, self._process = self._process, None
        if connection is not None:
            connection.close()
        if process is None:
            return "was not running"
        if kill:
            process.kill()
        try:
            wait = _STOP_SECONDS if until is None else max(0.0, until - time.monotonic())
            status = process.wait(wait)
        except subprocess.TimeoutExpired:
            process.kill()
            status = process.wait()
        return f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"


POOL_LIMIT = 4
"""The most worker processes a store starts (one per core up to this)."""


def _cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS says)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class WorkerPool:
    """A store's projection workers, one per core (at most :data:`POOL_LIMIT`). A
    projector is given the worker that holds its session's projection (running or
    parked: see the module doc), else the one with the fewest projectors, when it starts,
    and keeps it until it stops. One worker waits while the writer commits its session's
    last page; another projects meanwhile.

    Owns which worker holds each session's projection: the sessions of running
    projectors (at most the live projectors) and the parked ones (at most
    :data:`PARKED_PER_PROJECTOR` times ``limit``).
    """

    def __init__(self, *, hold_unknown: bool, limit: int) -> None:
        count = max(1, min(POOL_LIMIT, _cores()))
        self._park_limit = PARKED_PER_PROJECTOR * limit
        self._workers = tuple(
            ProjectionWorker(
                hold_unknown=hold_unknown,
                limit=limit,
                park_limit=self._park_limit,
                park_bytes=PARKED_BYTES_PER_PROJECTOR * limit // count,
            )
            for _ in range(count)
        )
        self._lock = threading.Lock()
        self._attached = [0] * count
        """Projectors on each worker."""
        self._running: dict[str, tuple[int, int]] = {}
        """Sessions with a running projector: their worker and how many projectors (a
        second starts before the first stopped) run on it."""
        self._parked: OrderedDict[str, int] = OrderedDict()
        """Sessions whose projection is parked, and their worker, oldest first."""
        self._forgotten: set[str] = set()
        """Running sessions :meth:`forget` was called for: their worker drops their
        projection when the last of their projectors stops, instead of parking it (at
        most the running sessions)."""

    def __len__(self) -> int:
        return len(self._workers)

    def attach(self, session_id: str) -> int:
        """A worker for the session's projector starting (its index): the one that holds
        the session's projection, else the one with the fewest projectors; started now
        if it is not running."""
        with self._lock:
            running = self._running.get(session_id)
            if running is not None:
                index = running[0]
                self._running[session_id] = (index, running[1] + 1)
            else:
                index = self._parked.pop(session_id, -1)
                if index < 0:
                    index = min(range(len(self._workers)), key=self._attached.__getitem__)
                self._running[session_id] = (index, 1)
            self._attached[index] += 1
        self._workers[index].warm()
        return index

    def worker(self, index: int) -> ProjectionWorker:
        """The worker :meth:`attach` gave."""
        return self._workers[index]

    def detach(self, index: int, session_id: str) -> None:
        """The session's projector on worker ``index`` stopped: its projection is parked
        there (the oldest parked session forgotten past the bound)."""
        with self._lock:
            self._attached[index] -= 1
            worker, running = self._running.pop(session_id)
            if running > 1:  # another projector of the session runs on it
                self._running[session_id] = (worker, running - 1)
                return
            if session_id in self._forgotten:
                self._forgotten.discard(session_id)
                self._workers[index].queue(Forget(session_id))
                return
            self._parked[session_id] = index
            self._workers[index].queue(Park(session_id))
            while len(self._parked) > self._park_limit:
                oldest, at = self._parked.popitem(last=False)
                self._workers[at].queue(Forget(oldest))
        self._flush()

    def forget(self, session_id: str) -> None:
        """Something out of band changes the session (a delete, a seed): its worker drops
        its projection before its next conversation, parked or not, and a projector of
        the session still stopping (taken out for room just before) does not park it."""
        with self._lock:
            index = self._parked.pop(session_id, -1)
            running = self._running.get(session_id)
            if running is not None:
                index = running[0]
                self._forgotten.add(session_id)
            if index >= 0:
                self._workers[index].queue(Forget(session_id))
        self._flush()

    def _flush(self) -> None:
        for worker in self._workers:
            worker.flush()

    @property
    def restarts(self) -> int:
        """Workers started again after one died, over the pool."""
        return sum(worker.restarts for worker in self._workers)

    def held(self) -> tuple[int, int]:
        """Sessions' projections held over the pool: for running projectors (never more
        than the live projectors), and parked."""
        counts = [worker.held() for worker in self._workers]
        return sum(active for active, _ in counts), sum(parked for _, parked in counts)

    @property
    def pids(self) -> list[int]:
        """The running workers' process ids."""
        return [pid for worker in self._workers if (pid := worker.pid) is not None]

    def close(self) -> None:
        """Close every worker (see :meth:`ProjectionWorker.close`): all hang up first,
        then each is waited for until one deadline (:data:`_STOP_SECONDS` from then),
        so closing takes that long at most however many do not exit."""
        for worker in self._workers:
            worker.hang_up()
        until = time.monotonic() + _STOP_SECONDS
        for worker in self._workers:
            worker.close(until)


def _package_root() -> str:
    """The folder this ``relaystore`` was imported from (symlinks kept: an editable
    install's link tree), first on the worker's path so it imports the same build."""
    return str(Path(sys.modules["relaystore"].__file__ or ".").parent.parent)
