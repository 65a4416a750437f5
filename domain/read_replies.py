"""The replies of the read side, in the origin's JSON shapes.

Owns the types the reader answers with: sessions and workspaces, transcript pages,
history and items, turn summaries and projection tails, usage pages and pending
questions, and the raw twins of the usage and question replies. The shapes are the
origin's (``mj-controller/src/server/api/types.rs``, ``database/materialized.rs``,
``database/usage.rs``), so ``encode(reply)`` is what the HTTP routes answer; field order
is part of that contract.

Types only: no rules (those live in :mod:`relaystore.domain.transcript_views`,
:mod:`relaystore.domain.sessions.views`, :mod:`relaystore.domain.usage` and
:mod:`relaystore.domain.paging`) and no I/O.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .elicitation.forms import ElicitationRequest, ElicitationValue
from .materialized import (
    MaterializedExecutionState,
    MaterializedSession,
    ProjectionBehind,
    TranscriptBody,
    TranscriptItem,
)
from .outcomes import MaterializedTurnOutcome, ProviderCost, TurnDiagnostic
from .roles import TranscriptRole
from .sessions.records import NativeSubagents, SessionState, SubagentPolicy
from .wire import JSON, Wire, emitted

__all__ = [
    "ApiSession",
    "BackgroundTask",
    "ChatPhase",
    "ConfigOption",
    "ElicitationAnswer",
    "ElicitationAnswerList",
    "ElicitationList",
    "HistoryCursor",
    "HistoryItem",
    "Lifecycle",
    "ProjectionTail",
    "RawElicitationList",
    "RawTranscriptItemView",
    "RawTranscriptPage",
    "RawUsagePage",
    "SessionFacts",
    "SessionList",
    "TranscriptHistory",
    "TranscriptItemView",
    "TranscriptItems",
    "TranscriptPage",
    "TurnSummary",
    "UsageCounterTotal",
    "UsageCoverage",
    "UsagePage",
    "Workspace",
    "WorkspaceList",
]

Lifecycle = Literal["live", "starting", "suspending", "suspended", "failed"]
ChatPhase = Literal["idle", "running", "closing", "closed"]


class ConfigOption(Wire, kw_only=True):
    """One setting of the session's configuration: its key, label and current value."""

    key: str
    label: str
    current: JSON
    choices: list[JSON] = emitted([])


class BackgroundTask(Wire, kw_only=True):
    """One background task a session's worker runs (the origin's ``background_tasks``
    record): an opaque id, the command, when it started and whether it can be stopped."""

    id: str
    command: str
    started_at_ms: int
    can_stop: bool


class ApiSession(Wire, kw_only=True):
    """One session as the origin's API presents it (``ApiSession``, ``types.rs`` @e1ec72d,
    field for field and in its order).

    The list leaves ``last_turn_outcome`` and ``last_turn_diagnostic`` out; the detail
    (:class:`~relaystore.domain.reads.LoadSessionDetail`) fills them. The rules that
    derive each field from the stored record are
    :func:`~relaystore.domain.sessions.views.api_session`'s.
    """

    background_tasks: list[BackgroundTask] = emitted([])
    """Always written, as the origin writes it; the origin fills it from a live worker's
    report, which relaystore never has, so it is empty here."""
    assessment: JSON | None = None
    """The origin's live worker assessment (``mj_core::assessment::Summary``), opaque;
    absent unless set (relaystore has no live worker, so never set here)."""
    subagents: SubagentPolicy = emitted(NativeSubagents())
    """The record's delegation policy, always written (``native`` when it names none)."""
    at: str | None = None
    """The commit the workspace started checked out at, when one was named."""
    branch: str | None = None
    """The branch created at ``at``, or the existing branch checked out without it."""
    base: str | None = None
    """The diff base the session started with: ``at`` unless another was named."""
    background_work: JSON | None = None
    """The origin's observed provider-owned background work (``ApiBackgroundWork``),
    opaque; absent without a live worker snapshot (always, here)."""
    id: str
    workspace_id: str
    title: str
    harness_kind: str
    profile_id: str
    target_id: str
    bundle_id: str
    state: str
    lifecycle: Lifecycle
    chat_phase: ChatPhase
    is_idle: bool
    activity_state: JSON | None = None
    has_error: bool
    error: str | None = None
    storage_problem: str | None = None
    """Why the session's target cannot take writes (its disk is full); absent unless set
    (the origin learns it from a live target, relaystore never does)."""
    created_at: str
    updated_at: str
    last_turn_outcome: MaterializedTurnOutcome | None = None
    last_turn_diagnostic: TurnDiagnostic | None = None
    config_options: list[ConfigOption] = emitted([])
    pending_elicitations: list[ElicitationRequest] = msgspec.field(default_factory=list)
    projection_behind: ProjectionBehind | None = None
    """relaystore's own (detail only, absent unless set): the session's projection waits
    behind its relay log at a line of a kind this build does not know."""


class SessionList(Wire, kw_only=True):
    """``GET /api/v1/sessions``: every live session, ordered by id."""

    sessions: list[ApiSession] = emitted([])


class Workspace(Wire, kw_only=True):
    """A workspace (the origin's ``WorkspaceRecord``).

    relaystore stores no workspace names or openings: ``name`` is the id and
    ``last_opened_at`` the creation time.
    """

    id: str
    name: str
    created_at: str
    last_opened_at: str
    session_count: int


class WorkspaceList(Wire, kw_only=True):
    """``GET /api/v1/workspaces``: most recently opened first."""

    workspaces: list[Workspace] = emitted([])


class TranscriptItemView(Wire, kw_only=True):
    """One item of a transcript page: its seq, role and text beside the stored body."""

    stable_id: str
    position: int
    seq: int
    role: TranscriptRole
    text: str
    created_at_ms: int
    last_changed_at_ms: int
    body: TranscriptBody


class TranscriptPage(Wire, kw_only=True):
    """``GET .../transcript``: items with ``seq > after_seq``, oldest seq first.

    ``latest_seq`` is the highest seq of the whole transcript (every role); resume with
    ``next_after_seq``: the page's last seq while more matching items follow, else
    ``max(latest_seq, after_seq)`` (an empty filtered page fast-forwards).
    """

    next_after_seq: int = emitted(0)
    session_id: str
    latest_seq: int
    execution: MaterializedExecutionState
    items: list[TranscriptItemView] = emitted([])


class RawTranscriptItemView(Wire, kw_only=True):
    """A :class:`TranscriptItemView` whose body is the stored JSON, untouched."""

    stable_id: str
    position: int
    seq: int
    role: TranscriptRole
    text: str
    created_at_ms: int
    last_changed_at_ms: int
    body: msgspec.Raw


class RawTranscriptPage(Wire, kw_only=True):
    """A :class:`TranscriptPage` whose items' bodies are the stored JSON, untouched.

    The same fields in the same order: ``encode`` of it is the bytes ``encode`` of the
    typed page gives (a body the store holds in another form than this build writes,
    one an older build wrote, passes through in that form), without decoding a body
    (see :class:`~relaystore.domain.reads.LoadRawTranscriptPage`).
    """

    next_after_seq: int = emitted(0)
    session_id: str
    latest_seq: int
    execution: MaterializedExecutionState
    items: list[RawTranscriptItemView] = emitted([])


class HistoryItem(Wire, kw_only=True):
    """One item of an "earlier messages" page."""

    stable_id: str
    position: int
    role: TranscriptRole
    text: str


class HistoryCursor(Wire, kw_only=True):
    """Where the preceding history page ends (exclusive)."""

    position: int
    stable_id: str


class TranscriptHistory(Wire, kw_only=True):
    """``GET .../history``: stored items in chronological order.

    ``before`` is the cursor of the preceding page (the oldest item here), or ``None``
    at the beginning of the conversation; ``frontier`` is the projection's last applied
    relay ordinal.
    """

    items: list[HistoryItem] = emitted([])
    before: HistoryCursor | None = emitted(None)
    frontier: int


class TranscriptItems(Wire, kw_only=True):
    """A page of :class:`~relaystore.domain.reads.LoadTranscriptItems`: ``items`` in the
    store's order, ``more`` when items follow the last one, and where the session's chain
    stood when the page was read
    (:attr:`~relaystore.domain.materialized.MaterializedSession.kept_frontier`): pages
    read at one frontier belong to one projection."""

    items: list[TranscriptItem] = emitted([])
    more: bool
    frontier_ordinal: int
    frontier_digest: str


class TurnSummary(Wire, kw_only=True):
    """One turn summed up: its number in the conversation, its span, its answer."""

    turn_number: int
    turn_started_at_ms: int
    last_changed_at_ms: int
    final_message: str | None = emitted(None)


class ProjectionTail(Wire, kw_only=True):
    """A projection carrying only the newest transcript items, and what lies outside.

    ``omitted_items`` counts the older items left out; ``provisional_title`` comes from
    the oldest titled user message; ``latest_turn_start_position`` is where the newest
    turn began (a user message or a harness-started turn marker).
    """

    session: MaterializedSession
    omitted_items: int
    provisional_title: str | None = emitted(None)
    latest_turn_start_position: int | None = emitted(None)


class UsageCounterTotal(Wire, kw_only=True):
    tokens: int
    reported_turns: int


class UsageCoverage(Wire, kw_only=True):
    """How many recorded turns carry which kind of usage report."""

    recorded_turns: int = emitted(0)
    full_turn_reports: int = emitted(0)
    last_request_reports: int = emitted(0)
    unspecified_reports: int = emitted(0)
    missing_reports: int = emitted(0)


class UsagePage(Wire, kw_only=True):
    """``GET .../usage``: recorded turns by completion ordinal, with totals and coverage.

    Only whole-turn reports (scope ``turn``) count towards ``totals``; a counter no such
    report carries is absent. The rows outlive the session (revision 6).
    """

    session_id: str
    next_after_seq: int
    latest_seq: int
    turns: list[MaterializedTurnOutcome] = emitted([])
    totals: dict[str, UsageCounterTotal] = emitted({})
    coverage: UsageCoverage = emitted(UsageCoverage())
    provider_session_cost: ProviderCost | None = None


class ElicitationList(Wire, kw_only=True):
    """``GET .../elicitations``: the session's pending structured questions."""

    elicitations: list[ElicitationRequest] = emitted([])


class ElicitationAnswer(Wire, kw_only=True):
    """One question's recorded answer (relaystore's own, not the origin's): who gave it,
    when, the action and the answer on one line (``answer``,
    :func:`~relaystore.domain.elicitation.answered.answer_text`) and by field
    (``content``); a ``secret`` field's value is the mask, never the answer."""

    elicitation_id: str
    action: str
    answered_by: str
    answered_at_ms: int
    answer: str
    content: dict[str, ElicitationValue] = emitted({})


class ElicitationAnswerList(Wire, kw_only=True):
    """``GET .../answers`` (relaystore's own route): every recorded answer of the
    session, in the order they were recorded."""

    session_id: str
    answers: list[ElicitationAnswer] = emitted([])


class RawUsagePage(Wire, kw_only=True):
    """A :class:`UsagePage` whose turns and provider cost are the stored JSON, untouched.

    The same fields in the same order: ``encode`` of it is the bytes ``encode`` of the
    typed page gives, without decoding a stored turn (see
    :class:`~relaystore.domain.reads.LoadRawUsagePage`).
    """

    session_id: str
    next_after_seq: int
    latest_seq: int
    turns: list[msgspec.Raw] = emitted([])
    totals: dict[str, UsageCounterTotal] = emitted({})
    coverage: UsageCoverage = emitted(UsageCoverage())
    provider_session_cost: msgspec.Raw | None = None


class RawElicitationList(Wire, kw_only=True):
    """An :class:`ElicitationList` whose questions are the stored JSON array, untouched."""

    elicitations: msgspec.Raw


class SessionFacts(msgspec.Struct, kw_only=True):
    """The fields of a stored :class:`~relaystore.domain.sessions.records.SessionRecord` the API shows.

    Decoded straight from the record's JSON, every other field skipped unread: listing a
    thousand sessions must not cost a thousand full record decodes.
    """

    id: str
    title: str
    harness_kind: str
    last_profile: str
    bundle_id: str
    target_template_id: str
    state: SessionState
    created_at: str
    updated_at: str
    last_error: str | None = None
    session_title_override: str | None = None
    launch_base: str | None = None
    launch_branch: str | None = None
    checkout: JSON | None = None
    subagents: SubagentPolicy | bool | None = None
