"""The projector's projection: kept across messages, discarded only after a failure.

The projector applies events in place to the session its :class:`SessionProjection`
owns. These tests run it against a stand-in for the writer (a real store on one
connection that counts loads and commits pages with :func:`storage.projection.commit_page`)
to pin down when the projection is reloaded: never on the path of events that commit as
projected; after an event fails mid-page, after a failed commit, and when the store
turns out to be ahead. Each runs twice: the projector in its own thread, and in a
projection worker process (whose proxy commits a message's last page after the reply, so
the worker's cases of a failed or overtaken last commit are settled there).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from pykka import ActorRef

from relaystore.actors.envelope import Envelope
from relaystore.actors.projector import (
    PAGE_SIZE,
    PageCommit,
    Projection,
    ProjectorActor,
    ProjectorCore,
)
from relaystore.actors.workers.pool import WorkerPool
from relaystore.actors.workers.proxy import RemoteProjection
from relaystore.domain.errors import ProjectionError, RelayChainError, WriterStopped
from relaystore.domain.materialized import MaterializedSession, TranscriptItem
from relaystore.domain.messages import ObserveRelayEvents, ProjectionReport
from relaystore.domain.projection import PageDelta, SessionProjection
from relaystore.domain.projection.index import ColdEntry
from relaystore.domain.relay import CommandCompleted, RelayCursor, RelayEvent, SteeredOutcome
from relaystore.domain.wire import encode
from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.storage.materialized import load_materialized_session
from relaystore.storage.projection import commit_page
from relaystore.storage.sessions import save_session
from relaystore.testing import example_session
from tests.domain.journal_stories import build_events, journal_observations

SESSION = "session-1"

# A turn with streaming, a tool and its terminal output (parked, then claimed), repeated
# until the journal spans a few pages.
_TURN = [
    ("prompt", 0, "go"),
    ("start", 0, ""),
    ("chunk", 1, "a"),
    ("thought", 0, "b"),
    ("terminal", 1, "out"),
    ("tool", 1, "run"),
    ("tool_update", 1, "q"),
    ("plan", 0, "p"),
    ("chunk", 0, "c"),
    ("complete", 0, ""),
]
EVENTS = build_events(journal_observations(_TURN * 40))


def _canonical(session: MaterializedSession) -> bytes:
    """The session as the store orders its transcript (by position, then stable id)."""
    ordered = sorted(session.transcript, key=lambda item: (item.position, item.stable_id))
    fields = {name: getattr(session, name) for name in session.__struct_fields__}
    return encode(MaterializedSession(**{**fields, "transcript": ordered}))


def _replayed(count: int) -> bytes:
    projection = SessionProjection(MaterializedSession.empty(SESSION))
    for event in EVENTS[:count]:
        projection.apply(event)
    return _canonical(projection.session)


class Store:
    """The projector's loader and page writer over a real store on one connection."""

    def __init__(self, path: Path) -> None:
        self.writer: WriterConnection = open_writer(path, synchronous="OFF")
        save_session(self.writer.connection, example_session(SESSION))
        self.loads = 0
        self.pages: list[int] = []  # the size of each committed page
        self.fail_next_commit = False
        self.before_commit: list[int] = []
        """Counts to :meth:`advance` to, one per commit, just before the commit (a FIFO)."""

    @property
    def stored(self) -> MaterializedSession:
        session = load_materialized_session(self.writer.connection, SESSION)
        assert session is not None
        return session

    def load(self, session_id: str) -> MaterializedSession:
        assert session_id == SESSION
        self.loads += 1
        return self.stored

    def load_paged(
        self, session_id: str
    ) -> tuple[MaterializedSession, Iterator[TranscriptItem | ColdEntry]]:
        """:meth:`load`, its transcript as the items to enter (a worker's loader)."""
        session = self.load(session_id)
        return session, iter(session.transcript)

    def send_page(self, session_id: str, page: PageDelta) -> PageCommit:
        """Commit ``page`` when the projector waits for it (as late as the writer may)."""
        assert session_id == SESSION

        def wait() -> tuple[RelayCursor, int]:
            if self.fail_next_commit:
                self.fail_next_commit = False
                raise WriterStopped("commit failed")
            if self.before_commit:
                self.advance(self.before_commit.pop(0))
            stored, applied = commit_page(self.writer.connection, session_id, page)
            self.pages.append(page.applied)
            return stored, applied

        return wait

    def advance(self, count: int) -> None:
        """Commit the events up to ``count`` behind the projector's back."""
        projection = SessionProjection(self.stored)
        page = PageDelta.starting_at(SESSION, projection.frontier)
        for event in EVENTS[:count]:
            mutation = projection.apply(event)
            if mutation is not None:
                page.add(event, mutation)
        commit_page(self.writer.connection, SESSION, page)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store(tmp_path / "store.sqlite3")
    yield store
    store.writer.close()


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    workers = WorkerPool(hold_unknown=False, limit=8)
    yield workers
    workers.close()


@pytest.fixture(params=["thread", "process"])
def projector(
    request: pytest.FixtureRequest, store: Store, pool: WorkerPool
) -> Iterator[ActorRef[ProjectorActor]]:
    """The projector in its own thread, and run by a worker process: the same rules."""
    projection: Projection
    if request.param == "thread":
        projection = ProjectorCore(SESSION, load=store.load, send_page=store.send_page)
    else:
        projection = RemoteProjection(
            SESSION,
            pool,
            load=store.load,
            send_page=store.send_page,
            ask=_no_ask,
            load_paged=store.load_paged,
        )
    ref = ProjectorActor.start(projection)
    yield ref
    ref.stop()
    pool.forget(SESSION)  # parked: the next test's store is another store


def _no_ask(message: object) -> object:
    raise AssertionError(f"the projector asked {message!r}")


def observe(projector: ActorRef[ProjectorActor], events: list[RelayEvent]) -> ProjectionReport:
    future: pykka.Future[object] = pykka.ThreadingFuture()
    projector.tell(Envelope(ObserveRelayEvents(session_id=SESSION, events=events), future))
    report = future.get(timeout=30)
    assert isinstance(report, ProjectionReport)
    return report


def _gap(after: int) -> RelayEvent:
    """An event that skips the one after ordinal ``after``."""
    return EVENTS[after + 1]


def test_the_working_copy_is_loaded_once_and_kept_across_messages_and_pages(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    assert len(EVENTS) > 2 * PAGE_SIZE + 10
    cuts = [0, 7, PAGE_SIZE + 3, 2 * PAGE_SIZE + 9, len(EVENTS)]
    for start, end in itertools.pairwise(cuts):
        report = observe(projector, EVENTS[start:end])
        assert (report.applied, report.frontier_ordinal) == (end - start, end)
    assert store.loads == 1
    assert _canonical(store.stored) == _replayed(len(EVENTS))
    # Re-delivered events are skipped without touching the store.
    report = observe(projector, EVENTS[-5:])
    assert (report.applied, report.already_applied) == (0, 5)
    assert store.loads == 1


def test_an_event_failing_mid_page_discards_the_page_and_reloads(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    with pytest.raises(RelayChainError, match="gap"):
        observe(projector, [*EVENTS[:5], _gap(5)])
    assert (store.stored.applied_event_ordinal, store.pages) == (0, [])
    # The next message starts from the store, not from the five uncommitted events.
    report = observe(projector, EVENTS[:10])
    assert (report.applied, report.already_applied, report.frontier_ordinal) == (10, 0, 10)
    assert store.loads == 2
    assert _canonical(store.stored) == _replayed(10)


def test_a_failure_after_a_committed_page_keeps_that_page(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    with pytest.raises(RelayChainError):
        observe(projector, [*EVENTS[: PAGE_SIZE + 2], _gap(PAGE_SIZE + 2)])
    assert store.stored.applied_event_ordinal == PAGE_SIZE
    report = observe(projector, EVENTS[: PAGE_SIZE + 10])
    assert (report.applied, report.already_applied) == (10, PAGE_SIZE)
    assert store.loads == 2
    assert _canonical(store.stored) == _replayed(PAGE_SIZE + 10)


def test_an_event_refused_before_its_page_began_keeps_the_working_copy(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    observe(projector, EVENTS[:10])
    steer = RelayEvent.create(
        ordinal=11,
        recorded_at_ms=1,
        observation=CommandCompleted.of(
            command_id="s", outcome=SteeredOutcome.of(queued_command_id="missing")
        ),
    )
    with pytest.raises(ProjectionError):
        observe(projector, [steer])
    with pytest.raises(RelayChainError, match="gap"):
        observe(projector, [_gap(10)])
    report = observe(projector, EVENTS[10:20])
    assert (report.applied, report.frontier_ordinal) == (10, 20)
    assert store.loads == 1  # the refused events changed nothing: no reload
    assert _canonical(store.stored) == _replayed(20)


def test_a_failed_commit_discards_the_working_copy(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    observe(projector, EVENTS[:3])
    store.fail_next_commit = True
    with pytest.raises(WriterStopped):
        observe(projector, EVENTS[3:8])
    assert store.stored.applied_event_ordinal == 3
    report = observe(projector, EVENTS[3:8])
    assert (report.applied, report.frontier_ordinal) == (5, 8)
    assert store.loads == 2
    assert _canonical(store.stored) == _replayed(8)


@pytest.mark.parametrize(
    ("ahead_to", "applied"),
    [(6, 2), (8, 0)],
    ids=["partway-through-the-page", "holding-the-whole-page"],
)
def test_a_store_ahead_of_the_working_copy_is_adopted(
    store: Store, projector: ActorRef[ProjectorActor], ahead_to: int, applied: int
) -> None:
    observe(projector, EVENTS[:2])
    store.advance(ahead_to)  # another writer committed events 3 to ``ahead_to``
    report = observe(projector, EVENTS[2:8])
    assert (report.applied, report.already_applied, report.frontier_ordinal) == (
        applied,
        6 - applied,
        8,
    )
    assert store.loads == 2
    report = observe(projector, EVENTS[8:12])
    assert (report.applied, report.frontier_ordinal) == (4, 12)
    assert store.loads == 2
    assert _canonical(store.stored) == _replayed(12)


# Pipelined pages: page k commits while page k+1 is projected on top of it. The stand-in
# commits a page only when the projector waits for it, so each of these cases happens with
# the next page already partly projected in memory.


def test_a_failed_commit_with_the_next_page_under_way_keeps_the_pages_before_it(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    observe(projector, EVENTS[:PAGE_SIZE])
    store.fail_next_commit = True
    with pytest.raises(WriterStopped):
        observe(projector, EVENTS[PAGE_SIZE : 3 * PAGE_SIZE + 5])
    assert store.stored.applied_event_ordinal == PAGE_SIZE
    assert store.pages == [PAGE_SIZE]  # neither the failed page nor any after it
    report = observe(projector, EVENTS[: 3 * PAGE_SIZE + 5])
    assert (report.applied, report.already_applied) == (2 * PAGE_SIZE + 5, PAGE_SIZE)
    assert _canonical(store.stored) == _replayed(3 * PAGE_SIZE + 5)


@pytest.mark.parametrize(
    "ahead_to",
    [9, PAGE_SIZE + 6],
    ids=["partway-through-the-page-in-flight", "past-it-into-the-next-page"],
)
def test_a_store_ahead_of_the_page_in_flight_is_adopted_and_the_rest_reprojected(
    store: Store, projector: ActorRef[ProjectorActor], ahead_to: int
) -> None:
    observe(projector, EVENTS[:1])
    # When the first page commits, another writer has committed up to ``ahead_to``.
    store.before_commit = [ahead_to]
    report = observe(projector, EVENTS[1 : 2 * PAGE_SIZE + 20])
    assert report.frontier_ordinal == 2 * PAGE_SIZE + 20
    assert report.applied == 2 * PAGE_SIZE + 20 - ahead_to
    assert report.applied + report.already_applied == 2 * PAGE_SIZE + 19
    assert _canonical(store.stored) == _replayed(2 * PAGE_SIZE + 20)
    assert store.loads == 2
