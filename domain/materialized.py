"""A session's materialized projection: transcript, queue, questions, turns.

:class:`MaterializedSession` is what the projection folds relay events into and what
the store persists; :class:`MaterializedSessionMutation` is the change one relay event
makes, before it is committed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import msgspec

from .api_events import ApiEventData, MaterializedTurn
from .elicitation.forms import ElicitationRequest
from .hashing import RELAY_EVENT_GENESIS_DIGEST
from .outcomes import MaterializedTurnOutcome, ProviderCost
from .relay.events import RelayEvent
from .relay.payloads import RelayCursor
from .wire import JSON, Wire, emitted

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
    "ProjectionBehind",
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


class ProjectionBehind(Wire, kw_only=True, forbid_unknown_fields=True):
    """A session whose projection stopped at a relay line of a kind this build does not
    know (a newer worker's), while its relay log keeps every line after it.

    ``ordinal`` is that line, the first not projected; ``kind``, ``position`` and
    ``path`` say what in it this build does not know (as
    :class:`~relaystore.domain.errors.UnknownRelayKind` names it). ``kept_ordinal`` /
    ``kept_digest`` are the last line kept (verified, in the log, not projected): the
    chain goes on from there. Nothing after ``ordinal`` is projected until a build that
    knows the kind catches the session up (:mod:`relaystore.domain.projection.rebuild`).
    """

    ordinal: int
    kind: str
    position: str
    path: str
    kept_ordinal: int
    kept_digest: str

    @property
    def kept(self) -> RelayCursor:
        """The last line kept: where the session's chain stands."""
        return RelayCursor(ordinal=self.kept_ordinal, digest=self.kept_digest)

    def describe(self) -> str:
        """One line for people: ``projection behind at ordinal N (unknown ...)``."""
        return (
            f"projection behind at ordinal {self.ordinal} (unknown {self.position} "
            f"{self.kind!r}); {self.kept_ordinal - self.ordinal + 1} line(s) kept in the "
            "relay log, not projected, until a build that knows the kind catches up"
        )


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
    projection_behind: ProjectionBehind | None = None
    """Set only while the projection is behind its relay log (see
    :class:`ProjectionBehind`); ``applied_event_ordinal`` is then the last line
    projected, before the unknown one."""

    @property
    def frontier(self) -> RelayCursor:
        """The cursor of the last applied relay event (ordinal 0: genesis)."""
        return RelayCursor(ordinal=self.applied_event_ordinal, digest=self.applied_event_digest)

    @property
    def kept_frontier(self) -> RelayCursor:
        """Where the session's chain stands: the last line the store holds, projected
        or (while behind) only kept in the relay log. The cursor a journal continues
        from."""
        behind = self.projection_behind
        return self.frontier if behind is None else behind.kept

    @classmethod
    def empty(cls, session_id: str) -> MaterializedSession:
        """The projection before any relay event: ordinal 0, genesis digest, idle."""
        return cls(session_id=session_id)


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
    behind: ProjectionBehind | None = None
    """Set when the event was kept, not projected (the session is behind its log): the
    session's marker after it. Every other field is then unchanged."""
