"""The relay journal's records: commands, their outcomes, observations and events.

Each adjacently tagged enum of the origin (``{"type": .., "data": {..}}``) is a union
of variant Structs tagged on ``type``; a variant with fields holds them in ``data``.
Build one with ``CommandStarted.of(command_id="c1", started_at_ms=2)``.

:class:`RelayEvent` keeps the bytes its observation was read from, so its digest never
depends on re-encoding; see :mod:`domain.digests`.
"""

from __future__ import annotations

import enum
import re
from typing import Annotated, ClassVar

import msgspec

from relaystore.domain.elicitation import ElicitationRequest
from relaystore.domain.errors import InvalidInput, UnknownRelayKind
from relaystore.domain.hashing import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_FORMAT_V2,
    RELAY_EVENT_GENESIS_DIGEST,
    envelope_digest,
)
from relaystore.domain.integers import INT64_MAX
from relaystore.domain.outcomes import OutcomeReason, TokenUsage, TurnDiagnostic
from relaystore.domain.runtime import RuntimeIdentity
from relaystore.domain.wire import JSON, Variant, Wire, emitted, encode

__all__ = [
    "MAX_RELAY_LINE_BYTES",
    "MIN_RECORDED_AT_MS",
    "RELAY_EVENT_FORMAT_V1",
    "RELAY_EVENT_FORMAT_V2",
    "RELAY_EVENT_GENESIS_DIGEST",
    "RELAY_PROTOCOL_VERSION",
    "AdvanceRecoveryFloorCommand",
    "AgentInitialized",
    "BeginCheckpointCommand",
    "CancelCommand",
    "CancelTurnCommand",
    "CancelTurnForCommand",
    "CancelUserShellCommand",
    "CancelledOutcome",
    "CheckpointCompletedOutcome",
    "CheckpointReady",
    "CheckpointReleasedOutcome",
    "ClearContextCommand",
    "ClearQueuedPromptsCommand",
    "CloseCommand",
    "Closed",
    "ClosedOutcome",
    "Closing",
    "CommandCompleted",
    "CommandInterrupted",
    "CommandQueued",
    "CommandRejected",
    "CommandStarted",
    "CompleteCheckpointCommand",
    "ConfigurationUpdated",
    "ConfiguredOutcome",
    "ContextClearedOutcome",
    "ContextHistory",
    "ContinueAuthorizedWorkCommand",
    "DeliverMailboxEventCommand",
    "ElicitationRequested",
    "ElicitationResolved",
    "ElicitationsCleared",
    "EvidenceMessage",
    "GoalControlCommand",
    "GoalControlledOutcome",
    "HandbackReminderCommand",
    "HarnessTurnSettled",
    "HarnessTurnStarted",
    "InstallPromptContextCommand",
    "MailboxDeliveryPath",
    "MailboxEvent",
    "MailboxEventsDelivered",
    "MailboxHookLease",
    "MailboxHookLeaseCreated",
    "MailboxHookLeaseReturnReason",
    "MailboxHookLeaseReturned",
    "MailboxWakeCommand",
    "NativeAgent",
    "Notice",
    "NoticeRecordedOutcome",
    "PermissionAutoApproved",
    "PromptCommand",
    "PromptOutcome",
    "QueueChangedOutcome",
    "QuotaRecovery",
    "RecordNoticeCommand",
    "RecoveryFloorAdvancedOutcome",
    "RelayCommand",
    "RelayCommandKind",
    "RelayCommandOutcome",
    "RelayCursor",
    "RelayEvent",
    "RelayLine",
    "RelayObservation",
    "ReleaseCheckpointCommand",
    "RemoveQueuedPromptCommand",
    "ResolveSteeringCommand",
    "RestoreExecutionModeCommand",
    "ResumeAfterQuotaCommand",
    "RetryAssessmentResolved",
    "RetryAssessmentStarted",
    "RunUserShellCommand",
    "SeedAssessmentContextCommand",
    "SessionConfigured",
    "SessionFault",
    "SessionModeSetOutcome",
    "SessionModesConfigured",
    "SessionOpened",
    "SessionRestarted",
    "SessionUpdate",
    "SetConfigCommand",
    "SetQuotaRecoveryCommand",
    "SetSessionModeCommand",
    "SteerCommand",
    "SteeredOutcome",
    "SteeringReturnedOutcome",
    "SteeringUnconfirmed",
    "TerminalOutput",
    "TurnAssessmentUpdated",
    "UserShellCancelledOutcome",
    "UserShellOutcome",
    "UserShellOutput",
    "UserShellResult",
    "UserShellStatus",
    "WarningObservation",
    "decode_relay_event",
    "encode_relay_event",
]

MAX_RELAY_LINE_BYTES = 2 * 1024 * 1024
MIN_RECORDED_AT_MS = 0
"""The earliest ``recorded_at_ms`` a relay event may carry, read from a journal, sent in
a message or built by the test kit alike. The origin's field is an i64, but no worker's
clock reads before 1970: a negative time is damage, refused where it is read."""


# -- cursor and shell results ---------------------------------------------------------


class RelayCursor(Wire, kw_only=True, forbid_unknown_fields=True):
    """A position in a relay journal: an ordinal and the digest of the event there."""

    ordinal: int
    digest: str


class UserShellStatus(enum.Enum):
    EXITED = "exited"
    SIGNALED = "signaled"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class UserShellResult(Wire, kw_only=True, forbid_unknown_fields=True):
    """What a user shell command produced and how it ended."""

    command: str
    stdout: str
    stderr: str
    stdout_truncated: bool = emitted(False)
    stderr_truncated: bool = emitted(False)
    exit_code: int | None = None
    signal: str | None = None
    duration_ms: int
    status: UserShellStatus
    error: str | None = None


# -- mailbox events and assessment context ---------------------------------------------


class MailboxEvent(Wire, kw_only=True, forbid_unknown_fields=True):
    """One event of a session's durable mailbox (protocol 33's text form).

    ``source`` is free text (``github``, ``parent``, ``api`` are seen); ``key``
    deduplicates deliveries. ``created_at_ms`` is unsigned on the wire.
    """

    key: str
    source: str
    wake: bool
    text: str
    created_at_ms: Annotated[int, msgspec.Meta(ge=0)]  # u64: msgspec reads at most 2**64 - 1


class EvidenceMessage(Wire, kw_only=True, forbid_unknown_fields=True):
    """One message of a retained authorization history (``role`` is free text)."""

    id: str
    role: str
    text: str


class ContextHistory(Wire, kw_only=True):
    """The retained authorization history a controller seeds a worker with.

    Every field is always written; the origin takes unknown fields and drops them.
    """

    messages: list[EvidenceMessage]
    authorization_complete: bool
    assistant_history_omitted: bool
    open_assistant_id: str | None = emitted(None)
    final_reply_omitted: bool = emitted(False)


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


RELAY_PROTOCOL_VERSION = 33
"""The origin's relay protocol whose journal lines this build reads, every kind of it."""


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
    reset_at_ms: int | None = emitted(None)
    retry_at_ms: int | None = emitted(None)
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
    completed_ordinal: Annotated[int, msgspec.Meta(ge=0)]  # u64: msgspec reads at most 2**64 - 1


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


# -- observations ---------------------------------------------------------------------


class SteeringUnconfirmedData(Wire, kw_only=True):
    command_id: str
    message: str


class SteeringUnconfirmed(Variant, tag="steering_unconfirmed"):
    data: SteeringUnconfirmedData


class NativeAgentData(Wire, kw_only=True):
    event: JSON


class NativeAgent(Variant, tag="native_agent"):
    data: NativeAgentData


class AgentInitializedData(Wire, kw_only=True):
    protocol_version: Annotated[int, msgspec.Meta(ge=0, le=65535)] | str
    capabilities: JSON
    agent_info: JSON = emitted(None)
    runtime: RuntimeIdentity | None = None

    def __post_init__(self) -> None:
        # ACP reads any string protocol version as version 0.
        if isinstance(self.protocol_version, str):
            self.protocol_version = 0


class AgentInitialized(Variant, tag="agent_initialized"):
    data: AgentInitializedData


class SessionOpenedData(Wire, kw_only=True):
    native_session_id: str
    resumed: bool
    native_continuity_lost: bool = False
    replaced_unused_native_session_id: str | None = None


class SessionOpened(Variant, tag="session_opened"):
    data: SessionOpenedData


class SessionConfiguredData(Wire, kw_only=True):
    config_options: list[JSON]  # required, as the origin requires it


class SessionConfigured(Variant, tag="session_configured"):
    data: SessionConfiguredData


class SessionModesConfiguredData(Wire, kw_only=True):
    modes: JSON = emitted(None)


class SessionModesConfigured(Variant, tag="session_modes_configured"):
    data: SessionModesConfiguredData


class SessionUpdateData(Wire, kw_only=True):
    update: JSON


class SessionUpdate(Variant, tag="session_update"):
    data: SessionUpdateData


class PermissionAutoApprovedData(Wire, kw_only=True):
    option_id: str
    option_name: str


class PermissionAutoApproved(Variant, tag="permission_auto_approved"):
    data: PermissionAutoApprovedData


class ElicitationRequestedData(Wire, kw_only=True):
    request: ElicitationRequest


class ElicitationRequested(Variant, tag="elicitation_requested"):
    data: ElicitationRequestedData


class ElicitationResolvedData(Wire, kw_only=True):
    elicitation_id: str
    action: str


class ElicitationResolved(Variant, tag="elicitation_resolved"):
    data: ElicitationResolvedData


class ElicitationsCleared(Variant, tag="elicitations_cleared"):
    pass


class CommandQueuedData(Wire, kw_only=True):
    command_id: str
    command: RelayCommand
    created_at_ms: int


class CommandQueued(Variant, tag="command_queued"):
    data: CommandQueuedData


class CommandStartedData(Wire, kw_only=True):
    command_id: str
    started_at_ms: int


class CommandStarted(Variant, tag="command_started"):
    data: CommandStartedData


class CommandCompletedData(Wire, kw_only=True):
    barrier_command_id: str | None = None
    command: RelayCommandKind | None = None
    command_id: str
    outcome: RelayCommandOutcome


class CommandCompleted(Variant, tag="command_completed"):
    data: CommandCompletedData


class RetryAssessmentStartedData(Wire, kw_only=True):
    command_id: str
    evidence: JSON


class RetryAssessmentStarted(Variant, tag="retry_assessment_started"):
    data: RetryAssessmentStartedData


class RetryAssessmentResolvedData(Wire, kw_only=True):
    command_id: str
    assessment_ordinal: int
    retryable: bool


class RetryAssessmentResolved(Variant, tag="retry_assessment_resolved"):
    data: RetryAssessmentResolvedData


class CommandEndedData(Wire, kw_only=True):
    """Data of ``command_rejected`` and ``command_interrupted``."""

    reason: OutcomeReason | None = None
    command_id: str
    command: RelayCommandKind
    message: str


class CommandRejected(Variant, tag="command_rejected"):
    data: CommandEndedData


class CommandInterrupted(Variant, tag="command_interrupted"):
    data: CommandEndedData


class UserShellOutputData(Wire, kw_only=True):
    command_id: str
    command: str
    stdout: str
    stderr: str
    stdout_truncated: bool  # required, as the origin requires it
    stderr_truncated: bool


class UserShellOutput(Variant, tag="user_shell_output"):
    data: UserShellOutputData


class ConfigurationUpdatedData(Wire, kw_only=True):
    key: str
    value: str


class ConfigurationUpdated(Variant, tag="configuration_updated"):
    data: ConfigurationUpdatedData


class CheckpointReadyData(Wire, kw_only=True):
    command_id: str
    through: int


class CheckpointReady(Variant, tag="checkpoint_ready"):
    data: CheckpointReadyData


class SessionFaultData(Wire, kw_only=True):
    reason: OutcomeReason
    message: str


class SessionFault(Variant, tag="session_fault"):
    data: SessionFaultData


class MessageData(Wire, kw_only=True):
    message: str


class WarningObservation(Variant, tag="warning"):
    data: MessageData


class SessionRestarted(Variant, tag="session_restarted"):
    pass


class TerminalOutputData(Wire, kw_only=True):
    terminal_id: str
    output: str
    truncated: bool  # required, as the origin requires it
    exit_code: Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)] | None = emitted(None)  # u32
    signal: str | None = emitted(None)


class TerminalOutput(Variant, tag="terminal_output"):
    data: TerminalOutputData


class Notice(Variant, tag="notice"):
    data: MessageData


class MailboxHookLease(Wire, kw_only=True, forbid_unknown_fields=True):
    """Mailbox events a tool hook claimed, until it acknowledges them or the lease ends."""

    lease_id: str
    events: list[MailboxEvent]
    hook_event: str
    expires_at_ms: int


class MailboxHookLeaseCreatedData(Wire, kw_only=True):
    lease: MailboxHookLease


class MailboxHookLeaseCreated(Variant, tag="mailbox_hook_lease_created"):
    data: MailboxHookLeaseCreatedData


class MailboxHookLeaseReturnReason(enum.Enum):
    """Why a hook lease's events went back to the mailbox."""

    TIMEOUT = "timeout"
    WORKER_RESTART = "worker_restart"


class MailboxHookLeaseReturnedData(Wire, kw_only=True):
    lease_id: str
    reason: MailboxHookLeaseReturnReason


class MailboxHookLeaseReturned(Variant, tag="mailbox_hook_lease_returned"):
    data: MailboxHookLeaseReturnedData


class MailboxDeliveryPath(enum.Enum):
    """How mailbox events reached the agent."""

    TOOL_HOOK = "tool_hook"
    PROMPT = "prompt"
    WAKE = "wake"


class MailboxEventsDeliveredData(Wire, kw_only=True):
    event_keys: list[str]
    path: MailboxDeliveryPath
    prompt_command_id: str | None = None
    hook_event: str | None = None
    events: list[MailboxEvent] = msgspec.field(default_factory=list)
    lease_id: str | None = None


class MailboxEventsDelivered(Variant, tag="mailbox_events_delivered"):
    data: MailboxEventsDeliveredData


class HarnessTurnStartedData(Wire, kw_only=True):
    started_at_ms: int


class HarnessTurnStarted(Variant, tag="harness_turn_started"):
    data: HarnessTurnStartedData


class HarnessTurnSettledData(Wire, kw_only=True):
    origin: str | None = emitted(None)
    prompt_in_flight: bool = emitted(False)


class HarnessTurnSettled(Variant, tag="harness_turn_settled"):
    data: HarnessTurnSettledData


class Closing(Variant, tag="closing"):
    pass


class Closed(Variant, tag="closed"):
    pass


class TurnAssessmentUpdatedData(Wire, kw_only=True):
    assessment: JSON


class TurnAssessmentUpdated(Variant, tag="turn_assessment_updated"):
    """Written by newer workers (schema 58 era); carried opaquely, changes nothing."""

    data: TurnAssessmentUpdatedData


RelayObservation = (
    SteeringUnconfirmed
    | NativeAgent
    | AgentInitialized
    | SessionOpened
    | SessionConfigured
    | SessionModesConfigured
    | SessionUpdate
    | PermissionAutoApproved
    | ElicitationRequested
    | ElicitationResolved
    | ElicitationsCleared
    | CommandQueued
    | CommandStarted
    | CommandCompleted
    | RetryAssessmentStarted
    | RetryAssessmentResolved
    | CommandRejected
    | CommandInterrupted
    | UserShellOutput
    | ConfigurationUpdated
    | CheckpointReady
    | SessionFault
    | WarningObservation
    | SessionRestarted
    | TerminalOutput
    | Notice
    | MailboxHookLeaseCreated
    | MailboxHookLeaseReturned
    | MailboxEventsDelivered
    | HarnessTurnStarted
    | HarnessTurnSettled
    | Closing
    | Closed
    | TurnAssessmentUpdated
)
"""Something the worker observed and journaled."""


# -- events ---------------------------------------------------------------------------


class RelayEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One journal record.

    ``observation_json`` holds the observation's bytes exactly as they were read (or as
    they were encoded, for an event built in code); digests are computed over them.
    Build events in code with :meth:`create`; read them with :func:`decode_relay_event`.
    """

    format: int = RELAY_EVENT_FORMAT_V1
    ordinal: int
    previous_digest: str = ""
    digest: str
    recorded_at_ms: int
    command_id: str | None = None
    observation: RelayObservation
    observation_json: bytes = b""

    def __post_init__(self) -> None:
        if not self.observation_json:
            msgspec.structs.force_setattr(self, "observation_json", encode(self.observation))

    @classmethod
    def create(
        cls,
        *,
        ordinal: int,
        recorded_at_ms: int,
        observation: RelayObservation,
        format: int = RELAY_EVENT_FORMAT_V2,
        previous_digest: str = "",
        command_id: str | None = None,
    ) -> RelayEvent:
        """Build an event in code and compute its digest."""

        draft = cls(
            format=format,
            ordinal=ordinal,
            previous_digest=previous_digest,
            digest="",
            recorded_at_ms=recorded_at_ms,
            command_id=command_id,
            observation=observation,
        )
        return msgspec.structs.replace(draft, digest=envelope_digest(draft, draft.observation_json))

    @property
    def cursor(self) -> RelayCursor:
        """The cursor that points at this event."""
        return RelayCursor(ordinal=self.ordinal, digest=self.digest)


class _RelayEventWire(msgspec.Struct, kw_only=True):
    format: Annotated[int, msgspec.Meta(ge=0, le=255)] = RELAY_EVENT_FORMAT_V1  # u8
    ordinal: Annotated[int, msgspec.Meta(ge=0)]  # u64
    previous_digest: str = ""
    digest: str
    recorded_at_ms: Annotated[int, msgspec.Meta(ge=MIN_RECORDED_AT_MS, le=INT64_MAX)]
    command_id: str | None = None
    observation: msgspec.Raw


_EVENT_DECODER = msgspec.json.Decoder(_RelayEventWire)
_LEADING_ORDINAL = re.compile(rb'\s*\{[^\[\]{}]*?"ordinal"\s*:\s*(\d+)')
"""The ordinal of a line too deeply nested to decode, when it comes before any nesting
(as the worker writes it): only to say where the refused line is."""
_OBSERVATION_DECODER: msgspec.json.Decoder[RelayObservation] = msgspec.json.Decoder(
    RelayObservation
)


def decode_relay_event(line: bytes | str) -> RelayEvent:
    """Decode one journal line (a trailing newline is allowed).

    Raises :class:`~relaystore.domain.errors.UnknownRelayKind` for a command, command
    kind, outcome, observation or reason this build does not know (a newer worker's
    line: its envelope stays readable), and :class:`InvalidInput` naming the field for
    malformed JSON, a wrong type, a ``recorded_at_ms`` outside SQLite's INTEGER range, JSON nested
    deeper than the decoder can follow, or a line over 2 MiB. The digest is not checked
    here.
    """
    raw = line.encode() if isinstance(line, str) else line
    if len(raw) > MAX_RELAY_LINE_BYTES:
        raise InvalidInput(
            f"relay line is {len(raw)} bytes, over the {MAX_RELAY_LINE_BYTES}-byte limit"
        )
    try:
        wire = _EVENT_DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid relay event: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"relay line is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        ordinal = _LEADING_ORDINAL.match(raw)
        raise InvalidInput(
            f"relay line is nested too deeply to decode: {exc}",
            ordinal=None if ordinal is None else int(ordinal.group(1)),
        ) from None
    try:
        observation = _OBSERVATION_DECODER.decode(wire.observation)
    except RecursionError as exc:
        raise InvalidInput(
            f"invalid relay observation: nested too deeply to decode ({exc}) - at `$.observation`",
            ordinal=wire.ordinal,
        ) from None
    except msgspec.DecodeError as exc:
        text = str(exc)
        unknown = _unknown_kind(text)
        if unknown is not None:
            raise UnknownRelayKind(
                *unknown, _line(wire, bytes(wire.observation)), ordinal=wire.ordinal
            ) from None
        text = (
            text.replace("`$", "`$.observation", 1)
            if "- at `$" in text
            else f"{text} - at `$.observation`"
        )
        raise InvalidInput(f"invalid relay observation: {text}", ordinal=wire.ordinal) from exc
    return RelayEvent(
        format=wire.format,
        ordinal=wire.ordinal,
        previous_digest=wire.previous_digest,
        digest=wire.digest,
        recorded_at_ms=wire.recorded_at_ms,
        command_id=wire.command_id,
        observation=observation,
        observation_json=bytes(wire.observation),
    )


class RelayLine(msgspec.Struct, frozen=True, kw_only=True):
    """A journal line's envelope with its observation as the bytes read, undecoded.

    What a line of a kind this build does not know still offers: its place in the chain
    and the bytes its digest covers (:func:`relaystore.domain.digests.validate_relay_event_self`).
    """

    format: int
    ordinal: int
    previous_digest: str
    digest: str
    recorded_at_ms: int
    command_id: str | None
    observation_json: bytes

    @property
    def cursor(self) -> RelayCursor:
        """The cursor that points at this line."""
        return RelayCursor(ordinal=self.ordinal, digest=self.digest)


def _line(wire: _RelayEventWire, observation: bytes) -> RelayLine:
    return RelayLine(
        format=wire.format,
        ordinal=wire.ordinal,
        previous_digest=wire.previous_digest,
        digest=wire.digest,
        recorded_at_ms=wire.recorded_at_ms,
        command_id=wire.command_id,
        observation_json=observation,
    )


_KIND_POSITIONS = {
    "$.type": "observation",
    "$.data.command.type": "command",
    "$.data.command": "command kind",
    "$.data.outcome.type": "command outcome",
    "$.data.reason": "reason",
}
"""Where in an observation a kind is named, and what it names: an unknown value at one
of these is a newer protocol's kind, not damage."""

_UNKNOWN_VALUE = re.compile(r"Invalid (?:enum )?value '(.*)' - at `(\$[.a-z_]*)`")


def _unknown_kind(message: str) -> tuple[str, str, str] | None:
    """``(kind, position, path)`` when a decode error names an unknown tag or kind value
    at a kind position of :data:`_KIND_POSITIONS`; ``None`` for any other error."""
    found = _UNKNOWN_VALUE.fullmatch(message)
    if found is None:
        return None
    path = found.group(2)
    position = _KIND_POSITIONS.get(path)
    if position is None:
        return None
    return found.group(1), position, "$.observation" + path[1:]


def encode_relay_event(event: RelayEvent | RelayLine) -> bytes:
    """Encode an event (or an undecoded line) as the worker writes it (without the
    trailing newline)."""
    parts = [b"{"]
    if event.format != RELAY_EVENT_FORMAT_V1:
        parts.append(b'"format":%d,' % event.format)
    parts.append(b'"ordinal":%d,' % event.ordinal)
    if event.previous_digest:
        parts.append(b'"previous_digest":' + encode(event.previous_digest) + b",")
    parts.append(b'"digest":' + encode(event.digest) + b",")
    parts.append(b'"recorded_at_ms":%d,' % event.recorded_at_ms)
    if event.command_id is not None:
        parts.append(b'"command_id":' + encode(event.command_id) + b",")
    parts.append(b'"observation":' + event.observation_json + b"}")
    return b"".join(parts)
