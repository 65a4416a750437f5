"""Helpers shared by the message-level ports of the origin's seed tests.

``turn()`` is the seed's exact observations (its digests are pinned in
``origin-projection.md`` §2); ``chain`` builds on :class:`relaystore.testing.JournalBuilder`.
"""

from __future__ import annotations

import msgspec

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiEvent
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    ProjectionReport,
)
from relaystore.domain.relay import (
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCursor,
    RelayEvent,
    RelayObservation,
)
from relaystore.testing import JournalBuilder


def turn() -> list[RelayObservation]:
    """The seed's ``turn()``: a prompt queued, started and finished with end_turn."""
    return [
        CommandQueued.of(
            command_id="prompt-1", command=PromptCommand.of(prompt=[]), created_at_ms=1
        ),
        CommandStarted.of(command_id="prompt-1", started_at_ms=2),
        CommandCompleted.of(
            command_id="prompt-1", outcome=PromptOutcome.of(stop_reason="end_turn")
        ),
    ]


def chain(
    store: EventStore, observations: list[RelayObservation], session_id: str = "session-1"
) -> list[RelayEvent]:
    """Format 1 events that continue the session's stored frontier (all recorded at 100)."""
    current = store.ask(LoadMaterializedSession(session_id=session_id))
    assert current is not None
    frontier = RelayCursor(
        ordinal=current.applied_event_ordinal, digest=current.applied_event_digest
    )
    builder = JournalBuilder(format=1, after=frontier, start_ms=100, step_ms=0)
    return builder.extend(observations)


def page(
    store: EventStore,
    observations: list[RelayObservation],
    *,
    fail: bool = False,
    session_id: str = "session-1",
) -> ProjectionReport:
    """Project ``observations`` as one message; ``fail`` ends the page with a forged event."""
    events = chain(store, observations, session_id)
    if fail:
        last = events[-1]
        events[-1] = msgspec.structs.replace(last, digest="f" * 64)
    return store.ask(ObserveRelayEvents(session_id=session_id, events=events))


def all_events(store: EventStore, after: int | None = 0, limit: int = 100) -> list[ApiEvent]:
    return store.ask(LoadApiEvents(after_seq=after, limit=limit)).events
