"""The relay journal's commands: what the controller asked the worker, by kind.

Each command is a variant Struct tagged on ``type`` (``{"type": .., "data": {..}}``),
with its kind (:meth:`kind`), the oldest protocol that accepts it
(:meth:`minimum_protocol`) and whether it waits in the durable queue
(:meth:`is_queue_entry`), as the origin's relay protocol 36 has them. The values they
carry (cursor, shell results, assessment context) are :mod:`.relay_payloads`'s; mailbox
events are :mod:`.mailbox`'s. Pure wire types: it must not decide what a command does.
"""

from __future__ import annotations

import enum
from typing import Annotated, ClassVar

import msgspec

from ..integers import Int64, UInt64
from ..mailbox import MailboxEvent
from ..protocol import RELAY_PROTOCOL_VERSION
from ..wire import JSON, Variant, Wire, emitted
from .payloads import ContextHistory, RelayCursor

__all__ = [
    "RELAY_PROTOCOL_VERSION",
    "AdvanceRecoveryFloorCommand",
    "AdvanceRecoveryFloorData",
    "BarrierData",
    "BeginCheckpointCommand",
    "BeginCheckpointData",
    "CancelCommand",
    "CancelTurnCommand",
    "CancelTurnForCommand",
    "CancelTurnForData",
    "CancelUserShellCommand",
    "CancelUserShellData",
    "ClearContextCommand",
    "ClearQueuedPromptsCommand",
    "CloseCommand",
    "CloseData",
    "CompleteCheckpointCommand",
    "ContinueAuthorizedWorkCommand",
    "ContinueAuthorizedWorkData",
    "DeliverMailboxEventCommand",
    "DeliverMailboxEventData",
    "GoalAction",
    "GoalControlCommand",
    "GoalControlData",
    "HandbackReminderCommand",
    "HandbackReminderData",
    "InstallPromptContextCommand",
    "InstallPromptContextData",
    "MailboxEvent",
    "MailboxWakeCommand",
    "MailboxWakeData",
    "PromptCommand",
    "PromptCommandData",
    "QuotaRecovery",
    "RecordNoticeCommand",
    "RecordNoticeData",
    "RelayCommand",
    "RelayCommandKind",
    "ReleaseCheckpointCommand",
    "RemoveQueuedPromptCommand",
    "RemoveQueuedPromptData",
    "ResolveSteeringCommand",
    "ResolveSteeringData",
    "RestoreExecutionModeCommand",
    "ResumeAfterQuotaCommand",
    "ResumeAfterQuotaData",
    "RunUserShellCommand",
    "RunUserShellData",
    "SeedAssessmentContextCommand",
    "SeedAssessmentContextData",
    "SetConfigCommand",
    "SetConfigData",
    "SetQuotaRecoveryCommand",
    "SetQuotaRecoveryData",
    "SetSessionModeCommand",
    "SetSessionModeData",
    "SteerCommand",
    "SteerData",
]


# -- commands -------------------------------------------------------------------------


class RelayCommandKind(enum.Enum):
    """The kind of a command, as journaled in completions and refusals."""

    STEER = "steer"
    RESOLVE_STEERING = "resolve_steering"
    CLEAR_CONTEXT = "clear_context"
    PROMPT = "prompt"
    RUN_USER_SHELL = "run_user_shell"
    CANCEL_USER_SHELL = "cancel_user_shell"
    REMOVE_QUEUED_PROMPT = "remove_queued_prompt"
    CLEAR_QUEUED_PROMPTS = "clear_queued_prompts"
    SET_CONFIG = "set_config"
    RESTORE_EXECUTION_MODE = "restore_execution_mode"
    GOAL_CONTROL = "goal_control"
    SET_SESSION_MODE = "set_session_mode"
    CANCEL_TURN = "cancel_turn"
    CANCEL = "cancel"
    CLOSE = "close"
    BEGIN_CHECKPOINT = "begin_checkpoint"
    COMPLETE_CHECKPOINT = "complete_checkpoint"
    RELEASE_CHECKPOINT = "release_checkpoint"
    ADVANCE_RECOVERY_FLOOR = "advance_recovery_floor"
    RECORD_NOTICE = "record_notice"


class _Command(Variant, kw_only=True, forbid_unknown_fields=True):
    KIND: ClassVar[RelayCommandKind]
    MINIMUM_PROTOCOL: ClassVar[int] = 1
    QUEUE_ENTRY: ClassVar[bool] = False

    def kind(self) -> RelayCommandKind:
        """The kind a completion or refusal of this command journals."""
        return self.KIND

    def minimum_protocol(self) -> int:
        """The oldest relay protocol whose workers accept this command.

        For a ``prompt`` this is the base value: the origin raises it for prompts with
        attachment references (8) and context-clear commands (15), which only decides
        what a controller may send; a journal line already went through.
        """
        return self.MINIMUM_PROTOCOL

    def is_queue_entry(self) -> bool:
        """True when the command waits its turn in the durable queue (prompts, the
        worker's own prompts and configuration changes)."""
        return self.QUEUE_ENTRY


class ClearContextCommand(_Command, tag="clear_context"):
    KIND = RelayCommandKind.CLEAR_CONTEXT
    MINIMUM_PROTOCOL = 15
    data: None = None


class PromptCommandData(Wire, kw_only=True, forbid_unknown_fields=True):
    prompt: list[JSON]


class PromptCommand(_Command, tag="prompt"):
    KIND = RelayCommandKind.PROMPT
    QUEUE_ENTRY = True
    data: PromptCommandData


class ContinueAuthorizedWorkData(Wire, kw_only=True, forbid_unknown_fields=True):
    expected: RelayCursor
    user_command_id: str
    completed_command_id: str
    attempt: Annotated[int, msgspec.Meta(ge=0, le=255)]  # u8


class ContinueAuthorizedWorkCommand(_Command, tag="continue_authorized_work"):
    KIND = RelayCommandKind.PROMPT
    MINIMUM_PROTOCOL = 18
    QUEUE_ENTRY = True
    data: ContinueAuthorizedWorkData


class QuotaRecovery(Wire, kw_only=True):
    user_command_id: str
    completed_command_id: str
    profile_id: str
    reset_at_ms: Int64 | None = emitted(None)
    retry_at_ms: Int64 | None = emitted(None)
    notice: str
    submitted: bool


class SetQuotaRecoveryData(Wire, kw_only=True, forbid_unknown_fields=True):
    expected: RelayCursor
    recovery: QuotaRecovery | None = emitted(None)


class SetQuotaRecoveryCommand(_Command, tag="set_quota_recovery"):
    KIND = RelayCommandKind.RECORD_NOTICE
    MINIMUM_PROTOCOL = 20
    data: SetQuotaRecoveryData


class ResumeAfterQuotaData(Wire, kw_only=True, forbid_unknown_fields=True):
    expected: RelayCursor
    completed_command_id: str


class ResumeAfterQuotaCommand(_Command, tag="resume_after_quota"):
    KIND = RelayCommandKind.PROMPT
    MINIMUM_PROTOCOL = 20
    QUEUE_ENTRY = True
    data: ResumeAfterQuotaData


class RunUserShellData(Wire, kw_only=True, forbid_unknown_fields=True):
    command: str


class RunUserShellCommand(_Command, tag="run_user_shell"):
    KIND = RelayCommandKind.RUN_USER_SHELL
    MINIMUM_PROTOCOL = 5
    data: RunUserShellData


class CancelUserShellData(Wire, kw_only=True, forbid_unknown_fields=True):
    shell_command_id: str


class CancelUserShellCommand(_Command, tag="cancel_user_shell"):
    KIND = RelayCommandKind.CANCEL_USER_SHELL
    MINIMUM_PROTOCOL = 5
    data: CancelUserShellData


class RemoveQueuedPromptData(Wire, kw_only=True, forbid_unknown_fields=True):
    queued_command_id: str


class RemoveQueuedPromptCommand(_Command, tag="remove_queued_prompt"):
    KIND = RelayCommandKind.REMOVE_QUEUED_PROMPT
    data: RemoveQueuedPromptData


class ClearQueuedPromptsCommand(_Command, tag="clear_queued_prompts"):
    KIND = RelayCommandKind.CLEAR_QUEUED_PROMPTS
    data: None = None


class SetConfigData(Wire, kw_only=True, forbid_unknown_fields=True):
    key: str
    value: str


class SetConfigCommand(_Command, tag="set_config"):
    KIND = RelayCommandKind.SET_CONFIG
    QUEUE_ENTRY = True
    data: SetConfigData


class GoalAction(enum.Enum):
    PAUSE = "pause"
    RESUME = "resume"
    CLEAR = "clear"


class GoalControlData(Wire, kw_only=True, forbid_unknown_fields=True):
    action: GoalAction


class GoalControlCommand(_Command, tag="goal_control"):
    KIND = RelayCommandKind.GOAL_CONTROL
    MINIMUM_PROTOCOL = 11
    data: GoalControlData


class SetSessionModeData(Wire, kw_only=True, forbid_unknown_fields=True):
    mode_id: str


class SetSessionModeCommand(_Command, tag="set_session_mode"):
    KIND = RelayCommandKind.SET_SESSION_MODE
    data: SetSessionModeData


class CancelTurnCommand(_Command, tag="cancel_turn"):
    KIND = RelayCommandKind.CANCEL_TURN
    MINIMUM_PROTOCOL = 7
    data: None = None


class SteerData(Wire, kw_only=True, forbid_unknown_fields=True):
    active_prompt_id: str
    queued_prompt_id: str


class SteerCommand(_Command, tag="steer"):
    KIND = RelayCommandKind.STEER
    MINIMUM_PROTOCOL = 17
    data: SteerData


class CancelTurnForData(Wire, kw_only=True, forbid_unknown_fields=True):
    active_prompt_id: str


class CancelTurnForCommand(_Command, tag="cancel_turn_for"):
    KIND = RelayCommandKind.CANCEL_TURN
    MINIMUM_PROTOCOL = 17
    data: CancelTurnForData


class ResolveSteeringData(Wire, kw_only=True, forbid_unknown_fields=True):
    steering_id: str


class ResolveSteeringCommand(_Command, tag="resolve_steering"):
    KIND = RelayCommandKind.RESOLVE_STEERING
    MINIMUM_PROTOCOL = 17
    data: ResolveSteeringData


class CancelCommand(_Command, tag="cancel"):
    KIND = RelayCommandKind.CANCEL
    data: None = None


class CloseData(Wire, kw_only=True, forbid_unknown_fields=True):
    barrier_command_id: str
    expected: RelayCursor


class CloseCommand(_Command, tag="close"):
    KIND = RelayCommandKind.CLOSE
    data: CloseData


class BeginCheckpointData(Wire, kw_only=True, forbid_unknown_fields=True):
    reason: str | None = emitted(None)


class BeginCheckpointCommand(_Command, tag="begin_checkpoint"):
    KIND = RelayCommandKind.BEGIN_CHECKPOINT
    data: BeginCheckpointData


class BarrierData(Wire, kw_only=True, forbid_unknown_fields=True):
    barrier_command_id: str


class CompleteCheckpointCommand(_Command, tag="complete_checkpoint"):
    KIND = RelayCommandKind.COMPLETE_CHECKPOINT
    data: BarrierData


class ReleaseCheckpointCommand(_Command, tag="release_checkpoint"):
    KIND = RelayCommandKind.RELEASE_CHECKPOINT
    data: BarrierData


class AdvanceRecoveryFloorData(Wire, kw_only=True, forbid_unknown_fields=True):
    through: RelayCursor


class AdvanceRecoveryFloorCommand(_Command, tag="advance_recovery_floor"):
    KIND = RelayCommandKind.ADVANCE_RECOVERY_FLOOR
    data: AdvanceRecoveryFloorData


class RecordNoticeData(Wire, kw_only=True, forbid_unknown_fields=True):
    text: str


class RecordNoticeCommand(_Command, tag="record_notice"):
    KIND = RelayCommandKind.RECORD_NOTICE
    data: RecordNoticeData


class InstallPromptContextData(Wire, kw_only=True, forbid_unknown_fields=True):
    text: str


class InstallPromptContextCommand(_Command, tag="install_prompt_context"):
    """Hidden context installed before the first prompt (relay-local; protocol 26)."""

    KIND = RelayCommandKind.RECORD_NOTICE
    MINIMUM_PROTOCOL = 26
    data: InstallPromptContextData


class SeedAssessmentContextData(Wire, kw_only=True, forbid_unknown_fields=True):
    expected: RelayCursor
    context: ContextHistory


class SeedAssessmentContextCommand(_Command, tag="seed_assessment_context"):
    """Retained authorization history seeded at the controller's verified frontier
    (relay-local; protocol 25)."""

    KIND = RelayCommandKind.RECORD_NOTICE
    MINIMUM_PROTOCOL = 25
    data: SeedAssessmentContextData


class HandbackReminderData(Wire, kw_only=True, forbid_unknown_fields=True):
    completed_command_id: str
    completed_ordinal: UInt64


class HandbackReminderCommand(_Command, tag="handback_reminder"):
    """The fixed hand-back reminder, a prompt of its own (protocol 26)."""

    KIND = RelayCommandKind.PROMPT
    MINIMUM_PROTOCOL = 26
    QUEUE_ENTRY = True
    data: HandbackReminderData


class DeliverMailboxEventData(Wire, kw_only=True, forbid_unknown_fields=True):
    event: MailboxEvent


class DeliverMailboxEventCommand(_Command, tag="deliver_mailbox_event"):
    """One event added to the durable mailbox (relay-local; protocol 33)."""

    KIND = RelayCommandKind.RECORD_NOTICE
    MINIMUM_PROTOCOL = 33
    data: DeliverMailboxEventData


class MailboxWakeData(Wire, kw_only=True, forbid_unknown_fields=True):
    events: list[MailboxEvent]


class MailboxWakeCommand(_Command, tag="mailbox_wake"):
    """A worker-made prompt carrying mailbox events claimed at an idle turn boundary
    (protocol 33)."""

    KIND = RelayCommandKind.PROMPT
    MINIMUM_PROTOCOL = 33
    QUEUE_ENTRY = True
    data: MailboxWakeData


class RestoreExecutionModeCommand(_Command, tag="restore_execution_mode"):
    """Restore the worker's saved execution policy after planning (protocol 28)."""

    KIND = RelayCommandKind.RESTORE_EXECUTION_MODE
    MINIMUM_PROTOCOL = 28
    data: None = None


RelayCommand = (
    InstallPromptContextCommand
    | SeedAssessmentContextCommand
    | ClearContextCommand
    | PromptCommand
    | HandbackReminderCommand
    | DeliverMailboxEventCommand
    | MailboxWakeCommand
    | ContinueAuthorizedWorkCommand
    | SetQuotaRecoveryCommand
    | ResumeAfterQuotaCommand
    | RunUserShellCommand
    | CancelUserShellCommand
    | RemoveQueuedPromptCommand
    | ClearQueuedPromptsCommand
    | SetConfigCommand
    | RestoreExecutionModeCommand
    | GoalControlCommand
    | SetSessionModeCommand
    | CancelTurnCommand
    | SteerCommand
    | CancelTurnForCommand
    | ResolveSteeringCommand
    | CancelCommand
    | CloseCommand
    | BeginCheckpointCommand
    | CompleteCheckpointCommand
    | ReleaseCheckpointCommand
    | AdvanceRecoveryFloorCommand
    | RecordNoticeCommand
)
"""A command the controller sent the worker (``command_queued``)."""
