"""The relay journal's observations: what the worker observed and journaled."""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec

from ..elicitation.forms import ElicitationRequest
from ..integers import Int64, UInt64
from ..outcomes import OutcomeReason
from ..runtime import RuntimeIdentity
from ..wire import JSON, Variant, Wire, emitted
from .commands import MailboxEvent, RelayCommand, RelayCommandKind
from .outcomes import RelayCommandOutcome

__all__ = [
    "AgentInitialized",
    "AgentInitializedData",
    "CheckpointReady",
    "CheckpointReadyData",
    "Closed",
    "Closing",
    "CommandCompleted",
    "CommandCompletedData",
    "CommandEndedData",
    "CommandInterrupted",
    "CommandQueued",
    "CommandQueuedData",
    "CommandRejected",
    "CommandStarted",
    "CommandStartedData",
    "ConfigurationUpdated",
    "ConfigurationUpdatedData",
    "ElicitationRequested",
    "ElicitationRequestedData",
    "ElicitationResolved",
    "ElicitationResolvedData",
    "ElicitationsCleared",
    "HarnessTurnSettled",
    "HarnessTurnSettledData",
    "HarnessTurnStarted",
    "HarnessTurnStartedData",
    "MailboxDeliveryPath",
    "MailboxEventsDelivered",
    "MailboxEventsDeliveredData",
    "MailboxHookLease",
    "MailboxHookLeaseCreated",
    "MailboxHookLeaseCreatedData",
    "MailboxHookLeaseReturnReason",
    "MailboxHookLeaseReturned",
    "MailboxHookLeaseReturnedData",
    "MessageData",
    "NativeAgent",
    "NativeAgentData",
    "Notice",
    "PermissionAutoApproved",
    "PermissionAutoApprovedData",
    "RelayObservation",
    "RetryAssessmentResolved",
    "RetryAssessmentResolvedData",
    "RetryAssessmentStarted",
    "RetryAssessmentStartedData",
    "SessionConfigured",
    "SessionConfiguredData",
    "SessionFault",
    "SessionFaultData",
    "SessionModesConfigured",
    "SessionModesConfiguredData",
    "SessionOpened",
    "SessionOpenedData",
    "SessionRestarted",
    "SessionUpdate",
    "SessionUpdateData",
    "SteeringUnconfirmed",
    "SteeringUnconfirmedData",
    "TerminalOutput",
    "TerminalOutputData",
    "TurnAssessmentUpdated",
    "TurnAssessmentUpdatedData",
    "UserShellOutput",
    "UserShellOutputData",
    "WarningObservation",
]


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
    created_at_ms: Int64


class CommandQueued(Variant, tag="command_queued"):
    data: CommandQueuedData


class CommandStartedData(Wire, kw_only=True):
    command_id: str
    started_at_ms: Int64


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
    assessment_ordinal: UInt64
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
    through: UInt64


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
    expires_at_ms: Int64


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
    started_at_ms: Int64


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
