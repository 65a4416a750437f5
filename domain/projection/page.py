"""A page of projected relay events coalesced into one delta: what a page writes.

A projector folds each event it applied, with its mutation, into a :class:`PageDelta`
(:meth:`PageDelta.add`); the store writes the delta as one transaction
(:func:`relaystore.storage.projection.commit_page`). Coalescing is pure: several events of a page
touching the same field or transcript item leave one value, the last; API events, turn
outcomes and configuration results keep every value, in order.

The delta knows the frontier it starts at and the one it ends at. The store writes it
only when its own frontier is the start (:meth:`PageDelta.write_needed` says what a
stored frontier means for the page), so a page is never written over another.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api_events import ApiEventData, MaterializedTurn
from ..chain import Step, advance
from ..elicitation.forms import ElicitationRequest
from ..errors import ChainFault, RelayChainError
from ..materialized import (
    UNCHANGED,
    MaterializedExecutionState,
    MaterializedQueuedPrompt,
    MaterializedSessionMutation,
    ProjectionBehind,
    TranscriptRemove,
    TranscriptUpsert,
    _Unset,
)
from ..outcomes import MaterializedTurnOutcome, ProviderCost
from ..relay.events import RelayEvent, RelayLine
from ..relay.log import pack_lines
from ..relay.payloads import RelayCursor
from ..wire import JSON
from .fold import fold_fields
from .integrity import check_mutation

__all__ = ["PackedLog", "PageDelta", "PendingItem"]


@dataclass(frozen=True, slots=True)
class PackedLog:
    """A page's events as its relay log row: their journal lines, packed
    (:func:`~relaystore.domain.relay.log.pack_lines`)."""

    first_ordinal: int
    last_ordinal: int
    lines: bytes
    """The newline-joined lines, compressed."""
    raw_bytes: int
    """Their size uncompressed."""


@dataclass(slots=True)
class PendingItem:
    """The last transcript change of one stable id in the page."""

    change: TranscriptUpsert | TranscriptRemove
    remove_first: bool
    """A removal came before the final upsert: the stored row is deleted, then inserted."""
    ordinal: int
    """The event that made ``change``, for error messages."""


@dataclass(slots=True)
class PageDelta:
    """The coalesced changes of a page of relay events; ``None`` / ``UNCHANGED``: keep.

    Start one with :meth:`starting_at` and fold events into it with :meth:`add`.
    """

    session_id: str
    start: RelayCursor
    """The frontier the page was projected from: the store must be there to write it."""
    end: RelayCursor
    """The frontier after the page's last event (``start`` while the page is empty)."""
    applied: int = 0
    """How many events the page folded."""
    last_activity_at_ms: int | None = None
    execution: MaterializedExecutionState | None = None
    session_title: str | _Unset | None = UNCHANGED
    configuration: dict[str, JSON] | None = None
    transcript: dict[str, PendingItem] = field(default_factory=dict)
    queued_prompts: list[MaterializedQueuedPrompt] | None = None
    pending_elicitations: list[ElicitationRequest] | None = None
    active_turn: MaterializedTurn | _Unset | None = UNCHANGED
    clear_turn_outcome: bool = False
    last_turn_outcome: MaterializedTurnOutcome | None = None
    finished_turns: list[MaterializedTurnOutcome] = field(default_factory=list)
    config_results: dict[str, str | None] = field(default_factory=dict)
    provider_cost: ProviderCost | None = None
    api_events: list[tuple[str, int, ApiEventData]] = field(default_factory=list)
    """``(session_id, recorded_at_ms, event)`` in the order the events yielded them."""
    logged: list[RelayEvent | RelayLine] = field(default_factory=list)
    """The page's events, in order: what the relay log keeps of the page."""
    held: int = 0
    """How many of the page's events were kept, not projected (the session is behind)."""
    behind: ProjectionBehind | None = None
    """The session's marker after the page when it is behind its log (None: the page
    leaves the marker as it is, which for a page that holds nothing is: not behind)."""
    projected_end: RelayCursor | None = None
    """The last event the page projected (None: it projected none). Equal to ``end``
    unless the page kept events without projecting them."""
    packed: PackedLog | None = None
    """``logged`` packed by :meth:`seal` (None: not sealed, or nothing to log)."""

    @classmethod
    def starting_at(cls, session_id: str, frontier: RelayCursor) -> PageDelta:
        """An empty page projected from ``frontier``."""
        return cls(session_id=session_id, start=frontier, end=frontier)

    def add(
        self,
        event: RelayEvent | RelayLine,
        mutation: MaterializedSessionMutation,
        *,
        digest_checked: bool = False,
        applied_at_end: bool = False,
    ) -> Step:
        """Fold ``event``'s ``mutation`` into the page; return where the event stood.

        The chain rule (:func:`relaystore.domain.chain.advance`) places the event against the page's
        end: an event already in the page (or before it) is ``ALREADY_APPLIED`` and
        folds nothing; a gap, a fork or a bad digest raises :class:`RelayChainError`.
        The mutation's own rules (:func:`relaystore.domain.projection.integrity.check_mutation`) are
        checked next. An add that raises leaves the page as it was. API events are
        recorded at the mutation's activity time, else at the event's.

        ``applied_at_end`` says the caller's :class:`SessionProjection`, whose frontier
        is this page's end, just applied the event and returned ``mutation``: its
        :meth:`~SessionProjection.apply` placed the event by the same rule and checked the
        same mutation rules, so neither is run twice (an event that does not directly
        follow the page's end is checked in full regardless).

        A mutation whose ``behind`` is set (the event was kept, not projected) folds
        nothing: the page keeps the event for the log and the session's new marker.
        """
        if not (applied_at_end and event.ordinal == self.end.ordinal + 1):
            step = advance(
                self.end, event, session_id=self.session_id, digest_checked=digest_checked
            )
            if step is Step.ALREADY_APPLIED:
                return step
            check_mutation(mutation, session_id=self.session_id, ordinal=event.ordinal)
        cursor = RelayCursor(ordinal=event.ordinal, digest=event.digest)
        if mutation.behind is not None:
            self.behind = mutation.behind
            self.held += 1
        else:
            self._fold(event, mutation)
            self.projected_end = cursor
        self.logged.append(event)
        self.end = cursor
        self.applied += 1
        return Step.NEXT

    def seal(self, *, log: bool) -> None:
        """Done adding: pack ``logged`` as its log row (``log``: the store keeps the
        relay log), or drop it, so the page crosses a process boundary as its row's
        bytes, not its events. Sealing twice changes nothing."""
        if log and self.logged and self.packed is None:
            blob, raw_bytes = pack_lines(self.logged)
            first, last = self.logged[0].ordinal, self.logged[-1].ordinal
            self.packed = PackedLog(first, last, blob, raw_bytes)
        self.logged = []

    def log_row(self) -> PackedLog | None:
        """The page's relay log row (None: it logs nothing), packed when first asked."""
        if self.packed is None and self.logged:
            self.seal(log=True)
        return self.packed

    def write_needed(self, stored: RelayCursor) -> bool:
        """What the stored frontier ``stored`` means for this page.

        True when the store is at the page's start: write the page. False when the store
        already holds the whole page (at or past its end): write nothing. Anything else
        means the page was projected from a frontier the store is not at, and raises
        :class:`RelayChainError`: ``GAP`` when the store is behind the page's start,
        ``FORK`` when it holds other events at the page's ordinals.
        """
        start, end = self.start, self.end
        if stored == start:
            return True
        if stored.ordinal > end.ordinal or stored == end:
            return False
        session_id, ordinal = self.session_id, stored.ordinal
        if stored.ordinal < start.ordinal:
            raise RelayChainError(
                ChainFault.GAP,
                f"the stored frontier is at ordinal {stored.ordinal}, behind the page, "
                f"which starts after ordinal {start.ordinal}",
                session_id=session_id,
                ordinal=ordinal,
            )
        raise RelayChainError(
            ChainFault.FORK,
            f"the stored frontier ({stored.ordinal}, {stored.digest[:12]}…) is neither the "
            f"page's start ({start.ordinal}, {start.digest[:12]}…) nor at or past its end "
            f"({end.ordinal}, {end.digest[:12]}…)",
            session_id=session_id,
            ordinal=ordinal,
        )

    def _fold(self, event: RelayEvent | RelayLine, mutation: MaterializedSessionMutation) -> None:
        ordinal = event.ordinal
        fold_fields(self, mutation)
        transcript = self.transcript
        for change in mutation.transcript:
            stable_id = (
                change.item.stable_id if isinstance(change, TranscriptUpsert) else change.stable_id
            )
            entry = transcript.get(stable_id)
            if entry is None:
                transcript[stable_id] = PendingItem(change, False, ordinal)
                continue
            if isinstance(change, TranscriptUpsert) and isinstance(entry.change, TranscriptRemove):
                entry.remove_first = True
            entry.change, entry.ordinal = change, ordinal
        for command_id, error in mutation.config_results:
            self.config_results.pop(command_id, None)  # keep write order = last result order
            self.config_results[command_id] = error
        if mutation.clear_turn_outcome:
            self.clear_turn_outcome = True
        if mutation.last_turn_outcome is not None:
            self.finished_turns.append(mutation.last_turn_outcome)
        if mutation.provider_cost is not None:
            self.provider_cost = mutation.provider_cost
        if mutation.api_events:
            activity = mutation.last_activity_at_ms
            at = activity if activity is not None else event.recorded_at_ms
            self.api_events.extend((self.session_id, at, item) for item in mutation.api_events)
