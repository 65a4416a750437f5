"""The source of truth as it travels through a stream: what each change carries.

A store's source of truth is its API feed (``api_events``, published as before) and,
per session, its record, its history start and its relay log. Each change to the
latter is numbered by the store (:mod:`relaystore.storage.changes`) and published as
one message whose value is one of these shapes (JSON, or the log page's bytes):

* ``record``: :class:`RecordState`: the session's rows as stored (``session`` None:
  the session was deleted), with its context and workspace (which outlive it), its
  checkpoint, its open checkpoint operation, the last activity it published, its
  sub-agent relation and the answers recorded for its questions.
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

What a reader applies (:func:`cut_span`): a commit marker (``Relaystore-Change`` C,
``Relaystore-Seq`` S) says the store once held exactly its changes 1..C and its API
events through seq S, all before the marker in the stream. A reader keeps, per store,
the :class:`Mark` it applied last (C0, S0) and applies at the next marker the changes
C0+1..C and the events S0+1..S, each once: a message at or below the mark is one it
holds already (a re-publish after a purge, a second publisher) and is dropped; one past
the marker waits for a later marker (a second publisher ahead of the first). Refused,
before anything of the span is written, naming the first one: a change number of
C0+1..C the stream lacks (change numbers have no holes); an event seq of S0+1..S it
lacks. A publisher of 0.5 or later says which seqs the store no longer held when it
published (a ``gap`` message: seqs FIRST..LAST, events of sessions deleted before they
were sent) and its markers say so (``gaps``); in a span closed by such a marker every
seq is an event or in a gap, and any other missing seq is a hole. A marker of an older
publisher says nothing of gaps: there a hole is taken for a deleted session's events
when the span deletes a session (the stream cannot tell them apart). A span with a hole
waits for the next marker, whose span may explain it;
one event seq with two different bodies; a marker behind the mark on one count and
ahead on the other (no state of the store is that). A marker behind on both is a stale
one (nothing to apply).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from .api_events import RawApiEvent
from .elicitation.answered import check_answerer, check_elicitation_id
from .elicitation.forms import decode_elicitation_response
from .errors import InvalidInput, StoreError
from .ids import validate_id

__all__ = [
    "GAP",
    "Change",
    "Incoming",
    "WireEvent",
    "stored_body",
    "ReplicationRound",
    "ActivityRow",
    "AnswerRow",
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
    "Mark",
    "Span",
    "check_record_ids",
    "check_restore_target",
    "cut_span",
]


GAP = "gap"
"""The kind of a message saying the store held none of seqs ``number..marker_seq``."""


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


class AnswerRow(msgspec.Struct, frozen=True):
    """One recorded answer to a session's question as stored: who answered, when, and
    the response JSON (its ``secret`` fields masked before it was stored)."""

    elicitation_id: str
    answered_by: str
    answered_at_ms: int
    response_json: str


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
    answers: list[AnswerRow] = msgspec.field(default_factory=list)
    """The answers recorded for its questions, in the order recorded (a stream written
    before answers were published has none: read as none recorded)."""


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
    """A marker's seq; a gap's last seq (``number`` its first)."""
    first_ordinal: int | None = None
    says_gaps: bool = False
    """A marker whose publisher sends a gap for every seq it did not send."""


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


# -- what a reader may apply ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mark:
    """How far a reader applied one store: the newest change and API event seq of the
    last commit marker applied."""

    change: int
    seq: int


@dataclass(frozen=True, slots=True)
class Span:
    """What one commit marker lets a reader apply (see :func:`cut_span`)."""

    messages: list[Incoming]
    """The changes in number order, then the events in seq order, each once."""
    held: list[tuple[int, Incoming]]
    """Messages past the marker (with their stream positions): for a later marker."""
    mark: Mark
    """The mark once ``messages`` are applied."""
    hole: str | None = None
    """Set (the refusal, naming the first missing seq) when an event seq is missing and
    no gap says it (or, under an older publisher's marker, the span deletes no session):
    nothing is applied, every message waits, and the next marker's span decides; a run
    that ends with it refuses with it."""


def _first_missing(
    numbers: list[int], low: int, high: int, ranges: Sequence[tuple[int, int]] = ()
) -> int | None:
    """The first number of ``low+1..high`` neither in ``numbers`` (all in that range)
    nor in one of the inclusive ``ranges``."""
    covered = sorted([(number, number) for number in numbers] + list(ranges))
    expected = low + 1
    for first, last in covered:
        if first > expected:
            break
        expected = max(expected, last + 1)
    return expected if expected <= high else None


def _numbers_seqs(message: Incoming) -> bool:
    """Whether ``message``'s numbers are event seqs (an event, a gap), not changes."""
    return message.kind in ("event", GAP)


def _low_of(message: Incoming, mark: Mark) -> int:
    """The mark's number for ``message``'s sort: its seq for an event or a gap, else its
    change."""
    return mark.seq if _numbers_seqs(message) else mark.change


def _top_of(message: Incoming) -> int:
    """The highest number ``message`` stands for (a gap's last seq)."""
    return message.marker_seq if message.kind == GAP else message.number


def _deletes_a_session(changes: list[Incoming]) -> bool:
    return any(
        isinstance(change.value, RecordState) and change.value.session is None for change in changes
    )


def cut_span(
    store_id: str,
    mark: Mark | None,
    marker: Incoming,
    position: int,
    buffered: list[tuple[int, Incoming]],
) -> Span:
    """The span of ``store_id``'s ``buffered`` messages (with their stream positions,
    in stream order) that ``marker`` (at stream seq ``position``) closes, after
    ``mark`` (None: a replica of 0.4, which kept no mark: the span's own lowest numbers
    start it); :class:`StoreError` naming what is wrong (see the module doc)."""
    where = f"the commit marker of store {store_id} at stream seq {position}"
    change, seq = marker.number, marker.marker_seq
    if mark is None:
        seqs = [m.number for _, m in buffered if _numbers_seqs(m)]
        changes_read = [m.number for _, m in buffered if not _numbers_seqs(m)]
        mark = Mark(min(changes_read, default=change + 1) - 1, min(seqs, default=seq + 1) - 1)
        mark = Mark(min(mark.change, change), min(mark.seq, seq))
    if change <= mark.change and seq <= mark.seq:
        return Span([], [(at, m) for at, m in buffered if _top_of(m) > _low_of(m, mark)], mark)
    if change < mark.change or seq < mark.seq:
        raise StoreError(
            f"{where} says change {change} and seq {seq}, but change {mark.change} and seq "
            f"{mark.seq} are applied: no state of the store is that; nothing of it applied"
        )
    changes: dict[int, Incoming] = {}
    events: dict[int, Incoming] = {}
    gaps: list[tuple[int, int]] = []
    held = []
    for at, message in buffered:
        is_event = message.kind == "event"
        low, high = (mark.seq, seq) if _numbers_seqs(message) else (mark.change, change)
        if _top_of(message) <= low:
            continue  # held already
        if message.kind == GAP:
            gaps.append((message.number, message.marker_seq))
            if message.marker_seq > high:
                held.append((at, message))  # its seqs past the marker: for a later one
            continue
        if message.number > high:
            held.append((at, message))
            continue
        if is_event:
            seen = events.get(message.number)
            if seen is not None and seen.value != message.value:
                raise StoreError(
                    f"API event seq {message.number} of store {store_id} is in the stream "
                    f"twice with different contents (again at stream seq {at}); nothing of "
                    f"the span before {where} applied"
                )
            events[message.number] = message
        else:
            changes[message.number] = message  # a later read of the change: its newer value
    missing = _first_missing(list(changes), mark.change, change)
    if missing is not None:
        raise StoreError(
            f"change {missing} of store {store_id} is missing from the stream before {where} "
            f"(changes {mark.change + 1}..{change} are its; deleted from the stream or never "
            "published): nothing of the span applied"
        )
    ordered = [changes[number] for number in sorted(changes)]
    missing = _first_missing(list(events), mark.seq, seq, gaps)
    if missing is not None and (marker.says_gaps or not _deletes_a_session(ordered)):
        hole = (
            f"API event seq {missing} of store {store_id} is missing from the stream before "
            f"{where} (its events {mark.seq + 1}..{seq}; deleted from the stream or never "
            "published): nothing of the span applied"
        )
        waiting = [(at, m) for at, m in buffered if _top_of(m) > _low_of(m, mark)]
        return Span([], waiting, mark, hole)
    ordered.extend(events[number] for number in sorted(events))
    return Span(ordered, held, Mark(change, seq))


def check_record_ids(where: str, session_id: str, value: object) -> None:
    """The session's and workspace's ids a change carries follow the id rule
    (:func:`~relaystore.domain.ids.validate_id`), and its recorded answers the checks an
    answer passes when it is recorded: :class:`InvalidInput` naming ``where`` otherwise
    (a session no command could show or delete, an answer no read could show)."""
    found: list[tuple[str, str]] = [("session", session_id)]
    if isinstance(value, RecordState):
        if value.workspace is not None:
            found.append(("workspace", value.workspace.workspace_id))
        if value.context is not None:
            found.append(("session", value.context.session_id))
            found.append(("workspace", value.context.workspace_id))
            found.append(("bundle", value.context.bundle_id))
        if value.session is not None:
            found.append(("session", value.session.session_id))
    for kind, value_id in found:
        try:
            validate_id(kind, value_id)
        except InvalidInput as exc:
            raise InvalidInput(f"{where}: {exc.detail}") from None
    if isinstance(value, RecordState):
        for index, answer in enumerate(value.answers):
            _check_answer_row(f"{where}: answers[{index}]", answer)
        owners = {value.session_id}
        owners |= {value.context.session_id} if value.context is not None else set()
        owners |= {value.session.session_id} if value.session is not None else set()
        if owners != {session_id}:
            raise InvalidInput(f"{where}: its rows are of sessions {sorted(owners)}")


def _check_answer_row(where: str, row: AnswerRow) -> None:
    """A published answer is one this build could have recorded: its id and answerer
    pass the boundary's checks, its time is not negative, its response decodes."""
    check_elicitation_id(f"{where}.elicitation_id", row.elicitation_id)
    check_answerer(f"{where}.answered_by", row.answered_by)
    if row.answered_at_ms < 0:
        raise InvalidInput(f"{where}.answered_at_ms: {row.answered_at_ms} is negative")
    try:
        decode_elicitation_response(row.response_json)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.response_json: {exc.detail}") from None


def check_restore_target(
    store_id: str, *, own_sessions: int, own_events: int, other_stores: int
) -> None:
    """A restore of ``store_id`` writes only into an empty store or one that restores
    the same store: :class:`InvalidInput` for one holding sessions (``own_sessions``,
    with ``own_events`` API events) it did not restore from this store, or restores of
    ``other_stores`` other stores (a mirror's among them)."""
    if not own_sessions and not other_stores:
        return
    held = []
    if own_sessions:
        held.append(
            f"{own_sessions} session{'s' if own_sessions != 1 else ''} and {own_events} API "
            f"event{'s' if own_events != 1 else ''} not restored from store {store_id}"
        )
    if other_stores:
        held.append(
            f"what it restored or mirrored from {other_stores} other "
            f"store{'s' if other_stores != 1 else ''}"
        )
    raise InvalidInput(
        f"refusing to restore store {store_id}: the target holds {' and '.join(held)}; "
        "restore into an empty store (a new --db) or one restoring the same store"
    )
