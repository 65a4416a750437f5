"""Reader actors: each answers queries on its own read-only connection.

Every query runs in one read transaction, so a page is one consistent snapshot; in WAL
mode readers never block the writer and the writer never blocks them.
"""

from __future__ import annotations

import os
from typing import Any

from pykka import ActorRef

from ..domain.messages import (
    BackupStore,
    LoadApiEvents,
    LoadMaterializedSession,
    LoadRawApiEvents,
    LoadRelayLog,
    LoadRuntimeReceipt,
    LoadState,
    LoadStats,
)
from ..storage.audit import load_audit_view
from ..storage.changes import load_replication_round
from ..storage.connection import open_reader
from ..storage.maintenance import backup_store
from ..storage.materialized import (
    load_index_entries,
    load_materialized_session,
    load_transcript_item,
)
from ..storage.paging import (
    load_api_events,
    load_raw_api_events,
    load_runtime_receipt,
)
from ..storage.reads import READ_TYPES, answer_read
from ..storage.relay_log import load_relay_log
from ..storage.requests import open_requests
from ..storage.schema import read_store_id
from ..storage.sessions import load_state
from ..storage.stats import load_stats
from ..storage.transaction import Connection
from .envelope import TellSafeActor, Unanswerable
from .internal import (
    LoadAuditView,
    LoadIndexEntries,
    LoadOpenRequests,
    LoadReplicationRound,
    LoadTranscriptItem,
)

__all__ = ["ReaderActor"]


class ReaderActor(TellSafeActor):
    """Answers reader messages; a failing query fails only its own ask."""

    def __init__(self, connection: Connection, *, capacity: int) -> None:
        super().__init__(capacity=capacity)
        self._connection = connection

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, capacity: int, identify: bool = False
    ) -> tuple[ActorRef[ReaderActor], str | None]:
        """Open a read connection (:func:`~relaystore.storage.connection.open_reader`; its
        refusals raise here, in the caller's thread) and start a reader on it; with
        ``identify``, the store's id is read first (else ``None``)."""
        connection = open_reader(path)
        store_id = None
        if identify:
            try:  # read before the reader actor owns the connection
                store_id = read_store_id(connection)
            except BaseException:
                connection.close()
                raise
        return cls.start(connection, capacity=capacity), store_id

    def on_stop(self) -> None:
        self._connection.close()

    def handle(self, message: Any) -> Any:
        connection = self._connection
        if isinstance(message, READ_TYPES):  # sessions, transcript, history, usage
            return answer_read(connection, message)
        match message:
            case LoadTranscriptItem(session_id=session_id, stable_id=stable_id):
                return load_transcript_item(connection, session_id, stable_id)
            case LoadIndexEntries(session_id=session_id, limit=limit):
                after = (
                    None
                    if message.after_position is None or message.after_id is None
                    else (message.after_position, message.after_id)
                )
                return load_index_entries(connection, session_id, after, limit)
            case LoadApiEvents(filter=event_filter, after_seq=after_seq, limit=limit):
                return load_api_events(connection, event_filter, after_seq, limit)
            case LoadRawApiEvents(filter=event_filter, after_seq=after_seq, limit=limit):
                return load_raw_api_events(connection, event_filter, after_seq, limit)
            case LoadRuntimeReceipt(session_id=session_id):
                return load_runtime_receipt(connection, session_id)
            case LoadMaterializedSession(session_id=session_id):
                return load_materialized_session(connection, session_id)
            case LoadState():
                return load_state(connection)
            case LoadStats():
                return load_stats(connection)
            case LoadRelayLog(session_id=session_id):
                return load_relay_log(connection, session_id)
            case LoadAuditView(session_id=session_id):
                return load_audit_view(connection, session_id)
            case LoadOpenRequests(limit=limit):
                return open_requests(connection, limit)
            case LoadReplicationRound(after_seq=seq, after_change=change, limit=limit):
                return load_replication_round(connection, seq, change, limit)
            case BackupStore(destination=destination):
                return backup_store(connection, destination)
        raise Unanswerable("reader", message)
