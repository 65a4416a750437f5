"""Projection pages for storage tests: synthetic events and a page at the stored frontier.

A support module, not a test module (``test_projection_pages`` and ``test_materialized``
use it).
"""

from __future__ import annotations

import apsw

from relaystore.domain.chain import Step
from relaystore.domain.materialized import MaterializedSessionMutation
from relaystore.domain.projection.page import PageDelta
from relaystore.domain.relay import RELAY_EVENT_FORMAT_V1, RelayEvent, WarningObservation
from relaystore.storage.materialized import load_frontier
from tests.storage.builders import event_digest as digest

SESSION = "session-1"


def synthetic_event(
    ordinal: int, *, recorded_at_ms: int = 0, format: int = RELAY_EVENT_FORMAT_V1
) -> RelayEvent:
    """An event at ``ordinal`` whose digests are the builders' ``digest(n)``.

    Its digest is not its content's, so pages take it with ``digest_checked=True``.
    """
    return RelayEvent(
        format=format,
        ordinal=ordinal,
        previous_digest=digest(ordinal - 1) if format == RELAY_EVENT_FORMAT_V1 else "",
        digest=digest(ordinal),
        recorded_at_ms=recorded_at_ms,
        observation=WarningObservation.of(message=f"event {ordinal}"),
    )


def new_page(connection: apsw.Connection, session_id: str = SESSION) -> PageDelta:
    """An empty page starting at the stored frontier."""
    frontier = load_frontier(connection, session_id)
    assert frontier is not None
    return PageDelta.starting_at(session_id, frontier)


def add(page: PageDelta, mutation: MaterializedSessionMutation, **event: int) -> Step:
    """Fold ``mutation`` into ``page`` as the event after the page's end."""
    return page.add(synthetic_event(page.end.ordinal + 1, **event), mutation, digest_checked=True)
