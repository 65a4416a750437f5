"""A session's materialized projection: transcript, queue, questions, turns.

:class:`MaterializedSession` is what the projection folds relay events into and what
the store persists; :class:`MaterializedSessionMutation` is the change one relay event
makes, before it is committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import msgspec

from relaystore.domain.api_events import ApiEventData, MaterializedTurn
from relaystore.domain.digests import is_relay_digest
from relaystore.domain.elicitation import ElicitationRequest
from relaystore.domain.errors import InvalidInput
from relaystore.domain.outcomes import MaterializedTurnOutcome, ProviderCost
from relaystore.domain.relay import RELAY_EVENT_GENESIS_DIGEST, RelayCursor, RelayEvent
from relaystore.domain.wire import JSON, Wire, emitted

__all__ = [
    "HistoryStart",
    "AgentBody",
    "ExecutionClosed",
    "ExecutionClosing",
    "ExecutionIdle",
    "ExecutionRunning",
    "MaterializedExecutionState",
    "MaterializedQueuedPrompt",
    "MaterializedSession",
    "MaterializedSessionMutation",
    "PlanBody",
    "PlanProposalBody",
    "SetConfigEntry",
    "SetConfigKind",
    "SystemBody",
    "TerminalOutputBody",
    "TerminalOutputRecord",
    "ThoughtBody",
    "ToolBody",
    "TranscriptBody",
    "TranscriptItem",
    "TranscriptRemove",
    "TranscriptUpsert",
    "UNCHANGED",
    "UserBody",
]


# -- execution ------------------------------------------------------------------------


class ExecutionIdle(Wire, kw_only=True, tag_field="state", tag="idle"):
    pass


class ExecutionRunning(Wire, kw_only=True, tag_field="state", tag="running"):
    started_at_ms: int


class ExecutionClosing(Wire, kw_only=True, tag_field="state", tag="closing"):
    pass


class ExecutionClosed(Wire, kw_only=True, tag_field="state", tag="closed"):
    pass


MaterializedExecutionState = ExecutionIdle | ExecutionRunning | ExecutionClosing | ExecutionClosed


# -- transcript -----------------------------------------------------------------------


class TerminalOutputRecord(Wire, kw_only=True):
    terminal_id: str
    output: str
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None


class UserBody(Wire, kw_only=True, tag_field="kind", tag="user"):
    content: list[JSON] = emitted([])


class AgentBody(Wire, kw_only=True, tag_field="kind", tag="agent"):
    chunks: list[JSON] = emitted([])
    streaming: bool = emitted(False)


class ThoughtBody(Wire, kw_only=True, tag_field="kind", tag="thought"):
    chunks: list[JSON] = emitted([])
    streaming: bool = emitted(False)


class ToolBody(Wire, kw_only=True, tag_field="kind", tag="tool"):
    call: JSON
    terminal_outputs: list[TerminalOutputRecord] = msgspec.field(default_factory=list)
    terminal_refs: list[str] = msgspec.field(default_factory=list)
    presentation: JSON = None


class TerminalOutputBody(Wire, kw_only=True, tag_field="kind", tag="terminal_output"):
    record: TerminalOutputRecord


class PlanBody(Wire, kw_only=True, tag_field="kind", tag="plan"):
    plan: JSON


class PlanProposalBody(Wire, kw_only=True, tag_field="kind", tag="plan_proposal"):
    proposal_id: str
    plan: str


class SystemBody(Wire, kw_only=True, tag_field="kind", tag="system"):
    text: str


TranscriptBody = (
    UserBody
    | AgentBody
    | ThoughtBody
    | ToolBody
    | TerminalOutputBody
    | PlanBody
    | PlanProposalBody
    | SystemBody
)


class TranscriptItem(Wire, kw_only=True, forbid_unknown_fields=True):
    """One entry of a session's transcript, identified by a stable id."""

    stable_id: str
    position: int
    latest_content_event_ordinal: int | None = emitted(None)
    created_at_ms: int
    last_changed_at_ms: int
    body: TranscriptBody

    def validate(self, frontier: int) -> None:
        """Check the item against the ordinal it is valid at (raises InvalidInput)."""
        where = f"transcript item {self.stable_id!r}"
        if not self.stable_id.strip():
            raise InvalidInput("transcript item has an empty stable id")
        if not 1 <= self.position <= frontier:
            raise InvalidInput(f"{where} has position {self.position} outside 1..={frontier}")
        latest = self.latest_content_event_ordinal
        if isinstance(self.body, AgentBody):
            if latest is None or not self.position <= latest <= frontier:
                raise InvalidInput(
                    f"{where} is an agent message whose latest content ordinal {latest} "
                    f"is outside {self.position}..={frontier}"
                )
        elif latest is not None:
            raise InvalidInput(f"{where} is not an agent message but has a latest content ordinal")
        if self.last_changed_at_ms < self.created_at_ms:
            raise InvalidInput(
                f"{where} changed at {self.last_changed_at_ms}, before it was created at {self.created_at_ms}"
            )


# -- queue ----------------------------------------------------------------------------


class SetConfigEntry(Wire, kw_only=True):
    key: str
    value: str


class SetConfigKind(Wire, kw_only=True):
    """The ``{"set_config": {"key", "value"}}`` queue entry kind."""

    set_config: SetConfigEntry


class MaterializedQueuedPrompt(Wire, kw_only=True, forbid_unknown_fields=True):
    """A command waiting in the worker's queue. ``kind`` None means a prompt."""

    command_id: str
    kind: SetConfigKind | Literal["prompt"] | None = None
    content: list[JSON] = emitted([])
    queued_at_ms: int
    accepted_ordinal: int | None = None

    def __post_init__(self) -> None:
        if self.kind == "prompt":
            self.kind = None  # the origin omits the prompt kind


class HistoryStart(Wire, kw_only=True, forbid_unknown_fields=True):
    """Where a session's history starts when it does not start at ordinal 1.

    ``ordinal`` is the first relay event the store holds. ``source`` says why: ``"seed"``
    (a checkpoint restore left ``relay-seed.json`` naming the frontier to continue from)
    or ``"first_event"`` (the journal's earlier segments are gone and ``replay
    --from-first`` adopted its first event's position).
    """

    ordinal: int
    source: Literal["seed", "first_event"]


# -- the session ----------------------------------------------------------------------


class MaterializedSession(Wire, kw_only=True, forbid_unknown_fields=True):
    """A session's projection at ``applied_event_ordinal``."""

    session_id: str
    applied_event_ordinal: int = emitted(0)
    applied_event_digest: str = emitted(RELAY_EVENT_GENESIS_DIGEST)
    last_activity_at_ms: int | None = emitted(None)
    execution: MaterializedExecutionState = emitted(ExecutionIdle())
    session_title: str | None = None
    configuration: dict[str, JSON] = msgspec.field(default_factory=dict)
    transcript: list[TranscriptItem] = msgspec.field(default_factory=list)
    queued_prompts: list[MaterializedQueuedPrompt] = msgspec.field(default_factory=list)
    pending_elicitations: list[ElicitationRequest] = msgspec.field(default_factory=list)
    active_turn: MaterializedTurn | None = None
    last_turn_outcome: MaterializedTurnOutcome | None = None
    history_start: HistoryStart | None = None
    """Set only for a session that does not start at ordinal 1 (never written otherwise,
    so the origin's JSON reads and writes back unchanged)."""

    @property
    def frontier(self) -> RelayCursor:
        """The cursor of the last applied relay event (ordinal 0: genesis)."""
        return RelayCursor(ordinal=self.applied_event_ordinal, digest=self.applied_event_digest)

    @classmethod
    def empty(cls, session_id: str) -> MaterializedSession:
        """The projection before any relay event: ordinal 0, genesis digest, idle."""
        return cls(session_id=session_id)

    def validate(self) -> None:
        """Check the invariants the store and projector rely on (raises InvalidInput)."""
        from relaystore.domain.sessions import validate_id

        validate_id("session", self.session_id)
        ordinal, digest = self.applied_event_ordinal, self.applied_event_digest
        if not is_relay_digest(digest) or (ordinal == 0) != (digest == RELAY_EVENT_GENESIS_DIGEST):
            raise InvalidInput(
                f"materialized session {self.session_id} has inconsistent frontier {ordinal} / {digest}"
            )
        if self.session_title is not None and not self.session_title.strip():
            raise InvalidInput(f"materialized session {self.session_id} has an empty title")
        seen: set[str] = set()
        for item in self.transcript:
            item.validate(ordinal)
            if item.stable_id in seen:
                raise InvalidInput(f"duplicate transcript item {item.stable_id!r}")
            seen.add(item.stable_id)
        queued: set[str] = set()
        for entry in self.queued_prompts:
            if not entry.command_id.strip() or entry.command_id in queued:
                raise InvalidInput(f"queued command id {entry.command_id!r} is blank or repeated")
            queued.add(entry.command_id)
            if isinstance(entry.kind, SetConfigKind) and not (
                entry.kind.set_config.key.strip() and entry.kind.set_config.value.strip()
            ):
                raise InvalidInput(
                    f"queued set_config {entry.command_id!r} has a blank key or value"
                )


# -- mutations ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TranscriptUpsert:
    item: TranscriptItem


@dataclass(frozen=True, slots=True)
class TranscriptRemove:
    stable_id: str


class _Unset:
    """Marks a mutation field left unchanged (distinct from "set to None")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = _Unset()


@dataclass(slots=True)
class MaterializedSessionMutation:
    """The change one relay event makes; every field defaults to "unchanged"."""

    native_agent: RelayEvent | None = None
    last_activity_at_ms: int | None = None
    execution: MaterializedExecutionState | None = None
    session_title: str | _Unset | None = UNCHANGED
    configuration: dict[str, JSON] | None = None
    transcript: list[TranscriptUpsert | TranscriptRemove] = field(default_factory=list)
    queued_prompts: list[MaterializedQueuedPrompt] | None = None
    pending_elicitations: list[ElicitationRequest] | None = None
    active_turn: MaterializedTurn | _Unset | None = UNCHANGED
    clear_turn_outcome: bool = False
    last_turn_outcome: MaterializedTurnOutcome | None = None
    config_results: list[tuple[str, str | None]] = field(default_factory=list)
    provider_cost: ProviderCost | None = None
    api_events: list[ApiEventData] = field(default_factory=list)
