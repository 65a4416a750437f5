"""The typed messages the store's actors accept, and their replies.

Each message is a frozen, keyword-only Struct that names its reply type:
``Request[R]``. The facade's ``ask`` is typed from it, so ``store.ask(LoadState())``
is a :class:`State` to the type checker.

These are the public messages (the contract's three tables, plus ``BackupStore``,
``CompactStore`` and ``SeedProjection``), gathered in one union per owner
(:data:`WriterMessage`, :data:`ProjectorMessage`, :data:`ReaderMessage`):
:data:`PUBLIC_MESSAGES` is every type the facades' ``ask`` and ``tell`` take, and
:mod:`relaystore.actors.routing` derives which actor answers each from those unions.
The actors' own messages live in :mod:`relaystore.actors.internal`.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import msgspec

from .api_events import (
    ApiActivityState,
    ApiEventFilter,
    ApiEventPage,
    RawApiEventPage,
)
from .elicitation.answered import check_answerer, check_elicitation_id
from .elicitation.forms import ElicitationResponse
from .integers import UInt64
from .materialized import (
    MaterializedQueuedPrompt,
    MaterializedSession,
    ProjectionBehind,
)
from .projection.rebuild import ReprojectReport
from .reads import ReadMessage
from .relay.events import RelayEvent, RelayLine
from .relay.log import PruneReport, StoredRelayLog
from .relay.payloads import RelayCursor
from .reports import BackupReport, StoreStats, VacuumReport
from .request import Request
from .retention import TranscriptRetention
from .runtime import RuntimeReceipt
from .sessions.records import SessionRecord, State
from .subagents import SubagentRecord

__all__ = [
    "BackupStore",
    "BeginCheckpoint",
    "CompactStore",
    "CompactTranscript",
    "CorrelateCheckpointBarrier",
    "DeleteSession",
    "FinishFailedCheckpoint",
    "LoadApiEvents",
    "LoadMaterializedSession",
    "LoadRawApiEvents",
    "LoadRelayLog",
    "LoadRuntimeReceipt",
    "LoadState",
    "LoadStats",
    "ObserveRelayEvents",
    "PUBLIC_MESSAGES",
    "ProjectionReport",
    "ProjectorMessage",
    "PruneRelayLog",
    "ReaderMessage",
    "RecordActivities",
    "RecordElicitationAnswer",
    "RecordStartupFault",
    "RecoverInterruptedCheckpoints",
    "Reproject",
    "Request",
    "SaveLifecycleSession",
    "SaveRequestedCheckpoint",
    "SaveSession",
    "SaveSubagent",
    "SeedProjection",
    "WriterMessage",
]

# -- writer ---------------------------------------------------------------------------


class SaveSession(Request[None], frozen=True, kw_only=True):
    """Create or fully update a session record."""

    record: SessionRecord


class SaveLifecycleSession(Request[None], frozen=True, kw_only=True):
    """Update only the lifecycle-owned fields of an existing session."""

    record: SessionRecord


class DeleteSession(Request[None], frozen=True, kw_only=True):
    """Delete a session with its events and projection (its context and usage stay)."""

    session_id: str


class SaveSubagent(Request[None], frozen=True, kw_only=True):
    """Record a sub-agent of a session, or update its relation (the noticed turn, the
    reported finish): the origin's ``save_subagent_session``.

    Both sessions must be stored (:class:`~relaystore.domain.errors.UnknownSession`
    otherwise); a child keeps its parent for ever (naming another parent for a recorded
    child is :class:`~relaystore.domain.errors.InvalidInput`). The relation is deleted
    with either session.
    """

    record: SubagentRecord


class RecordActivities(Request[None], frozen=True, kw_only=True):
    """Publish activity states; only changes become ``activity_changed`` events."""

    activities: list[tuple[str, ApiActivityState]]
    recorded_at_ms: int


class RecordStartupFault(Request[None], frozen=True, kw_only=True):
    """Record that a session failed to start (``session_fault``/``startup_failed``)."""

    session_id: str
    message: str


class RecordElicitationAnswer(Request[None], frozen=True, kw_only=True):
    """Record who answered a session's question and what, as the embedder that forwarded
    the answer to the worker knows it (the journal keeps only the action).

    ``response`` is checked against the question the session asked
    (:func:`~relaystore.domain.elicitation.answers.validate_response`); the value of a
    ``secret`` field is stored masked, so no read shows it. One answer per question
    (:func:`~relaystore.domain.elicitation.answered.admit_answer`): the same record
    again changes nothing, a different one is refused. Raises
    :class:`~relaystore.domain.errors.UnknownSession` for a session the store lacks and
    :class:`~relaystore.domain.errors.InvalidInput` (naming the field) for a question the
    session never asked, an answer its question refuses, or a second answer. The record
    is deleted with its session.
    """

    session_id: str
    elicitation_id: str
    answered_by: str
    response: ElicitationResponse
    answered_at_ms: UInt64

    def check(self) -> None:
        name = type(self).__name__
        check_elicitation_id(f"{name}.elicitation_id", self.elicitation_id)
        check_answerer(f"{name}.answered_by", self.answered_by)


class BeginCheckpoint(Request[None], frozen=True, kw_only=True):
    """Start the session's checkpoint operation, owned by ``command_id``."""

    session: SessionRecord
    command_id: str


class SaveRequestedCheckpoint(Request[None], frozen=True, kw_only=True):
    """Finish the owned checkpoint successfully, storing its archive metadata."""

    session: SessionRecord
    command_id: str


class FinishFailedCheckpoint(Request[None], frozen=True, kw_only=True):
    """Finish the owned checkpoint as failed, or as deferred (``rejected``)."""

    session: SessionRecord
    command_id: str
    deferred: bool
    message: str


class CorrelateCheckpointBarrier(Request[None], frozen=True, kw_only=True):
    """Attach a barrier command to the checkpoint operation ``operation_id``."""

    session_id: str
    operation_id: str
    command_id: str


class RecoverInterruptedCheckpoints(Request[int], frozen=True, kw_only=True):
    """Fail every open checkpoint after a controller restart; reply: sessions recovered."""

    updated_at: str


class SeedProjection(Request[RelayCursor], frozen=True, kw_only=True):
    """Start a session whose history does not start at ordinal 1 at frontier ``start``.

    For a session whose stored projection is still empty: its frontier becomes
    ``start``, its queue ``queued_prompts``, and its projection records where its
    history starts (``source``: ``"seed"`` for a checkpoint restore's
    ``relay-seed.json``, ``"first_event"`` for ``replay --from-first``). A session
    already at or past ``start`` is left as it is. Reply: the stored frontier.
    """

    session_id: str
    start: RelayCursor
    queued_prompts: list[MaterializedQueuedPrompt] = msgspec.field(default_factory=list)
    source: Literal["seed", "first_event"] = "seed"


class CompactStore(Request[VacuumReport], frozen=True, kw_only=True):
    """Rewrite the store without the free pages deletes left (SQLite ``VACUUM``).

    Runs between group commits, outside any transaction; it holds the writer for as
    long as the rewrite takes.
    """


class CompactTranscript(Request[TranscriptRetention], frozen=True, kw_only=True):
    """One retention pass over a session's checkpoint-covered tool calls
    (:mod:`relaystore.domain.retention`): what a line no longer shows is forgotten.

    Online (one writer transaction); ask again while the reply says ``remaining``.
    Raises :class:`~relaystore.domain.errors.UnknownSession` for an unknown session.
    """

    session_id: str


class PruneRelayLog(Request[PruneReport], frozen=True, kw_only=True):
    """Delete the relay log of ``session_id`` through ``through_ordinal``: the pages that
    end at or before it (a page straddling it stays whole).

    Refused (:class:`~relaystore.domain.errors.RelayLogUnavailable`, nothing deleted)
    unless the session's verified checkpoint covers ``through_ordinal`` (its
    ``event_frontier`` is at or past it). Afterwards the session can no longer be
    reprojected from its log. Reply: what was removed.
    """

    session_id: str
    through_ordinal: int


WriterMessage = (
    SaveSession
    | SaveLifecycleSession
    | DeleteSession
    | SaveSubagent
    | RecordActivities
    | RecordStartupFault
    | RecordElicitationAnswer
    | BeginCheckpoint
    | SaveRequestedCheckpoint
    | FinishFailedCheckpoint
    | CorrelateCheckpointBarrier
    | RecoverInterruptedCheckpoints
    | CompactStore
    | SeedProjection
    | CompactTranscript
    | PruneRelayLog
)


# -- projectors -----------------------------------------------------------------------


class ProjectionReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a projector did with one :class:`ObserveRelayEvents`."""

    session_id: str
    applied: int
    """Events the store took: projected, or (``held``) kept in the relay log only."""
    already_applied: int
    frontier_ordinal: int
    """Where the session's chain stands (the last event applied or kept)."""
    frontier_digest: str
    held: int = 0
    """Of ``applied``, the events kept in the relay log but not projected: the session is
    behind (``behind``) since a line of a kind this build does not know."""
    behind: ProjectionBehind | None = None
    """Why the session's projection stops short of the frontier (None: it does not)."""


class ObserveRelayEvents(Request[ProjectionReport], frozen=True, kw_only=True):
    """Verify and project relay events of one session, in order.

    An event may be a :class:`~relaystore.domain.relay.RelayLine` that
    :func:`~relaystore.domain.relay.decode_relay_line` returned for a kind this build does
    not know (a newer worker's): a store with a relay log checks its digest and chain,
    keeps it and holds the session behind
    (:class:`~relaystore.domain.materialized.ProjectionBehind`); without the log it is
    refused with :class:`~relaystore.domain.errors.UnknownRelayKind`.
    """

    session_id: str
    events: list[RelayEvent | RelayLine]


class Reproject(Request[ReprojectReport], frozen=True, kw_only=True):
    """Rebuild the session's materialized projection from its relay log with this
    build's rules, in one transaction, while the store keeps serving.

    The session's projector does it between its relay-event messages: it reads the log,
    projects it again (the writer serves other messages meanwhile) and has the writer
    replace the projection. The feed is append-only: API events the new rules derive
    that the feed lacks (matched by body, as a multiset) are appended with fresh seqs;
    committed ones are never rewritten or deleted. Refused with
    :class:`~relaystore.domain.errors.RelayLogUnavailable` when the log does not hold
    the session's whole history (the log was off, or pruned). Reply: what changed.
    """

    session_id: str


ProjectorMessage = ObserveRelayEvents | Reproject
"""What a session's projector answers."""


# -- readers --------------------------------------------------------------------------


class LoadApiEvents(Request[ApiEventPage], frozen=True, kw_only=True):
    """A page of the feed after ``after_seq`` (``None``: from now)."""

    filter: ApiEventFilter = ApiEventFilter()
    after_seq: int | None = None
    limit: int = 100


class LoadRawApiEvents(Request[RawApiEventPage], frozen=True, kw_only=True):
    """The page :class:`LoadApiEvents` would give, as the feed's printed bytes.

    Same fields, validation, cursors and snapshot; each event is a
    :class:`~relaystore.domain.api_events.RawApiEvent` whose ``json`` is the stored
    body put into the flat ``ApiEvent`` wire shape without decoding it (the store
    checked each body when it wrote it).
    """

    filter: ApiEventFilter = ApiEventFilter()
    after_seq: int | None = None
    limit: int = 100


class LoadRuntimeReceipt(Request[RuntimeReceipt | None], frozen=True, kw_only=True):
    """The session's newest runtime receipt."""

    session_id: str


class LoadMaterializedSession(Request[MaterializedSession | None], frozen=True, kw_only=True):
    """The session's stored projection."""

    session_id: str


class LoadState(Request[State], frozen=True, kw_only=True):
    """Every session record."""


class LoadStats(Request[StoreStats], frozen=True, kw_only=True):
    """The store's figures in one snapshot: schema revision, store id, sessions, the
    newest seq and the API events by kind."""


class BackupStore(Request[BackupReport], frozen=True, kw_only=True):
    """Copy a consistent snapshot of the store to ``destination`` (a new file).

    Safe while the writer commits: SQLite's online backup API, then a verify.
    """

    destination: str


class LoadRelayLog(Request[StoredRelayLog | None], frozen=True, kw_only=True):
    """The session's relay log as stored (compressed pages) with its projection's
    frontier and history start, one snapshot; None when the store lacks the session."""

    session_id: str


ReaderMessage = (
    LoadRelayLog
    | LoadApiEvents
    | LoadRawApiEvents
    | LoadRuntimeReceipt
    | LoadMaterializedSession
    | LoadState
    | LoadStats
    | BackupStore
    | ReadMessage
)


PUBLIC_MESSAGES: tuple[type[Request[Any]], ...] = (
    *get_args(WriterMessage),
    *get_args(ProjectorMessage),
    *get_args(ReaderMessage),
)
"""Every message type the public ``ask`` and ``tell`` take, by owner: writer, projectors,
readers (each union's owner is named once, in :mod:`relaystore.actors.routing`)."""
