"""Projector actors: one per session, folding verified relay events into its projection.

A projector owns a :class:`~relaystore.domain.projection.SessionProjection` of its session, loaded
from the store through its loader and never handed out (readers load the stored
projection, not the projector's). For each :class:`ObserveRelayEvents` it applies the
events strictly in order (:meth:`SessionProjection.apply`: re-deliveries at or below the
frontier change nothing; the rest are checked and projected in place, so an event costs
the same however long the transcript has grown), folds each applied event into a
:class:`~relaystore.domain.projection.PageDelta` and sends the pages, of up to :data:`PAGE_SIZE`
events, to the writer.

Pages are pipelined, one in flight: a full page is handed to the writer and the projector
goes on projecting the next one while the writer commits it (SQLite and fsync release
the GIL, so the two overlap); it waits for that commit before it hands over the next
page. The projection therefore runs ahead of the store by at most two pages, and nothing
is reported before the writer committed all of it.

If a page's commit fails, or any event of the message fails (the message fails with its
typed error), the projection is discarded and reloaded from the store through the loader
(when the next message arrives): every complete page before the failure stays committed
(a page in flight when a later event fails is waited for first), no event of the page the
failure was in is, and the projector goes on from the committed state. The one exception
is an event that fails with a typed error before anything of its page was projected: the
projection checks every rule before it changes anything, so it is still exactly the
committed state and is kept. When the writer applied fewer events of a page than were
sent, or its stored frontier differs from the page's end (the store was ahead: another
writer of this session's events), the projection is reloaded and the events projected
after that page are projected again from it; when the writer refuses a page because the
store is partway through it, the projection is reloaded and the page's events are
projected again from the stored state and committed. Those are the only reloads.

A :class:`~relaystore.domain.messages.Reproject` is handled between two relay-event
messages, so no page of the session is in flight: the projector reads the session's
relay log (through a reader), projects it again from the history start with the current
rules (:func:`~relaystore.domain.projection.rebuild.rebuild`, in this thread: the writer
keeps serving meanwhile) and has the writer replace the projection in one transaction
(:class:`~relaystore.actors.internal.CommitReprojection`); then it reloads.

A session behind its log (a line of a kind this build did not know: see
:class:`~relaystore.domain.materialized.ProjectionBehind`) keeps every later event in
the log without projecting it. When a projector loads such a session it reads the line
the projection stopped at; if this build knows its kind now
(:func:`~relaystore.domain.projection.session.knows_line`), it
catches the session up: a reprojection from the log, as above, before anything else.
With the store's ``relay_log`` off a line of an unknown kind is refused with
:class:`~relaystore.domain.errors.UnknownRelayKind` instead (``hold_unknown``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pykka import ActorRef

from ..domain.errors import RelayChainError, StoreError, UnknownSession
from ..domain.materialized import MaterializedSession, TranscriptItem
from ..domain.messages import (
    LoadRelayLog,
    ObserveRelayEvents,
    ProjectionReport,
    Reproject,
)
from ..domain.projection import PageDelta, SessionProjection
from ..domain.projection.index import ColdEntry
from ..domain.projection.rebuild import ReprojectReport, rebuild
from ..domain.projection.session import knows_line
from ..domain.relay.events import RelayEvent, RelayLine
from ..domain.relay.payloads import RelayCursor
from .envelope import TellSafeActor, Unanswerable
from .inbox import inbox_of
from .internal import CommitReprojection, LoadLoggedLine, LoadTranscriptItem

__all__ = [
    "PAGE_SIZE",
    "PageCommit",
    "PageSender",
    "PagedLoader",
    "Projection",
    "ProjectorActor",
    "ProjectorCore",
    "SessionLoader",
]

logger = logging.getLogger(__name__)

PAGE_SIZE = 128

PageCommit = Callable[[], tuple[RelayCursor, int]]
"""Waits for a page handed to the writer: its stored frontier and applied count, or its error."""

PageSender = Callable[[str, PageDelta], PageCommit]
"""Hands one page to the writer without waiting; the returned call waits for its commit."""

SessionLoader = Callable[[str], MaterializedSession]
"""Loads the committed projection of a session (through the writer)."""

PagedLoader = Callable[[str], tuple[MaterializedSession, Iterator[TranscriptItem | ColdEntry]]]
"""Loads the committed projection of a session without its transcript, and its transcript
a page at a time: the old items as their ids and index facts, the newest whole (so a long
transcript is neither held nor decoded whole)."""


@dataclass(slots=True)
class _Tally:
    """What one message's events came to: applied, or already applied."""

    applied: int = 0
    already: int = 0
    held: int = 0


@dataclass(slots=True)
class _InFlight:
    """A page handed to the writer, the events it holds, and how to wait for its commit."""

    page: PageDelta
    events: list[RelayEvent | RelayLine]
    wait: PageCommit


class Projection(Protocol):
    """What a projector actor runs its messages through: a :class:`ProjectorCore` in the
    actor's thread, or a projection worker process's proxy
    (:class:`~relaystore.actors.workers.proxy.RemoteProjection`)."""

    def handle(self, message: Any) -> Any:
        """Answer an :class:`ObserveRelayEvents` or a :class:`Reproject`."""

    def close(self) -> None:
        """The projector stops: drop the projection."""


class ProjectorActor(TellSafeActor):
    """Owns one session's projection: runs each message through its :class:`Projection`,
    in order."""

    def __init__(self, projection: Projection, *, capacity: int = 64) -> None:
        super().__init__(capacity=capacity)
        self._projection = projection

    def handle(self, message: Any) -> Any:
        return self._projection.handle(message)

    def on_receive(self, message: Any) -> None:
        """Answer ``message``, then mark it done in the inbox, so the inbox's unfinished
        count includes the message being handled (what :func:`working` reads)."""
        try:
            super().on_receive(message)
        finally:
            self.inbox.task_done()

    def on_stop(self) -> None:
        self._projection.close()


def working(ref: ActorRef[ProjectorActor]) -> bool:
    """Whether the projector has a message waiting or being handled (a snapshot)."""
    return inbox_of(ref).unfinished_tasks > 0


class ProjectorCore:
    """One session's in-memory projection and the rules of projecting into it (the
    module doc), with the store reached through its callbacks only: it runs in a
    projector actor's thread or in a projection worker process alike."""

    def __init__(
        self,
        session_id: str,
        *,
        load: SessionLoader,
        send_page: PageSender,
        ask: Callable[[Any], Any] | None = None,
        hold_unknown: bool = False,
        load_paged: PagedLoader | None = None,
        finish_page: PageSender | None = None,
    ) -> None:
        self._load_paged = load_paged
        self._finish_page = finish_page or send_page
        """Hands over a message's last page (``send_page`` unless the caller commits it
        after the reply: a projection worker)."""
        self._hold_unknown = hold_unknown
        """Keep lines of unknown kinds (the store keeps a relay log) instead of refusing."""
        self._ask = ask
        """Asks a reader or the writer (for :class:`Reproject`)."""
        self._session_id = session_id
        self._load = load
        self._send_page = send_page
        self._projection: SessionProjection | None = None
        """The private projection (None: load it from the store when next needed)."""

    def handle(self, message: Any) -> Any:
        if isinstance(message, Reproject) and self._ask is not None:
            return self._rebuild()
        if not isinstance(message, ObserveRelayEvents):
            raise Unanswerable("projector", message)
        return self._observe(message.events)

    def close(self) -> None:
        self._projection = None

    def park(self) -> int:
        """Leave active use, keeping the projection (a projection worker parks it when its
        projector stops: see :meth:`SessionProjection.park`); its estimated bytes (0
        when none is loaded)."""
        return 0 if self._projection is None else self._projection.park()

    def _rebuild(self) -> ReprojectReport:
        assert self._ask is not None
        session_id = self._session_id
        stored = self._ask(LoadRelayLog(session_id=session_id))
        if stored is None:
            raise UnknownSession(session_id)
        rebuilt = rebuild(stored)
        self._projection = None  # whatever happens next, start again from the store
        report: ReprojectReport = self._ask(
            CommitReprojection(session_id=session_id, page=rebuilt.page)
        )
        return report

    def _working(self) -> SessionProjection:
        if self._projection is None:
            projection = self._loaded()
            behind = projection.behind
            if behind is not None and self._ask is not None and self._knows(behind.ordinal):
                try:
                    report = self._rebuild()
                except StoreError as exc:
                    # It stays behind (its lines are still kept): a pruned log, say.
                    logger.warning("cannot catch session %s up: %s", self._session_id, exc)
                else:
                    logger.info(
                        "caught session %s up from ordinal %d (%s): %d events projected again",
                        self._session_id,
                        behind.ordinal,
                        behind.kind,
                        report.events_reprojected,
                    )
                projection = self._loaded()
            self._projection = projection
        return self._projection

    def _loaded(self) -> SessionProjection:
        items = None
        if self._load_paged is not None:
            session, items = self._load_paged(self._session_id)
        else:
            session = self._load(self._session_id)
        return SessionProjection(
            session,
            session_id=self._session_id,
            hold_unknown=self._hold_unknown,
            fetch=None if self._ask is None else self._fetch,
            items=items,
        )

    def _fetch(self, stable_id: str) -> TranscriptItem:
        """A committed item the projection dropped from memory (a cold item)."""
        assert self._ask is not None
        item: TranscriptItem = self._ask(
            LoadTranscriptItem(session_id=self._session_id, stable_id=stable_id)
        )
        return item

    def _knows(self, ordinal: int) -> bool:
        """Whether this build can project the logged line at ``ordinal`` now."""
        assert self._ask is not None
        line = self._ask(LoadLoggedLine(session_id=self._session_id, ordinal=ordinal))
        return line is not None and knows_line(line)

    def _observe(self, events: list[RelayEvent | RelayLine]) -> ProjectionReport:
        tally = _Tally()
        projection = self._working()
        page = PageDelta.starting_at(self._session_id, projection.frontier)
        page_events: list[RelayEvent | RelayLine] = []
        flight: _InFlight | None = None
        try:
            for event in events:
                mutation = projection.apply(event)
                if mutation is None:
                    tally.already += 1
                    continue
                if mutation.behind is not None:
                    tally.held += 1
                page.add(event, mutation, applied_at_end=True)
                page_events.append(event)
                if page.applied < PAGE_SIZE:
                    continue
                if flight is not None:
                    sent, flight = flight, None
                    rebuilt = self._land(sent, page_events, tally)
                    if rebuilt is not None:
                        page, page_events = rebuilt
                        projection = self._working()
                        if page.applied < PAGE_SIZE:
                            continue
                flight = _InFlight(page, page_events, self._send_page(self._session_id, page))
                page = PageDelta.starting_at(self._session_id, projection.frontier)
                page_events = []
            if flight is not None:
                sent, flight = flight, None
                rebuilt = self._land(sent, page_events, tally)
                if rebuilt is not None:
                    page, page_events = rebuilt
            if page.applied:
                last = _InFlight(page, page_events, self._finish_page(self._session_id, page))
                self._land(last, [], tally)
        except StoreError:
            # A page in flight holds complete pages before the failure: they stay
            # committed (its own failure, which comes first, is the one to report). An
            # event refused with its typed error changed nothing, so the projection is
            # still the committed state unless a page was under way (or a commit failed):
            # then it is ahead of the store.
            if flight is not None:
                self._settle(flight)
            if self._projection is not None and self._projection.frontier != page.start:
                self._projection = None
            raise
        except Exception:
            # A bug may have stopped mid-projection: restart from what is stored.
            logger.exception("projector for %s failed; reloading", self._session_id)
            self._projection = None
            if flight is not None:
                with contextlib.suppress(Exception):
                    flight.wait()
            raise
        working = self._working()
        frontier = working.frontier
        return ProjectionReport(
            session_id=self._session_id,
            applied=tally.applied,
            already_applied=tally.already,
            frontier_ordinal=frontier.ordinal,
            frontier_digest=frontier.digest,
            held=min(tally.held, tally.applied),
            behind=working.behind,
        )

    def _land(
        self, flight: _InFlight, building: list[RelayEvent | RelayLine], tally: _Tally
    ) -> tuple[PageDelta, list[RelayEvent | RelayLine]] | None:
        """Settle ``flight`` while the page of ``building`` is under way, counting in
        ``tally`` the events the store applied and those it (or the reloaded projection)
        already held; return the building page projected again when the projection was
        replaced (else None)."""
        count, redo = self._settle(flight)
        tally.applied += count
        tally.already += len(flight.events) - count
        if not redo:
            return None
        page, kept, again = self._reproject(building)
        tally.already += again
        return page, kept

    def _settle(self, flight: _InFlight) -> tuple[int, bool]:
        """Wait for ``flight``'s commit; return how many events the store applied (the
        rest of the page it already held) and whether the projection was replaced (events
        projected after the page must then be projected again from it). A failed commit
        discards the projection and raises."""
        try:
            stored, applied = flight.wait()
        except RelayChainError:
            # The store is neither where the page starts nor past its end: another writer
            # of this session's events got partway. Adopt what is stored and project the
            # page's events again from there (those it holds are already applied).
            self._projection = None
            page, _, _ = self._reproject(flight.events)
            if not page.applied:
                return 0, True
            stored, applied = self._send_page(self._session_id, page)()
            if applied != page.applied or stored != page.end:
                self._projection = None
            return applied, True
        except BaseException:
            self._projection = None
            raise
        if applied != flight.page.applied or stored != flight.page.end:
            # The store was ahead of memory (another writer of this session's events):
            # adopt what is stored.
            self._projection = None
            return applied, True
        if self._projection is not None:
            self._projection.committed(stored.ordinal)  # its old items may go cold now
        return applied, False

    def _reproject(
        self, events: list[RelayEvent | RelayLine]
    ) -> tuple[PageDelta, list[RelayEvent | RelayLine], int]:
        """Project ``events`` (digests checked) onto the working projection, reloaded if
        discarded; return their page, the events it holds, and how many were already
        applied."""
        projection = self._working()
        page = PageDelta.starting_at(self._session_id, projection.frontier)
        kept: list[RelayEvent | RelayLine] = []
        for event in events:
            mutation = projection.apply(event, digest_checked=True)
            if mutation is not None:
                page.add(event, mutation, applied_at_end=True)
                kept.append(event)
        return page, kept, len(events) - len(kept)
