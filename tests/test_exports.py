"""The public surface: every contract name imports, and the layers point one way."""

from __future__ import annotations

import subprocess
import sys

import domain

CONTRACT_NAMES = [
    "ApiActivityState",
    "ApiEvent",
    "ApiEventData",
    "ApiEventFilter",
    "ApiEventPage",
    "BeginCheckpoint",
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


def test_every_contract_name_imports_from_domain() -> None:
    missing = [name for name in CONTRACT_NAMES if not hasattr(domain, name)]
    assert missing == []


def test_domain_all_is_sorted_and_complete() -> None:
    assert domain.__all__ == sorted(domain.__all__, key=str.casefold)
    assert all(hasattr(domain, name) for name in domain.__all__)


def test_actors_exports_the_facade() -> None:
    import actors

    assert actors.EventStore.__name__ == "EventStore"


def test_every_error_derives_from_store_error() -> None:
    for name in [
        "InvalidInput",
        "RelayChainError",
        "ProjectionError",
        "SchemaMismatch",
        "UnknownSession",
        "LifecycleConflict",
        "WriterStopped",
        "StoreClosed",
        "StoreLocked",
    ]:
        assert issubclass(getattr(domain, name), domain.StoreError)


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return set(out.stdout.split())


def test_domain_loads_neither_storage_nor_actors_nor_their_drivers() -> None:
    loaded = _loaded_after("import domain")
    assert not {"apsw", "pykka", "storage", "actors", "sqlite3"} & loaded


def test_storage_loads_no_actor_runtime() -> None:
    loaded = _loaded_after("import storage")
    assert not {"pykka", "actors"} & loaded
