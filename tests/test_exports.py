"""The public surface: every contract name imports, and the layers point one way."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import relaystore
from relaystore import domain
from tests.paths import ROOT

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


def test_relaystore_exports_the_contract() -> None:
    missing = [name for name in CONTRACT_NAMES if not hasattr(relaystore, name)]
    assert missing == []
    assert relaystore.EventStore.__module__ == "relaystore.actors.store"


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


_LAYERS = {"domain": ROOT / "domain", "storage": ROOT / "storage", "actors": ROOT / "actors"}
_ALLOWED = {
    "domain": {"msgspec", "relaystore.domain"},
    "storage": {"msgspec", "apsw", "relaystore.domain", "relaystore.storage"},
    "actors": {
        "msgspec",
        "pykka",
        "tqdm",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "relaystore.domain",
        "relaystore.storage",
        "relaystore.actors",
    },
}


def _imports(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _third_party(module: str) -> str:
    if module.startswith("relaystore."):
        return ".".join(module.split(".")[:2])
    return module.split(".")[0]


@pytest.mark.parametrize("layer", sorted(_LAYERS))
def test_layers_import_only_what_is_below_them(layer: str) -> None:
    """domain is pure, storage adds apsw, actors adds pykka and never touches apsw."""
    stdlib = sys.stdlib_module_names
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(_LAYERS[layer].rglob("*.py"))
        for line, module in _imports(path)
        if (_third_party(module) not in _ALLOWED[layer] and module.split(".")[0] not in stdlib)
        or module.split(".")[0] in {"domain", "storage", "actors"}
    ]
    assert wrong == []


def test_domain_does_no_io() -> None:
    """The pure layer opens no files, sockets, threads or processes."""
    banned = {"threading", "socket", "subprocess", "multiprocessing", "sqlite3", "os", "io"}
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(_LAYERS["domain"].rglob("*.py"))
        for line, module in _imports(path)
        if module.split(".")[0] in banned
    ]
    assert wrong == []
