"""The read side's statements: session lists, transcript pages, history, usage.

Each function reads in one transaction (one snapshot: a page and its cursors agree)
and returns the reply type of its message in :mod:`relaystore.domain.reads`, whose rules (seq,
limits, roles, finished, text, lifecycle) it applies; it decides nothing itself.

Guarantees:

* A transcript page walks ``materialized_transcript_seq`` (session, seq, stable id)
  from the cursor and stops after the limit and the items tied with the last one, so
  a page costs its own rows, not the session's (schema revision 6 adds the index).
* A reply is ``None`` where the store has no such session (or no projection of it);
  a stored row that does not decode raises :class:`ProjectionError` naming the session.
* Usage rows outlive their session (revision 6): a usage page answers for a deleted
  session whose context remains.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, get_args

import apsw
import msgspec

from ..domain.api_events import ApiActivityState
from ..domain.elicitation import ElicitationRequest, shown
from ..domain.errors import InvalidInput, ProjectionError
from ..domain.materialized import MaterializedExecutionState, TranscriptBody
from ..domain.outcomes import MaterializedTurnOutcome, ProviderCost
from ..domain.paging import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_PAGE_LIMIT,
    clamp_page_limit,
    next_page_cursor,
)
from ..domain.paging import transcript_page_cursor as finished_page_cursor
from ..domain.projection.markers import HARNESS_TURN_ITEM_PREFIX
from ..domain.projection.text import provisional_session_title
from ..domain.reads import (
    ROLE_KINDS,
    USAGE_COUNTERS,
    ApiSession,
    ElicitationList,
    HistoryCursor,
    HistoryItem,
    ListSessions,
    ListWorkspaces,
    LoadElicitations,
    LoadProjectionTail,
    LoadRawElicitations,
    LoadRawUsagePage,
    LoadSessionDetail,
    LoadTranscriptHistory,
    LoadTranscriptItems,
    LoadTranscriptPage,
    LoadTurnSummary,
    LoadUsagePage,
    ProjectionTail,
    RawElicitationList,
    RawUsagePage,
    ReadMessage,
    SessionFacts,
    SessionList,
    TranscriptHistory,
    TranscriptItems,
    TranscriptItemView,
    TranscriptPage,
    TranscriptRole,
    TurnSummary,
    UsageCounterTotal,
    UsageCoverage,
    UsagePage,
    Workspace,
    WorkspaceList,
    api_session,
    finished_only_roles,
    is_open_agent_item,
    item_role,
    item_text,
    transcript_seq,
)
from ..domain.wire import JSON
from .materialized import (
    decode_stored,
    load_materialized_session,
    load_projection_behind,
    load_transcript_items,
    parse_execution,
)
from .transaction import transaction

__all__ = [
    "READ_TYPES",
    "answer_read",
    "decode_transcript_bodies",
    "list_sessions",
    "list_workspaces",
    "load_elicitations",
    "load_projection_tail",
    "load_raw_elicitations",
    "load_raw_usage_page",
    "load_session_detail",
    "load_transcript_history",
    "load_transcript_page",
    "load_turn_summary",
    "load_usage_page",
]

_SEQ = "COALESCE(latest_content_event_ordinal, position)"
"""The seq expression; it must read exactly as the index ``materialized_transcript_seq``."""

_SESSION_COLUMNS = """
SELECT s.session_id, s.record_json, c.workspace_id, m.execution_state,
       m.running_started_at_ms, m.session_title, m.configuration_json,
       m.pending_elicitations_json, a.body,
       (SELECT count(*) FROM materialized_queued_prompts q WHERE q.session_id = s.session_id),
       m.last_turn_outcome_json
FROM sessions s
JOIN session_contexts c ON c.session_id = s.session_id
LEFT JOIN materialized_sessions m ON m.session_id = s.session_id
LEFT JOIN api_session_activity a ON a.session_id = s.session_id
"""
_PAGE_HEAD = f"""
SELECT execution_state, running_started_at_ms,
       (SELECT COALESCE(MAX({_SEQ}), 0) FROM materialized_transcript_items i
        WHERE i.session_id = m.session_id)
FROM materialized_sessions m WHERE session_id = ?
"""
"""A transcript page's execution state and ``latest_seq`` (every role), in one step."""
_ITEM_COLUMNS = (
    "stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,"
    " body_json"
)
_TURN_START = (
    "(stable_id GLOB ?2 OR ((stable_id GLOB 'user:*' OR stable_id GLOB 'user-*')"
    " AND json_extract(body_json, '$.kind') = 'user'))"
)
"""A turn starts at a user message or at a harness-started turn marker (``?2``)."""

_BODY: msgspec.json.Decoder[Any] = msgspec.json.Decoder(TranscriptBody)
_BODY_LIST: msgspec.json.Decoder[Any] = msgspec.json.Decoder(list[TranscriptBody])
_CONFIGURATION = msgspec.json.Decoder(dict[str, JSON])
_FACTS = msgspec.json.Decoder(SessionFacts)
_ELICITATIONS = msgspec.json.Decoder(list[ElicitationRequest])
_ACTIVITY = msgspec.json.Decoder(ApiActivityState)
_OUTCOME = msgspec.json.Decoder(MaterializedTurnOutcome)
_PROVIDER_COST = msgspec.json.Decoder(ProviderCost)
_RAW = msgspec.json.Decoder(msgspec.Raw)


def _execution(session_id: str, state: Any, started: Any) -> MaterializedExecutionState | None:
    if state is None:
        return None
    return parse_execution(str(state), started, session_id=session_id)


# -- sessions and workspaces ------------------------------------------------------------


def list_sessions(connection: apsw.Connection, workspace_id: str | None = None) -> SessionList:
    """Every stored session (of ``workspace_id``, when given), ordered by id."""
    query = _SESSION_COLUMNS
    bindings: tuple[str, ...] = ()
    if workspace_id is not None:
        query += " WHERE c.workspace_id = ?"
        bindings = (workspace_id,)
    with transaction(connection, "list sessions"):
        rows = connection.execute(query + " ORDER BY s.session_id", bindings).fetchall()
    return SessionList(sessions=[_api_session(row, detail=False) for row in rows])


def load_session_detail(connection: apsw.Connection, session_id: str) -> ApiSession | None:
    """One session with its last turn outcome and diagnostic, or ``None``."""
    with transaction(connection, f"load session {session_id}"):
        row = connection.execute(
            _SESSION_COLUMNS + " WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        behind = load_projection_behind(connection, session_id).get(session_id)
    if row is None:
        return None
    detail = _api_session(row, detail=True)
    if behind is not None:
        detail = msgspec.structs.replace(detail, projection_behind=behind)
    return detail


def _api_session(row: apsw.SQLiteValues, *, detail: bool) -> ApiSession:
    (
        session_id,
        record_json,
        workspace_id,
        state,
        started,
        title,
        configuration_json,
        elicitations_json,
        activity_json,
        queued,
        outcome_json,
    ) = row
    sid = str(session_id)
    try:
        record = _FACTS.decode(str(record_json))
    except msgspec.DecodeError as exc:
        raise InvalidInput(
            f"stored session record does not decode: {exc}; the store may have been written "
            "by another tool",
            session_id=sid,
        ) from exc
    outcome = (
        decode_stored(_OUTCOME, str(outcome_json), "last turn outcome", sid)
        if detail and outcome_json is not None
        else None
    )
    return api_session(
        record,
        workspace_id=str(workspace_id),
        execution=_execution(sid, state, started),
        session_title=None if title is None else str(title),
        configuration=(
            {}
            if configuration_json is None
            else decode_stored(_CONFIGURATION, str(configuration_json), "configuration", sid)
        ),
        pending_elicitations=(
            []
            if elicitations_json is None
            else decode_stored(_ELICITATIONS, str(elicitations_json), "pending elicitations", sid)
        ),
        queued_prompts=int(queued),  # type: ignore[arg-type]
        activity=(
            None
            if activity_json is None
            else decode_stored(_ACTIVITY, str(activity_json), "activity", sid)
        ),
        last_turn_outcome=outcome,
    )


def list_workspaces(connection: apsw.Connection) -> WorkspaceList:
    """Every workspace with its number of live sessions, newest first."""
    with transaction(connection, "list workspaces"):
        rows = connection.execute(
            "SELECT w.workspace_id, w.created_at, count(s.session_id) FROM workspaces w"
            " LEFT JOIN session_contexts c ON c.workspace_id = w.workspace_id"
            " LEFT JOIN sessions s ON s.session_id = c.session_id"
            " GROUP BY w.workspace_id ORDER BY w.created_at DESC, w.workspace_id"
        ).fetchall()
    return WorkspaceList(
        workspaces=[
            Workspace(
                id=str(workspace_id),
                name=str(workspace_id),
                created_at=str(created_at),
                last_opened_at=str(created_at),
                session_count=int(count),  # type: ignore[arg-type]
            )
            for workspace_id, created_at, count in rows
        ]
    )


def _stored_elicitations(connection: apsw.Connection, session_id: str) -> str | None:
    with transaction(connection, f"load the elicitations of session {session_id}"):
        value = connection.execute(
            "SELECT pending_elicitations_json FROM materialized_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    return None if value is None else str(value[0])


def load_elicitations(connection: apsw.Connection, session_id: str) -> ElicitationList | None:
    """The session's pending structured questions, or ``None`` without a projection."""
    stored = _stored_elicitations(connection, session_id)
    if stored is None:
        return None
    return ElicitationList(
        elicitations=decode_stored(_ELICITATIONS, stored, "pending elicitations", session_id)
    )


def load_raw_elicitations(
    connection: apsw.Connection, session_id: str
) -> RawElicitationList | None:
    """:func:`load_elicitations` with the stored array passed through untouched."""
    stored = _stored_elicitations(connection, session_id)
    if stored is None:
        return None
    return RawElicitationList(
        elicitations=_raw(stored, "pending elicitations", session_id, array=True)
    )


def _raw(text: str, what: str, session_id: str, *, array: bool = False) -> msgspec.Raw:
    """A stored JSON column passed through as it is, once its syntax is checked (an
    object, or an array when ``array``): the typed read's refusal, without building the
    values."""
    raw: msgspec.Raw = decode_stored(_RAW, text, what, session_id)
    if not bytes(raw).startswith(b"[" if array else b"{"):
        raise ProjectionError(
            f"stored {what} is not a JSON {'array' if array else 'object'}",
            session_id=session_id,
        )
    return raw


# -- transcript -------------------------------------------------------------------------


def decode_transcript_bodies(rows: list[tuple[Any, ...]], session_id: str) -> list[TranscriptBody]:
    """The decoded bodies of transcript ``rows`` (body JSON in column 5).

    One decoder call for the whole page; a page holding a bad body is decoded row by row
    to name the item.
    """
    try:
        bodies: list[TranscriptBody] = _BODY_LIST.decode("[" + ",".join(r[5] for r in rows) + "]")
        if len(bodies) == len(rows):
            return bodies
    except msgspec.DecodeError:
        pass
    return [
        decode_stored(_BODY, str(r[5]), f"body of transcript item {r[0]!r}", session_id)
        for r in rows
    ]


def _views(rows: list[tuple[Any, ...]], session_id: str) -> list[TranscriptItemView]:
    """The views of transcript ``rows`` (the ``_ITEM_COLUMNS``, then anything)."""
    view = TranscriptItemView
    return [
        view(
            stable_id=row[0],
            position=row[1],
            seq=transcript_seq(row[1], row[2]),
            role=item_role(body),
            text=item_text(body),
            created_at_ms=row[3],
            last_changed_at_ms=row[4],
            body=body,
        )
        for row, body in zip(rows, decode_transcript_bodies(rows, session_id), strict=True)
    ]


def _each_view(rows: Iterable[apsw.SQLiteValues], session_id: str) -> Iterator[TranscriptItemView]:
    """The views of ``rows``, decoded one at a time (for a caller that stops early)."""
    for row in rows:
        yield _views([row], session_id)[0]


def _role_filter(roles: tuple[TranscriptRole, ...]) -> tuple[str, list[str]]:
    kinds = sorted({ROLE_KINDS[role] for role in roles})
    if not kinds:
        return "", []
    marks = ", ".join("?" for _ in kinds)
    return f" AND json_extract(body_json, '$.kind') IN ({marks})", kinds


def load_transcript_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
    roles: tuple[TranscriptRole, ...] = (),
    finished_only: bool = False,
) -> TranscriptPage | None:
    """The items with seq above ``after_seq`` (see :class:`~relaystore.domain.reads.TranscriptPage`).

    ``roles`` and ``finished_only`` filter before the limit. Items tied with the last
    item's seq all come along. With ``finished_only`` the page holds finished agent items
    only and ends before the first agent item still open, whose seq bounds the cursor
    (:func:`~relaystore.domain.reads.finished_page_cursor`), so that item is delivered once
    it finishes. ``None``: no projection of the session.
    """
    if after_seq < 0:
        raise InvalidInput(f"after_seq must be 0 or more, not {after_seq}")
    wanted = clamp_page_limit(limit)
    if finished_only:
        roles = finished_only_roles(roles)
    role_sql, kinds = _role_filter(roles)
    with transaction(connection, f"load a transcript page of session {session_id}"):
        row = connection.execute(_PAGE_HEAD, (session_id,)).fetchone()
        if row is None:
            return None
        execution = parse_execution(str(row[0]), row[1], session_id=session_id)
        latest_seq = int(row[2])
        cursor = connection.execute(
            f"SELECT {_ITEM_COLUMNS}, {_SEQ} FROM materialized_transcript_items"
            f" WHERE session_id = ? AND {_SEQ} > ?{role_sql} ORDER BY {_SEQ}, stable_id",
            (session_id, after_seq, *kinds),
        )
        if finished_only:
            items, full, barrier = _finished_prefix(cursor, wanted, session_id)
            next_after_seq = finished_page_cursor(
                after_seq,
                latest_seq,
                items[-1].seq if items else None,
                full=full,
                barrier=barrier,
            )
        else:
            rows = list(islice(cursor, wanted))
            more = False
            if rows:
                last = rows[-1][6]
                for row in cursor:  # the items tied with the last travel with it
                    if row[6] != last:
                        more = True
                        break
                    rows.append(row)
            items = _views(rows, session_id)
            if more:
                next_after_seq = items[-1].seq if items else after_seq
            else:
                next_after_seq = max(latest_seq, after_seq)
    return TranscriptPage(
        next_after_seq=next_after_seq,
        session_id=session_id,
        latest_seq=latest_seq,
        execution=execution,
        items=items,
    )


def _finished_prefix(
    cursor: Iterable[apsw.SQLiteValues], wanted: int, session_id: str
) -> tuple[list[TranscriptItemView], bool, int | None]:
    """The finished agent items before the first open one: the items, whether the page
    stopped at its limit with more to come, and the open item's seq (``None``: none).
    A finished item tied with the open one's seq waits with it."""
    items: list[TranscriptItemView] = []
    for row in cursor:
        view = _views([row], session_id)[0]
        if is_open_agent_item(view.body):
            while items and items[-1].seq >= view.seq:
                items.pop()
            return items, False, view.seq
        if items and len(items) >= wanted and view.seq != items[-1].seq:
            return items, True, None
        items.append(view)
    return items, False, None


def load_transcript_history(
    connection: apsw.Connection,
    session_id: str,
    before_position: int | None = None,
    before_id: str | None = None,
    limit: int = DEFAULT_HISTORY_LIMIT,
) -> TranscriptHistory | None:
    """Up to ``limit`` items before the cursor, oldest first (see the message).

    Raises :class:`InvalidInput` when ``before_id`` names no item of the session.
    """
    wanted = clamp_page_limit(limit)
    with transaction(connection, f"load transcript history of session {session_id}"):
        frontier = connection.execute(
            "SELECT applied_event_ordinal FROM materialized_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if frontier is None:
            return None
        if before_id is not None and before_position is None:
            found = connection.execute(
                "SELECT position FROM materialized_transcript_items"
                " WHERE session_id = ? AND stable_id = ?",
                (session_id, before_id),
            ).fetchone()
            if found is None:
                raise InvalidInput(
                    f"before_id {shown(before_id)} names no transcript item of this session",
                    session_id=session_id,
                )
            before_position = int(found[0])
        query = f"SELECT {_ITEM_COLUMNS} FROM materialized_transcript_items WHERE session_id = ?"
        bindings: list[object] = [session_id]
        if before_position is not None and before_id is not None:
            query += " AND (position < ? OR (position = ? AND stable_id < ?))"
            bindings += [before_position, before_position, before_id]
        elif before_position is not None:
            query += " AND position < ?"
            bindings.append(before_position)
        query += " ORDER BY position DESC, stable_id DESC LIMIT ?"
        bindings.append(wanted + 1)
        rows = connection.execute(query, bindings).fetchall()
    older = len(rows) > wanted
    views = _views(rows[:wanted][::-1], session_id)
    return TranscriptHistory(
        items=[
            HistoryItem(stable_id=v.stable_id, position=v.position, role=v.role, text=v.text)
            for v in views
        ],
        before=(
            HistoryCursor(position=views[0].position, stable_id=views[0].stable_id)
            if older and views
            else None
        ),
        frontier=int(frontier[0]),
    )


def load_turn_summary(
    connection: apsw.Connection,
    session_id: str,
    turn_start_position: int | None = None,
    completed_ordinal: int | None = None,
) -> TurnSummary | None:
    """The turn from ``turn_start_position`` through ``completed_ordinal`` summed up;
    both ``None``: the last finished turn. ``None`` without a projection or a span."""
    marker = f"{HARNESS_TURN_ITEM_PREFIX}*"
    with transaction(connection, f"load a turn summary of session {session_id}"):
        row = connection.execute(
            "SELECT last_turn_outcome_json FROM materialized_sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        if turn_start_position is None or completed_ordinal is None:
            if row[0] is None:
                return None
            outcome = decode_stored(_OUTCOME, str(row[0]), "last turn outcome", session_id)
            if outcome.turn_start_position is None:
                return None
            turn_start_position, completed_ordinal = (
                outcome.turn_start_position,
                outcome.completed_ordinal,
            )
        number = connection.execute(
            "SELECT count(*) FROM materialized_transcript_items"
            f" WHERE session_id = ?1 AND position <= ?3 AND {_TURN_START}",
            (session_id, marker, turn_start_position),
        ).get
        started, changed = connection.execute(
            "SELECT COALESCE(min(created_at_ms), 0), COALESCE(max(last_changed_at_ms), 0)"
            " FROM materialized_transcript_items"
            " WHERE session_id = ? AND position >= ? AND position <= ?",
            (session_id, turn_start_position, completed_ordinal),
        ).fetchone()  # type: ignore[misc]
        agents = connection.execute(
            f"SELECT {_ITEM_COLUMNS} FROM materialized_transcript_items"
            " WHERE session_id = ? AND position > ? AND position <= ?"
            " AND latest_content_event_ordinal IS NOT NULL"
            " ORDER BY position DESC, stable_id DESC",
            (session_id, turn_start_position, completed_ordinal),
        )
        final = next((v.text for v in _each_view(agents, session_id) if v.text.strip()), None)
    return TurnSummary(
        turn_number=int(number),
        turn_started_at_ms=int(started),
        last_changed_at_ms=int(changed),
        final_message=final,
    )


def load_projection_tail(
    connection: apsw.Connection, session_id: str, limit: int = 1024
) -> ProjectionTail | None:
    """The projection with only its newest ``limit`` transcript items, and the window."""
    marker = f"{HARNESS_TURN_ITEM_PREFIX}*"
    with transaction(connection, f"load the projection tail of session {session_id}"):
        session = load_materialized_session(connection, session_id, transcript_limit=limit)
        if session is None:
            return None
        total = connection.execute(
            "SELECT count(*) FROM materialized_transcript_items WHERE session_id = ?",
            (session_id,),
        ).get
        users = connection.execute(
            f"SELECT {_ITEM_COLUMNS} FROM materialized_transcript_items"
            " WHERE session_id = ? AND (stable_id GLOB 'user:*' OR stable_id GLOB 'user-*')"
            " AND json_extract(body_json, '$.kind') = 'user' ORDER BY position, stable_id",
            (session_id,),
        )
        title = next(
            (
                t
                for t in (provisional_session_title(v.text) for v in _each_view(users, session_id))
                if t
            ),
            None,
        )
        start = connection.execute(
            "SELECT position FROM materialized_transcript_items"
            f" WHERE session_id = ?1 AND {_TURN_START}"
            " ORDER BY position DESC, stable_id DESC LIMIT 1",
            (session_id, marker),
        ).get
    return ProjectionTail(
        session=session,
        omitted_items=max(0, int(total) - len(session.transcript)),
        provisional_title=title,
        latest_turn_start_position=None if start is None else int(start),
    )


# -- usage ------------------------------------------------------------------------------


class _UsageRows(msgspec.Struct, kw_only=True):
    """What one usage page reads, in one snapshot: turn bodies and cost still stored JSON."""

    latest: int
    bodies: list[str]
    last_ordinal: int | None
    coverage: UsageCoverage
    totals: dict[str, UsageCounterTotal]
    cost: str | None

    def summary(self, session_id: str, after_seq: int) -> dict[str, Any]:
        """The page's fields besides its turns and cost: the cursor after it (its last
        turn's ordinal, else the newest seen), the newest, totals and coverage."""
        last = self.last_ordinal
        return {
            "session_id": session_id,
            "next_after_seq": next_page_cursor(after_seq, self.latest, last),
            "latest_seq": self.latest,
            "totals": self.totals,
            "coverage": self.coverage,
        }


def _usage_rows(
    connection: apsw.Connection, session_id: str, after_seq: int, limit: int
) -> _UsageRows | None:
    if after_seq < 0:
        raise InvalidInput(f"after_seq must be 0 or more, not {after_seq}")
    with transaction(connection, f"load the usage of session {session_id}"):
        known = connection.execute(
            "SELECT 1 FROM session_contexts WHERE session_id = ?", (session_id,)
        ).fetchone()
        if known is None:
            return None
        bad = connection.execute(
            "SELECT command_id FROM session_turn_usage WHERE session_id = ? AND NOT json_valid(body)"
            " LIMIT 1",
            (session_id,),
        ).fetchone()
        if bad is not None:  # the totals below read every row's JSON
            raise ProjectionError(
                f"stored turn usage of command {bad[0]!r} does not decode: it is not JSON",
                session_id=session_id,
            )
        latest = int(
            connection.execute(
                "SELECT COALESCE(max(completed_ordinal), 0) FROM session_turn_usage"
                " WHERE session_id = ?",
                (session_id,),
            ).get
        )
        page = connection.execute(
            "SELECT body, completed_ordinal FROM session_turn_usage"
            " WHERE session_id = ? AND completed_ordinal > ? ORDER BY completed_ordinal LIMIT ?",
            (session_id, after_seq, clamp_page_limit(limit)),
        ).fetchall()
        coverage = UsageCoverage()
        for scope, count in connection.execute(
            "SELECT json_extract(body, '$.usage.scope'), count(*) FROM session_turn_usage"
            " WHERE session_id = ? GROUP BY 1",
            (session_id,),
        ):
            n = int(count)
            coverage.recorded_turns += n
            if scope == "turn":
                coverage.full_turn_reports += n
            elif scope == "last_request":
                coverage.last_request_reports += n
            elif scope is not None:
                coverage.unspecified_reports += n
            else:
                coverage.missing_reports += n
        totals: dict[str, UsageCounterTotal] = {}
        for counter in USAGE_COUNTERS:
            tokens, reported = connection.execute(  # type: ignore[misc]
                "SELECT sum(json_extract(body, ?2)), count(json_extract(body, ?2))"
                " FROM session_turn_usage WHERE session_id = ?1"
                " AND json_extract(body, '$.usage.scope') = 'turn'",
                (session_id, f"$.usage.{counter}"),
            ).fetchone()
            if tokens is not None:
                totals[counter] = UsageCounterTotal(
                    tokens=int(tokens),
                    reported_turns=int(reported),
                )
        cost = connection.execute(
            "SELECT body FROM session_provider_cost WHERE session_id = ?", (session_id,)
        ).fetchone()
    return _UsageRows(
        latest=latest,
        bodies=[str(body) for body, _ in page],
        last_ordinal=int(page[-1][1]) if page else None,  # type: ignore[arg-type]
        coverage=coverage,
        totals=totals,
        cost=None if cost is None else str(cost[0]),
    )


def load_usage_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
) -> UsagePage | None:
    """Recorded turns after completion ordinal ``after_seq``, with totals and coverage.

    ``None`` when the store never knew the session (no context); a deleted session's
    usage stays readable.
    """
    rows = _usage_rows(connection, session_id, after_seq, limit)
    if rows is None:
        return None
    return UsagePage(
        **rows.summary(session_id, after_seq),
        turns=[decode_stored(_OUTCOME, body, "turn usage", session_id) for body in rows.bodies],
        provider_session_cost=(
            None
            if rows.cost is None
            else decode_stored(_PROVIDER_COST, rows.cost, "provider cost", session_id)
        ),
    )


def load_raw_usage_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
) -> RawUsagePage | None:
    """:func:`load_usage_page` with each stored turn and the cost passed through
    untouched."""
    rows = _usage_rows(connection, session_id, after_seq, limit)
    if rows is None:
        return None
    return RawUsagePage(
        **rows.summary(session_id, after_seq),
        turns=[_raw(body, "turn usage", session_id) for body in rows.bodies],
        provider_session_cost=(
            None if rows.cost is None else _raw(rows.cost, "provider cost", session_id)
        ),
    )


# -- dispatch -----------------------------------------------------------------------------

READ_TYPES: tuple[type[Any], ...] = get_args(ReadMessage)
"""The message types :func:`answer_read` answers."""


def answer_read(connection: apsw.Connection, message: ReadMessage) -> object:
    """The reply to one read message (a reader actor's whole job for these)."""
    match message:
        case ListSessions(workspace_id=workspace_id):
            return list_sessions(connection, workspace_id)
        case LoadSessionDetail(session_id=session_id):
            return load_session_detail(connection, session_id)
        case LoadTranscriptPage():
            return load_transcript_page(
                connection,
                message.session_id,
                message.after_seq,
                message.limit,
                message.roles,
                message.finished_only,
            )
        case LoadTranscriptHistory():
            return load_transcript_history(
                connection,
                message.session_id,
                message.before_position,
                message.before_id,
                message.limit,
            )
        case LoadTranscriptItems():
            after = (
                None
                if message.after_position is None or message.after_id is None
                else (message.after_position, message.after_id)
            )
            found = load_transcript_items(
                connection, message.session_id, after, clamp_page_limit(message.limit)
            )
            if found is None:
                return None
            items, more, frontier = found
            return TranscriptItems(
                items=items,
                more=more,
                frontier_ordinal=frontier.ordinal,
                frontier_digest=frontier.digest,
            )
        case LoadTurnSummary():
            return load_turn_summary(
                connection,
                message.session_id,
                message.turn_start_position,
                message.completed_ordinal,
            )
        case LoadProjectionTail(session_id=session_id, limit=limit):
            return load_projection_tail(connection, session_id, limit)
        case LoadUsagePage(session_id=session_id, after_seq=after_seq, limit=limit):
            return load_usage_page(connection, session_id, after_seq, limit)
        case ListWorkspaces():
            return list_workspaces(connection)
        case LoadElicitations(session_id=session_id):
            return load_elicitations(connection, session_id)
        case LoadRawUsagePage(session_id=session_id, after_seq=after_seq, limit=limit):
            return load_raw_usage_page(connection, session_id, after_seq, limit)
        case LoadRawElicitations(session_id=session_id):
            return load_raw_elicitations(connection, session_id)
    raise InvalidInput(f"{type(message).__name__} is not a read message")
