"""The read side's messages: what a client of the reader may ask about sessions,
transcripts, history, usage and pending questions.

Each read is a reader message (``Request[R]``) naming its reply type, checked where it
enters (``check``); a reply is ``None`` where the origin answers 404: the store has no
such session (or no projection of it). The reader actor (:mod:`relaystore.actors.reader`)
answers each with one storage function.

This module owns the messages, :data:`ReadMessage` (their union) and the one wording of
an unknown session. It holds no rules and no reply shapes; those live by topic:

* the replies: :mod:`relaystore.domain.read_replies`;
* seq, roles, text, turns, titles: :mod:`relaystore.domain.transcript_views`;
* lifecycle, chat phase and the session view: :mod:`relaystore.domain.sessions.views`;
* usage coverage and totals: :mod:`relaystore.domain.usage`;
* limits and cursors: :mod:`relaystore.domain.paging`;
* searching transcript text (its message too): :mod:`relaystore.domain.search`.
"""

from __future__ import annotations

from .errors import InvalidInput
from .paging import DEFAULT_HISTORY_LIMIT, DEFAULT_ITEMS_LIMIT, DEFAULT_PAGE_LIMIT
from .read_replies import (
    ApiSession,
    ElicitationAnswerList,
    ElicitationList,
    ProjectionTail,
    RawElicitationList,
    RawTranscriptPage,
    RawUsagePage,
    SessionList,
    TranscriptHistory,
    TranscriptItems,
    TranscriptPage,
    TurnSummary,
    UsagePage,
    WorkspaceList,
)
from .request import Request
from .roles import TranscriptRole
from .search import SearchTranscripts
from .subagents import SubagentList
from .transcript_views import (
    finished_only_roles,
)

__all__ = [
    "PROJECTION_TAIL_ITEMS",
    "ListSessions",
    "ListSubagents",
    "ListWorkspaces",
    "LoadElicitationAnswers",
    "LoadElicitations",
    "LoadProjectionTail",
    "LoadRawElicitations",
    "LoadRawTranscriptPage",
    "LoadRawUsagePage",
    "LoadSessionDetail",
    "LoadTranscriptHistory",
    "LoadTranscriptItems",
    "LoadTranscriptPage",
    "LoadTurnSummary",
    "LoadUsagePage",
    "ReadMessage",
    "unknown_session_text",
]


PROJECTION_TAIL_ITEMS = 1024
"""Transcript items a projection tail carries by default (the origin's window)."""


def _at_least(message: object, field: str, low: int) -> None:
    value = getattr(message, field)
    if value is not None and value < low:
        raise InvalidInput(f"{type(message).__name__}.{field}: {value} is below {low}")


class ListSessions(Request[SessionList], frozen=True, kw_only=True):
    """Every live session (optionally of one workspace), ordered by id.

    ``all`` (the origin's ``?all=``, default true): false lists top-level sessions only,
    leaving out every session recorded as a sub-agent (:class:`SaveSubagent
    <relaystore.domain.messages.SaveSubagent>`), as the origin's ``list_sessions`` does.
    """

    workspace_id: str | None = None
    all: bool = True


class ListSubagents(Request[SubagentList | None], frozen=True, kw_only=True):
    """The sub-agents of ``parent_session_id``, each with its session, ordered by child
    id; ``None``: no such parent (the origin's ``GET .../subagents`` answers 404)."""

    parent_session_id: str


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
        _check_transcript_page(self)


class LoadRawTranscriptPage(Request[RawTranscriptPage | None], frozen=True, kw_only=True):
    """The page :class:`LoadTranscriptPage` would give, with each item's body passed
    through as its stored JSON: what ``GET .../transcript`` answers.

    Same fields, validation, cursors and snapshot; a stored body that is not a JSON
    object is refused as the typed read refuses one that does not decode. With
    ``finished_only`` the bodies are read (whether an agent item is still open is in
    its body) and written out again.
    """

    session_id: str
    after_seq: int = 0
    limit: int = DEFAULT_PAGE_LIMIT
    roles: tuple[TranscriptRole, ...] = ()
    finished_only: bool = False

    def check(self) -> None:
        _check_transcript_page(self)


def _check_transcript_page(message: LoadTranscriptPage | LoadRawTranscriptPage) -> None:
    """The one check of a transcript page's query, typed or raw."""
    _at_least(message, "after_seq", 0)
    if message.finished_only:
        finished_only_roles(message.roles)


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


class LoadElicitationAnswers(Request[ElicitationAnswerList | None], frozen=True, kw_only=True):
    """Every answer recorded for the session's questions
    (:class:`~relaystore.domain.messages.RecordElicitationAnswer`), in the order they were
    recorded, with who answered and when; a ``secret`` field's value is masked. What
    ``GET .../answers`` (relaystore's own route) answers. ``None``: no such session."""

    session_id: str


ReadMessage = (
    ListSessions
    | ListSubagents
    | LoadSessionDetail
    | LoadTranscriptPage
    | LoadRawTranscriptPage
    | LoadTranscriptHistory
    | LoadTranscriptItems
    | LoadTurnSummary
    | LoadProjectionTail
    | LoadUsagePage
    | ListWorkspaces
    | LoadElicitations
    | LoadRawUsagePage
    | LoadRawElicitations
    | LoadElicitationAnswers
    | SearchTranscripts
)
"""The reads of this module and :class:`~relaystore.domain.search.SearchTranscripts`
(all reader messages)."""


def unknown_session_text(session_id: str) -> str:
    """The one wording of a session the store lacks: every command and every route says
    it (over HTTP a 404 with ``code`` ``not_found``)."""
    return f"no session {session_id} in this store"
