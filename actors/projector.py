"""Projector actors: one per session, folding verified relay events into its projection.

A projector keeps a private working copy of its session's :class:`MaterializedSession`,
loaded from the store through its loader and never handed out (readers load the stored
projection, not the projector's). For each :class:`ObserveRelayEvents` it skips events
at or below the frontier (re-deliveries), validates and projects the rest strictly in
order *in place* into the working copy (:func:`domain.projection.project_in_place`, so
an event costs the same however long the transcript has grown), and sends them to the writer in pages of up to :data:`PAGE_SIZE`. The working
copy runs ahead of the store by at most the page being built, and nothing is reported
before the writer committed it.

If a page's commit fails, or any event of the message fails (the message fails with its
typed error), the working copy is discarded and reloaded from the store through the
loader (when the next message arrives): every complete page before the failure stays
committed, no event of the page the failure was in is, and the projector goes on from
the committed state. The one exception is an event that fails with a typed error before
anything of its page was projected: the in-place projection checks every rule before it
changes anything, so the working copy is still exactly the committed state and is kept.
When the writer applied fewer events of a page than were sent, or its stored frontier
differs from the working copy's (the store was ahead: another writer of this session's
events), the working copy is reloaded too. Those are the only reloads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from relaystore.actors.told import TellSafeActor
from relaystore.domain.errors import ChainFault, RelayChainError, StoreError
from relaystore.domain.materialized import MaterializedSession, MaterializedSessionMutation
from relaystore.domain.messages import ObserveRelayEvents, ProjectionReport
from relaystore.domain.projection import project_in_place
from relaystore.domain.relay import RelayEvent

__all__ = ["PAGE_SIZE", "PageWriter", "ProjectorActor", "SessionLoader"]

logger = logging.getLogger(__name__)

PAGE_SIZE = 128

PageWriter = Callable[[str, list[tuple[RelayEvent, MaterializedSessionMutation]]], tuple[int, int]]
"""Commits one page through the writer; returns the stored frontier ordinal and applied count."""

SessionLoader = Callable[[str], MaterializedSession]
"""Loads the committed projection of a session (through the writer)."""


class ProjectorActor(TellSafeActor):
    """Owns one session's in-memory projection."""

    def __init__(self, session_id: str, *, load: SessionLoader, write_page: PageWriter) -> None:
        super().__init__()
        self._session_id = session_id
        self._load = load
        self._write_page = write_page
        self._session: MaterializedSession | None = None
        """The private working copy (None: load it from the store when next needed)."""

    def handle(self, message: Any) -> Any:
        if not isinstance(message, ObserveRelayEvents):
            logger.warning("projector ignored an unexpected message %r", message)
            return None
        return self._observe(message.events)

    def _working(self) -> MaterializedSession:
        if self._session is None:
            self._session = self._load(self._session_id)
        return self._session

    def _observe(self, events: list[RelayEvent]) -> ProjectionReport:
        applied = already = 0
        working = self._working()
        page: list[tuple[RelayEvent, MaterializedSessionMutation]] = []
        try:
            for event in events:
                if event.ordinal <= working.applied_event_ordinal:
                    if (
                        event.ordinal == working.applied_event_ordinal
                        and event.digest != working.applied_event_digest
                    ):
                        raise RelayChainError(
                            ChainFault.FORK,
                            f"relay event digest mismatch: projection has "
                            f"{working.applied_event_digest}, received {event.digest}",
                            session_id=self._session_id,
                            ordinal=event.ordinal,
                        )
                    already += 1
                    continue
                mutation = project_in_place(working, event, session_id=self._session_id)
                page.append((event, mutation))
                if len(page) == PAGE_SIZE:
                    applied += self._commit(page, working)
                    working = self._working()
                    page = []
            if page:
                applied += self._commit(page, working)
        except StoreError:
            # An event refused with its typed error changed nothing, so the working copy
            # is still the committed state unless a page was under way (or its commit
            # failed): then it is ahead of the store.
            if page:
                self._session = None
            raise
        except Exception:
            # A bug may have stopped mid-projection: restart from what is stored.
            logger.exception("projector for %s failed; reloading", self._session_id)
            self._session = None
            raise
        final = self._working()
        return ProjectionReport(
            session_id=self._session_id,
            applied=applied,
            already_applied=already,
            frontier_ordinal=final.applied_event_ordinal,
            frontier_digest=final.applied_event_digest,
        )

    def _commit(
        self,
        page: list[tuple[RelayEvent, MaterializedSessionMutation]],
        result: MaterializedSession,
    ) -> int:
        stored_ordinal, applied = self._write_page(self._session_id, page)
        if applied != len(page) or stored_ordinal != result.applied_event_ordinal:
            # The store was ahead of memory (another writer of this session's events):
            # adopt what is stored.
            self._session = None
            self._session = self._load(self._session_id)
        return applied
