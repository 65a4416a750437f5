"""``derive_api_events`` called directly."""

from __future__ import annotations

import msgspec

from relaystore.domain.api_events import (
    MaterializedTurn,
)
from relaystore.domain.materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
)
from relaystore.domain.outcomes import (
    OutcomeReason,
)
from relaystore.domain.projection import derive_api_events
from relaystore.domain.relay import (
    CommandRejected,
    RelayCommandKind,
    RelayEvent,
    WarningObservation,
)
from tests.domain.projection.support import (
    Journal,
    kinds,
    queued,
    refused,
)

# --- derive_api_events directly -------------------------------------------------------------


def test_a_turn_that_is_already_active_is_not_started_again() -> None:
    session = MaterializedSession.empty("s")
    active = MaterializedTurn(
        command_id="p", accepted_ordinal=1, turn_start_position=2, started_at_ms=2
    )
    session = msgspec.structs.replace(session, active_turn=active)
    event = RelayEvent.create(
        ordinal=1, recorded_at_ms=1, observation=WarningObservation.of(message="x")
    )
    assert derive_api_events(session, event, MaterializedSessionMutation(active_turn=active)) == []
    other = msgspec.structs.replace(active, command_id="q")
    assert [
        e.kind
        for e in derive_api_events(session, event, MaterializedSessionMutation(active_turn=other))
    ] == ["turn_started"]


def test_a_refused_prompt_never_yields_command_ended_or_legacy_notice() -> None:
    journal = Journal()
    for reason in (None, OutcomeReason.RUNTIME_STOPPED):
        journal.add(queued("p"))
        mutation = journal.add(refused(CommandRejected, "p", RelayCommandKind.PROMPT, "no", reason))
        assert kinds(mutation) == ["turn_ended"]
