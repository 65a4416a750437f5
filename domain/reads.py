"""The read side the origin's clients page through: sessions, transcript, history, usage.

Each read is a reader message (``Request[R]``) naming its reply type; the replies have
the origin's JSON shapes (``mj-controller/src/server/api/types.rs``,
``database/materialized.rs``, ``database/usage.rs``), so ``encode(reply)`` is what the
HTTP routes answer. A reply is ``None`` where the origin answers 404: the store has no
such session (or no projection of it).

The rules every surface shares live here, once:

* **seq** (:func:`transcript_seq`): an item's place in the transcript feed is
  ``COALESCE(latest_content_event_ordinal, position)``: a streaming agent message keeps
  its position but takes a new seq each time its content grows, so paging by seq
  returns the grown item again instead of missing it.
* **limits**: :mod:`relaystore.domain.paging` states them for every page.
* **roles** (:data:`ROLE_KINDS`): the stable words ``user``, ``agent``, ``thought``,
  ``tool``, ``terminal``, ``plan``, ``plan_proposal``, ``system``; ``terminal`` is the
  ``terminal_output`` body kind.
* **finished only** (:func:`finished_only_roles`, :func:`finished_page_cursor`): as the
  origin's API reference (63ed4b3) has it, ``finished_only`` pages agent items whose body
  is no longer streaming; it implies ``role=agent``, and its cursor never passes the
  earliest agent item still open.
* **text** (:func:`item_text`): an item flattened to the text a reader wants.
* **lifecycle** and **chat phase** (:func:`lifecycle_of`, :func:`chat_phase_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, get_args

import msgspec

from .api_events import ApiActivityState
from .elicitation import ElicitationRequest
from .errors import InvalidInput
from .materialized import (
    AgentBody,
    ExecutionClosed,
    ExecutionClosing,
    ExecutionRunning,
    MaterializedExecutionState,
    MaterializedSession,
    PlanBody,
    PlanProposalBody,
    ProjectionBehind,
    SystemBody,
    TerminalOutputBody,
    ThoughtBody,
    ToolBody,
    TranscriptBody,
    TranscriptItem,
    UserBody,
)
from .outcomes import MaterializedTurnOutcome, ProviderCost, TurnDiagnostic
from .paging import DEFAULT_HISTORY_LIMIT, DEFAULT_ITEMS_LIMIT, DEFAULT_PAGE_LIMIT
from .projection.goal import GOAL_STATE_KEY
from .projection.text import (
    materialized_chunks_text,
    materialized_content_text,
    normalize_session_title,
    sanitize_terminal_text,
)
from .request import Request
from .roles import TranscriptRole
from .sessions import SessionState
from .wire import JSON, Wire, emitted

__all__ = [
    "PROJECTION_TAIL_ITEMS",
    "ROLE_KINDS",
    "ApiSession",
    "BackgroundTask",
    "ChatPhase",
    "ConfigOption",
    "ElicitationList",
    "HistoryCursor",
    "HistoryItem",
    "Lifecycle",
    "ListSessions",
    "ListWorkspaces",
    "LoadElicitations",
    "LoadProjectionTail",
    "LoadSessionDetail",
    "LoadTranscriptHistory",
    "LoadTranscriptItems",
    "LoadTranscriptPage",
    "LoadTurnSummary",
    "LoadUsagePage",
    "ProjectionTail",
    "RawElicitationList",
    "RawUsagePage",
    "LoadRawElicitations",
    "LoadRawUsagePage",
    "ReadMessage",
    "SessionFacts",
    "SessionList",
    "TranscriptHistory",
    "TranscriptItems",
    "TranscriptItemView",
    "TranscriptPage",
    "TranscriptRole",
    "TurnSummary",
    "UsageCounterTotal",
    "UsageCoverage",
    "UsagePage",
    "Workspace",
    "WorkspaceList",
    "USAGE_COUNTERS",
    "api_session",
    "api_turn_outcome",
    "chat_phase_of",
    "finished_only_roles",
    "finished_page_cursor",
    "is_open_agent_item",
    "item_role",
    "item_text",
    "lifecycle_of",
    "state_label",
    "transcript_seq",
    "unknown_session_text",
]


PROJECTION_TAIL_ITEMS = 1024
"""Transcript items a projection tail carries by default (the origin's window)."""

USAGE_COUNTERS = (
    "total_tokens",
    "input_tokens",
    "output_tokens",
    "thought_tokens",
    "cached_read_tokens",
    "cached_write_tokens",
)
"""The token counters a usage page totals, in the order the origin reports them."""

ROLE_KINDS: Mapping[str, str] = {
    role: ("terminal_output" if role == "terminal" else role) for role in get_args(TranscriptRole)
}
"""The stored body ``kind`` of each role."""
_ROLES = {kind: role for role, kind in ROLE_KINDS.items()}

Lifecycle = Literal["live", "starting", "suspending", "suspended", "failed"]
ChatPhase = Literal["idle", "running", "closing", "closed"]

_LIFECYCLE: Mapping[SessionState, Lifecycle] = {
    SessionState.PROVISIONING: "starting",
    SessionState.RUNNING: "live",
    SessionState.DISCONNECTED: "live",
    SessionState.CHECKPOINTING: "suspending",
    SessionState.CLOSING: "suspending",
    SessionState.DESTROYING: "suspending",
    SessionState.STOPPED: "suspended",
    SessionState.PARKED: "suspended",
    SessionState.LOST: "suspended",
    SessionState.ERROR: "failed",
    SessionState.DESTROYED_WITH_DATA_LOSS: "failed",
}


# -- rules ------------------------------------------------------------------------------


def transcript_seq(position: int, latest_content_event_ordinal: int | None) -> int:
    """An item's seq: its latest content ordinal (agent messages), else its position."""
    return position if latest_content_event_ordinal is None else latest_content_event_ordinal


def item_role(body: TranscriptBody) -> TranscriptRole:
    """The stable role word of a transcript body."""
    return _ROLES[_kind(body)]  # type: ignore[return-value]


def _kind(body: TranscriptBody) -> str:
    return str(type(body).__struct_config__.tag)


def finished_only_roles(roles: tuple[TranscriptRole, ...]) -> tuple[TranscriptRole, ...]:
    """The roles a ``finished_only`` page reads: agent items only.

    Raises :class:`InvalidInput` when ``roles`` names any role but ``agent`` (no role, or
    ``agent`` alone, is accepted): ``finished_only`` implies ``role=agent``.
    """
    others = [role for role in roles if role != "agent"]
    if others:
        raise InvalidInput(
            f"finished_only=true implies role=agent; role {others[0]!r} cannot be combined with it"
        )
    return ("agent",)


def is_open_agent_item(body: TranscriptBody) -> bool:
    """An agent message still streaming: the barrier a ``finished_only`` page stops at."""
    return isinstance(body, AgentBody) and body.streaming


def finished_page_cursor(
    after_seq: int, latest_seq: int, last_seq: int | None, *, full: bool, barrier: int | None
) -> int:
    """The ``next_after_seq`` of a ``finished_only`` page.

    The page returned items up to ``last_seq`` (``None``: none). ``full``: it stopped at
    its limit with more finished items to come; then the cursor is the last returned
    seq. Otherwise, with an open agent item at seq ``barrier``, the cursor moves through
    the filtered rows to just before it; with none open, to ``latest_seq``. It never moves
    back from ``after_seq``.
    """
    if full and last_seq is not None:
        return last_seq
    if barrier is not None:
        return max(after_seq, barrier - 1)
    return max(after_seq, latest_seq)


def item_text(body: TranscriptBody) -> str:
    """The item flattened to text: what ``mj transcript`` and the history reader show.

    Messages and thoughts: their visible text (hidden controller context removed); a
    tool call: its title (else its kind); terminal output: the sanitized output; a plan:
    one ``- entry`` line per entry; a proposal or system line: its text.
    """
    if isinstance(body, UserBody):
        return materialized_content_text(body.content)
    if isinstance(body, AgentBody | ThoughtBody):
        return materialized_chunks_text(body.chunks)
    if isinstance(body, ToolBody):
        call = body.call if isinstance(body.call, dict) else {}
        title = call.get("title") or call.get("kind") or "tool call"
        return sanitize_terminal_text(str(title))
    if isinstance(body, TerminalOutputBody):
        return sanitize_terminal_text(body.record.output)
    if isinstance(body, PlanBody):
        entries = body.plan.get("entries") if isinstance(body.plan, dict) else None
        if not isinstance(entries, list):
            return ""
        return "\n".join(
            f"- {sanitize_terminal_text(str(entry.get('content', '')))}"
            for entry in entries
            if isinstance(entry, dict)
        )
    if isinstance(body, PlanProposalBody):
        return sanitize_terminal_text(body.plan)
    assert isinstance(body, SystemBody)
    return sanitize_terminal_text(body.text)


def lifecycle_of(state: SessionState) -> Lifecycle:
    """The origin's lifecycle category of a session state."""
    return _LIFECYCLE[state]


def chat_phase_of(execution: MaterializedExecutionState | None) -> ChatPhase:
    """The chat phase of a projection's execution state (no projection: idle)."""
    if isinstance(execution, ExecutionRunning):
        return "running"
    if isinstance(execution, ExecutionClosing):
        return "closing"
    if isinstance(execution, ExecutionClosed):
        return "closed"
    return "idle"


def state_label(state: SessionState) -> str:
    """The state as the origin's session list spells it (``Running``, ``DestroyedWithDataLoss``)."""
    return "".join(part.capitalize() for part in state.value.split("-"))


def api_turn_outcome(turn: MaterializedTurnOutcome) -> MaterializedTurnOutcome:
    """The last outcome as the session detail shows it: usage and diagnostic left out
    (usage has its own page; the diagnostic travels as ``last_turn_diagnostic``)."""
    return msgspec.structs.replace(turn, usage=None, diagnostic=None)


# -- replies ----------------------------------------------------------------------------


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
    """One session as the origin's API presents it (``ApiSession``).

    The list leaves ``last_turn_outcome`` and ``last_turn_diagnostic`` out; the detail
    (:class:`LoadSessionDetail`) fills them.
    """

    checkout: JSON | None = None
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
    created_at: str
    updated_at: str
    last_turn_outcome: MaterializedTurnOutcome | None = None
    last_turn_diagnostic: TurnDiagnostic | None = None
    config_options: list[ConfigOption] = emitted([])
    pending_elicitations: list[ElicitationRequest] = msgspec.field(default_factory=list)
    background_tasks: list[BackgroundTask] = emitted([])
    """Always written, as the origin writes it; the origin fills it from a live worker's
    report, which relaystore never has, so it is empty here."""
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
    """A page of :class:`LoadTranscriptItems`: ``items`` in the store's order, ``more``
    when items follow the last one, and where the session's chain stood when the page
    was read (:attr:`~relaystore.domain.materialized.MaterializedSession.kept_frontier`):
    pages read at one frontier belong to one projection."""

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


class RawUsagePage(Wire, kw_only=True):
    """A :class:`UsagePage` whose turns and provider cost are the stored JSON, untouched.

    The same fields in the same order: ``encode`` of it is the bytes ``encode`` of the
    typed page gives, without decoding a stored turn (see :class:`LoadRawUsagePage`).
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
    """The fields of a stored :class:`SessionRecord` the API shows.

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
    checkout: JSON | None = None


def api_session(
    record: SessionFacts,
    *,
    workspace_id: str,
    execution: MaterializedExecutionState | None,
    session_title: str | None,
    configuration: Mapping[str, JSON],
    pending_elicitations: list[ElicitationRequest],
    queued_prompts: int,
    activity: ApiActivityState | None,
    last_turn_outcome: MaterializedTurnOutcome | None = None,
) -> ApiSession:
    """The API's view of one stored session and its projection.

    ``execution`` is ``None`` for a session never projected (idle). The title is the
    override, else the projection's title, else the record's. ``is_idle``: the chat is
    idle with nothing queued. ``has_error``: the record holds an error or the state is
    ``error``; ``error`` is published only for a session in the error state (raw error
    text of a running session stays private, as the origin keeps it).
    ``config_options`` lists the configuration's settings other than relaystore's own
    ``mj_*`` keys, their stored values as ``current`` (the store keeps no choices).
    ``last_turn_outcome`` (detail only) is shown without usage and diagnostic; the
    diagnostic becomes ``last_turn_diagnostic``.
    """
    title = (
        (record.session_title_override and normalize_session_title(record.session_title_override))
        or (session_title and normalize_session_title(session_title))
        or record.title
    )
    phase = chat_phase_of(execution)
    failed = record.state is SessionState.ERROR
    return ApiSession(
        checkout=record.checkout,
        id=record.id,
        workspace_id=workspace_id,
        title=title,
        harness_kind=record.harness_kind,
        profile_id=record.last_profile,
        target_id=record.target_template_id,
        bundle_id=record.bundle_id,
        state=state_label(record.state),
        lifecycle=lifecycle_of(record.state),
        chat_phase=phase,
        is_idle=phase == "idle" and queued_prompts == 0,
        activity_state=None if activity is None else msgspec.to_builtins(activity),
        has_error=failed or record.last_error is not None,
        error=record.last_error if failed else None,
        created_at=record.created_at,
        updated_at=record.updated_at,
        last_turn_outcome=None
        if last_turn_outcome is None
        else api_turn_outcome(last_turn_outcome),
        last_turn_diagnostic=None if last_turn_outcome is None else last_turn_outcome.diagnostic,
        config_options=[
            ConfigOption(key=key, label=key, current=value)
            for key, value in configuration.items()
            if key != GOAL_STATE_KEY and not key.startswith("mj_")
        ],
        pending_elicitations=list(pending_elicitations),
    )


# -- messages ---------------------------------------------------------------------------


def _at_least(message: object, field: str, low: int) -> None:
    value = getattr(message, field)
    if value is not None and value < low:
        raise InvalidInput(f"{type(message).__name__}.{field}: {value} is below {low}")


class ListSessions(Request[SessionList], frozen=True, kw_only=True):
    """Every live session (optionally of one workspace), ordered by id.

    ``all`` (the origin's ``?all=``, default true): false lists top-level sessions only,
    leaving out sub-agent sessions. relaystore records no sub-agent relation (the
    origin's ``subagent_sessions`` table is the controller's), so every session it holds
    is top-level and both answers are the same.
    """

    workspace_id: str | None = None
    all: bool = True


class LoadSessionDetail(Request[ApiSession | None], frozen=True, kw_only=True):
    """One session with its last turn outcome and diagnostic; ``None``: no such session."""

    session_id: str


class LoadTranscriptPage(Request[TranscriptPage | None], frozen=True, kw_only=True):
    """A page of the transcript after ``after_seq`` (see :class:`TranscriptPage`).

    ``roles`` (empty: every role) and ``finished_only`` filter before the limit
    applies. Items sharing the page's last seq all travel together, so the limit is
    soft; paging never skips one. ``None``: no projection of that session.
    """

    session_id: str
    after_seq: int = 0
    limit: int = DEFAULT_PAGE_LIMIT
    roles: tuple[TranscriptRole, ...] = ()
    finished_only: bool = False

    def check(self) -> None:
        _at_least(self, "after_seq", 0)
        if self.finished_only:
            finished_only_roles(self.roles)


class LoadTranscriptHistory(Request[TranscriptHistory | None], frozen=True, kw_only=True):
    """Up to ``limit`` stored items before a cursor, in chronological order.

    No cursor: the newest page. ``before_position`` alone: items at a lower position;
    ``before_id`` alone: items before that item; both: items before ``(position,
    stable_id)``. The cursor uses the item's original position, so streaming revisions
    and new messages do not shift pages. ``None``: no projection of that session.
    """

    session_id: str
    before_position: int | None = None
    before_id: str | None = None
    limit: int = DEFAULT_HISTORY_LIMIT

    def check(self) -> None:
        _at_least(self, "before_position", 1)
        if self.before_id is not None and not self.before_id.strip():
            raise InvalidInput("LoadTranscriptHistory.before_id: must not be blank")


class LoadTranscriptItems(Request[TranscriptItems | None], frozen=True, kw_only=True):
    """Up to ``limit`` stored transcript items after the cursor ``(after_position,
    after_id)`` (both, or neither: from the start), whole and in the store's order
    (position, then stable id), as :class:`~relaystore.domain.messages.LoadMaterializedSession`
    holds them: for reading a long session piece by piece (``relaystore show`` does).
    ``None``: no projection of that session.
    """

    session_id: str
    after_position: int | None = None
    after_id: str | None = None
    limit: int = DEFAULT_ITEMS_LIMIT

    def check(self) -> None:
        _at_least(self, "after_position", 0)
        _at_least(self, "limit", 1)
        if (self.after_position is None) != (self.after_id is None):
            raise InvalidInput(
                "LoadTranscriptItems.after_position and .after_id: give both (the last "
                "item read) or neither"
            )


class LoadTurnSummary(Request[TurnSummary | None], frozen=True, kw_only=True):
    """The summary of the turn that ran from ``turn_start_position`` through
    ``completed_ordinal``; both omitted: the session's last finished turn.

    ``None``: no projection of that session, or no finished turn with a recorded span.
    """

    session_id: str
    turn_start_position: int | None = None
    completed_ordinal: int | None = None

    def check(self) -> None:
        if (self.turn_start_position is None) != (self.completed_ordinal is None):
            raise InvalidInput(
                "LoadTurnSummary: give both turn_start_position and completed_ordinal, or neither"
            )
        _at_least(self, "turn_start_position", 1)
        _at_least(self, "completed_ordinal", 1)


class LoadProjectionTail(Request[ProjectionTail | None], frozen=True, kw_only=True):
    """The session's projection with only its newest ``limit`` transcript items."""

    session_id: str
    limit: int = PROJECTION_TAIL_ITEMS

    def check(self) -> None:
        _at_least(self, "limit", 0)


class LoadUsagePage(Request[UsagePage | None], frozen=True, kw_only=True):
    """Recorded turn usage after completion ordinal ``after_seq`` (see :class:`UsagePage`).

    Answers for a deleted session too, as long as its usage rows remain; ``None``: the
    store never recorded the session.
    """

    session_id: str
    after_seq: int = 0
    limit: int = DEFAULT_PAGE_LIMIT

    def check(self) -> None:
        _at_least(self, "after_seq", 0)


class LoadRawUsagePage(Request[RawUsagePage | None], frozen=True, kw_only=True):
    """The page :class:`LoadUsagePage` would give, with each stored turn (and the
    provider cost) passed through as its stored JSON: what ``GET .../usage`` answers.

    Same fields, validation, cursors and snapshot; a stored value that is not JSON is
    refused as the typed read refuses a value that does not decode.
    """

    session_id: str
    after_seq: int = 0
    limit: int = DEFAULT_PAGE_LIMIT

    def check(self) -> None:
        _at_least(self, "after_seq", 0)


class ListWorkspaces(Request[WorkspaceList], frozen=True, kw_only=True):
    """Every workspace, most recently opened first."""


class LoadElicitations(Request[ElicitationList | None], frozen=True, kw_only=True):
    """The session's pending structured questions; ``None``: no projection of it."""

    session_id: str


class LoadRawElicitations(Request[RawElicitationList | None], frozen=True, kw_only=True):
    """The reply :class:`LoadElicitations` would give, the stored questions passed
    through as their stored JSON: what ``GET .../elicitations`` answers."""

    session_id: str


ReadMessage = (
    ListSessions
    | LoadSessionDetail
    | LoadTranscriptPage
    | LoadTranscriptHistory
    | LoadTranscriptItems
    | LoadTurnSummary
    | LoadProjectionTail
    | LoadUsagePage
    | ListWorkspaces
    | LoadElicitations
    | LoadRawUsagePage
    | LoadRawElicitations
)
"""The reads of this module (all reader messages)."""


def unknown_session_text(session_id: str) -> str:
    """The one wording of a session the store lacks: every command and every route says
    it (over HTTP a 404 with ``code`` ``not_found``)."""
    return f"no session {session_id} in this store"
