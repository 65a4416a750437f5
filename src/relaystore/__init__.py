"""relaystore: the event store a coding-agent supervisor embeds.

This module is the contract (``relaystore-api.md``): the :class:`EventStore` facade,
every message and reply, the wire types users construct or read, and the error tree.
The layers install as subpackages: :mod:`relaystore.domain` (pure types, codec,
digests, projection), :mod:`relaystore.storage` (apsw) and :mod:`relaystore.actors`
(pykka, the facade, journal reading, the command line).

Names are imported when first used (:pep:`562`), so ``import relaystore`` and the
command line's ``--version`` stay cheap; ``from relaystore import EventStore`` imports
the runtime then.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
        RelayLogUnavailable,
        RequestUnanswered,
        SchemaMismatch,
        StoreBusy,
        StoreClosed,
        StoreError,
        StoreForked,
        StoreLocked,
        UnknownRelayKind,
        UnknownSession,
        WorkerLost,
        WriterStopped,
    )
    from relaystore.domain.materialized import MaterializedSession
    from relaystore.domain.messages import (
        BeginCheckpoint,
        CompactTranscript,
        CorrelateCheckpointBarrier,
        DeleteSession,
        FinishFailedCheckpoint,
        LoadApiEvents,
        LoadMaterializedSession,
        LoadRawApiEvents,
        LoadRelayLog,
        LoadRuntimeReceipt,
        LoadState,
        LoadStats,
        ObserveRelayEvents,
        ProjectionReport,
        PruneRelayLog,
        RecordActivities,
        RecordStartupFault,
        RecoverInterruptedCheckpoints,
        Reproject,
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
        LoadRawElicitations,
        LoadRawUsagePage,
        LoadSessionDetail,
        LoadTranscriptHistory,
        LoadTranscriptItems,
        LoadTranscriptPage,
        LoadTurnSummary,
        LoadUsagePage,
        ProjectionTail,
        RawElicitationList,
        RawUsagePage,
        SessionList,
        TranscriptHistory,
        TranscriptItems,
        TranscriptItemView,
        TranscriptPage,
        TurnSummary,
        UsagePage,
        Workspace,
        WorkspaceList,
    )
    from relaystore.domain.relay_events import (
        RelayEvent,
        RelayLine,
        decode_relay_event,
        decode_relay_line,
        encode_relay_event,
    )
    from relaystore.domain.reports import StoreStats
    from relaystore.domain.retention import (
        TranscriptRetention,  # the names of _HOMES, imported: type checkers see what is exported
    )
    from relaystore.domain.runtime import (
        HarnessKind,
        RuntimeReceipt,
    )
    from relaystore.domain.session_provisioning import ManagedCheckoutKind, MountAccess
    from relaystore.domain.session_targets import ExecutionPolicy
    from relaystore.domain.sessions import PublicationState, SessionRecord, SessionState, State
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
    "CompactTranscript",
    "CorrelateCheckpointBarrier",
    "DeleteSession",
    "ElicitationList",
    "EventStore",
    "ExecutionPolicy",
    "FinishFailedCheckpoint",
    "HarnessKind",
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
    "LoadRawElicitations",
    "LoadRawUsagePage",
    "LoadRelayLog",
    "LoadRuntimeReceipt",
    "LoadSessionDetail",
    "LoadState",
    "LoadStats",
    "LoadTranscriptHistory",
    "LoadTranscriptItems",
    "LoadTranscriptPage",
    "LoadTurnSummary",
    "LoadUsagePage",
    "ManagedCheckoutKind",
    "MaterializedSession",
    "MountAccess",
    "ObserveRelayEvents",
    "ProjectionError",
    "ProjectionReport",
    "ProjectionTail",
    "PruneRelayLog",
    "PublicationState",
    "RawApiEvent",
    "RawApiEventPage",
    "RawElicitationList",
    "RawUsagePage",
    "RecordActivities",
    "RecordStartupFault",
    "RecoverInterruptedCheckpoints",
    "RelayChainError",
    "RelayEvent",
    "RelayLine",
    "RelayLogUnavailable",
    "Reproject",
    "Request",
    "RequestUnanswered",
    "RuntimeReceipt",
    "SaveLifecycleSession",
    "SaveRequestedCheckpoint",
    "SaveSession",
    "SchemaMismatch",
    "SessionList",
    "SessionRecord",
    "SessionState",
    "State",
    "StoreBusy",
    "StoreClosed",
    "StoreError",
    "StoreForked",
    "StoreLocked",
    "StoreStats",
    "TranscriptHistory",
    "TranscriptItemView",
    "TranscriptItems",
    "TranscriptPage",
    "TranscriptRetention",
    "TurnSummary",
    "UnknownRelayKind",
    "UnknownSession",
    "UsagePage",
    "WorkerLost",
    "Workspace",
    "WorkspaceList",
    "WriterStopped",
    "__version__",
    "decode_relay_event",
    "decode_relay_line",
    "encode",
    "encode_relay_event",
    "relay_event_digest",
]

_HOMES: dict[str, tuple[str, ...]] = {
    "relaystore.domain.reports": ("StoreStats",),
    "relaystore.domain.retention": ("TranscriptRetention",),
    "relaystore.actors.store": ("EventStore",),
    "relaystore.domain.api_events": (
        "ApiActivityState",
        "ApiEvent",
        "ApiEventData",
        "ApiEventFilter",
        "ApiEventPage",
        "RawApiEvent",
        "RawApiEventPage",
    ),
    "relaystore.domain.digests": ("relay_event_digest",),
    "relaystore.domain.errors": (
        "AskTimeout",
        "ChainFault",
        "InvalidInput",
        "LifecycleConflict",
        "ProjectionError",
        "RelayChainError",
        "RelayLogUnavailable",
        "RequestUnanswered",
        "SchemaMismatch",
        "StoreBusy",
        "StoreClosed",
        "StoreError",
        "StoreForked",
        "StoreLocked",
        "UnknownRelayKind",
        "UnknownSession",
        "WorkerLost",
        "WriterStopped",
    ),
    "relaystore.domain.materialized": ("MaterializedSession",),
    "relaystore.domain.messages": (
        "LoadStats",
        "CompactTranscript",
        "BeginCheckpoint",
        "CorrelateCheckpointBarrier",
        "DeleteSession",
        "FinishFailedCheckpoint",
        "LoadApiEvents",
        "LoadMaterializedSession",
        "LoadRawApiEvents",
        "LoadRelayLog",
        "LoadRuntimeReceipt",
        "LoadState",
        "ObserveRelayEvents",
        "ProjectionReport",
        "PruneRelayLog",
        "RecordActivities",
        "RecordStartupFault",
        "RecoverInterruptedCheckpoints",
        "Reproject",
        "Request",
        "SaveLifecycleSession",
        "SaveRequestedCheckpoint",
        "SaveSession",
    ),
    "relaystore.domain.reads": (
        "ApiSession",
        "ElicitationList",
        "HistoryItem",
        "ListSessions",
        "ListWorkspaces",
        "LoadElicitations",
        "LoadProjectionTail",
        "LoadRawElicitations",
        "LoadRawUsagePage",
        "LoadSessionDetail",
        "LoadTranscriptHistory",
        "LoadTranscriptItems",
        "LoadTranscriptPage",
        "LoadTurnSummary",
        "LoadUsagePage",
        "ProjectionTail",
        "RawElicitationList",
        "RawUsagePage",
        "SessionList",
        "TranscriptHistory",
        "TranscriptItemView",
        "TranscriptItems",
        "TranscriptPage",
        "TurnSummary",
        "UsagePage",
        "Workspace",
        "WorkspaceList",
    ),
    "relaystore.domain.relay_events": (
        "RelayEvent",
        "RelayLine",
        "decode_relay_event",
        "decode_relay_line",
        "encode_relay_event",
    ),
    "relaystore.domain.runtime": ("HarnessKind", "RuntimeReceipt"),
    "relaystore.domain.session_provisioning": ("ManagedCheckoutKind", "MountAccess"),
    "relaystore.domain.session_targets": ("ExecutionPolicy",),
    "relaystore.domain.sessions": ("PublicationState", "SessionRecord", "SessionState", "State"),
    "relaystore.domain.wire": ("encode",),
}
"""Each module of the contract, and the names ``relaystore`` exports from it."""


if TYPE_CHECKING:
    __version__: str
else:  # hidden from type checkers, so that a misspelt name is still an error there

    def __getattr__(name: str) -> object:
        """Import a contract name on first use (and keep it, as an import would)."""
        if name == "__version__":
            from importlib.metadata import PackageNotFoundError, version

            try:
                value = version("relaystore")
            except PackageNotFoundError:  # pragma: no cover - a bare source tree
                value = "0+unknown"
        else:
            home = next((module for module, names in _HOMES.items() if name in names), None)
            if home is None:
                raise AttributeError(f"module 'relaystore' has no attribute {name!r}")
            value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


logging.getLogger(__name__).addHandler(logging.NullHandler())
