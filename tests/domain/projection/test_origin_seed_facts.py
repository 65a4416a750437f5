"""The origin's seed facts about projection, pinned one by one."""

from __future__ import annotations

import pytest

from relaystore.domain.materialized import (
    ExecutionIdle,
)
from relaystore.domain.outcomes import (
    CommandOwner,
    CommandResultKind,
    OutcomeReason,
    TurnDiagnostic,
    TurnResultKind,
)
from relaystore.domain.relay import (
    AgentInitialized,
    CommandInterrupted,
    CommandRejected,
    ElicitationRequested,
    ElicitationResolved,
    RelayCommandKind,
    RelayObservation,
    SessionFault,
    SessionRestarted,
)
from relaystore.domain.wire import encode
from tests.domain.projection.support import (
    Journal,
    command_ended,
    finished,
    input_required,
    input_resolved,
    question,
    refused,
    runtime,
    runtime_receipt,
    session_fault,
    system_texts,
    turn,
    turn_ended,
)

# --- the origin's seed facts ---------------------------------------------------------------


def test_seed_turn_yields_exactly_turn_started_then_turn_ended() -> None:
    journal = Journal(chained=True)
    journal.run(turn())

    assert journal.session.applied_event_digest == (
        "a6aff09e636ffa8e59dcb3548acbeebddd663a1a0f75068cbe781d5ec9c7ac2a"
    )
    assert journal.kinds == ["turn_started", "turn_ended"]
    started_event, ended_event = journal.api_events
    assert encode(started_event.data) == (
        b'{"turn":{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,'
        b'"started_at_ms":2}}'
    )
    assert encode(ended_event.data) == (
        b'{"turn":{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,'
        b'"completed_ordinal":3,"completed_at_ms":100,'
        b'"outcome":{"kind":"completed","stop_reason":"end_turn"}}}'
    )
    assert journal.session.active_turn is None
    assert journal.session.execution == ExecutionIdle()
    outcome = journal.session.last_turn_outcome
    assert outcome is not None
    assert (outcome.accepted_ordinal, outcome.turn_start_position) == (1, 2)


def test_seed_question_inside_a_turn_is_required_then_resolved_with_its_turn_id() -> None:
    request = question()
    journal = Journal(chained=True)
    observations = turn()
    observations[2:2] = [
        ElicitationRequested.of(request=request),
        ElicitationResolved.of(elicitation_id=request.id, action="accept"),
    ]
    journal.run(observations)

    assert journal.kinds == ["turn_started", "input_required", "input_resolved", "turn_ended"]
    required, resolved = (
        input_required(journal.api_events[1]),
        input_resolved(journal.api_events[2]),
    )
    assert required.request == request
    assert required.turn_id == 1
    assert (resolved.elicitation_id, resolved.turn_id, resolved.action) == (
        "question-1",
        1,
        "accept",
    )
    assert journal.session.pending_elicitations == []
    assert journal.session.active_turn is None
    assert journal.session.last_turn_outcome is not None
    assert journal.session.last_turn_outcome.accepted_ordinal == 1


def test_seed_checkpoint_cleanup_ends_commands_without_ending_the_turn() -> None:
    journal = Journal(chained=True)
    journal.run(turn()[:2])
    for command_id, reason in [
        ("arbitrary-one", OutcomeReason.CONTROLLER_DISCONNECTED),
        ("arbitrary-two", OutcomeReason.OWNER_LOST_ON_RESTART),
    ]:
        journal.add(
            refused(
                CommandInterrupted,
                command_id,
                RelayCommandKind.BEGIN_CHECKPOINT,
                "diagnostic wording is not a contract",
                reason,
            )
        )
    journal.add(
        refused(
            CommandRejected,
            "arbitrary-three",
            RelayCommandKind.COMPLETE_CHECKPOINT,
            "Cannot save recovery floor",
            OutcomeReason.COMMAND_FAILED,
        )
    )

    session = journal.session
    assert session.active_turn is not None
    assert session.last_turn_outcome is None
    assert not any("diagnostic wording" in text for text in system_texts(session))
    assert any("Cannot save recovery floor" in text for text in system_texts(session))

    journal.add(turn()[2])
    assert journal.kinds == [
        "turn_started",
        "command_ended",
        "command_ended",
        "command_ended",
        "turn_ended",
    ]
    for event in journal.api_events[1:3]:
        result = command_ended(event)
        assert result.outcome is CommandResultKind.CANCELLED
        assert result.command_kind == "begin_checkpoint"
        assert result.owner is CommandOwner.WORKER
    failed = command_ended(journal.api_events[3])
    assert (failed.outcome, failed.reason, failed.command_kind) == (
        CommandResultKind.FAILED,
        OutcomeReason.COMMAND_FAILED,
        "complete_checkpoint",
    )
    assert failed.message == "Cannot save recovery floor"
    assert turn_ended(journal.api_events[4]).outcome.kind is TurnResultKind.COMPLETED


@pytest.mark.parametrize(
    ("terminal", "kind", "reason"),
    [
        (
            finished(stop_reason="Cancelled", command=RelayCommandKind.PROMPT),
            TurnResultKind.CANCELLED,
            OutcomeReason.REQUESTED_CANCELLATION,
        ),
        (
            finished(stop_reason="QuotaLimit", command=RelayCommandKind.PROMPT),
            TurnResultKind.FAILED,
            OutcomeReason.QUOTA_LIMIT,
        ),
        (
            finished(stop_reason="provider_error"),
            TurnResultKind.FAILED,
            OutcomeReason.UNRECOGNIZED_STOP_REASON,
        ),
        (
            refused(
                CommandRejected,
                "prompt-1",
                RelayCommandKind.PROMPT,
                "unavailable",
                OutcomeReason.ADMISSION_REJECTED,
            ),
            TurnResultKind.REJECTED,
            OutcomeReason.ADMISSION_REJECTED,
        ),
        (
            refused(
                CommandInterrupted,
                "prompt-1",
                RelayCommandKind.PROMPT,
                "runtime stopped",
                OutcomeReason.RUNTIME_STOPPED,
            ),
            TurnResultKind.INTERRUPTED,
            OutcomeReason.RUNTIME_STOPPED,
        ),
    ],
    ids=["cancelled", "quota-limit", "provider-error", "admission-rejected", "runtime-stopped"],
)
def test_seed_prompt_endings_are_one_semantic_turn_ended_and_nothing_else(
    terminal: RelayObservation, kind: TurnResultKind, reason: OutcomeReason
) -> None:
    journal = Journal(chained=True)
    journal.run([*turn()[:2], terminal])

    assert journal.kinds == ["turn_started", "turn_ended"]
    ended = turn_ended(journal.api_events[1])
    assert ended.command_id == "prompt-1"
    assert ended.accepted_ordinal == 1
    assert (ended.outcome.kind, ended.outcome.reason) == (kind, reason)


def test_seed_provider_error_keeps_its_stop_reason_and_message() -> None:
    journal = Journal()
    journal.run([*turn()[:2], finished(stop_reason="provider_error")])

    outcome = turn_ended(journal.api_events[-1]).outcome
    assert (outcome.message, outcome.stop_reason) == ("provider_error", "provider_error")


def test_a_diagnostic_turns_an_unknown_stop_reason_into_a_provider_failure() -> None:
    journal = Journal()
    diagnostic = TurnDiagnostic(message="model overloaded", code="529")
    journal.run([*turn()[:2], finished(stop_reason="provider_error", diagnostic=diagnostic)])

    ended = turn_ended(journal.api_events[-1])
    assert ended.outcome.reason is OutcomeReason.PROVIDER_FAILURE
    assert ended.outcome.message == "model overloaded"
    assert ended.diagnostic == diagnostic


def test_seed_session_fault_after_a_completed_turn_leaves_that_turn_alone() -> None:
    journal = Journal(chained=True)
    journal.run(turn())
    outcome = journal.session.last_turn_outcome
    mutation = journal.add(
        SessionFault.of(reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited"),
        command_id="cmd-9",
    )

    assert journal.kinds == ["turn_started", "turn_ended", "session_fault"]
    fault = session_fault(mutation.api_events[0])
    assert (fault.reason, fault.message, fault.command_id) == (
        OutcomeReason.RUNTIME_UNAVAILABLE,
        "runtime exited",
        "cmd-9",
    )
    assert mutation.last_turn_outcome is None
    assert journal.session.last_turn_outcome == outcome
    assert system_texts(journal.session)[-1] == "warning: runtime exited"


def test_seed_runtime_receipts_carry_the_event_ordinal_and_time() -> None:
    journal = Journal(chained=True)
    journal.add(
        AgentInitialized.of(protocol_version=1, capabilities={}, runtime=runtime("first")),
        at_ms=111,
    )
    journal.add(SessionRestarted())
    journal.add(
        AgentInitialized.of(protocol_version=1, capabilities={}, runtime=runtime("second")),
        at_ms=333,
    )

    receipts = [runtime_receipt(event) for event in journal.api_events]
    assert [event.kind for event in journal.api_events] == ["runtime_resolved", "runtime_resolved"]
    assert [(r.event_ordinal, r.observed_at_ms) for r in receipts] == [(1, 111), (3, 333)]
    assert receipts[0].id == (
        "mj-runtime-v1:55e085ff68b9b6b8e189583b12475fb6e2dde6f5f3d27e88979ed826b0174bdc"
    )
    assert receipts[0].id != receipts[1].id
