"""Projector actors: one per session, folding verified relay events into its projection.

A projector holds its session's :class:`MaterializedSession` as committed. For each
:class:`ObserveRelayEvents` it skips events at or below the frontier (re-deliveries),
validates and projects the rest strictly in order, and sends them to the writer in
pages of up to :data:`PAGE_SIZE`; memory moves to a page's result only after the
writer committed it. A bad event fails the message with its typed error, leaves every
earlier complete page committed and nothing of the page it was in, and the projector
goes on from the committed state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors.told import TellSafeActor
from domain.errors import ChainFault, RelayChainError, StoreError
from domain.materialized import MaterializedSession, MaterializedSessionMutation
from domain.messages import ObserveRelayEvents, ProjectionReport
from domain.projection import project_and_apply
from domain.relay import RelayEvent

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

    def handle(self, message: Any) -> Any:
        if not isinstance(message, ObserveRelayEvents):
            logger.warning("projector ignored an unexpected message %r", message)
            return None
        try:
            return self._observe(message.events)
        except StoreError:
            raise
        except Exception:
            # A bug must not leave memory ahead of the store: restart from what is stored.
            logger.exception("projector for %s failed; reloading", self._session_id)
            self._session = None
            raise

    def _committed(self) -> MaterializedSession:
        if self._session is None:
            self._session = self._load(self._session_id)
        return self._session

    def _observe(self, events: list[RelayEvent]) -> ProjectionReport:
        applied = already = 0
        working = self._committed()
        page: list[tuple[RelayEvent, MaterializedSessionMutation]] = []
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
            working, mutation = project_and_apply(working, event, session_id=self._session_id)
            page.append((event, mutation))
            if len(page) == PAGE_SIZE:
                applied += self._commit(page, working)
                working = self._committed()
                page = []
        if page:
            applied += self._commit(page, working)
        final = self._committed()
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
        if applied == len(page) and stored_ordinal == result.applied_event_ordinal:
            self._session = result
        else:
            # The store was ahead of memory (another writer of this session's events):
            # adopt what is stored.
            self._session = self._load(self._session_id)
        return applied
