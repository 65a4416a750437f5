"""The projectors' wiring to the store: how a projector loads its session and how the
page it made reaches the writer.

Owns :class:`ProjectorWiring`, which starts a session's projector actor (its
:class:`~relaystore.actors.projector.ProjectorCore` in the actor's thread, or with
``projection="process"`` a :class:`~relaystore.actors.workers.proxy.RemoteProjection`
on the store's :class:`~relaystore.actors.workers.pool.WorkerPool`) and gives it its
callbacks: loading the session (whole, or paged through readers as a reloading
projector enters it) and committing a page, which goes to the writer actor directly
(``ask_writer``), never back through the facade's routing. How many items and index
entries a reload reads at a time is said here (:data:`RELOAD_ITEMS`,
:data:`LOAD_PAGE_ITEMS`, :data:`LOAD_PAGE_ENTRIES`).

Must not: import the store's core or route anything itself. The two ways to ask are
handed in: ``ask`` (a message routed to the actor that owns it, answered in this
thread) and ``ask_writer`` (a message handed to the writer now; the returned call
waits for its answer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from pykka import ActorRef

from ..domain.errors import ProjectionError
from ..domain.materialized import MaterializedSession, TranscriptItem
from ..domain.projection import PageDelta, frozen
from ..domain.projection.index import ColdEntry
from .internal import CommitPage, LoadProjection
from .projector import PageCommit, ProjectorActor, ProjectorCore
from .transcript_pages import SessionMoved, reloaded_entries
from .workers.pool import WorkerPool
from .workers.proxy import RemoteProjection

__all__ = [
    "LOAD_PAGE_ENTRIES",
    "LOAD_PAGE_ITEMS",
    "RELOAD_ITEMS",
    "ProjectorWiring",
]

LOAD_PAGE_ITEMS = 512
"""How many whole transcript items a projector reads at a time when it loads its session."""

RELOAD_ITEMS = frozen.QUIET_WINDOW
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


class ProjectorWiring:
    """Starts projector actors wired to the store (see the module)."""

    def __init__(
        self,
        *,
        ask: Callable[[Any], Any],
        ask_writer: Callable[[Any], Callable[[], Any]],
        workers: WorkerPool | None,
        relay_log: bool,
        capacity: int,
    ) -> None:
        self._ask = ask
        self._ask_writer = ask_writer
        self._workers = workers
        self._relay_log = relay_log
        self._capacity = capacity
        self._loads_lock = threading.Lock()
        self._loads = 0

    @property
    def loads(self) -> int:
        """Projections loaded from the store so far (whole or paged)."""
        return self._loads

    def _loaded(self) -> None:
        with self._loads_lock:
            self._loads += 1

    def start(self, session_id: str) -> ActorRef[ProjectorActor]:
        """A projector actor for ``session_id`` projecting in its thread, started (what
        the live projectors call)."""
        projection = ProjectorCore(
            session_id,
            load=self.load,
            send_page=self.send_page,
            ask=self._ask,
            hold_unknown=self._relay_log,
            load_paged=self.load_paged,
        )
        return ProjectorActor.start(projection, capacity=self._capacity)

    def remote(self, session_id: str) -> RemoteProjection:
        """The proxy of ``session_id``'s projection in the store's worker processes,
        attached to its worker (what the session runners call)."""
        if self._workers is None:
            raise RuntimeError("no projection workers: the store projects in threads")
        return RemoteProjection(
            session_id,
            self._workers,
            load=self.load,
            send_page=self.send_page,
            ask=self._ask,
            load_paged=self.load_paged,
        )

    def load(self, session_id: str) -> MaterializedSession:
        """The session's stored projection, whole (the writer reads it)."""
        self._loaded()
        session: MaterializedSession = self._ask_writer(LoadProjection(session_id=session_id))()
        return session

    def load_paged(
        self, session_id: str
    ) -> tuple[MaterializedSession, Iterator[TranscriptItem | ColdEntry]]:
        """The session without its transcript (through the writer), and its transcript
        through readers as a reloading projector enters it: the old items' ids and index
        facts, the newest :data:`RELOAD_ITEMS` (at most the window) whole. A
        page read at another frontier (the session moved while it was loaded) raises
        :class:`ProjectionError`."""
        self._loaded()
        session: MaterializedSession = self._ask_writer(
            LoadProjection(session_id=session_id, transcript=False)
        )()
        frontier = session.kept_frontier

        def entries() -> Iterator[TranscriptItem | ColdEntry]:
            try:
                yield from reloaded_entries(
                    self._ask,
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

    def send_page(self, session_id: str, page: PageDelta) -> PageCommit:
        """Hand ``page`` to the writer; the returned call waits for its commit."""
        wait: PageCommit = self._ask_writer(
            CommitPage(session_id=session_id, page=page, log=self._relay_log)
        )
        return wait
