"""Projection in a worker process: the projectors' Python work off the embedder's interpreter.

With ``EventStore.open(projection="process")`` each session's projector actor is a thin
proxy (:class:`RemoteProjection`): it hands its message to the store's worker process
(:class:`ProjectionWorker`), which runs the session's
:class:`~relaystore.actors.projector.ProjectorCore` (the same code the thread path runs:
digests, the chain rule, the projection, folding pages) and calls back over a pipe for
what only the embedding process has: the writer, which commits each page it sends
(pages stay pipelined, one in flight, as in the thread path; each is sealed first, so
its events cross as their packed relay log row, and crosses as msgpack:
:mod:`~relaystore.domain.projection.page_wire`), and the readers, which load the
session's projection. A store runs one worker per core (:class:`WorkerPool`, at most
:data:`POOL_LIMIT`); each projector is given the least busy one when it starts. The
writer stays the single owner of the write connection; the worker process opens no
store connection at all.

A conversation is strictly request and reply, one message at a time: the proxy sends
:class:`Observe` (the events as msgpack) or :class:`Run`, the worker answers its
callbacks' requests with :class:`PageOut` (a page for the writer, not waited on) or
:class:`Call` (answered by one :class:`Reply`), and ends with :class:`Done`, which
carries the message's last page: the proxy commits it and the reply stands only if it
committed as sent (else the message runs again, see :class:`Done`), so a one-page
message crosses the pipe twice. One
conversation holds the worker at a time, so a session's events are projected in order
and the worker's projections mirror the live projectors: when a projector stops, the
worker drops its session's projection (:class:`Forget`: at once, or after the
conversation under way).

Guarantees: an ask returns after its pages committed, as in the thread path. If the
worker process dies (SIGKILL, a crash), the proxy waits for every page it already handed
to the writer, starts a new worker and sends the message again once; the new worker
loads the session from the store, so events whose pages committed are re-deliveries it
leaves alone (nothing is applied twice) and the report counts them as the first attempt
applied them. A second death while projecting the same message raises
:class:`~relaystore.domain.errors.WorkerLost`; every page committed before it stays
committed. A worker that says nothing for :data:`SILENCE_SECONDS` in a conversation (it
beats every tenth of that while it projects, so only one that does not run: stopped,
hung) or takes no message for as long is presumed lost: it is killed and counts as a
death. The worker exits when the store closes its pipe (or the embedding process
dies), and ignores SIGINT so a terminal's Ctrl-C reaches the embedder only; closing
waits :data:`_STOP_SECONDS` for all the workers together, then kills those left.

The child is started with ``python -P -c`` (``sys.executable``): it imports relaystore,
never the embedder's ``__main__``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..domain.errors import RelayChainError, StoreClosed, StoreError, WorkerLost
from ..domain.materialized import MaterializedSession, TranscriptItem
from ..domain.messages import ObserveRelayEvents, ProjectionReport, Reproject
from ..domain.projection import PageDelta
from ..domain.projection.index import ColdEntry
from ..domain.projection.page_wire import decode_page, encode_page
from ..domain.relay import RelayCursor, RelayEvent, RelayLine
from .envelope import Unanswerable
from .projector import (
    PageCommit,
    PagedLoader,
    PageSender,
    ProjectorCore,
    SessionLoader,
)

__all__ = [
    "POOL_LIMIT",
    "ProjectionWorker",
    "RemoteProjection",
    "WorkerPool",
    "decode_events",
    "encode_events",
    "main",
]

logger = logging.getLogger(__name__)

_STOP_SECONDS = 5.0
"""How long closing waits for the workers to exit before they are killed."""

SILENCE_SECONDS = 10.0
"""How long the store waits, in a conversation, for the worker's next word (or for room
to write to it) before it presumes the worker lost (stopped, hung) and kills it. A
working worker beats every tenth of that (:class:`Beat`), so only one that does not run
is taken for lost, however long its projection takes."""


# -- the pipe's messages ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    """The first message a worker gets: how to build its projectors."""

    hold_unknown: bool
    """The store keeps a relay log: keep lines of unknown kinds, and log every page."""
    limit: int
    """The most sessions it keeps a projection of (the store's ``max_projectors``)."""
    beat_seconds: float = SILENCE_SECONDS / 10
    """How often it beats while a conversation is under way (:class:`Beat`)."""


@dataclass(frozen=True, slots=True)
class Run:
    """Project ``message`` (an ``ObserveRelayEvents`` or a ``Reproject``) for its session."""

    session_id: str
    message: Any
    defer: bool = True
    """Hand the message's last page back with :class:`Done` (see there)."""


@dataclass(frozen=True, slots=True)
class Observe:
    """Project relay events for their session: an ``ObserveRelayEvents`` whose events
    cross as msgpack (:func:`encode_events`), which costs the embedding process a
    twentieth of pickling them."""

    session_id: str
    events: bytes
    defer: bool = True
    """Hand the message's last page back with :class:`Done` (see there)."""


_OnWire = tuple[list[RelayEvent | None], list[tuple[int, RelayLine]]]
"""Events on the pipe: the decoded events in order (None where a line of an unknown kind
stands) and those lines by position."""

_EVENTS = msgspec.msgpack.Decoder(_OnWire)


def encode_events(events: list[RelayEvent | RelayLine]) -> bytes:
    """``events`` as :class:`Observe` carries them."""
    lines = [(at, event) for at, event in enumerate(events) if isinstance(event, RelayLine)]
    decoded = events if not lines else [e if isinstance(e, RelayEvent) else None for e in events]
    return msgspec.msgpack.encode((decoded, lines))


def decode_events(data: bytes) -> list[RelayEvent | RelayLine]:
    """The events :func:`encode_events` encoded, in order."""
    decoded, lines = _EVENTS.decode(data)
    events: list[RelayEvent | RelayLine | None] = list(decoded)
    for at, line in lines:
        events[at] = line
    return events  # type: ignore[return-value]  # every None was a line's place


@dataclass(frozen=True, slots=True)
class Forget:
    """Drop the session's projection: its projector stopped."""

    session_id: str


@dataclass(frozen=True, slots=True)
class Census:
    """How many sessions' projections the worker holds (answered by :class:`Done`)."""


@dataclass(frozen=True, slots=True)
class PageOut:
    """A page for the writer, not waited on (``Call("wait", number)`` waits)."""

    number: int
    page: bytes
    """The page, sealed, as :func:`~relaystore.domain.projection.page_wire.encode_page`
    encodes it (a fraction of pickling it)."""


@dataclass(frozen=True, slots=True)
class Call:
    """A callback the worker needs the embedding process for; one :class:`Reply` answers."""

    what: Literal["wait", "ask", "load", "load_paged"]
    argument: Any


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a :class:`Call` (``error`` set: it raised)."""

    value: Any
    error: BaseException | None = None


@dataclass(frozen=True, slots=True)
class Beat:
    """The worker is alive and conversing (sent every ``Start.beat_seconds``; the proxy
    skips it)."""


@dataclass(frozen=True, slots=True)
class Done:
    """The end of a conversation: the message's reply, or the error it raised.

    With ``page`` set (the message was sent with ``defer``), the reply assumed that page,
    the message's last, committed as sent: the proxy commits it, and only if the writer
    applied all of it and stored its end does the reply stand. Otherwise the proxy has
    the worker forget the session and sends the message again without ``defer``, so
    the core's own rules settle it (the page's commit failing with another error is
    that error, as in the thread path). This saves the two pipe crossings of waiting
    for the last commit in the worker.
    """

    value: Any
    error: BaseException | None = None
    page: bytes | None = None
    """The deferred last page, encoded as :attr:`PageOut.page` is."""


def _sendable(error: BaseException) -> BaseException:
    """``error`` if it pickles, else a plain error with its text (a bug's exception may
    hold what cannot cross the pipe)."""
    try:
        pickle.dumps(error)
    except Exception:  # noqa: BLE001 - whatever pickling raises, send the text instead
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


# -- the worker process -----------------------------------------------------------------


class _Heart:
    """The worker's writing end of the pipe: while a conversation is under way a thread
    sends a :class:`Beat` every ``every`` seconds, so the store can tell a worker that is
    projecting from one that does not run (see :data:`SILENCE_SECONDS`)."""

    def __init__(self, connection: Connection, every: float) -> None:
        self._connection = connection
        self._every = every
        self._lock = threading.Lock()
        self._conversing = threading.Event()
        threading.Thread(target=self._beat, name="relaystore-beat", daemon=True).start()

    def send(self, message: object) -> None:
        with self._lock:
            self._connection.send(message)

    @contextlib.contextmanager
    def conversing(self) -> Iterator[None]:
        """Beat while the block runs."""
        self._conversing.set()
        try:
            yield
        finally:
            self._conversing.clear()

    def _beat(self) -> None:
        beat = Beat()
        while self._conversing.wait():
            time.sleep(self._every)
            if self._conversing.is_set():
                try:
                    self.send(beat)
                except OSError:
                    return  # the store is gone: the main thread sees EOF


class _Serving:
    """The worker process's side: projections by session and the callbacks over the pipe."""

    def __init__(self, connection: Connection, start: Start) -> None:
        self._out = _Heart(connection, start.beat_seconds)
        self._in = connection
        self._start = start
        self._cores: OrderedDict[str, ProjectorCore] = OrderedDict()
        self._pages = 0
        self._defer = False
        """The conversation under way hands its last page back with :class:`Done`."""
        self._last: bytes | None = None
        """That page, once the core finished it (encoded)."""

    def serve(self) -> None:
        while True:
            try:
                data = self._in.recv_bytes()
            except EOFError:
                return  # the store closed (or its process died)
            try:
                message = pickle.loads(data)
            except Exception as exc:  # noqa: BLE001 - a conversation waits: answer it
                self._out.send(Done(None, _sendable(exc)))
                continue
            if isinstance(message, Forget):
                core = self._cores.pop(message.session_id, None)
                if core is not None:
                    core.close()
            elif isinstance(message, Observe | Run):
                with self._out.conversing():
                    self._run(message)
            elif isinstance(message, Census):
                self._out.send(Done(len(self._cores)))

    def _run(self, run: Observe | Run) -> None:
        session_id = run.session_id
        core = self._cores.pop(session_id, None) or self._core(session_id)
        self._cores[session_id] = core  # the most recently used
        while len(self._cores) > self._start.limit:  # the store forgets first; a bound
            self._cores.popitem(last=False)[1].close()
        self._defer, self._last = run.defer, None
        try:
            if isinstance(run, Observe):
                events = decode_events(run.events)
                message: Any = ObserveRelayEvents(session_id=session_id, events=events)
            else:
                message = run.message
            value = core.handle(message)
        except Exception as exc:  # noqa: BLE001 - the proxy raises it, as the thread path does
            done = Done(None, _sendable(exc), self._last)
        else:
            done = Done(value, None, self._last)
        self._last = None
        self._out.send(done)

    def _core(self, session_id: str) -> ProjectorCore:
        return ProjectorCore(
            session_id,
            load=self._load,
            send_page=self._send_page,
            ask=self._ask,
            hold_unknown=self._start.hold_unknown,
            load_paged=self._load_paged,
            finish_page=self._finish_page,
        )

    def _call(self, what: Literal["wait", "ask", "load", "load_paged"], argument: Any) -> Any:
        self._out.send(Call(what, argument))
        reply: Reply = self._in.recv()
        if reply.error is not None:
            raise reply.error
        return reply.value

    def _load(self, session_id: str) -> MaterializedSession:
        session: MaterializedSession = self._call("load", session_id)
        return session

    def _load_paged(
        self, session_id: str
    ) -> tuple[MaterializedSession, Iterator[TranscriptItem | ColdEntry]]:
        session, entries = self._call("load_paged", session_id)
        return session, iter(entries)

    def _ask(self, message: Any) -> Any:
        return self._call("ask", message)

    def _send_page(self, session_id: str, page: PageDelta) -> PageCommit:
        self._pages += 1
        number = self._pages
        page.seal(log=self._start.hold_unknown)
        self._out.send(PageOut(number, encode_page(page)))

        def wait() -> tuple[RelayCursor, int]:
            committed: tuple[RelayCursor, int] = self._call("wait", number)
            return committed

        return wait

    def _finish_page(self, session_id: str, page: PageDelta) -> PageCommit:
        """The message's last page: kept for :class:`Done` when deferring, and taken as
        committed exactly as sent (the proxy checks that it was)."""
        if not self._defer:
            return self._send_page(session_id, page)
        page.seal(log=self._start.hold_unknown)
        self._last = encode_page(page)
        return lambda: (page.end, page.applied)


def main(fd: int) -> None:
    """The worker process: serve the store on the connection at file descriptor ``fd``.

    A failure outside a conversation (which answers with its error) ends the worker with
    one line on stderr and status 70, never a traceback: the store starts another.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        connection = Connection(fd)
        start = connection.recv()
        if not isinstance(start, Start):
            raise TypeError(f"expected Start, got {type(start).__name__}")
        _Serving(connection, start).serve()
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback, on the CLI
        sys.stderr.write(f"relaystore projection worker: {type(exc).__name__}: {exc}\n")
        raise SystemExit(70) from None


_BOOT = """\
import sys
try:
    from relaystore.actors.projection_worker import main
except BaseException as exc:
    sys.stderr.write(f"relaystore projection worker: cannot import relaystore: {exc}\\n")
    raise SystemExit(70) from None
main(int(sys.argv[1]))
"""
"""The worker's program (``python -P -c``): an import failure is one line, too."""


# -- the embedding process's side -------------------------------------------------------


class _Died(Exception):
    """The worker's pipe broke mid-conversation."""


class _Redo(Exception):
    """A deferred last page did not commit as sent (see :class:`Done`)."""


class _Pipe:
    """The worker's connection for one conversation: a broken pipe raises :class:`_Died`
    (and the worker is reaped), as does a worker silent for ``silence`` seconds (killed:
    see :data:`SILENCE_SECONDS`); anything else passes. Beats are skipped."""

    def __init__(self, connection: Connection, reap: Callable[[bool], str], silence: float) -> None:
        self._connection = connection
        self._reap = reap
        """Reaps the worker (killed first when True); says how it ended."""
        self._silence = silence

    def send(self, message: object) -> None:
        try:
            self._connection.send(message)
        except BlockingIOError as exc:  # the socket's send timeout: it reads nothing
            raise _Died(self._lost("had no room for a message")) from exc
        except OSError as exc:
            raise _Died(f"{exc or type(exc).__name__}; the worker {self._reap(False)}") from exc

    def recv(self) -> Any:
        while True:
            try:
                if not self._connection.poll(self._silence):
                    raise _Died(self._lost("said nothing"))
                message = self._connection.recv()
            except (EOFError, OSError) as exc:
                raise _Died(f"{exc or 'its pipe closed'}; the worker {self._reap(False)}") from exc
            if not isinstance(message, Beat):
                return message

    def _lost(self, what: str) -> str:
        return (
            f"it {what} for {self._silence:g} s, so it is presumed lost (stopped or hung); "
            f"the worker {self._reap(True)}"
        )


class ProjectionWorker:
    """A worker process projecting the store's sessions, started when its first
    projector does (:meth:`warm`), and again after it dies; one conversation at a
    time (see the module doc).

    Owns the process, its pipe and the sessions to forget (those whose projector
    stopped while a conversation held the worker: at most the live projectors).
    """

    def __init__(self, *, hold_unknown: bool, limit: int) -> None:
        self._silence = SILENCE_SECONDS
        self._start = Start(hold_unknown=hold_unknown, limit=limit, beat_seconds=self._silence / 10)
        self._lock = threading.Lock()
        self._forget_lock = threading.Lock()
        self._forget: set[str] = set()
        self._process: subprocess.Popen[bytes] | None = None
        self._connection: Connection | None = None
        self._closed = False
        self.restarts = 0
        """How many times a worker was started again after it died."""

    @property
    def pid(self) -> int | None:
        """The worker process's id (None before it is first needed)."""
        return None if self._process is None else self._process.pid

    def forget(self, session_id: str) -> None:
        """Drop the session's projection: now when no conversation holds the worker,
        else before the next one."""
        if self._lock.acquire(blocking=False):
            try:
                if self._connection is not None:
                    with contextlib.suppress(_Died):  # a dead worker holds nothing
                        self._pipe(self._connection).send(Forget(session_id))
            finally:
                self._lock.release()
            return
        with self._forget_lock:
            self._forget.add(session_id)

    @contextlib.contextmanager
    def conversation(self) -> Iterator[_Pipe]:
        """Hold the worker (started if needed) for one conversation."""
        with self._lock:
            if self._closed:
                raise StoreClosed()
            pipe = self._pipe(self._connection or self._spawn())
            with self._forget_lock:
                forget, self._forget = self._forget, set()
            for session_id in forget:
                pipe.send(Forget(session_id))
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
            except (WorkerLost, _Died) as exc:
                logger.warning("projection worker did not start: %s", exc)
        finally:
            self._lock.release()

    def held(self) -> int:
        """How many sessions' projections the worker holds (0 when it is not running)."""
        if self._connection is None:
            return 0
        with self.conversation() as pipe:
            pipe.send(Census())
            done: Done = pipe.recv()
        count: int = done.value
        return count

    def replaced(self) -> None:
        """Count a worker started again after it died (the next conversation starts it)."""
        self.restarts += 1

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
            # A write the worker does not read within the silence bound fails (see _Pipe).
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
        self._pipe(connection).send(self._start)
        logger.info("started projection worker %d", self._process.pid)
        return connection

    def _pipe(self, connection: Connection) -> _Pipe:
        return _Pipe(connection, lambda lost: self._reap(kill=lost), self._silence)

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
    projector is given the worker with the fewest projectors when it starts and keeps it
    until it stops (its session's projection lives there meanwhile). One worker waits
    while the writer commits its session's last page; another projects meanwhile."""

    def __init__(self, *, hold_unknown: bool, limit: int) -> None:
        count = max(1, min(POOL_LIMIT, _cores()))
        self._workers = tuple(
            ProjectionWorker(hold_unknown=hold_unknown, limit=limit) for _ in range(count)
        )
        self._lock = threading.Lock()
        self._attached = [0] * count
        """Projectors on each worker."""

    def __len__(self) -> int:
        return len(self._workers)

    def attach(self) -> int:
        """A worker for a projector starting: the one with the fewest (its index),
        started now if it is not running."""
        with self._lock:
            index = min(range(len(self._workers)), key=self._attached.__getitem__)
            self._attached[index] += 1
        self._workers[index].warm()
        return index

    def worker(self, index: int) -> ProjectionWorker:
        """The worker :meth:`attach` gave."""
        return self._workers[index]

    def detach(self, index: int) -> None:
        """A projector on worker ``index`` stopped."""
        with self._lock:
            self._attached[index] -= 1

    @property
    def restarts(self) -> int:
        """Workers started again after one died, over the pool."""
        return sum(worker.restarts for worker in self._workers)

    def held(self) -> int:
        """Sessions' projections held over the pool (never more than the live
        projectors: a stopped projector's session is forgotten)."""
        return sum(worker.held() for worker in self._workers)

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


class RemoteProjection:
    """A projector actor's :class:`~relaystore.actors.projector.Projection` run by the
    store's worker process: the proxy side of a conversation (see the module doc)."""

    def __init__(
        self,
        session_id: str,
        pool: WorkerPool,
        *,
        load: SessionLoader,
        send_page: PageSender,
        ask: Callable[[Any], Any],
        load_paged: PagedLoader,
    ) -> None:
        self._session_id = session_id
        self._pool = pool
        self._index = pool.attach()
        self._worker = pool.worker(self._index)
        self._load = load
        self._send_page = send_page
        self._ask = ask
        self._load_paged = load_paged

    def handle(self, message: Any) -> Any:
        if not isinstance(message, ObserveRelayEvents | Reproject):
            raise Unanswerable("projector", message)
        applied_before = 0
        """Events the pages of earlier attempts committed."""
        deaths = 0
        defer = True
        while True:
            committed: list[int] = []
            try:
                value = self._converse(message, committed, defer=defer)
            except _Died as died:
                deaths += 1
                if deaths == 2:
                    raise WorkerLost(
                        f"the projection worker died twice projecting this message ({died}); "
                        "every page committed before stays committed",
                        session_id=self._session_id,
                    ) from None
                logger.warning(
                    "projection worker died projecting session %s (%s); starting another",
                    self._session_id,
                    died,
                )
                self._worker.replaced()
            except _Redo:
                defer = False  # the core settles it this time
            else:
                break
            applied_before += sum(committed)
        if (
            applied_before
            and isinstance(message, ObserveRelayEvents)
            and isinstance(value, ProjectionReport)
        ):
            # The last attempt found the earlier attempts' committed pages already applied.
            moved = min(applied_before, value.already_applied)
            value = msgspec.structs.replace(
                value,
                applied=value.applied + moved,
                already_applied=value.already_applied - moved,
            )
        return value

    def close(self) -> None:
        self._worker.forget(self._session_id)
        self._pool.detach(self._index)

    def _converse(self, message: Any, committed: list[int], *, defer: bool) -> Any:
        """One conversation; ``committed`` gets the applied count of each page that
        committed (also when the worker dies). :class:`_Redo`: the deferred last page
        did not commit as sent; send the message again without ``defer``."""
        pending: dict[int, PageCommit] = {}
        session_id = self._session_id
        try:
            with self._worker.conversation() as connection:
                if isinstance(message, ObserveRelayEvents):
                    events = encode_events(message.events)
                    connection.send(Observe(session_id, events, defer))
                else:
                    connection.send(Run(session_id, message, defer))
                while True:
                    out = connection.recv()
                    if isinstance(out, PageOut):
                        page = decode_page(out.page)
                        pending[out.number] = self._send_page(session_id, page)
                    elif isinstance(out, Call):
                        connection.send(self._answer(out, pending, committed))
                    elif isinstance(out, Done):
                        done = out
                        break
        except _Died:
            for wait in pending.values():  # settle what the writer was handed
                with contextlib.suppress(StoreError):
                    committed.append(wait()[1])
            raise
        # The worker is free: it projects another session while this page commits.
        if done.page is not None:
            self._commit_last(decode_page(done.page), committed)
        if done.error is not None:
            raise done.error
        return done.value

    def _commit_last(self, page: PageDelta, committed: list[int]) -> None:
        """Commit the page a :class:`Done` handed back; unless it committed exactly as
        sent, the worker forgets the session (its projection assumed the page; before
        this session's next conversation) and :class:`_Redo` or the commit's error is
        raised."""
        try:
            stored, applied = self._send_page(self._session_id, page)()
        except RelayChainError:  # the store is partway through the page: the core settles it
            self._worker.forget(self._session_id)
            raise _Redo() from None
        except BaseException:
            self._worker.forget(self._session_id)
            raise
        committed.append(applied)
        if applied != page.applied or stored != page.end:  # the store was ahead
            self._worker.forget(self._session_id)
            raise _Redo()

    def _answer(self, call: Call, pending: dict[int, PageCommit], committed: list[int]) -> Reply:
        try:
            if call.what == "wait":
                stored, applied = pending.pop(call.argument)()
                committed.append(applied)
                return Reply((stored, applied))
            if call.what == "ask":
                return Reply(self._ask(call.argument))
            if call.what == "load":
                return Reply(self._load(call.argument))
            session, entries = self._load_paged(call.argument)
            return Reply((session, list(entries)))
        except Exception as exc:  # noqa: BLE001 - raised in the worker, as in the thread path
            return Reply(None, _sendable(exc))
