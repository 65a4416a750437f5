"""Searching transcript text: one statement over the full-text index (revision 13).

Owns the statement that answers :class:`~relaystore.domain.search.SearchTranscripts`
(:func:`search_transcripts`): FTS5 finds the items whose text matches, newest indexed
first (the index's own order, so a page stops at its limit instead of ranking every
match), joined to each item's row for where it is, its role and its times; SQLite
writes the snippet. One read transaction, so a page is one snapshot.

It decides nothing about a query: the rules and limits are the domain's
(:mod:`relaystore.domain.search`); a query FTS5 refuses becomes the domain's
:func:`~relaystore.domain.search.bad_query`, never SQLite's error. The index itself is
kept by the store's triggers (:data:`~relaystore.storage.schema_ddl.SEARCH_DDL`).
"""

from __future__ import annotations

import apsw

from ...domain.errors import ProjectionError
from ...domain.roles import TranscriptRole
from ...domain.search import (
    MATCH_END,
    MATCH_START,
    SNIPPET_TOKENS,
    SearchHit,
    SearchPage,
    bad_query,
    match_expression,
    search_limit,
    snippet_parts,
)
from ...domain.transcript_views import ROLE_KINDS
from ..transaction import transaction

__all__ = ["search_transcripts"]

_SEARCH = f"""
SELECT keys.search_id, keys.session_id, keys.stable_id,
    COALESCE(items.latest_content_event_ordinal, items.position), items.position,
    items.view_role, items.created_at_ms, items.last_changed_at_ms,
    snippet(transcript_search, 0, '{MATCH_START}', '{MATCH_END}', '…', {SNIPPET_TOKENS})
FROM transcript_search
JOIN transcript_search_keys AS keys ON keys.search_id = transcript_search.rowid
JOIN materialized_transcript_items AS items
    ON items.session_id = keys.session_id AND items.stable_id = keys.stable_id
WHERE transcript_search MATCH ?1 AND transcript_search.rowid < ?2
    AND (?3 IS NULL OR keys.session_id = ?3) AND (?4 IS NULL OR items.view_role = ?4)
ORDER BY transcript_search.rowid DESC
LIMIT ?5
"""
"""The page: matches newest first, after the cursor, of a session and role if given."""

_NO_CURSOR = 2**63 - 1
"""The cursor of a first page: every search id is below it."""


def search_transcripts(
    connection: apsw.Connection,
    query: str,
    session_id: str | None = None,
    role: TranscriptRole | None = None,
    limit: int = 50,
    cursor: int | None = None,
    plain: bool = False,
) -> SearchPage:
    """The page of items whose text matches ``query`` (see
    :class:`~relaystore.domain.search.SearchTranscripts`).

    Raises :class:`~relaystore.domain.errors.InvalidInput` (``SearchTranscripts.query``)
    for a query FTS5 cannot run, and :class:`ProjectionError` naming the session for a
    stored role that is no role word (a store edited by hand).
    """
    wanted = search_limit(limit)
    with transaction(connection, "search the transcripts"):
        try:
            rows = connection.execute(
                _SEARCH,
                (
                    match_expression(query, plain),
                    cursor or _NO_CURSOR,
                    session_id,
                    role,
                    wanted + 1,
                ),
            ).fetchall()
        except apsw.SQLError as exc:  # the query's syntax, a column it names
            raise bad_query(query, str(exc).removeprefix("SQLError: ")) from exc
    more = len(rows) > wanted
    hits = [_hit(row) for row in rows[:wanted]]
    next_cursor = int(rows[wanted - 1][0]) if more else None  # type: ignore[arg-type]
    return SearchPage(query=query, hits=hits, next_cursor=next_cursor)


def _hit(row: apsw.SQLiteValues) -> SearchHit:
    _, session_id, stable_id, seq, position, role, created, changed, marked = row
    if role not in ROLE_KINDS:
        raise ProjectionError(
            f"transcript item at position {position}: its stored role {str(role)[:40]!r}"
            " is no role word",
            session_id=str(session_id),
        )
    parts = snippet_parts(str(marked or ""))
    return SearchHit(
        session_id=str(session_id),
        stable_id=str(stable_id),
        seq=int(seq),  # type: ignore[arg-type]
        position=int(position),  # type: ignore[arg-type]
        role=role,  # type: ignore[arg-type]
        created_at_ms=int(created),  # type: ignore[arg-type]
        last_changed_at_ms=int(changed),  # type: ignore[arg-type]
        snippet="".join(part.text for part in parts),
        parts=parts,
    )
