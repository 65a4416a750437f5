"""relaystore's domain: the typed model, the wire codec, digests, the pure projection,
the messages and the errors. Pure: no I/O, no threads.

This package re-exports only the contract's domain names (``relaystore-api.md``, the
same ones :mod:`relaystore` exports). Everything else is imported from its module, for
example ``from relaystore.domain.relay import CommandQueued``; each module lists its
public names in its own ``__all__``.
"""

from __future__ import annotations

from relaystore.domain.api_events import (
    ApiActivityState,
    ApiEvent,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
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
    "AskTimeout",
    "BeginCheckpoint",
    "ChainFault",
    "CorrelateCheckpointBarrier",
    "DeleteSession",
    "FinishFailedCheckpoint",
    "InvalidInput",
    "LifecycleConflict",
    "LoadApiEvents",
    "LoadMaterializedSession",
    "LoadRuntimeReceipt",
    "LoadState",
    "MaterializedSession",
    "ObserveRelayEvents",
    "ProjectionError",
    "ProjectionReport",
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
    "SessionRecord",
    "State",
    "StoreClosed",
    "StoreError",
    "StoreLocked",
    "UnknownSession",
    "WriterStopped",
    "decode_relay_event",
    "encode",
    "encode_relay_event",
    "relay_event_digest",
]
