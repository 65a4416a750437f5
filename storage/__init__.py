"""relaystore's storage layer: the SQLite schema and every read and write of the store.

Plain functions over an apsw connection; no threads, no global state. Writers get their
connection from :func:`open_writer` (the only write connection, locked across
processes) and readers from :func:`open_reader`. Every operation is one transaction,
or a savepoint when the caller already holds one, and raises only the errors of
:mod:`domain.errors`.
"""

from __future__ import annotations

from relaystore.storage.activity import record_activities, record_startup_fault
from relaystore.storage.checkpoints import (
    begin_checkpoint,
    correlate_checkpoint_barrier,
    finish_failed_checkpoint,
    recover_interrupted_checkpoints,
    save_requested_checkpoint,
)
from relaystore.storage.connection import WriterConnection, open_reader, open_writer
from relaystore.storage.events import insert_api_event, insert_api_events
from relaystore.storage.paging import (
    MAX_PAGE_LIMIT,
    load_api_events,
    load_latest_seq,
    load_runtime_receipt,
)
from relaystore.storage.schema import (
    SCHEMA_VERSION,
    SchemaState,
    check_writer_schema,
    ensure_supported,
    migrate_schema,
    read_schema_state,
)
from relaystore.storage.sessions import (
    delete_session,
    load_session,
    load_state,
    save_lifecycle_session,
    save_session,
    update_lifecycle_fields,
)
from relaystore.storage.transaction import transaction

__all__ = [
    "MAX_PAGE_LIMIT",
    "SCHEMA_VERSION",
    "SchemaState",
    "WriterConnection",
    "begin_checkpoint",
    "check_writer_schema",
    "correlate_checkpoint_barrier",
    "delete_session",
    "ensure_supported",
    "finish_failed_checkpoint",
    "insert_api_event",
    "insert_api_events",
    "load_api_events",
    "load_latest_seq",
    "load_runtime_receipt",
    "load_session",
    "load_state",
    "migrate_schema",
    "open_reader",
    "open_writer",
    "read_schema_state",
    "record_activities",
    "record_startup_fault",
    "recover_interrupted_checkpoints",
    "save_lifecycle_session",
    "save_requested_checkpoint",
    "save_session",
    "transaction",
    "update_lifecycle_fields",
]
