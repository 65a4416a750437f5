"""Projector actors: one per session, folding verified relay events into its projection.

A projector owns a :class:`~domain.projection.SessionProjection` of its session, loaded
from the store through its loader and never handed out (readers load the stored
projection, not the projector's). For each :class:`ObserveRelayEvents` it applies the
events strictly in order (:meth:`SessionProjection.apply`: re-deliveries at or below the
frontier change nothing; the rest are checked and projected in place, so an event costs
the same however long the transcript has grown), folds each applied event into a
:class:`~domain.projection.PageDelta` and sends the pages, of up to :data:`PAGE_SIZE`
events, to the writer. The projection runs ahead of the store by at most the page being
built, and nothing is reported before the writer committed it.

If a page's commit fails, or any event of the message fails (the message fails with its
typed error), the projection is discarded and reloaded from the store through the loader
(when the next message arrives): every complete page before the failure stays committed,
no event of the page the failure was in is, and the projector goes on from the committed
state. The one exception is an event that fails with a typed error before anything of its
page was projected: the projection checks every rule before it changes anything, so it
is still exactly the committed state and is kept. When the writer applied fewer events
of a page than were sent, or its stored frontier differs from the projection's (the store
was ahead: another writer of this session's events), the projection is reloaded too; when
the writer refuses a page because the store is partway through it, the projection is
reloaded and the page's events are projected again from the stored state and committed.
Those are the only reloads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from relaystore.actors.told import TellSafeActor
from relaystore.domain.errors import RelayChainError, StoreError
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import ObserveRelayEvents, ProjectionReport
from relaystore.domain.projection import PageDelta, SessionProjection
from relaystore.domain.relay import RelayCursor, RelayEvent

__all__ = ["PAGE_SIZE", "PageWriter", "ProjectorActor", "SessionLoader"]

logger = logging.getLogger(__name__)

PAGE_SIZE = 128

PageWriter = Callable[[str, PageDelta], tuple[RelayCursor, int]]
"""Commits one page through the writer; returns the stored frontier and the applied count."""

SessionLoader = Callable[[str], MaterializedSession]
"""Loads the committed projection of a session (through the writer)."""


class ProjectorActor(TellSafeActor):
    """Owns one session's in-memory projection."""

    def __init__(
        self,
        session_id: str,
        *,
        load: SessionLoader,
        write_page: PageWriter,
        capacity: int = 64,
    ) -> None:
        super().__init__(capacity=capacity)
        self._session_id = session_id
        self._load = load
        self._write_page = write_page
        self._projection: SessionProjection | None = None
        """The private projection (None: load it from the store when next needed)."""

    def handle(self, message: Any) -> Any:
        if not isinstance(message, ObserveRelayEvents):
            logger.warning("projector ignored an unexpected message %r", message)
            return None
        return self._observe(message.events)

    def _working(self) -> SessionProjection:
        if self._projection is None:
            session = self._load(self._session_id)
            self._projection = SessionProjection(session, session_id=self._session_id)
        return self._projection

    def _observe(self, events: list[RelayEvent]) -> ProjectionReport:
        applied = already = 0
        projection = self._working()
        page = PageDelta.starting_at(self._session_id, projection.frontier)
        page_events: list[RelayEvent] = []
        try:
            for event in events:
                mutation = projection.apply(event)
                if mutation is None:
                    already += 1
                    continue
                page.add(event, mutation, digest_checked=True)
                page_events.append(event)
                if page.applied == PAGE_SIZE:
                    applied += self._commit(page, page_events)
                    projection = self._working()
                    page = PageDelta.starting_at(self._session_id, projection.frontier)
                    page_events = []
            if page.applied:
                applied += self._commit(page, page_events)
        except StoreError:
            # An event refused with its typed error changed nothing, so the projection is
            # still the committed state unless a page was under way (or its commit
            # failed): then it is ahead of the store.
            if self._projection is not None and self._projection.frontier != page.start:
                self._projection = None
            raise
        except Exception:
            # A bug may have stopped mid-projection: restart from what is stored.
            logger.exception("projector for %s failed; reloading", self._session_id)
            self._projection = None
            raise
        frontier = self._working().frontier
        return ProjectionReport(
            session_id=self._session_id,
            applied=applied,
            already_applied=already,
            frontier_ordinal=frontier.ordinal,
            frontier_digest=frontier.digest,
        )

    def _commit(self, page: PageDelta, events: list[RelayEvent]) -> int:
        """Commit ``page`` (made of ``events``); return how many events the store applied."""
        try:
            stored, applied = self._write_page(self._session_id, page)
        except RelayChainError:
            # The store is neither where the page starts nor past its end: another writer
            # of this session's events got partway. Adopt what is stored and project the
            # page's events again from there (those it holds are already applied).
            self._projection = None
            projection = self._working()
            page = PageDelta.starting_at(self._session_id, projection.frontier)
            for event in events:
                mutation = projection.apply(event, digest_checked=True)
                if mutation is not None:
                    page.add(event, mutation, digest_checked=True)
            if not page.applied:
                return 0
            stored, applied = self._write_page(self._session_id, page)
        working = self._working()
        if applied != page.applied or stored != working.frontier:
            # The store was ahead of memory (another writer of this session's events):
            # adopt what is stored.
            self._projection = None
            self._working()
        return applied
