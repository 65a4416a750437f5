"""The source of truth as it travels through a stream: what each change carries.

A store's source of truth is its API feed (``api_events``, published as before) and,
per session, its record, its history start and its relay log. Each change to the
latter is numbered by the store (:mod:`relaystore.storage.changes`) and published as
one message whose value is one of these shapes (JSON, or the log page's bytes):

* ``record``: :class:`RecordState`: the session's rows as stored (``session`` None:
  the session was deleted), with its context and workspace (which outlive it), its
  checkpoint, its open checkpoint operation and the last activity it published.
* ``start``: :class:`StartState`: where its history starts (a checkpoint seed's
  cursor and queued prompts, and/or the first ordinal it holds).
* ``log``: :class:`LogPageRow`: one relay log page, the worker's lines compressed as
  the store keeps them.

Everything here is pure: the rows are copied as the store holds them, so a store
restored from them holds the same rows; the projection is derived from them again.

Session ids in a mirror (:func:`mirror_session_id`): a session keeps its id unless the
mirror already holds a session of that id from another store; then it is
``ID.STORE8`` (the first 8 hex digits of its store's id), shortened to
``PREFIX.HASH.STORE8`` when that would pass 64 characters. The mirror applies stores'
commits in stream order, so which session keeps the plain id is the one whose store
published it first, and a mirror rebuilt from the same stream decides the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgspec

from .api_events import RawApiEvent

__all__ = [
    "Change",
    "Incoming",
    "WireEvent",
    "stored_body",
    "ReplicationRound",
    "ActivityRow",
    "ChangeRef",
    "CheckpointRow",
    "ContextRow",
    "LogPageRow",
    "OperationRow",
    "RecordState",
    "SubagentRow",
    "SeedRow",
    "SessionRow",
    "StartState",
    "WorkspaceRow",
    "mirror_session_id",
]


class ChangeRef(msgspec.Struct, frozen=True, kw_only=True):
    """One numbered change: what changed, not its value."""

    change_seq: int
    kind: str
    session_id: str
    workspace_id: str
    first_ordinal: int | None = None


class WorkspaceRow(msgspec.Struct, frozen=True):
    workspace_id: str
    created_at: str


class ContextRow(msgspec.Struct, frozen=True):
    session_id: str
    bundle_id: str
    created_at: str
    workspace_id: str


class SessionRow(msgspec.Struct, frozen=True):
    session_id: str
    title: str
    harness_kind: str
    state: str
    updated_at: str
    viewed_through_event_ordinal: int
    last_error: str | None
    last_checkpoint_error: str | None
    native_session_id: str | None
    record_json: str


class CheckpointRow(msgspec.Struct, frozen=True):
    archive_path: str
    sha256: str
    created_at: str
    event_frontier: int


class OperationRow(msgspec.Struct, frozen=True):
    command_id: str
    related_command_ids: str


class ActivityRow(msgspec.Struct, frozen=True):
    body: str


class SeedRow(msgspec.Struct, frozen=True):
    start_ordinal: int
    start_digest: str
    queued_prompts_json: str


class SubagentRow(msgspec.Struct, frozen=True):
    """A child session's sub-agent relation as stored: its parent and the whole
    :class:`~relaystore.domain.subagents.SubagentRecord` JSON."""

    parent_session_id: str
    record_json: str


class RecordState(msgspec.Struct, frozen=True, kw_only=True):
    """A ``record`` change's value (see the module doc)."""

    session_id: str
    workspace: WorkspaceRow | None
    context: ContextRow | None
    session: SessionRow | None
    checkpoint: CheckpointRow | None = None
    operation: OperationRow | None = None
    activity: ActivityRow | None = None
    subagent: SubagentRow | None = None
    """The session's relation to its parent, when it is a sub-agent (a stream written
    before relations were published has none: read as no relation)."""


class StartState(msgspec.Struct, frozen=True, kw_only=True):
    """A ``start`` change's value: the seed and the history start (None: none)."""

    session_id: str
    seed: SeedRow | None
    first_ordinal: int | None
    source: str | None


class LogPageRow(msgspec.Struct, frozen=True, kw_only=True):
    """A ``log`` change's value: one relay log page as stored (``lines`` compressed)."""

    first_ordinal: int
    last_ordinal: int
    raw_bytes: int
    lines: bytes


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """A numbered change with its value as of the snapshot it was read in (a ``log``
    change's value is None when the page is gone: pruned, or its session deleted)."""

    ref: ChangeRef
    value: RecordState | StartState | LogPageRow | None


class ReplicationRound(msgspec.Struct, frozen=True, kw_only=True):
    """What a publisher sends next, read in one snapshot: the changes after its change
    cursor and the API events after its seq cursor (each at most a page), and the
    snapshot's newest change and seq. ``complete``: both lists reach the snapshot's
    newest, so after them the stream holds a committed state of the store."""

    changes: list[Change]
    events: list[RawApiEvent]
    next_after_seq: int
    latest_change: int
    latest_seq: int
    complete: bool


class WireEvent(msgspec.Struct, frozen=True):
    """An API event as the feed prints it (its ``data`` undecoded)."""

    seq: int
    session_id: str
    recorded_at_ms: int
    type: str
    data: msgspec.Raw


def stored_body(event: WireEvent) -> str:
    """The ``api_events.body`` the event was printed from: ``{"type":..,"data":..}``,
    the store's canonical layout (:mod:`relaystore.storage.events`)."""
    return (
        '{"type":'
        + msgspec.json.encode(event.type).decode()
        + ',"data":'
        + bytes(event.data).decode()
        + "}"
    )


@dataclass(frozen=True, slots=True)
class Incoming:
    """One of a store's messages, checked: ``kind`` is ``event``, ``commit`` or a change
    kind; ``number`` the event's seq, the change's number or the marker's change."""

    kind: str
    store_id: str
    number: int
    session_id: str | None
    value: WireEvent | RecordState | StartState | LogPageRow | None
    marker_seq: int = 0
    first_ordinal: int | None = None


def mirror_session_id(session_id: str, store_id: str, taken: bool) -> str:
    """The id a mirror gives ``session_id`` of ``store_id``; ``taken`` says another
    store's session holds the plain id already (see the module doc)."""
    if not taken:
        return session_id
    qualified = f"{session_id}.{store_id[:8]}"
    if len(qualified) <= 64:
        return qualified
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
    return f"{session_id[:38]}.{digest}.{store_id[:8]}"
