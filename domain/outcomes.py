"""How commands and turns end: reasons, turn results, command results.

The pure rules here decide what a user sees in ``turn_ended`` and ``command_ended``.
"""

from __future__ import annotations

import enum

import msgspec

from .wire import Wire

__all__ = [
    "AWAITING_INPUT_STOP_REASON",
    "QUOTA_STOP_REASON",
    "ApiTurnOutcome",
    "CommandOwner",
    "CommandResult",
    "CommandResultKind",
    "MaterializedTurnOutcome",
    "OutcomeReason",
    "PromptCompletion",
    "ProviderCost",
    "ProviderTurnCost",
    "ProviderTurnUsage",
    "TokenUsage",
    "TurnDiagnostic",
    "TurnOutcomeCompleted",
    "TurnOutcomeInterrupted",
    "TurnOutcomeKind",
    "TurnOutcomeRejected",
    "TurnResult",
    "TurnResultKind",
    "UsageScope",
    "classify_prompt_completion",
    "expected_cancellation",
]

AWAITING_INPUT_STOP_REASON = "awaiting_input"
QUOTA_STOP_REASON = "QuotaLimit"


class OutcomeReason(enum.Enum):
    """Why a command or turn ended the way it did (``legacy_unclassified`` by default)."""

    CONTROLLER_DISCONNECTED = "controller_disconnected"
    OWNER_LOST_ON_RESTART = "owner_lost_on_restart"
    WORKER_RESTARTED = "worker_restarted"
    RUNTIME_STOPPED = "runtime_stopped"
    RUNTIME_FAILURE = "runtime_failure"
    REQUESTED_CANCELLATION = "requested_cancellation"
    ADMISSION_REJECTED = "admission_rejected"
    COMMAND_FAILED = "command_failed"
    PROVIDER_FAILURE = "provider_failure"
    QUOTA_LIMIT = "quota_limit"
    UNRECOGNIZED_STOP_REASON = "unrecognized_stop_reason"
    NONZERO_EXIT = "nonzero_exit"
    SIGNALED = "signaled"
    TIMED_OUT = "timed_out"
    STARTUP_FAILED = "startup_failed"
    LIFECYCLE_FAILED = "lifecycle_failed"
    RUNTIME_UNAVAILABLE = "runtime_unavailable"
    CHECKPOINT_FAILED = "checkpoint_failed"
    CHECKPOINT_DEFERRED = "checkpoint_deferred"
    CONTROLLER_RESTARTED = "controller_restarted"
    LEGACY_UNCLASSIFIED = "legacy_unclassified"


_EXPECTED_CANCELLATIONS = frozenset(
    {
        OutcomeReason.CONTROLLER_DISCONNECTED,
        OutcomeReason.OWNER_LOST_ON_RESTART,
        OutcomeReason.REQUESTED_CANCELLATION,
    }
)


def expected_cancellation(reason: OutcomeReason | None) -> bool:
    """True when ``reason`` means someone meant to stop the work."""
    return reason in _EXPECTED_CANCELLATIONS


class TurnResultKind(enum.Enum):
    COMPLETED = "completed"
    INPUT_REQUIRED = "input_required"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class TurnResult(Wire, kw_only=True):
    """The semantic end of a turn, as clients see it."""

    kind: TurnResultKind
    reason: OutcomeReason | None = None
    message: str | None = None
    stop_reason: str | None = None


class PromptCompletion(enum.Enum):
    FINISHED = "finished"
    INPUT_REQUIRED = "input_required"
    CANCELLED = "cancelled"
    QUOTA_LIMIT = "quota_limit"
    ERROR = "error"


def classify_prompt_completion(stop_reason: str) -> PromptCompletion:
    """Classify an ACP stop reason, ignoring case, ``_`` and ``-``."""
    normalized = stop_reason.replace("_", "").replace("-", "").lower()
    if normalized == "endturn":
        return PromptCompletion.FINISHED
    if normalized == "awaitinginput":
        return PromptCompletion.INPUT_REQUIRED
    if normalized in ("cancelled", "canceled"):
        return PromptCompletion.CANCELLED
    if normalized == "quotalimit":
        return PromptCompletion.QUOTA_LIMIT
    return PromptCompletion.ERROR


class TurnDiagnostic(Wire, kw_only=True):
    """A provider's explanation of a failed turn."""

    message: str
    code: str | None = None
    http_status: int | None = None
    reset_at: str | None = None


class UsageScope(enum.Enum):
    TURN = "turn"
    LAST_REQUEST = "last_request"
    UNSPECIFIED = "unspecified"


class ProviderTurnCost(Wire, kw_only=True):
    """What one turn cost: ``usd`` is exact decimal USD (10^10 ticks per USD)."""

    usd_ticks: int
    usd: str
    is_partial: bool


class ProviderCost(Wire, kw_only=True):
    """The provider's cumulative cost of the whole session (not a turn delta)."""

    amount: float
    currency: str
    observed_at_ms: int


class ProviderTurnUsage(Wire, kw_only=True):
    """Provider details of a turn's usage; every field is skipped when absent or empty."""

    cost: ProviderTurnCost | None = None
    model_calls: int | None = None
    api_duration_ms: int | None = None
    elapsed_ms: int | None = None
    model_usage: dict[str, TokenUsage] = msgspec.field(default_factory=dict)


class TokenUsage(Wire, kw_only=True):
    """Tokens a turn used."""

    provider_details: ProviderTurnUsage | None = None
    scope: UsageScope
    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None


class TurnOutcomeCompleted(Wire, kw_only=True, tag_field="kind", tag="completed"):
    stop_reason: str


class TurnOutcomeRejected(Wire, kw_only=True, tag_field="kind", tag="rejected"):
    message: str
    reason: OutcomeReason | None = None


class TurnOutcomeInterrupted(Wire, kw_only=True, tag_field="kind", tag="interrupted"):
    message: str
    reason: OutcomeReason | None = None


TurnOutcomeKind = TurnOutcomeCompleted | TurnOutcomeRejected | TurnOutcomeInterrupted


def _turn_result(outcome: TurnOutcomeKind) -> TurnResult:
    if isinstance(outcome, TurnOutcomeCompleted):
        completion = classify_prompt_completion(outcome.stop_reason)
        if completion is PromptCompletion.FINISHED:
            kind, reason = TurnResultKind.COMPLETED, None
        elif completion is PromptCompletion.INPUT_REQUIRED:
            kind, reason = TurnResultKind.INPUT_REQUIRED, None
        elif completion is PromptCompletion.CANCELLED:
            kind, reason = TurnResultKind.CANCELLED, OutcomeReason.REQUESTED_CANCELLATION
        elif completion is PromptCompletion.QUOTA_LIMIT:
            kind, reason = TurnResultKind.FAILED, OutcomeReason.QUOTA_LIMIT
        else:
            kind, reason = TurnResultKind.FAILED, OutcomeReason.UNRECOGNIZED_STOP_REASON
        message = outcome.stop_reason if kind is TurnResultKind.FAILED else None
        return TurnResult(
            kind=kind, reason=reason, message=message, stop_reason=outcome.stop_reason
        )
    if isinstance(outcome, TurnOutcomeRejected):
        kind = (
            TurnResultKind.REJECTED
            if outcome.reason in (None, OutcomeReason.ADMISSION_REJECTED)
            else TurnResultKind.FAILED
        )
    else:
        kind = (
            TurnResultKind.CANCELLED
            if expected_cancellation(outcome.reason)
            else TurnResultKind.INTERRUPTED
        )
    return TurnResult(
        kind=kind,
        reason=outcome.reason or OutcomeReason.LEGACY_UNCLASSIFIED,
        message=outcome.message,
    )


class MaterializedTurnOutcome(Wire, kw_only=True, forbid_unknown_fields=True):
    """How the last turn ended, as the projection stores it (the legacy event body)."""

    diagnostic: TurnDiagnostic | None = None
    usage: TokenUsage | None = None
    command_id: str
    accepted_ordinal: int | None = None
    turn_start_position: int | None = None
    completed_ordinal: int
    completed_at_ms: int
    outcome: TurnOutcomeKind

    def result(self) -> TurnResult:
        """The semantic result; a diagnostic replaces the message and marks provider failure."""
        result = _turn_result(self.outcome)
        if self.diagnostic is not None:
            result.message = self.diagnostic.message
            if (
                result.kind is TurnResultKind.FAILED
                and result.reason is not OutcomeReason.QUOTA_LIMIT
            ):
                result.reason = OutcomeReason.PROVIDER_FAILURE
        return result


class ApiTurnOutcome(Wire, kw_only=True):
    """The body of a ``turn_ended`` API event."""

    command_id: str
    accepted_ordinal: int | None = None
    turn_start_position: int | None = None
    completed_ordinal: int
    completed_at_ms: int
    outcome: TurnResult
    diagnostic: TurnDiagnostic | None = None
    usage: TokenUsage | None = None

    @classmethod
    def from_materialized(cls, turn: MaterializedTurnOutcome) -> ApiTurnOutcome:
        """Copy ``turn`` and compute its semantic outcome."""
        return cls(
            command_id=turn.command_id,
            accepted_ordinal=turn.accepted_ordinal,
            turn_start_position=turn.turn_start_position,
            completed_ordinal=turn.completed_ordinal,
            completed_at_ms=turn.completed_at_ms,
            outcome=turn.result(),
            diagnostic=turn.diagnostic,
            usage=turn.usage,
        )


class CommandOwner(enum.Enum):
    WORKER = "worker"
    DAEMON = "daemon"


class CommandResultKind(enum.Enum):
    SUCCEEDED = "succeeded"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    FAILED = "failed"


class CommandResult(Wire, kw_only=True):
    """How a non-prompt command ended (the body of ``command_ended``)."""

    owner: CommandOwner
    command_id: str
    command_kind: str
    outcome: CommandResultKind
    reason: OutcomeReason | None = None
    message: str | None = None
    related_command_ids: list[str] = msgspec.field(default_factory=list)

    @classmethod
    def worker(
        cls,
        command_id: str,
        command_kind: str,
        outcome: CommandResultKind,
        reason: OutcomeReason | None,
        message: str | None,
    ) -> CommandResult:
        """A worker-owned result."""
        return cls(
            owner=CommandOwner.WORKER,
            command_id=command_id,
            command_kind=command_kind,
            outcome=outcome,
            reason=reason,
            message=message,
        )
