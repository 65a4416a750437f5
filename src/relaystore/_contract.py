"""The contract's names, each registered once: what ``import relaystore`` offers.

Every name here is one line, ``Name as Name`` (the explicit re-export type checkers
read); :mod:`relaystore` imports this module the first time a contract name is asked
for, and its ``__all__`` is the public names of this module (and ``__version__``). The
contract itself is ``docs/relaystore-api.md``; a test checks that every name it shows
in a table is here and every name here is shown there.

Imports only: a name that is not a contract name must not be added here.
"""

from .actors.store import (
    EventStore as EventStore,
)
from .domain.api_events import (
    ApiActivityState as ApiActivityState,
    ApiEvent as ApiEvent,
    ApiEventData as ApiEventData,
    ApiEventFilter as ApiEventFilter,
    ApiEventPage as ApiEventPage,
    RawApiEvent as RawApiEvent,
    RawApiEventPage as RawApiEventPage,
)
from .domain.digests import (
    relay_event_digest as relay_event_digest,
)
from .domain.errors import (
    AskTimeout as AskTimeout,
    ChainFault as ChainFault,
    InvalidInput as InvalidInput,
    LifecycleConflict as LifecycleConflict,
    ProjectionError as ProjectionError,
    RelayChainError as RelayChainError,
    RelayLogUnavailable as RelayLogUnavailable,
    RequestUnanswered as RequestUnanswered,
    SchemaMismatch as SchemaMismatch,
    StoreBusy as StoreBusy,
    StoreClosed as StoreClosed,
    StoreError as StoreError,
    StoreForked as StoreForked,
    StoreLocked as StoreLocked,
    UnknownRelayKind as UnknownRelayKind,
    UnknownSession as UnknownSession,
    WorkerLost as WorkerLost,
    WriterStopped as WriterStopped,
)
from .domain.materialized import (
    MaterializedSession as MaterializedSession,
)
from .domain.messages import (
    BeginCheckpoint as BeginCheckpoint,
    CompactTranscript as CompactTranscript,
    CorrelateCheckpointBarrier as CorrelateCheckpointBarrier,
    DeleteSession as DeleteSession,
    FinishFailedCheckpoint as FinishFailedCheckpoint,
    LoadApiEvents as LoadApiEvents,
    LoadMaterializedSession as LoadMaterializedSession,
    LoadRawApiEvents as LoadRawApiEvents,
    LoadRelayLog as LoadRelayLog,
    LoadRuntimeReceipt as LoadRuntimeReceipt,
    LoadState as LoadState,
    LoadStats as LoadStats,
    ObserveRelayEvents as ObserveRelayEvents,
    ProjectionReport as ProjectionReport,
    PruneRelayLog as PruneRelayLog,
    RecordActivities as RecordActivities,
    RecordElicitationAnswer as RecordElicitationAnswer,
    RecordStartupFault as RecordStartupFault,
    RecoverInterruptedCheckpoints as RecoverInterruptedCheckpoints,
    Reproject as Reproject,
    Request as Request,
    SaveLifecycleSession as SaveLifecycleSession,
    SaveRequestedCheckpoint as SaveRequestedCheckpoint,
    SaveSession as SaveSession,
    SaveSubagent as SaveSubagent,
)
from .domain.read_replies import (
    ApiSession as ApiSession,
    ElicitationAnswer as ElicitationAnswer,
    ElicitationAnswerList as ElicitationAnswerList,
    ElicitationList as ElicitationList,
    HistoryItem as HistoryItem,
    ProjectionTail as ProjectionTail,
    RawElicitationList as RawElicitationList,
    RawTranscriptItemView as RawTranscriptItemView,
    RawTranscriptPage as RawTranscriptPage,
    RawUsagePage as RawUsagePage,
    SessionList as SessionList,
    TranscriptHistory as TranscriptHistory,
    TranscriptItems as TranscriptItems,
    TranscriptItemView as TranscriptItemView,
    TranscriptPage as TranscriptPage,
    TurnSummary as TurnSummary,
    UsagePage as UsagePage,
    Workspace as Workspace,
    WorkspaceList as WorkspaceList,
)
from .domain.reads import (
    ListSessions as ListSessions,
    ListSubagents as ListSubagents,
    ListWorkspaces as ListWorkspaces,
    LoadElicitationAnswers as LoadElicitationAnswers,
    LoadElicitations as LoadElicitations,
    LoadProjectionTail as LoadProjectionTail,
    LoadRawElicitations as LoadRawElicitations,
    LoadRawTranscriptPage as LoadRawTranscriptPage,
    LoadRawUsagePage as LoadRawUsagePage,
    LoadSessionDetail as LoadSessionDetail,
    LoadTranscriptHistory as LoadTranscriptHistory,
    LoadTranscriptItems as LoadTranscriptItems,
    LoadTranscriptPage as LoadTranscriptPage,
    LoadTurnSummary as LoadTurnSummary,
    LoadUsagePage as LoadUsagePage,
)
from .domain.relay.events import (
    RelayEvent as RelayEvent,
    RelayLine as RelayLine,
    decode_relay_event as decode_relay_event,
    decode_relay_line as decode_relay_line,
    encode_relay_event as encode_relay_event,
)
from .domain.reports import (
    StoreStats as StoreStats,
)
from .domain.retention import (
    TranscriptRetention as TranscriptRetention,
)
from .domain.runtime import (
    HarnessKind as HarnessKind,
    RuntimeReceipt as RuntimeReceipt,
)
from .domain.search import (
    SearchHit as SearchHit,
    SearchPage as SearchPage,
    SearchTranscripts as SearchTranscripts,
    SnippetPart as SnippetPart,
)
from .domain.sessions.provisioning import (
    ManagedCheckoutKind as ManagedCheckoutKind,
    MountAccess as MountAccess,
)
from .domain.sessions.records import (
    PublicationState as PublicationState,
    SessionRecord as SessionRecord,
    SessionState as SessionState,
    State as State,
)
from .domain.sessions.targets import ExecutionPolicy as ExecutionPolicy
from .domain.subagents import (
    SubagentList as SubagentList,
    SubagentRecord as SubagentRecord,
    SubagentView as SubagentView,
)
from .domain.wire import (
    encode as encode,
)
