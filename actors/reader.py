"""Reader actors: each answers queries on its own read-only connection.

Every query runs in one read transaction, so a page is one consistent snapshot; in WAL
mode readers never block the writer and the writer never blocks them.

:func:`answer` is the reader's whole dispatch: one match over the typed read messages
(:mod:`relaystore.domain.reads`, :mod:`relaystore.domain.messages`,
:mod:`relaystore.actors.internal`), each case calling one storage function, as
:func:`relaystore.actors.writer.perform` is the writer's. Storage keeps no dispatcher,
and this module decides nothing a storage function or the domain decides.

Each reader's connection sits at its :class:`ReaderDesk`: the reader's thread takes the
desk's lock for each message, and a blocking ask from a thread other than the main one
that finds a reader idle answers there, in the asking thread, without the two thread
hops (:meth:`ReaderDesk.read_now`, the reads' counterpart of the writer's fast path).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
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
from ..domain.reads import (
    ListSessions,
    ListSubagents,
    ListWorkspaces,
    LoadElicitationAnswers,
    LoadElicitations,
    LoadProjectionTail,
    LoadRawElicitations,
    LoadRawTranscriptPage,
    LoadRawUsagePage,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptItems,
    LoadTranscriptPage,
    LoadTurnSummary,
    LoadUsagePage,
)
from ..domain.search import SearchTranscripts
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
from ..storage.reads.elicitations import (
    load_elicitation_answers,
    load_elicitations,
    load_raw_elicitations,
)
from ..storage.reads.search import search_transcripts
from ..storage.reads.sessions import list_sessions, list_workspaces, load_session_detail
from ..storage.reads.transcript import (
    load_raw_transcript_page,
    load_transcript_history,
    load_transcript_items_page,
    load_transcript_page,
)
from ..storage.reads.turns import load_projection_tail, load_turn_summary
from ..storage.reads.usage import load_raw_usage_page, load_usage_page
from ..storage.relay_log import load_relay_log
from ..storage.requests import open_requests
from ..storage.schema import read_store_id
from ..storage.sessions import load_state
from ..storage.stats import load_stats
from ..storage.subagents import list_subagents
from ..storage.transaction import Connection
from .envelope import TellSafeActor, Unanswerable, answers_here
from .internal import (
    LoadAuditView,
    LoadIndexEntries,
    LoadOpenRequests,
    LoadReplicationRound,
    LoadTranscriptItem,
)

__all__ = ["OpenedReader", "ReaderActor", "ReaderDesk", "answer"]


class ReaderDesk:
    """A reader's connection and who uses it now: the reader's thread, or one asking
    thread (the read fast path, :meth:`read_now`).

    The reader holds :attr:`lock` while it answers a message; :meth:`read_now` answers a
    message in the caller's thread only when it can take the lock without waiting and
    the reader has nothing waiting, so the connection has one user at a time.
    """

    __slots__ = ("_closed", "_connection", "_waiting", "lock")

    def __init__(self, connection: Connection) -> None:
        self.lock = threading.Lock()
        self._connection = connection
        self._closed = False
        self._waiting: Callable[[], bool] = lambda: False
        """Whether the reader has messages waiting (its inbox is not empty)."""

    def attach(self, waiting: Callable[[], bool]) -> None:
        """The reader's inbox check (messages waiting go first)."""
        self._waiting = waiting

    def answer(self, message: Any) -> Any:
        """Answer ``message`` on this desk's connection (the caller holds :attr:`lock`)."""
        return answer(self._connection, message)

    def read_now(self, message: Any) -> tuple[bool, Any]:
        """``(True, reply)`` when ``message`` was answered in this thread, ``(False,
        None)`` when it must be handed over: in the main thread (where signals and
        Ctrl-C arrive, which could cut into a read transaction), while the reader has
        messages waiting or is answering one, or once it closed. A refusal raises here,
        as the ask would raise it. Never waits for the reader."""
        if not answers_here() or self._waiting():
            return False, None
        if not self.lock.acquire(blocking=False):
            return False, None
        try:
            if self._closed:
                return False, None
            return True, answer(self._connection, message)
        finally:
            self.lock.release()

    def close(self) -> None:
        """Close the connection once no thread uses it; no fast path after."""
        with self.lock:
            self._closed = True
            self._connection.close()


@dataclass(frozen=True, slots=True)
class OpenedReader:
    """A started reader, its desk, and the store's id when it was asked to read it."""

    ref: ActorRef[ReaderActor]
    desk: ReaderDesk
    store_id: str | None


class ReaderActor(TellSafeActor):
    """Answers reader messages at its desk; a failing query fails only its own ask."""

    def __init__(self, desk: ReaderDesk, *, capacity: int) -> None:
        super().__init__(capacity=capacity)
        self._desk = desk
        desk.attach(lambda: not self.inbox.empty())

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, capacity: int, identify: bool = False
    ) -> OpenedReader:
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
        desk = ReaderDesk(connection)
        return OpenedReader(cls.start(desk, capacity=capacity), desk, store_id)

    def on_stop(self) -> None:
        self._desk.close()

    def handle(self, message: Any) -> Any:
        with self._desk.lock:
            return self._desk.answer(message)


def answer(connection: Connection, message: Any) -> Any:
    """Answer one reader message on ``connection``: the reader's whole dispatch (see
    the module doc)."""
    match message:
        # -- the read side (domain.reads): sessions, transcript, history, usage
        case ListSessions(workspace_id=workspace_id, all=every):
            return list_sessions(connection, workspace_id, top_level_only=not every)
        case ListSubagents(parent_session_id=parent):
            return list_subagents(connection, parent)
        case LoadSessionDetail(session_id=session_id):
            return load_session_detail(connection, session_id)
        case ListWorkspaces():
            return list_workspaces(connection)
        case LoadTranscriptPage():
            return load_transcript_page(
                connection,
                message.session_id,
                message.after_seq,
                message.limit,
                message.roles,
                message.finished_only,
            )
        case LoadRawTranscriptPage():
            return load_raw_transcript_page(
                connection,
                message.session_id,
                message.after_seq,
                message.limit,
                message.roles,
                message.finished_only,
            )
        case LoadTranscriptHistory():
            return load_transcript_history(
                connection,
                message.session_id,
                message.before_position,
                message.before_id,
                message.limit,
            )
        case LoadTranscriptItems(session_id=session_id, limit=limit):
            return load_transcript_items_page(
                connection, session_id, _after(message.after_position, message.after_id), limit
            )
        case LoadTurnSummary():
            return load_turn_summary(
                connection,
                message.session_id,
                message.turn_start_position,
                message.completed_ordinal,
            )
        case LoadProjectionTail(session_id=session_id, limit=limit):
            return load_projection_tail(connection, session_id, limit)
        case LoadUsagePage(session_id=session_id, after_seq=after_seq, limit=limit):
            return load_usage_page(connection, session_id, after_seq, limit)
        case LoadRawUsagePage(session_id=session_id, after_seq=after_seq, limit=limit):
            return load_raw_usage_page(connection, session_id, after_seq, limit)
        case LoadElicitations(session_id=session_id):
            return load_elicitations(connection, session_id)
        case LoadRawElicitations(session_id=session_id):
            return load_raw_elicitations(connection, session_id)
        case LoadElicitationAnswers(session_id=session_id):
            return load_elicitation_answers(connection, session_id)
        case SearchTranscripts():
            return search_transcripts(
                connection,
                message.query,
                message.session_id,
                message.role,
                message.limit,
                message.cursor,
                message.plain,
            )
        # -- the store's own reads (domain.messages, actors.internal)
        case LoadTranscriptItem(session_id=session_id, stable_id=stable_id):
            return load_transcript_item(connection, session_id, stable_id)
        case LoadIndexEntries(session_id=session_id, limit=limit):
            after = _after(message.after_position, message.after_id)
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


def _after(position: int | None, stable_id: str | None) -> tuple[int, str] | None:
    """A ``(position, stable_id)`` cursor from its two message fields (both, or none)."""
    return None if position is None or stable_id is None else (position, stable_id)
