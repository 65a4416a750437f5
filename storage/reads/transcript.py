"""A session's transcript as the read side serves it: pages, history, items, turns.

Owns the statements over ``materialized_transcript_items`` that the transcript reads
share: a page by seq after a cursor (:func:`load_transcript_page`, filtered by role and
``finished_only``), an "earlier messages" page before a cursor
(:func:`load_transcript_history`), whole items in the store's order
(:func:`load_transcript_items_page`) and, in :mod:`.turns`, one turn summed up and
the projection with only its newest items (:mod:`.turns`). Each reads in
one transaction, so a page and its cursors are one snapshot.

Guarantees:

* A transcript page walks ``materialized_transcript_seq`` (session, seq, stable id)
  from the cursor and stops after the limit and the items tied with the last one, so
  a page costs its own rows, not the session's (schema revision 6 adds the index).
* ``None`` where the store has no projection of the session; a stored row that does not
  decode raises :class:`~relaystore.domain.errors.ProjectionError` naming the session.

An item's role and text are read as stored with it (schema revision 12,
:func:`~relaystore.storage.item_views.stored_view`), so a page decodes its bodies but
flattens none, and history, titles and turn summaries decode no body; only an item an
older build wrote (NULL) has them taken from its body, by the same rule.

It reads rows and decides nothing: an item's seq, role and text, which items begin a
turn, the provisional title and a turn's final message are
:mod:`relaystore.domain.transcript_views`'s; the limits and the next cursor are
:mod:`relaystore.domain.paging`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

import apsw
import msgspec

from ...domain.elicitation.forms import shown
from ...domain.errors import InvalidInput, ProjectionError
from ...domain.materialized import MaterializedExecutionState, TranscriptBody
from ...domain.paging import (
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_ITEMS_LIMIT,
    DEFAULT_PAGE_LIMIT,
    check_after_seq,
    clamp_page_limit,
    transcript_page_cursor,
)
from ...domain.read_replies import (
    HistoryCursor,
    HistoryItem,
    RawTranscriptItemView,
    RawTranscriptPage,
    TranscriptHistory,
    TranscriptItems,
    TranscriptItemView,
    TranscriptPage,
)
from ...domain.roles import TranscriptRole
from ...domain.transcript_views import (
    ROLE_KINDS,
    finished_only_roles,
    is_open_agent_item,
    transcript_seq,
)
from ...domain.wire import encode
from ..item_views import stored_view
from ..materialized import load_transcript_items, parse_execution
from ..stored_columns import (
    decode_transcript_bodies,
    stored_bodies,
)
from ..transaction import transaction

__all__ = [
    "KIND_SQL",
    "TEXT_COLUMNS",
    "each_text",
    "load_raw_transcript_page",
    "load_transcript_history",
    "load_transcript_items_page",
    "load_transcript_page",
    "role_filter",
]

_SEQ = "COALESCE(latest_content_event_ordinal, position)"
"""The seq expression; it must read exactly as the index ``materialized_transcript_seq``."""

_PAGE_HEAD = f"""
SELECT execution_state, running_started_at_ms,
       (SELECT COALESCE(MAX({_SEQ}), 0) FROM materialized_transcript_items i
        WHERE i.session_id = m.session_id)
FROM materialized_sessions m WHERE session_id = ?
"""
"""A transcript page's execution state and ``latest_seq`` (every role), in one step."""
KIND_SQL = "json_extract(body_json, '$.kind')"
"""A stored item's body kind: what a role filter reads, and the turn rules beside its id."""
_ITEM_COLUMNS = (
    "stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,"
    " body_json, view_role, view_text"
)
"""An item as a page shows it: its body beside its stored role and text (schema revision
12; NULL where an older build wrote the item: the body's are taken)."""
TEXT_COLUMNS = (
    "stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,"
    " CASE WHEN view_role IS NULL OR view_text IS NULL THEN body_json END, view_role, view_text"
)
"""An item as history, titles and turn summaries read it: its stored role and text, and
its body only where the store does not know them."""


_View = TypeVar("_View", TranscriptItemView, RawTranscriptItemView)


def _item_views(
    view: type[_View],
    rows: list[tuple[Any, ...]],
    bodies: list[Any],
    shown: list[tuple[TranscriptRole, str]],
) -> list[_View]:
    """The ``view`` of each of transcript ``rows`` (the ``_ITEM_COLUMNS``) with its body
    and its role and text."""
    return [
        view(
            stable_id=row[0],
            position=row[1],
            seq=transcript_seq(row[1], row[2]),
            role=role,
            text=text,
            created_at_ms=row[3],
            last_changed_at_ms=row[4],
            body=body,
        )
        for row, body, (role, text) in zip(rows, bodies, shown, strict=True)
    ]


def _views(rows: list[tuple[Any, ...]], session_id: str) -> list[TranscriptItemView]:
    """The views of transcript ``rows`` (the ``_ITEM_COLUMNS``, then anything): the
    stored role and text where the store holds them, else the body's."""
    bodies = decode_transcript_bodies(rows, session_id)
    shown = [_stored_view(row, body, session_id) for row, body in zip(rows, bodies, strict=True)]
    return _item_views(TranscriptItemView, rows, bodies, shown)


def _stored_view(
    row: tuple[Any, ...], body: TranscriptBody | None, session_id: str
) -> tuple[TranscriptRole, str]:
    """The role and text of an item row: the stored ``view_role`` and ``view_text``
    (columns 6 and 7), or, where the store does not know them (NULL), ``body``'s.

    Raises :class:`ProjectionError` naming the session and position for a stored role
    that is no role word (a store edited by hand, or damaged; the STRICT table keeps the
    text text): a page never carries it (``relaystore reproject`` writes it again)."""
    role, text = row[6], row[7]
    if (role is None or text is None) and body is not None:
        return stored_view(body)
    if role not in ROLE_KINDS or text is None:
        raise ProjectionError(
            f"transcript item at position {row[1]}: its stored role {str(role)[:40]!r}"
            " is no role word",
            session_id=session_id,
        )
    return role, text


def _texts(rows: list[tuple[Any, ...]], session_id: str) -> list[tuple[TranscriptRole, str]]:
    """The role and text of each of ``rows`` (the ``TEXT_COLUMNS``): the body (column
    5) is read, and decoded, only where the store does not know them."""
    unknown = [row for row in rows if row[5] is not None]
    bodies = iter(decode_transcript_bodies(unknown, session_id) if unknown else ())
    return [
        _stored_view(row, next(bodies) if row[5] is not None else None, session_id) for row in rows
    ]


def each_text(rows: Iterable[apsw.SQLiteValues], session_id: str) -> Iterator[str]:
    """The texts of ``rows`` (the ``TEXT_COLUMNS``), one at a time (for a caller that
    stops early)."""
    for row in rows:
        yield _texts([row], session_id)[0][1]


def role_filter(roles: tuple[TranscriptRole, ...]) -> tuple[str, list[str]]:
    kinds = sorted({ROLE_KINDS[role] for role in roles})
    if not kinds:
        return "", []
    marks = ", ".join("?" for _ in kinds)
    return f" AND {KIND_SQL} IN ({marks})", kinds


def load_raw_transcript_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
    roles: tuple[TranscriptRole, ...] = (),
    finished_only: bool = False,
) -> RawTranscriptPage | None:
    """The page :func:`load_transcript_page` gives, each body its stored JSON (see
    :class:`~relaystore.domain.read_replies.RawTranscriptPage`): one syntax check over
    the page's bodies, none decoded, unless ``finished_only`` (an agent item's body
    says whether it is still open: the typed page's bodies are written out again).
    ``None``: no projection of the session."""
    read: _Read[RawTranscriptItemView] | None
    if finished_only:
        page = load_transcript_page(
            connection, session_id, after_seq, limit, roles, finished_only=True
        )
        if page is None:
            return None
        items = [
            RawTranscriptItemView(
                **{f: getattr(item, f) for f in item.__struct_fields__ if f != "body"},
                body=msgspec.Raw(encode(item.body)),
            )
            for item in page.items
        ]
        read = (page.execution, page.latest_seq, items, page.next_after_seq)
    else:
        read = _read_item_page(connection, session_id, after_seq, limit, roles, _raw_views)
    return None if read is None else RawTranscriptPage(**_page_fields(session_id, read))


def load_transcript_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int = 0,
    limit: int = DEFAULT_PAGE_LIMIT,
    roles: tuple[TranscriptRole, ...] = (),
    finished_only: bool = False,
) -> TranscriptPage | None:
    """The items with seq above ``after_seq`` (see
    :class:`~relaystore.domain.read_replies.TranscriptPage`).

    ``roles`` and ``finished_only`` filter before the limit. Items tied with the last
    item's seq all come along. With ``finished_only`` the page holds finished agent items
    only and ends before the first agent item still open, whose seq bounds the cursor
    (:func:`~relaystore.domain.paging.transcript_page_cursor`), so that item is delivered
    once it finishes. ``None``: no projection of the session.
    """
    if finished_only:
        roles = finished_only_roles(roles)
    read = _read_item_page(
        connection, session_id, after_seq, limit, roles, _views, finished_only=finished_only
    )
    return None if read is None else TranscriptPage(**_page_fields(session_id, read))


_Read = tuple[MaterializedExecutionState, int, list[_View], int]
"""What :func:`_read_item_page` read: the execution state, the latest seq, the items and the
next cursor."""


def _page_fields(session_id: str, read: _Read[Any]) -> dict[str, Any]:
    """The fields of a transcript page (typed or raw) of what :func:`_read_item_page` read."""
    execution, latest_seq, items, next_after_seq = read
    return {
        "next_after_seq": next_after_seq,
        "session_id": session_id,
        "latest_seq": latest_seq,
        "execution": execution,
        "items": items,
    }


def _read_item_page(
    connection: apsw.Connection,
    session_id: str,
    after_seq: int,
    limit: int,
    roles: tuple[TranscriptRole, ...],
    views: Callable[[list[tuple[Any, ...]], str], list[_View]],
    *,
    finished_only: bool = False,
) -> _Read[_View] | None:
    """A transcript page's execution state, latest seq, items (made by ``views``; with
    ``finished_only`` typed ones, whose bodies say which agent item is open) and next
    cursor, in one read transaction; ``None``: no projection of the session."""
    check_after_seq(after_seq)
    wanted = clamp_page_limit(limit)
    role_sql: str
    kinds: list[str]
    role_sql, kinds = role_filter(roles)
    barrier: int | None = None
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
            finished, full, barrier = _finished_prefix(cursor, wanted, session_id)
            items: list[_View] = finished  # type: ignore[assignment]  # views is _views here
        else:
            rows, full = _tied_prefix(cursor, wanted)
            items = views(rows, session_id)
    next_after_seq = transcript_page_cursor(
        after_seq, latest_seq, items[-1].seq if items else None, full=full, barrier=barrier
    )
    return execution, latest_seq, items, next_after_seq


def _raw_views(rows: list[tuple[Any, ...]], session_id: str) -> list[RawTranscriptItemView]:
    """The views of transcript ``rows`` (the ``_ITEM_COLUMNS``) with each body its
    stored JSON: one syntax check over the page (a bad body is found row by row and
    refused naming the item); a body is decoded only where the store does not know the
    item's role and text (an older build wrote it)."""
    bodies = stored_bodies(rows, session_id)
    shown = [
        _stored_view(
            row,
            decode_transcript_bodies([row], session_id)[0]
            if row[6] is None or row[7] is None
            else None,
            session_id,
        )
        for row in rows
    ]
    return _item_views(RawTranscriptItemView, rows, list(bodies), shown)


def _tied_prefix(
    cursor: Iterable[apsw.SQLiteValues], wanted: int
) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of the first ``wanted`` items and those tied with the last one's seq
    (they travel with it), and whether more items follow."""
    rows = list(islice(cursor, wanted))
    more = False
    if rows:
        last = rows[-1][8]
        for row in cursor:
            if row[8] != last:
                more = True
                break
            rows.append(row)
    return rows, more


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
        query = f"SELECT {TEXT_COLUMNS} FROM materialized_transcript_items WHERE session_id = ?"
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
    kept: list[tuple[Any, ...]] = rows[:wanted][::-1]
    items = [
        HistoryItem(stable_id=row[0], position=row[1], role=role, text=text)
        for row, (role, text) in zip(kept, _texts(kept, session_id), strict=True)
    ]
    return TranscriptHistory(
        items=items,
        before=(
            HistoryCursor(position=items[0].position, stable_id=items[0].stable_id)
            if older and items
            else None
        ),
        frontier=int(frontier[0]),
    )


def load_transcript_items_page(
    connection: apsw.Connection,
    session_id: str,
    after: tuple[int, str] | None = None,
    limit: int = DEFAULT_ITEMS_LIMIT,
) -> TranscriptItems | None:
    """Up to ``limit`` whole items after the ``(position, stable_id)`` cursor ``after``
    (``None``: from the start), with whether more follow and the frontier they were read
    at (see :class:`~relaystore.domain.reads.LoadTranscriptItems`). ``None``: no
    projection of the session."""
    found = load_transcript_items(connection, session_id, after, clamp_page_limit(limit))
    if found is None:
        return None
    items, more, frontier = found
    return TranscriptItems(
        items=items,
        more=more,
        frontier_ordinal=frontier.ordinal,
        frontier_digest=frontier.digest,
    )
