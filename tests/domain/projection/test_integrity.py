"""Chain strictness and the integrity rules of a projection change."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from relaystore.domain.errors import ChainFault, ProjectionError, RelayChainError
from relaystore.domain.materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.projection import SessionProjection
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.projection.integrity import (
    check_mutation,
    check_transcript_changes,
)
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RelayCommandKind,
    RelayCursor,
    RelayEvent,
    SteeredOutcome,
    TerminalOutput,
    WarningObservation,
)
from relaystore.domain.wire import encode
from tests.domain.projection.support import (
    SET_CONFIG,
    STREAMING,
    Journal,
    agent_body,
    chunk,
    completed,
    item,
    kinds,
    queued,
    started,
    update,
)

# --- chain strictness and integrity --------------------------------------------------------


def test_a_redelivered_event_is_already_applied_and_changes_nothing() -> None:
    journal = Journal()
    event = journal.next_event(queued())
    assert journal.projection.apply(event) is not None
    before = encode(journal.session)

    assert journal.projection.apply(event) is None
    assert encode(journal.session) == before
    other = msgspec.structs.replace(event, digest="3" * 64)
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(other)
    assert caught.value.fault is ChainFault.FORK
    assert caught.value.session_id == "session-1"
    assert encode(journal.session) == before


def test_a_gap_a_fork_and_a_forged_digest_are_refused_and_change_nothing() -> None:
    journal = Journal(chained=True)
    journal.add(queued())
    before = encode(journal.session)
    ahead = RelayEvent.create(ordinal=3, recorded_at_ms=1, observation=started())
    with pytest.raises(RelayChainError, match="expected ordinal 2, found 3"):
        journal.projection.apply(ahead)

    fork = RelayEvent.create(
        format=RELAY_EVENT_FORMAT_V1,
        ordinal=2,
        previous_digest="1" * 64,
        recorded_at_ms=1,
        observation=started(),
    )
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(fork)
    assert caught.value.fault is ChainFault.FORK

    forged = msgspec.structs.replace(journal.next_event(started()), digest="2" * 64)
    with pytest.raises(RelayChainError) as caught:
        journal.projection.apply(forged)
    assert caught.value.fault is ChainFault.BAD_DIGEST
    assert encode(journal.session) == before


def test_errors_name_the_session_id_given_by_the_caller() -> None:
    projection = SessionProjection(MaterializedSession.empty("session-1"), session_id="other-name")
    event = RelayEvent.create(ordinal=2, recorded_at_ms=1, observation=started())
    with pytest.raises(RelayChainError) as caught:
        projection.apply(event)
    assert caught.value.session_id == "other-name"


def test_apply_changes_the_projection_in_place_and_a_snapshot_stays_as_it_was() -> None:
    journal = Journal()
    journal.run(STREAMING)
    transcript = journal.projection.transcript
    before = journal.session
    snapshot = journal.projection.snapshot()
    snapshot_bytes = encode(snapshot)
    event = journal.next_event(chunk(" more", "m1"))
    mutation = journal.projection.apply(event)

    assert mutation is not None
    assert journal.projection.transcript is transcript  # changed in place, never copied
    session = journal.session
    assert (session.applied_event_ordinal, session.applied_event_digest) == (
        event.ordinal,
        event.digest,
    )
    assert journal.projection.frontier == RelayCursor(ordinal=event.ordinal, digest=event.digest)
    assert encode(snapshot) == snapshot_bytes
    assert snapshot.transcript == before.transcript != session.transcript
    assert kinds(mutation) == []


def integrity_case(journal: Journal, replacement: TranscriptItem) -> ProjectionError:
    """The rules :class:`SessionProjection` checks, run on a hand-made mutation."""
    ordinal = journal.session.applied_event_ordinal + 1
    mutation = MaterializedSessionMutation(transcript=[TranscriptUpsert(replacement)])
    items = {entry.stable_id: entry for entry in journal.session.transcript}

    def check() -> None:
        check_mutation(mutation, session_id="session-1", ordinal=ordinal)
        check_transcript_changes(mutation, items.get, session_id="session-1", ordinal=ordinal)

    with pytest.raises(ProjectionError) as caught:
        check()
    return caught.value


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"position": 1}, "immutable identity"),
        ({"created_at_ms": 1}, "immutable identity"),
        ({"last_changed_at_ms": 250}, "changed timestamp backwards"),
        ({"latest_content_event_ordinal": 4}, "latest content ordinal backwards"),
    ],
)
def test_integrity_rules_refuse_rewriting_an_items_history(
    fields: dict[str, Any], words: str
) -> None:
    journal = Journal()
    journal.run(STREAMING)
    journal.add(chunk(" again", "m1"), at_ms=200)
    journal.add(chunk("!", "m1"), at_ms=300)
    agent = item(journal.session, "agent:m1")
    assert (agent.position, agent.latest_content_event_ordinal, agent.last_changed_at_ms) == (
        3,
        5,
        300,
    )

    error = integrity_case(journal, msgspec.structs.replace(agent, **fields))
    assert words in str(error)
    assert "'agent:m1'" in str(error)
    assert (error.session_id, error.ordinal) == ("session-1", 6)


def test_an_agent_item_losing_its_latest_content_ordinal_is_refused() -> None:
    journal = Journal()
    journal.run(STREAMING)
    agent = item(journal.session, "agent:m1")
    error = integrity_case(
        journal, msgspec.structs.replace(agent, latest_content_event_ordinal=None)
    )
    assert "agent:m1" in str(error)


def test_an_item_from_the_future_is_refused() -> None:
    journal = Journal()
    future = TranscriptItem(
        stable_id="system:99",
        position=99,
        latest_content_event_ordinal=None,
        created_at_ms=1,
        last_changed_at_ms=1,
        body=SystemBody(text="x"),
    )
    error = integrity_case(journal, future)
    assert "position 99" in str(error)
    assert error.ordinal == 1


def test_a_later_change_of_an_item_removed_earlier_in_the_event_starts_it_anew() -> None:
    journal = Journal()
    journal.run(STREAMING)
    agent = item(journal.session, "agent:m1")
    ordinal = journal.session.applied_event_ordinal + 1
    moved = msgspec.structs.replace(agent, position=ordinal, latest_content_event_ordinal=ordinal)
    mutation = MaterializedSessionMutation(
        transcript=[TranscriptRemove("agent:m1"), TranscriptUpsert(moved)]
    )
    items = {entry.stable_id: entry for entry in journal.session.transcript}
    check_transcript_changes(mutation, items.get, session_id="session-1", ordinal=ordinal)


def test_a_refused_event_changes_nothing_and_the_projection_stays_usable() -> None:
    journal = Journal()
    journal.run([*STREAMING, queued("prompt-2")])
    before = encode(journal.session)
    index = TranscriptIndex.build(journal.session.transcript)
    refused_events = [
        journal.next_event(
            completed(
                "steer-1", SteeredOutcome.of(queued_command_id="ghost"), RelayCommandKind.STEER
            )
        ),
        journal.next_event(
            update("session_info_update", _meta={"execution": {"version": 2, "status": "x"}})
        ),
    ]
    for event in refused_events:
        with pytest.raises(ProjectionError):
            journal.projection.apply(event)
        assert encode(journal.session) == before
        assert journal.projection.index == index
    journal.add(chunk(" fine", "m1"))
    assert agent_body(journal.session, "agent:m1").chunks[0]["content"]["text"] == "hi fine"


def test_last_activity_never_moves_back_and_a_claimed_terminal_item_is_removed() -> None:
    journal = Journal()
    journal.add(WarningObservation.of(message="a"), at_ms=500)
    journal.add(WarningObservation.of(message="b"), at_ms=400)
    assert journal.session.last_activity_at_ms == 500
    journal.add(TerminalOutput.of(terminal_id="t9", output="x", exit_code=0, truncated=False))
    assert item(journal.session, "terminal:t9") is not None
    mutation = journal.add(
        update(
            "tool_call",
            toolCallId="c9",
            title="x",
            content=[{"type": "terminal", "terminalId": "t9"}],
        )
    )
    assert TranscriptRemove("terminal:t9") in mutation.transcript
    assert [entry.stable_id for entry in journal.session.transcript] == [
        "system:1",
        "system:2",
        "tool:c9",
    ]
    assert journal.projection.index == TranscriptIndex.build(journal.session.transcript)


def test_steering_into_a_prompt_missing_from_the_queue_is_a_projection_error() -> None:
    journal = Journal()
    journal.run([queued("prompt-1"), started("prompt-1")])
    event = journal.next_event(
        completed("steer-1", SteeredOutcome.of(queued_command_id="ghost"), RelayCommandKind.STEER)
    )
    with pytest.raises(ProjectionError, match="'ghost' is missing from the materialized queue"):
        journal.projection.apply(event)


def test_steering_into_a_config_change_is_a_projection_error() -> None:
    journal = Journal()
    journal.run([queued("prompt-1"), started("prompt-1"), SET_CONFIG])
    event = journal.next_event(completed("steer-1", SteeredOutcome.of(queued_command_id="cfg-1")))
    with pytest.raises(ProjectionError, match="not a prompt"):
        journal.projection.apply(event)
