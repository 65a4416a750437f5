"""The projection worker process: what runs in the child the store starts.

:func:`main` serves the store on the pipe it was given (:mod:`~relaystore.actors.workers.protocol`):
each session's :class:`~relaystore.actors.projector.ProjectorCore` (the same code the
thread path runs: digests, the chain rule, the projection, folding pages) lives here,
one per session the store's projectors hold (at most ``Start.limit``, least recently
used parked first), and, once a session's projector stopped, parked for its next one
(at most ``Start.park_limit`` and ``Start.park_bytes`` by estimate, oldest dropped
first), and calls back over the pipe for what only the embedding process
has: the writer, which commits each page it sends (pages stay pipelined, one in flight,
as in the thread path), and the readers, which load the session's projection. While a
conversation is under way a thread beats (:class:`~relaystore.actors.workers.protocol.Beat`)
so the store can tell a worker that projects from one that does not run. The worker
exits when the store closes its pipe (or the embedding process dies), and ignores
SIGINT so a terminal's Ctrl-C reaches the embedder only.

Owns the child's loop (:func:`main`). Must not: open a store connection (the writer in
the embedding process stays the single owner of the write connection; this process
opens none), or import the embedder's modules (it is started by
:mod:`~relaystore.actors.workers.pool` as ``python -P``, importing this module by path).
"""

from __future__ import annotations

import contextlib
import pickle
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any, Literal

from ...domain.materialized import MaterializedSession, TranscriptItem
from ...domain.messages import ObserveRelayEvents
from ...domain.projection import PageDelta
from ...domain.projection.index import ColdEntry
from ...domain.projection.page_wire import encode_page
from ...domain.relay.payloads import RelayCursor
from ..projector import PageCommit, ProjectorCore
from .protocol import (
    Beat,
    Call,
    CallResult,
    Census,
    Done,
    Forget,
    Observe,
    PageOut,
    Park,
    Run,
    Start,
    decode_events,
    sendable,
)

__all__ = ["main"]


class _Heart:
    """The worker's writing end of the pipe: while a conversation is under way a thread
    sends a :class:`~relaystore.actors.workers.protocol.Beat` every ``every`` seconds, so the store can tell a worker that is
    projecting from one that does not run (see :data:`~relaystore.actors.workers.pool.SILENCE_SECONDS`)."""

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
        """Projections of sessions whose projector runs, least recently used first."""
        self._parked: OrderedDict[str, tuple[ProjectorCore, int]] = OrderedDict()
        """Projections of sessions whose projector stopped, with their estimated bytes,
        oldest first."""
        self._parked_bytes = 0
        self._pages = 0
        self._defer = False
        """The conversation under way hands its last page back with :class:`~relaystore.actors.workers.protocol.Done`."""
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
                self._out.send(Done(None, sendable(exc)))
                continue
            if isinstance(message, Forget):
                core = self._cores.pop(message.session_id, None) or self._unpark(message.session_id)
                if core is not None:
                    core.close()
            elif isinstance(message, Park):
                self._park(message.session_id)
            elif isinstance(message, Observe | Run):
                with self._out.conversing():
                    self._run(message)
            elif isinstance(message, Census):
                self._out.send(Done((len(self._cores), len(self._parked))))

    def _park(self, session_id: str) -> None:
        """Keep the session's projection out of active use; drop the oldest parked ones
        past the bounds (the store's next projector of theirs loads them again)."""
        core = self._cores.pop(session_id, None)
        if core is None:
            return  # dropped already (the limit), or parked
        try:
            size = core.park()
        except Exception:  # noqa: BLE001 - a bug must not end the worker: drop it instead
            core.close()
            return
        self._parked[session_id] = (core, size)
        self._parked_bytes += size
        start = self._start
        while self._parked and (
            len(self._parked) > start.park_limit or self._parked_bytes > start.park_bytes
        ):
            oldest = next(iter(self._parked))
            dropped = self._unpark(oldest)
            assert dropped is not None
            dropped.close()

    def _unpark(self, session_id: str) -> ProjectorCore | None:
        """The session's parked projection, taken out of the parked ones (None: none)."""
        entry = self._parked.pop(session_id, None)
        if entry is None:
            return None
        self._parked_bytes -= entry[1]
        return entry[0]

    def _run(self, run: Observe | Run) -> None:
        session_id = run.session_id
        core = (
            self._cores.pop(session_id, None) or self._unpark(session_id) or self._core(session_id)
        )
        self._cores[session_id] = core  # the most recently used
        while len(self._cores) > self._start.limit:  # the store parks first; a bound
            self._park(next(iter(self._cores)))
        self._defer, self._last = run.defer, None
        try:
            if isinstance(run, Observe):
                events = decode_events(run.events)
                message: Any = ObserveRelayEvents(session_id=session_id, events=events)
            else:
                message = run.message
            value = core.handle(message)
        except Exception as exc:  # noqa: BLE001 - the proxy raises it, as the thread path does
            done = Done(None, sendable(exc), self._last)
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
        reply: CallResult = self._in.recv()
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
        """The message's last page: kept for :class:`~relaystore.actors.workers.protocol.Done` when deferring, and taken as
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
