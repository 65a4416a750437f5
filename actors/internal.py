"""The actors' own messages: what a projector asks of the writer, and what the
maintenance desk (:mod:`relaystore.actors.maintenance.desk`) asks. Not part of the
contract.

A projector loads its session's committed projection and commits its pages through the
writer (the one write connection), and reads a committed item back through a reader,
with these messages. They are plain frozen
dataclasses, not :class:`~relaystore.domain.messages.Request` s: a user's type checker
refuses them at ``store.ask``, and the facades refuse them by type at run time too
(``InvalidInput`` naming the message; see
:data:`~relaystore.actors.routing.INTERNAL_MESSAGES`). The unions at the end say which
actor answers each (:mod:`relaystore.actors.routing` reads them).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..domain.maintenance import MaintenanceAnswer, RequestState
from ..domain.projection.page import PageDelta
from ..domain.sessions.records import CheckpointMetadata

__all__ = [
    "CommitPage",
    "ClaimRequest",
    "CommitReprojection",
    "DeskReaderMessage",
    "DeskWriterMessage",
    "FinishRequest",
    "LoadAuditView",
    "LoadIndexEntries",
    "LoadLoggedLine",
    "LoadOpenRequests",
    "LoadProjection",
    "LoadReplicationRound",
    "LoadTranscriptItem",
    "ProjectorReaderMessage",
    "ProjectorWriterMessage",
    "RecordCheckpoint",
    "RecoverRequests",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadProjection:
    """A projector loads its session's committed projection through the writer.

    Reply: the :class:`~relaystore.domain.materialized.MaterializedSession`; raises
    :class:`~relaystore.domain.errors.UnknownSession` when the store has no such session.
    Without ``transcript`` the session comes without its transcript items (the projector
    then reads them a page at a time through a reader).
    """

    session_id: str
    transcript: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitPage:
    """A projector's page of projected events, coalesced, committed as one transaction.

    The projector never touches ``page`` after sending it. Reply: the stored frontier
    after the page (a :class:`~relaystore.domain.relay.RelayCursor`), and how many of its
    events applied (0: the store already held it).
    """

    session_id: str
    page: PageDelta
    log: bool = True
    """Keep the page's events in the relay log (the store's ``relay_log`` option)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitReprojection:
    """A projector's rebuilt whole-history page (for a ``Reproject``), written over the
    reset projection in one transaction. Reply: the
    :class:`~relaystore.domain.projection.rebuild.ReprojectReport`."""

    session_id: str
    page: PageDelta


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadLoggedLine:
    """A projector of a session behind its log reads the line it stopped at, to learn
    whether this build knows its kind now. Reply: the line's bytes, or None when the log
    does not hold it."""

    session_id: str
    ordinal: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadTranscriptItem:
    """A projector reads one committed transcript item it dropped from memory (a cold
    item), through a reader. Reply: the
    :class:`~relaystore.domain.materialized.TranscriptItem`."""

    session_id: str
    stable_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadIndexEntries:
    """A projector reloading its session reads its transcript as the index sees it, a
    page at a time after a ``(position, stable_id)`` cursor (both or neither), through a
    reader. Reply: :class:`~relaystore.storage.materialized.IndexEntries`, or None
    without a projection."""

    session_id: str
    after_position: int | None
    after_id: str | None
    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadAuditView:
    """``relaystore audit`` reads a session's projection, relay log and feed in one
    snapshot, through a reader. Reply: the
    :class:`~relaystore.domain.audit.AuditView`, or None without a projection."""

    session_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadOpenRequests:
    """The desk reads the open (pending or running) maintenance requests, oldest first,
    through a reader. Reply: a list of
    :class:`~relaystore.domain.maintenance.StoredRequest` (at most ``limit``)."""

    limit: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimRequest:
    """The desk takes a pending request for this process's writer. Reply: True, or
    False when it was withdrawn (or taken) meanwhile."""

    request_id: str
    pid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishRequest:
    """The desk records a request's answer (when it is in ``from_state``). Reply: True,
    or False when it was not in that state."""

    request_id: str
    answer: MaintenanceAnswer
    from_state: RequestState = "running"
    requester_pid: int | None = None
    """Only while this process still asks for it (None: whoever does)."""
    rowid: int | None = None
    """A damaged row, found by its place (its id may not read); None: by ``request_id``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoverRequests:
    """The desk of a writer that just opened the store fails the requests an earlier
    writer left running, with ``answer``. Reply: how many."""

    answer: MaintenanceAnswer


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordCheckpoint:
    """``relaystore checkpoint``: record ``checkpoint`` as the session's verified one.
    Reply: the checkpoint it replaces (None: it had none)."""

    session_id: str
    checkpoint: CheckpointMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadReplicationRound:
    """The publisher reads the changes and API events it sends next, in one snapshot,
    through a reader. Reply: the :class:`~relaystore.domain.replication.ReplicationRound`."""

    after_seq: int
    after_change: int
    limit: int


ProjectorWriterMessage = LoadProjection | CommitPage | CommitReprojection | LoadLoggedLine
"""Writer messages only projectors send."""
ProjectorReaderMessage = (
    LoadTranscriptItem | LoadIndexEntries | LoadAuditView | LoadReplicationRound
)
"""Reader messages only the actors send (projectors, ``audit``, the publisher)."""
DeskWriterMessage = ClaimRequest | FinishRequest | RecoverRequests | RecordCheckpoint
"""What the maintenance desk asks of the writer."""
DeskReaderMessage = LoadOpenRequests
"""What the maintenance desk asks of a reader."""
