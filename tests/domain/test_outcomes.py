"""How turns and commands end: stop-reason classification, turn results, wire shapes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from relaystore.domain.errors import InvalidInput
from relaystore.domain.outcomes import (
    AWAITING_INPUT_STOP_REASON,
    QUOTA_STOP_REASON,
    ApiTurnOutcome,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    MaterializedTurnOutcome,
    OutcomeReason,
    PromptCompletion,
    ProviderTurnCost,
    ProviderTurnUsage,
    TokenUsage,
    TurnDiagnostic,
    TurnOutcomeCompleted,
    TurnOutcomeInterrupted,
    TurnOutcomeKind,
    TurnOutcomeRejected,
    TurnResult,
    TurnResultKind,
    UsageScope,
    classify_prompt_completion,
    expected_cancellation,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.strategies import (
    OUTCOME_REASONS,
    api_turn_outcomes,
    command_results,
    dumps,
    materialized_turn_outcomes,
    turn_results,
)

# --- classification --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "completion"),
    [
        ("end_turn", PromptCompletion.FINISHED),
        ("EndTurn", PromptCompletion.FINISHED),
        ("end-turn", PromptCompletion.FINISHED),
        ("END_TURN", PromptCompletion.FINISHED),
        ("awaiting_input", PromptCompletion.INPUT_REQUIRED),
        ("AwaitingInput", PromptCompletion.INPUT_REQUIRED),
        ("Cancelled", PromptCompletion.CANCELLED),
        ("cancelled", PromptCompletion.CANCELLED),
        ("canceled", PromptCompletion.CANCELLED),
        ("QuotaLimit", PromptCompletion.QUOTA_LIMIT),
        ("quota_limit", PromptCompletion.QUOTA_LIMIT),
        ("provider_error", PromptCompletion.ERROR),
        ("max_tokens", PromptCompletion.ERROR),
        ("max_turn_requests", PromptCompletion.ERROR),
        ("refusal", PromptCompletion.ERROR),
        ("ModelCapacity", PromptCompletion.ERROR),
        ("prompt_unanswered", PromptCompletion.ERROR),
        ("", PromptCompletion.ERROR),
        ("end turn", PromptCompletion.ERROR),
    ],
)
def test_stop_reasons_classify_as_the_origin_does(
    stop_reason: str, completion: PromptCompletion
) -> None:
    assert classify_prompt_completion(stop_reason) is completion


def test_named_stop_reason_constants_classify_as_their_meaning() -> None:
    assert AWAITING_INPUT_STOP_REASON == "awaiting_input"
    assert classify_prompt_completion(AWAITING_INPUT_STOP_REASON) is PromptCompletion.INPUT_REQUIRED
    assert QUOTA_STOP_REASON == "QuotaLimit"
    assert classify_prompt_completion(QUOTA_STOP_REASON) is PromptCompletion.QUOTA_LIMIT


@settings(max_examples=100, deadline=None)
@given(
    word=st.sampled_from(["end_turn", "awaiting_input", "cancelled", "canceled", "quota_limit"]),
    separators=st.lists(st.sampled_from(["_", "-", ""]), min_size=1, max_size=20),
    upper=st.lists(st.booleans(), min_size=1, max_size=20),
)
def test_classification_ignores_case_underscores_and_dashes(
    word: str, separators: list[str], upper: list[bool]
) -> None:
    letters = word.replace("_", "")
    spelled = "".join(
        (letter.upper() if upper[i % len(upper)] else letter) + separators[i % len(separators)]
        for i, letter in enumerate(letters)
    )
    assert classify_prompt_completion(spelled) is classify_prompt_completion(word)
    assert classify_prompt_completion(word) is not PromptCompletion.ERROR


def test_outcome_reasons_are_the_21_spec_strings_in_declaration_order() -> None:
    assert [reason.value for reason in OutcomeReason] == OUTCOME_REASONS


@pytest.mark.parametrize("reason", list(OutcomeReason), ids=lambda reason: reason.value)
def test_only_three_reasons_are_expected_cancellations(reason: OutcomeReason) -> None:
    expected = reason in {
        OutcomeReason.CONTROLLER_DISCONNECTED,
        OutcomeReason.OWNER_LOST_ON_RESTART,
        OutcomeReason.REQUESTED_CANCELLATION,
    }
    assert expected_cancellation(reason) is expected


def test_no_reason_is_not_an_expected_cancellation() -> None:
    assert expected_cancellation(None) is False


# --- turn results (§3.5) ---------------------------------------------------------------------


def turn(
    outcome: TurnOutcomeKind, diagnostic: TurnDiagnostic | None = None
) -> MaterializedTurnOutcome:
    return MaterializedTurnOutcome(
        diagnostic=diagnostic,
        command_id="prompt-1",
        accepted_ordinal=1,
        turn_start_position=2,
        completed_ordinal=3,
        completed_at_ms=100,
        outcome=outcome,
    )


def result(
    kind: str, reason: str | None = None, message: str | None = None, stop_reason: str | None = None
) -> TurnResult:
    return TurnResult(
        kind=TurnResultKind(kind),
        reason=None if reason is None else OutcomeReason(reason),
        message=message,
        stop_reason=stop_reason,
    )


BOOM = TurnDiagnostic(message="upstream 502", code="bad_gateway", http_status=502)

SPEC_EXAMPLES: list[tuple[str, MaterializedTurnOutcome, TurnResult]] = [
    (
        "end_turn completes",
        turn(TurnOutcomeCompleted(stop_reason="end_turn")),
        result("completed", stop_reason="end_turn"),
    ),
    (
        "awaiting input asks for input",
        turn(TurnOutcomeCompleted(stop_reason="awaiting_input")),
        result("input_required", stop_reason="awaiting_input"),
    ),
    (
        "Cancelled is a requested cancellation",
        turn(TurnOutcomeCompleted(stop_reason="Cancelled")),
        result("cancelled", "requested_cancellation", stop_reason="Cancelled"),
    ),
    (
        "QuotaLimit fails with quota_limit and the stop reason as message",
        turn(TurnOutcomeCompleted(stop_reason="QuotaLimit")),
        result("failed", "quota_limit", "QuotaLimit", "QuotaLimit"),
    ),
    (
        "provider_error without diagnostic is unrecognized",
        turn(TurnOutcomeCompleted(stop_reason="provider_error")),
        result("failed", "unrecognized_stop_reason", "provider_error", "provider_error"),
    ),
    (
        "provider_error with diagnostic is a provider failure with its text",
        turn(TurnOutcomeCompleted(stop_reason="provider_error"), BOOM),
        result("failed", "provider_failure", "upstream 502", "provider_error"),
    ),
    (
        "QuotaLimit with diagnostic keeps quota_limit and takes its text",
        turn(TurnOutcomeCompleted(stop_reason="QuotaLimit"), BOOM),
        result("failed", "quota_limit", "upstream 502", "QuotaLimit"),
    ),
    (
        "end_turn with diagnostic stays completed but carries its text",
        turn(TurnOutcomeCompleted(stop_reason="end_turn"), BOOM),
        result("completed", message="upstream 502", stop_reason="end_turn"),
    ),
    (
        "max_tokens is unrecognized",
        turn(TurnOutcomeCompleted(stop_reason="max_tokens")),
        result("failed", "unrecognized_stop_reason", "max_tokens", "max_tokens"),
    ),
    (
        "rejected at admission is rejected",
        turn(TurnOutcomeRejected(message="queue full", reason=OutcomeReason.ADMISSION_REJECTED)),
        result("rejected", "admission_rejected", "queue full"),
    ),
    (
        "rejected without reason is a legacy rejection",
        turn(TurnOutcomeRejected(message="no")),
        result("rejected", "legacy_unclassified", "no"),
    ),
    (
        "rejected for another reason fails",
        turn(TurnOutcomeRejected(message="crash", reason=OutcomeReason.RUNTIME_FAILURE)),
        result("failed", "runtime_failure", "crash"),
    ),
    (
        "rejected for another reason with diagnostic is a provider failure",
        turn(TurnOutcomeRejected(message="crash", reason=OutcomeReason.RUNTIME_FAILURE), BOOM),
        result("failed", "provider_failure", "upstream 502"),
    ),
    (
        "interrupted by runtime stop is interrupted",
        turn(TurnOutcomeInterrupted(message="stopped", reason=OutcomeReason.RUNTIME_STOPPED)),
        result("interrupted", "runtime_stopped", "stopped"),
    ),
    (
        "interrupted without reason is a legacy interruption",
        turn(TurnOutcomeInterrupted(message="gone")),
        result("interrupted", "legacy_unclassified", "gone"),
    ),
    (
        "interrupted by a controller disconnect is a cancellation",
        turn(TurnOutcomeInterrupted(message="bye", reason=OutcomeReason.CONTROLLER_DISCONNECTED)),
        result("cancelled", "controller_disconnected", "bye"),
    ),
    (
        "interrupted on owner loss is a cancellation",
        turn(TurnOutcomeInterrupted(message="lost", reason=OutcomeReason.OWNER_LOST_ON_RESTART)),
        result("cancelled", "owner_lost_on_restart", "lost"),
    ),
]


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [pytest.param(outcome, expected, id=name) for name, outcome, expected in SPEC_EXAMPLES],
)
def test_turn_outcome_result_follows_the_spec(
    outcome: MaterializedTurnOutcome, expected: TurnResult
) -> None:
    assert outcome.result() == expected


def test_result_does_not_change_the_stored_outcome() -> None:
    outcome = turn(TurnOutcomeCompleted(stop_reason="provider_error"), BOOM)
    before = encode(outcome)
    outcome.result()
    outcome.result()
    assert encode(outcome) == before


# --- ApiTurnOutcome ----------------------------------------------------------------------------


def test_api_turn_outcome_of_the_seed_turn_has_the_published_bytes() -> None:
    api = ApiTurnOutcome.from_materialized(turn(TurnOutcomeCompleted(stop_reason="end_turn")))
    assert encode(api) == (
        b'{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,"completed_ordinal":3,'
        b'"completed_at_ms":100,"outcome":{"kind":"completed","stop_reason":"end_turn"}}'
    )


def test_api_turn_outcome_writes_diagnostic_and_usage_after_the_outcome() -> None:
    usage = TokenUsage(scope=UsageScope.TURN, total_tokens=3, input_tokens=1, output_tokens=2)
    stored = turn(TurnOutcomeCompleted(stop_reason="provider_error"), BOOM)
    stored.usage = usage
    api = ApiTurnOutcome.from_materialized(stored)
    assert api.diagnostic == BOOM
    assert api.usage == usage
    assert encode(api) == (
        b'{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,"completed_ordinal":3,'
        b'"completed_at_ms":100,"outcome":{"kind":"failed","reason":"provider_failure",'
        b'"message":"upstream 502","stop_reason":"provider_error"},'
        b'"diagnostic":{"message":"upstream 502","code":"bad_gateway","http_status":502},'
        b'"usage":{"scope":"turn","total_tokens":3,"input_tokens":1,"output_tokens":2}}'
    )


def test_materialized_turn_outcome_writes_diagnostic_and_usage_first() -> None:
    stored = turn(TurnOutcomeRejected(message="no", reason=OutcomeReason.ADMISSION_REJECTED), BOOM)
    assert encode(stored) == (
        b'{"diagnostic":{"message":"upstream 502","code":"bad_gateway","http_status":502},'
        b'"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,"completed_ordinal":3,'
        b'"completed_at_ms":100,"outcome":{"kind":"rejected","message":"no","reason":"admission_rejected"}}'
    )


def test_api_turn_outcome_leaves_out_absent_ordinals() -> None:
    stored = MaterializedTurnOutcome(
        command_id="c",
        completed_ordinal=9,
        completed_at_ms=1,
        outcome=TurnOutcomeInterrupted(message="m"),
    )
    assert encode(ApiTurnOutcome.from_materialized(stored)) == (
        b'{"command_id":"c","completed_ordinal":9,"completed_at_ms":1,'
        b'"outcome":{"kind":"interrupted","reason":"legacy_unclassified","message":"m"}}'
    )


def test_materialized_turn_outcome_refuses_unknown_fields() -> None:
    raw = b'{"command_id":"c","completed_ordinal":1,"completed_at_ms":1,"outcome":{"kind":"completed","stop_reason":"end_turn"},"extra":1}'
    with pytest.raises(InvalidInput, match="`extra`"):
        decode_json(raw, MaterializedTurnOutcome)


def test_api_turn_outcome_ignores_unknown_fields() -> None:
    raw = b'{"command_id":"c","completed_ordinal":1,"completed_at_ms":1,"outcome":{"kind":"completed"},"extra":1}'
    assert decode_json(raw, ApiTurnOutcome).outcome == TurnResult(kind=TurnResultKind.COMPLETED)


def test_unknown_turn_outcome_kind_is_refused() -> None:
    raw = b'{"command_id":"c","completed_ordinal":1,"completed_at_ms":1,"outcome":{"kind":"exploded"}}'
    with pytest.raises(InvalidInput, match="exploded"):
        decode_json(raw, MaterializedTurnOutcome)


# --- command results -------------------------------------------------------------------------


def test_worker_command_result_skips_empty_related_ids() -> None:
    result = CommandResult.worker(
        "c1",
        "begin_checkpoint",
        CommandResultKind.FAILED,
        OutcomeReason.CHECKPOINT_FAILED,
        "disk full",
    )
    assert result.owner is CommandOwner.WORKER
    assert encode(result) == (
        b'{"owner":"worker","command_id":"c1","command_kind":"begin_checkpoint","outcome":"failed",'
        b'"reason":"checkpoint_failed","message":"disk full"}'
    )


def test_daemon_checkpoint_result_writes_its_related_ids_last() -> None:
    result = CommandResult(
        owner=CommandOwner.DAEMON,
        command_id="op-1",
        command_kind="checkpoint",
        outcome=CommandResultKind.SUCCEEDED,
        related_command_ids=["b1", "b2"],
    )
    assert encode(result) == (
        b'{"owner":"daemon","command_id":"op-1","command_kind":"checkpoint","outcome":"succeeded",'
        b'"related_command_ids":["b1","b2"]}'
    )


def test_command_results_do_not_share_related_ids() -> None:
    first = CommandResult.worker("a", "cancel", CommandResultKind.SUCCEEDED, None, None)
    second = CommandResult.worker("b", "cancel", CommandResultKind.SUCCEEDED, None, None)
    first.related_command_ids.append("x")
    assert second.related_command_ids == []


def test_provider_usage_skips_every_empty_field() -> None:
    usage = TokenUsage(
        provider_details=ProviderTurnUsage(),
        scope=UsageScope.UNSPECIFIED,
        total_tokens=0,
        input_tokens=0,
        output_tokens=0,
    )
    assert encode(usage) == (
        b'{"provider_details":{},"scope":"unspecified","total_tokens":0,"input_tokens":0,"output_tokens":0}'
    )
    usage.provider_details = ProviderTurnUsage(
        cost=ProviderTurnCost(usd_ticks=5, usd="0.0005", is_partial=False),
        model_usage={
            "k2": TokenUsage(scope=UsageScope.TURN, total_tokens=1, input_tokens=1, output_tokens=0)
        },
    )
    assert encode(usage.provider_details) == (
        b'{"cost":{"usd_ticks":5,"usd":"0.0005","is_partial":false},'
        b'"model_usage":{"k2":{"scope":"turn","total_tokens":1,"input_tokens":1,"output_tokens":0}}}'
    )


# --- properties ------------------------------------------------------------------------------

PROPERTY = settings(max_examples=100, deadline=None)


@pytest.mark.parametrize(
    ("strategy", "kind"),
    [
        (turn_results, TurnResult),
        (command_results(), CommandResult),
        (api_turn_outcomes, ApiTurnOutcome),
        (materialized_turn_outcomes, MaterializedTurnOutcome),
    ],
    ids=["TurnResult", "CommandResult", "ApiTurnOutcome", "MaterializedTurnOutcome"],
)
@PROPERTY
@given(data=st.data())
def test_canonical_outcome_json_round_trips_to_identical_bytes(
    strategy: st.SearchStrategy[dict[str, Any]], kind: type, data: st.DataObject
) -> None:
    raw = dumps(data.draw(strategy))
    assert encode(decode_json(raw, kind)) == raw
    assert msgspec.json.encode(msgspec.json.decode(raw, type=kind)) == raw


@PROPERTY
@given(value=materialized_turn_outcomes)
def test_api_turn_outcome_copies_the_stored_turn_and_computes_its_result(
    value: dict[str, Any],
) -> None:
    stored = decode_json(dumps(value), MaterializedTurnOutcome)
    api = ApiTurnOutcome.from_materialized(stored)
    for name in (
        "command_id",
        "accepted_ordinal",
        "turn_start_position",
        "completed_ordinal",
        "completed_at_ms",
        "diagnostic",
        "usage",
    ):
        assert getattr(api, name) == getattr(stored, name)
    assert api.outcome == stored.result()


@PROPERTY
@given(value=materialized_turn_outcomes)
def test_turn_result_invariants_hold_for_every_stored_outcome(value: dict[str, Any]) -> None:
    stored = decode_json(dumps(value), MaterializedTurnOutcome)
    result = stored.result()
    outcome = stored.outcome
    if isinstance(outcome, TurnOutcomeCompleted):
        assert result.stop_reason == outcome.stop_reason
    else:
        assert result.stop_reason is None
        assert result.reason is not None
    if stored.diagnostic is not None:
        assert result.message == stored.diagnostic.message
        if result.kind is TurnResultKind.FAILED:
            assert result.reason in (OutcomeReason.PROVIDER_FAILURE, OutcomeReason.QUOTA_LIMIT)
    elif isinstance(outcome, TurnOutcomeCompleted):
        assert (result.message is not None) is (result.kind is TurnResultKind.FAILED)
    else:
        assert result.message == outcome.message
    if result.kind is TurnResultKind.CANCELLED:
        assert expected_cancellation(result.reason)
