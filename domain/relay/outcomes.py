"""The relay journal's command outcomes: how the worker finished a command."""

from __future__ import annotations

from ..outcomes import TokenUsage, TurnDiagnostic
from ..wire import Variant, Wire
from .payloads import UserShellResult

__all__ = [
    "CancelledOutcome",
    "CheckpointCompletedOutcome",
    "CheckpointReleasedOutcome",
    "ClosedOutcome",
    "ConfiguredOutcome",
    "ContextClearedData",
    "ContextClearedOutcome",
    "GoalControlledOutcome",
    "NoticeRecordedOutcome",
    "PromptOutcome",
    "PromptOutcomeData",
    "QueueChangedData",
    "QueueChangedOutcome",
    "QueuedCommandData",
    "RecoveryFloorAdvancedOutcome",
    "RelayCommandOutcome",
    "SessionModeSetOutcome",
    "SteeredOutcome",
    "SteeringReturnedOutcome",
    "UserShellCancelledOutcome",
    "UserShellOutcome",
    "UserShellOutcomeData",
]


# -- command outcomes -----------------------------------------------------------------


class ContextClearedData(Wire, kw_only=True):
    native_session_id: str
    memory: str | None = None


class ContextClearedOutcome(Variant, tag="context_cleared"):
    data: ContextClearedData


class PromptOutcomeData(Wire, kw_only=True):
    stop_reason: str
    diagnostic: TurnDiagnostic | None = None
    usage: TokenUsage | None = None


class PromptOutcome(Variant, tag="prompt"):
    data: PromptOutcomeData


class UserShellOutcomeData(Wire, kw_only=True):
    result: UserShellResult


class UserShellOutcome(Variant, tag="user_shell"):
    data: UserShellOutcomeData


class UserShellCancelledOutcome(Variant, tag="user_shell_cancelled"):
    pass


class ConfiguredOutcome(Variant, tag="configured"):
    pass


class GoalControlledOutcome(Variant, tag="goal_controlled"):
    pass


class SessionModeSetOutcome(Variant, tag="session_mode_set"):
    pass


class CancelledOutcome(Variant, tag="cancelled"):
    pass


class QueuedCommandData(Wire, kw_only=True):
    queued_command_id: str


class SteeredOutcome(Variant, tag="steered"):
    data: QueuedCommandData


class SteeringReturnedOutcome(Variant, tag="steering_returned"):
    data: QueuedCommandData


class ClosedOutcome(Variant, tag="closed"):
    pass


class QueueChangedData(Wire, kw_only=True):
    removed_command_ids: list[str]  # required, as the origin requires it


class QueueChangedOutcome(Variant, tag="queue_changed"):
    data: QueueChangedData


class CheckpointCompletedOutcome(Variant, tag="checkpoint_completed"):
    pass


class CheckpointReleasedOutcome(Variant, tag="checkpoint_released"):
    pass


class RecoveryFloorAdvancedOutcome(Variant, tag="recovery_floor_advanced"):
    pass


class NoticeRecordedOutcome(Variant, tag="notice_recorded"):
    pass


RelayCommandOutcome = (
    ContextClearedOutcome
    | PromptOutcome
    | UserShellOutcome
    | UserShellCancelledOutcome
    | ConfiguredOutcome
    | GoalControlledOutcome
    | SessionModeSetOutcome
    | CancelledOutcome
    | SteeredOutcome
    | SteeringReturnedOutcome
    | ClosedOutcome
    | QueueChangedOutcome
    | CheckpointCompletedOutcome
    | CheckpointReleasedOutcome
    | RecoveryFloorAdvancedOutcome
    | NoticeRecordedOutcome
)
"""How the worker finished a command (``command_completed``)."""
