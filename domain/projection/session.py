"""One session's projection: a relay event in, the session changed and its mutation out.

:class:`SessionProjection` owns one :class:`MaterializedSession` and the
:class:`~relaystore.domain.projection.index.TranscriptIndex` of its transcript. :meth:`~SessionProjection.apply`
places the event on the chain (:func:`relaystore.domain.chain.advance`), projects it into a
:class:`MaterializedSessionMutation` (with the API events it yields, in the origin's
order), checks every rule (:mod:`relaystore.domain.projection.integrity`) and only then changes the
session and its index in place, so an event costs the same however long the transcript
has grown, and an event that raises leaves the projection exactly as it was. The
transcript is a :class:`~relaystore.domain.projection.frozen.Transcript`: only its newest items stay
decoded, the older ones are kept as bytes, so a long session's memory grows by its
stored size, not by four times that.

Decisions where the origin is unclear (each is tested):

* The line a context clear leaves is ``system:context-cleared:{command_id}``
  (:data:`relaystore.domain.projection.markers.CONTEXT_BOUNDARY_PREFIX`).
* ``resume_after_quota`` is queued like ``continue_authorized_work`` (a prompt with
  the worker's continuation text, without the "Continuing…" line): it is a prompt
  command, so its start opens a turn and its completion ends that turn.
* Replacing the adapter configuration (``session_configured``, ``config_option_update``)
  keeps the projected goal state; an adapter option named ``mj_goal_state`` is ignored.
* Tool presentations are not derived here: a cached presentation is kept only while the
  inputs it summarizes (title, kind, raw input and output) are unchanged.
* In memory, ``clear_turn_outcome`` clears the last outcome before a new one is written,
  as the durable flush does.

A line of a kind this build does not know (a :class:`~relaystore.domain.relay.RelayLine`
whose kind is not in :data:`~relaystore.domain.projection.observations.LINE_HANDLERS`)
is placed on the chain like any event. With ``hold_unknown`` (the store keeps a relay
log) it is *kept*, not projected: the session is behind from it on
(:class:`~relaystore.domain.materialized.ProjectionBehind`) and every later event is kept
the same way, so nothing is projected out of order; without, it is refused with
:class:`~relaystore.domain.errors.UnknownRelayKind` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import msgspec

from ..chain import Step, advance, advance_from
from ..errors import StoreError, UnknownRelayKind
from ..materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    ProjectionBehind,
    TranscriptItem,
    TranscriptRemove,
)
from ..relay.events import RelayEvent, RelayLine, decode_relay_line
from ..relay.payloads import RelayCursor
from .context import ProjectionContext
from .feed import derive_api_events
from .fold import fold_fields
from .frozen import QUIET_WINDOW, FetchItem, Transcript
from .index import ColdEntry, ItemFacts, TranscriptIndex, item_facts
from .integrity import check_mutation, check_transcript_changes
from .observations import HANDLERS, LINE_HANDLERS

__all__ = ["SESSION_BYTES", "SessionProjection", "knows_line", "line_handler"]

SESSION_BYTES = 16 * 1024
"""Estimated bytes of a projection beside its transcript's items: the session's record,
queue, configuration, open calls and the index's own tables (tracemalloc over the
``sessions`` benchmark's reloaded projections, rounded up)."""


def line_handler(line: RelayLine) -> Callable[[ProjectionContext, RelayLine], None] | None:
    """The handler that projects ``line`` from its bytes, when this build has one
    (:data:`~relaystore.domain.projection.observations.LINE_HANDLERS`): the one rule of
    whether a line of an undecoded kind can be projected."""
    return LINE_HANDLERS.get((line.position, line.kind))


def knows_line(raw: bytes) -> bool:
    """Whether this build projects the journal line ``raw`` (a logged line a session is
    behind at): it decodes, or a line handler takes its kind. A line that does not even
    decode is not known (its damage is for a rebuild or an audit to report)."""
    try:
        decoded = decode_relay_line(raw)
    except StoreError:
        return False
    return not isinstance(decoded, RelayLine) or line_handler(decoded) is not None


class SessionProjection:
    """Owns one session's projection and its transcript index; applies relay events to it.

    The session handed in becomes the projection's own: no other object, thread or
    reader may hold it or its lists afterwards. :attr:`session` shows it; callers must
    not change it, nor hand it out (copy it with :meth:`snapshot`).
    """

    __slots__ = ("_hold_unknown", "_index", "_session", "_session_id", "_transcript")

    def __init__(
        self,
        session: MaterializedSession,
        *,
        session_id: str | None = None,
        hold_unknown: bool = False,
        fetch: FetchItem | None = None,
        items: Iterable[TranscriptItem | ColdEntry] | None = None,
    ) -> None:
        self._session_id = session_id or session.session_id
        self._hold_unknown = hold_unknown
        # With ``fetch``, ``session`` is what the store holds: its old items go cold as
        # they are read. ``items`` (else the session's transcript) are read once, in
        # order, so a long transcript streamed in never sits in memory whole; an entry
        # that is a ``ColdEntry`` (a stored item's id and index facts) enters cold.
        transcript = Transcript((), fetch=fetch, committed=session.kept_frontier.ordinal)

        def entered(
            stream: Iterable[TranscriptItem | ColdEntry],
        ) -> Iterator[tuple[str, ItemFacts]]:
            for entry in stream:
                if type(entry) is tuple:
                    transcript.append_cold(entry[0])
                    yield entry
                else:
                    assert isinstance(entry, TranscriptItem)
                    transcript.append(entry)
                    yield entry.stable_id, item_facts(entry)

        self._transcript = transcript
        self._index = TranscriptIndex.from_facts(
            entered(session.transcript if items is None else items)
        )
        session.transcript = []  # the transcript lives in ``_transcript``, old items frozen
        self._session = session

    @property
    def session_id(self) -> str:
        """The session named in errors."""
        return self._session_id

    @property
    def session(self) -> MaterializedSession:
        """The projected session with its whole transcript decoded: read it, never change
        it or hand it out (its lists other than the transcript are the live ones)."""
        return msgspec.structs.replace(self._session, transcript=self._transcript.thawed())

    @property
    def transcript(self) -> Transcript:
        """The session's transcript, live (old items frozen): read it, never change it."""
        return self._transcript

    @property
    def index(self) -> TranscriptIndex:
        """The index of the session's transcript, live: read it, never change it."""
        return self._index

    @property
    def frontier(self) -> RelayCursor:
        """The last event applied or kept (ordinal 0 with the genesis digest before any):
        where the chain stands (:attr:`MaterializedSession.kept_frontier`)."""
        return self._session.kept_frontier

    def committed(self, ordinal: int) -> None:
        """The store holds every event of this session through ``ordinal`` (a page
        landed): old items it holds may go cold (see :mod:`~relaystore.domain.projection.frozen`)."""
        self._transcript.committed(ordinal)

    def park(self, keep: int = QUIET_WINDOW) -> int:
        """Leave active use: every committed item but the newest ``keep`` goes cold (see
        :meth:`Transcript.cool`); return the projection's estimated bytes in memory (its
        transcript's :meth:`~Transcript.footprint` and :data:`SESSION_BYTES`). A parked
        projection applies events as before; an item it let go is fetched if one names it."""
        self._transcript.cool(keep)
        return SESSION_BYTES + self._transcript.footprint()

    @property
    def behind(self) -> ProjectionBehind | None:
        """Why the projection stopped short of :attr:`frontier` (None: it did not)."""
        return self._session.projection_behind

    def snapshot(self) -> MaterializedSession:
        """A copy of the session that later events leave alone, safe to hand out.

        Items are never changed in place (a changed item is a new item), so copying the
        session's lists and its configuration is enough.
        """
        session = self._session
        return msgspec.structs.replace(
            session,
            configuration=dict(session.configuration),
            transcript=self._transcript.thawed(),
            queued_prompts=list(session.queued_prompts),
            pending_elicitations=list(session.pending_elicitations),
        )

    def apply(
        self, event: RelayEvent | RelayLine, *, digest_checked: bool = False
    ) -> MaterializedSessionMutation | None:
        """Apply ``event``; return its mutation, or None when it was already applied.

        A mutation whose ``behind`` is set says the event was kept, not projected (see
        the module doc).

        The chain rule (:func:`relaystore.domain.chain.advance`) decides first: an event at or
        below the frontier (with the frontier's digest, at the frontier itself) is
        already applied and changes nothing; a gap, a fork or a bad digest raises
        :class:`RelayChainError`. ``digest_checked`` skips hashing an event whose digest
        the caller already verified. An event the projection cannot apply raises
        :class:`ProjectionError`. Every rule is checked before anything changes.
        """
        sid = self._session_id
        session = self._session
        behind = session.projection_behind
        if behind is None:  # the frontier, without building its cursor (every event)
            step = advance_from(
                session.applied_event_ordinal,
                session.applied_event_digest,
                event,
                session_id=sid,
                digest_checked=digest_checked,
            )
        else:
            step = advance(behind.kept, event, session_id=sid, digest_checked=digest_checked)
        if step is Step.ALREADY_APPLIED:
            return None
        if behind is None and isinstance(event, RelayLine) and line_handler(event) is None:
            if not self._hold_unknown:
                raise UnknownRelayKind(
                    event.kind or "?",
                    event.position or "kind",
                    event.path or "$.observation",
                    event,
                    session_id=sid,
                    ordinal=event.ordinal,
                )
            behind = ProjectionBehind(
                ordinal=event.ordinal,
                kind=event.kind,
                position=event.position,
                path=event.path,
                kept_ordinal=event.ordinal,
                kept_digest=event.digest,
            )
        if behind is not None:
            kept = msgspec.structs.replace(
                behind, kept_ordinal=event.ordinal, kept_digest=event.digest
            )
            self._session.projection_behind = kept
            return MaterializedSessionMutation(behind=kept)
        mutation = self._project(event)
        check_mutation(mutation, session_id=sid, ordinal=event.ordinal)
        check_transcript_changes(mutation, self._get, session_id=sid, ordinal=event.ordinal)
        self._write(event, mutation)
        return mutation

    def _get(self, stable_id: str) -> TranscriptItem | None:
        offset = self._index.positions.get(stable_id)
        return None if offset is None else self._transcript[offset]

    def _project(self, event: RelayEvent | RelayLine) -> MaterializedSessionMutation:
        """The mutation of ``event`` against the session as it is (nothing changes)."""
        current = self._session
        mutation = MaterializedSessionMutation(last_activity_at_ms=event.recorded_at_ms)
        ctx = ProjectionContext(  # by position: one an event
            current, self._transcript, self._index, event, mutation, self._session_id
        )
        if isinstance(event, RelayLine):
            line = line_handler(event)
            assert line is not None  # apply() holds a line without one
            line(ctx, event)
        else:
            handler = HANDLERS.get(type(event.observation))
            if handler is not None:
                handler(ctx, event.observation)
        mutation.api_events = derive_api_events(current, event, mutation)
        return mutation

    def _write(self, event: RelayEvent | RelayLine, mutation: MaterializedSessionMutation) -> None:
        """Apply a checked ``mutation`` to the session and its index; nothing here raises."""
        session = self._session
        self._write_transcript(mutation, event.ordinal)
        fold_fields(session, mutation)
        session.applied_event_ordinal = event.ordinal
        session.applied_event_digest = event.digest

    def _write_transcript(self, mutation: MaterializedSessionMutation, ordinal: int) -> None:
        """Apply checked transcript changes to the transcript and its index together.

        An upsert replaces the item at its id's offset or appends a new one; a removal
        deletes the item (a removed id upserted again later is appended anew).
        """
        transcript, index = self._transcript, self._index
        positions = index.positions
        for change in mutation.transcript:
            if isinstance(change, TranscriptRemove):
                offset = positions.get(change.stable_id)
                if offset is not None:
                    removed = transcript.pop(offset, ordinal=ordinal)
                    index.remove(removed, offset, transcript)
                continue
            item = change.item
            offset = positions.get(item.stable_id)
            if offset is None:
                transcript.append(item, ordinal=ordinal)
                index.append(item, len(transcript) - 1)
            else:
                before = transcript[offset]
                transcript.replace(offset, item, ordinal=ordinal)
                index.replace(before, item)
