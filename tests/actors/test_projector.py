"""The projector's working copy: kept across messages, discarded only after a failure.

The projector projects events in place into a private working session. These tests run
it against an in-memory stand-in for the store (it counts loads and applies committed
pages with the pure projection) to pin down when the working copy is reloaded: never
on the path of events that commit as projected; after an event fails mid-page, after a
failed commit, and when the store turns out to be ahead.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from pykka import ActorRef

from relaystore.actors.projector import PAGE_SIZE, ProjectorActor
from relaystore.domain.errors import ProjectionError, RelayChainError, WriterStopped
from relaystore.domain.materialized import MaterializedSession, MaterializedSessionMutation
from relaystore.domain.messages import ObserveRelayEvents, ProjectionReport
from relaystore.domain.projection import apply_committed_projection_event, project_and_apply
from relaystore.domain.relay import CommandCompleted, RelayEvent, SteeredOutcome
from relaystore.domain.wire import decode_json, encode
from tests.domain.test_projection_scenarios import build_events, journal_observations

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


def _replayed(count: int) -> MaterializedSession:
    session = MaterializedSession.empty(SESSION)
    for event in EVENTS[:count]:
        session, _ = project_and_apply(session, event)
    return session


class Store:
    """The projector's loader and page writer over one in-memory committed session."""

    def __init__(self) -> None:
        self.stored = MaterializedSession.empty(SESSION)
        self.loads = 0
        self.pages: list[int] = []  # the size of each committed page
        self.fail_next_commit = False

    def load(self, session_id: str) -> MaterializedSession:
        assert session_id == SESSION
        self.loads += 1
        return decode_json(encode(self.stored), MaterializedSession)  # a private copy

    def write_page(
        self, session_id: str, page: list[tuple[RelayEvent, MaterializedSessionMutation]]
    ) -> tuple[int, int]:
        assert session_id == SESSION
        if self.fail_next_commit:
            self.fail_next_commit = False
            raise WriterStopped("commit failed")
        applied = 0
        for event, mutation in page:
            if event.ordinal <= self.stored.applied_event_ordinal:
                continue  # already stored (the store was ahead)
            self.stored = apply_committed_projection_event(self.stored, event, mutation)
            applied += 1
        self.pages.append(len(page))
        return self.stored.applied_event_ordinal, applied

    def advance(self, count: int) -> None:
        """Commit the first ``count`` events behind the projector's back."""
        self.stored = _replayed(count)


@pytest.fixture
def store() -> Store:
    return Store()


@pytest.fixture
def projector(store: Store) -> Iterator[ActorRef[ProjectorActor]]:
    ref = ProjectorActor.start(SESSION, load=store.load, write_page=store.write_page)
    yield ref
    ref.stop()


def observe(projector: ActorRef[ProjectorActor], events: list[RelayEvent]) -> ProjectionReport:
    report = projector.ask(ObserveRelayEvents(session_id=SESSION, events=events))
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
    assert encode(store.stored) == encode(_replayed(len(EVENTS)))
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
    assert encode(store.stored) == encode(_replayed(10))


def test_a_failure_after_a_committed_page_keeps_that_page(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    with pytest.raises(RelayChainError):
        observe(projector, [*EVENTS[: PAGE_SIZE + 2], _gap(PAGE_SIZE + 2)])
    assert store.stored.applied_event_ordinal == PAGE_SIZE
    report = observe(projector, EVENTS[: PAGE_SIZE + 10])
    assert (report.applied, report.already_applied) == (10, PAGE_SIZE)
    assert store.loads == 2
    assert encode(store.stored) == encode(_replayed(PAGE_SIZE + 10))


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
    assert encode(store.stored) == encode(_replayed(20))


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
    assert encode(store.stored) == encode(_replayed(8))


def test_a_store_ahead_of_the_working_copy_is_adopted(
    store: Store, projector: ActorRef[ProjectorActor]
) -> None:
    observe(projector, EVENTS[:2])
    store.advance(6)  # another writer committed events 3 to 6
    report = observe(projector, EVENTS[2:8])
    assert (report.applied, report.frontier_ordinal) == (2, 8)
    assert store.loads == 2
    report = observe(projector, EVENTS[8:12])
    assert (report.applied, report.frontier_ordinal) == (4, 12)
    assert store.loads == 2
    assert encode(store.stored) == encode(_replayed(12))
