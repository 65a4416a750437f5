"""relaystore: the event store a coding-agent supervisor embeds.

This module is the contract (``relaystore-api.md``): the :class:`EventStore` facade,
every message and reply, the wire types users construct or read, and the error tree.
The layers install as subpackages: :mod:`relaystore.domain` (pure types, codec,
digests, projection), :mod:`relaystore.storage` (apsw) and :mod:`relaystore.actors`
(pykka, the facade, journal reading, the command line).
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import (
    ApiActivityState,
    ApiEvent,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
    RawApiEvent,
    RawApiEventPage,
)
from relaystore.domain.digests import relay_event_digest
from relaystore.domain.errors import (
    AskTimeout,
    ChainFault,
    InvalidInput,
    LifecycleConflict,
    ProjectionError,
    RelayChainError,
    SchemaMismatch,
    StoreClosed,
    StoreError,
    StoreLocked,
    UnknownRelayKind,
    UnknownSession,
    WriterStopped,
)
from relaystore.domain.materialized import MaterializedSession
from relaystore.domain.messages import (
    BeginCheckpoint,
    CorrelateCheckpointBarrier,
    DeleteSession,
    FinishFailedCheckpoint,
    LoadApiEvents,
    LoadMaterializedSession,
    LoadRawApiEvents,
    LoadRuntimeReceipt,
    LoadState,
    ObserveRelayEvents,
    ProjectionReport,
    RecordActivities,
    RecordStartupFault,
    RecoverInterruptedCheckpoints,
    Request,
    SaveLifecycleSession,
    SaveRequestedCheckpoint,
    SaveSession,
)
from relaystore.domain.reads import (
    ApiSession,
    ElicitationList,
    HistoryItem,
    ListSessions,
    ListWorkspaces,
    LoadElicitations,
    LoadProjectionTail,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptPage,
    LoadTurnSummary,
    LoadUsagePage,
    ProjectionTail,
    SessionList,
    TranscriptHistory,
    TranscriptItemView,
    TranscriptPage,
    TurnSummary,
    UsagePage,
    Workspace,
    WorkspaceList,
)
from relaystore.domain.relay import RelayEvent, decode_relay_event, encode_relay_event
from relaystore.domain.runtime import RuntimeReceipt
from relaystore.domain.sessions import SessionRecord, State
from relaystore.domain.wire import encode

__all__ = [
    "ApiActivityState",
    "ApiEvent",
    "ApiEventData",
    "ApiEventFilter",
    "ApiEventPage",
    "ApiSession",
    "AskTimeout",
    "BeginCheckpoint",
    "ChainFault",
    "CorrelateCheckpointBarrier",
    "DeleteSession",
    "ElicitationList",
    "EventStore",
    "FinishFailedCheckpoint",
    "HistoryItem",
    "InvalidInput",
    "LifecycleConflict",
    "ListSessions",
    "ListWorkspaces",
    "LoadApiEvents",
    "LoadElicitations",
    "LoadMaterializedSession",
    "LoadProjectionTail",
    "LoadRawApiEvents",
    "LoadRuntimeReceipt",
    "LoadSessionDetail",
    "LoadState",
    "LoadTranscriptHistory",
    "LoadTranscriptPage",
    "LoadTurnSummary",
    "LoadUsagePage",
    "MaterializedSession",
    "ObserveRelayEvents",
    "ProjectionError",
    "ProjectionReport",
    "ProjectionTail",
    "RawApiEvent",
    "RawApiEventPage",
    "RecordActivities",
    "RecordStartupFault",
    "RecoverInterruptedCheckpoints",
    "RelayChainError",
    "RelayEvent",
    "Request",
    "RuntimeReceipt",
    "SaveLifecycleSession",
    "SaveRequestedCheckpoint",
    "SaveSession",
    "SchemaMismatch",
    "SessionList",
    "SessionRecord",
    "State",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "TranscriptHistory",
    "TranscriptItemView",
    "TranscriptPage",
    "TurnSummary",
    "UnknownRelayKind",
    "UnknownSession",
    "UsagePage",
    "Workspace",
    "WorkspaceList",
    "WriterStopped",
    "__version__",
    "decode_relay_event",
    "encode",
    "encode_relay_event",
    "relay_event_digest",
]

try:
    __version__ = version("relaystore")
except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

logging.getLogger(__name__).addHandler(logging.NullHandler())
