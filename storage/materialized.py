"""Reading a session's materialized projection back from the store.

The projection lives in ``materialized_sessions`` (one row per session: frontier,
execution, title, configuration, questions, turns) and its child tables
``materialized_transcript_items`` and ``materialized_queued_prompts``.
:mod:`relaystore.storage.projection` writes them; this module reads them.

Guarantees:

* :func:`load_materialized_session` reads everything in one transaction, so the
  frontier, transcript and queue always describe the same committed page.
* The transcript comes back ordered by ``(position, stable_id)`` and the queue by its
  ordinal; runs of streamed text chunks are merged on read.
* The loaded session passes :meth:`MaterializedSession.validate`; a stored row that does
  not decode or validate raises :class:`ProjectionError` naming the session.
* Stored columns are decoded as the read side decodes them
  (:mod:`relaystore.storage.stored_columns`).
"""

from __future__ import annotations

from typing import Any, Literal

import apsw
import msgspec

from ..domain.api_events import MaterializedTurn
from ..domain.errors import ProjectionError
from ..domain.materialized import (
    AgentBody,
    ExecutionClosed,
    ExecutionClosing,
    ExecutionIdle,
    ExecutionRunning,
    HistoryStart,
    MaterializedExecutionState,
    MaterializedQueuedPrompt,
    MaterializedSession,
    ProjectionBehind,
    SetConfigKind,
    ThoughtBody,
    TranscriptItem,
)
from ..domain.projection.index import (
    ItemFacts,
    decode_item_facts,
    encode_item_facts,
    item_facts,
)
from ..domain.projection.integrity import check_session
from ..domain.projection.streams import merge_content_chunk
from ..domain.relay.payloads import RelayCursor
from ..domain.wire import JSON
from .stored_columns import (
    CONFIGURATION_DECODER,
    ELICITATIONS_DECODER,
    TURN_OUTCOME_DECODER,
    decode_stored,
    decode_transcript_bodies,
)
from .transaction import transaction

__all__ = [
    "IndexEntries",
    "load_index_entries",
    "stored_facts",
    "execution_columns",
    "load_frontier",
    "load_materialized_session",
    "load_projection_behind",
    "load_transcript_item",
    "load_transcript_items",
    "parse_execution",
]

_SESSION_ROW = """
SELECT applied_event_ordinal, applied_event_digest, last_activity_at_ms, execution_state,
       running_started_at_ms, session_title, configuration_json, pending_elicitations_json,
       active_turn_json, last_turn_outcome_json
FROM materialized_sessions WHERE session_id = ?
"""
_TRANSCRIPT_ROWS = """
SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,
       body_json
FROM materialized_transcript_items WHERE session_id = ?
ORDER BY position, stable_id
"""
_TRANSCRIPT_TAIL_ROWS = """
SELECT * FROM (
    SELECT stable_id, position, latest_content_event_ordinal, created_at_ms,
           last_changed_at_ms, body_json
    FROM materialized_transcript_items WHERE session_id = ?
    ORDER BY position DESC, stable_id DESC LIMIT ?
) ORDER BY position, stable_id
"""
_HISTORY_START_ROW = """
SELECT first_ordinal, source FROM materialized_history_start WHERE session_id = ?
"""
_ITEM_ROW = """
SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,
       body_json
FROM materialized_transcript_items WHERE session_id = ? AND stable_id = ?
"""
_ITEMS_FROM_START = """
SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,
       body_json
FROM materialized_transcript_items WHERE session_id = ?
ORDER BY position, stable_id LIMIT ?
"""
_ITEMS_AFTER = """
SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,
       body_json
FROM materialized_transcript_items
WHERE session_id = ?1 AND (position > ?2 OR (position = ?2 AND stable_id > ?3))
ORDER BY position, stable_id LIMIT ?4
"""
_INDEX_COLUMNS = """
SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, last_changed_at_ms,
       CASE WHEN index_facts IS NULL THEN body_json END, index_facts
FROM materialized_transcript_items
"""
_INDEX_FROM_START = _INDEX_COLUMNS + "WHERE session_id = ?1 ORDER BY position, stable_id LIMIT ?4"
_INDEX_AFTER = (
    _INDEX_COLUMNS
    + "WHERE session_id = ?1 AND (position > ?2 OR (position = ?2 AND stable_id > ?3))"
    " ORDER BY position, stable_id LIMIT ?4"
)
"""Two statements, not one with ``?2 IS NULL OR``: that form cannot seek the position
index to the cursor, so every page would walk the session from its first item."""
_BEHIND_ROWS = """
SELECT session_id, ordinal, kind, position, path, kept_ordinal, kept_digest
FROM projection_behind
"""
_QUEUE_ROWS = """
SELECT command_id, kind_json, content_json, queued_at_ms, accepted_ordinal
FROM materialized_queued_prompts WHERE session_id = ?
ORDER BY ordinal
"""

_ACTIVE_TURN = msgspec.json.Decoder(MaterializedTurn)
_QUEUE_KIND: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    SetConfigKind | Literal["prompt"] | None
)
_CONTENT = msgspec.json.Decoder(list[JSON])


def execution_columns(execution: MaterializedExecutionState) -> tuple[str, int | None]:
    """The ``(execution_state, running_started_at_ms)`` columns of ``execution``."""
    if isinstance(execution, ExecutionRunning):
        return "running", execution.started_at_ms
    if isinstance(execution, ExecutionClosing):
        return "closing", None
    if isinstance(execution, ExecutionClosed):
        return "closed", None
    return "idle", None


def parse_execution(
    state: str, running_started_at_ms: int | None, *, session_id: str
) -> MaterializedExecutionState:
    """The execution state stored as ``(state, running_started_at_ms)``.

    Raises :class:`ProjectionError` for a combination :func:`execution_columns` never
    writes (a running state without a start time, or a start time on any other state).
    """
    if state == "running" and running_started_at_ms is not None:
        return ExecutionRunning(started_at_ms=running_started_at_ms)
    if running_started_at_ms is None:
        if state == "idle":
            return ExecutionIdle()
        if state == "closing":
            return ExecutionClosing()
        if state == "closed":
            return ExecutionClosed()
    raise ProjectionError(
        f"stored execution state {state!r} with running_started_at_ms "
        f"{running_started_at_ms} is not valid; expected idle, closing, closed, or running "
        "with a start time",
        session_id=session_id,
    )


def load_frontier(connection: apsw.Connection, session_id: str) -> RelayCursor | None:
    """Where the stored session's chain stands (the last relay event it applied, or
    kept while behind: :attr:`MaterializedSession.kept_frontier`), or None for no
    projection. A session saved but never projected has the genesis frontier (ordinal 0).
    """
    with transaction(connection, f"load the projection frontier of session {session_id}"):
        row = connection.execute(
            "SELECT coalesce(b.kept_ordinal, s.applied_event_ordinal), "
            "coalesce(b.kept_digest, s.applied_event_digest) FROM materialized_sessions s "
            "LEFT JOIN projection_behind b USING (session_id) WHERE s.session_id = ?",
            (session_id,),
        ).fetchone()
    if row is None:
        return None
    return RelayCursor(ordinal=row[0], digest=row[1])


def load_materialized_session(
    connection: apsw.Connection, session_id: str, *, transcript_limit: int | None = None
) -> MaterializedSession | None:
    """The session's projection as last committed, or None when it has none.

    Reads in one transaction (a savepoint inside the caller's, if one is open). Raises
    :class:`ProjectionError` when the stored projection does not decode or validate.
    ``transcript_limit`` keeps only the newest that many transcript items.
    """
    with transaction(connection, f"load the projection of session {session_id}"):
        row = connection.execute(_SESSION_ROW, (session_id,)).fetchone()
        if row is None:
            return None
        if transcript_limit is None:
            transcript_rows = connection.execute(_TRANSCRIPT_ROWS, (session_id,)).fetchall()
        else:
            transcript_rows = connection.execute(
                _TRANSCRIPT_TAIL_ROWS, (session_id, max(0, transcript_limit))
            ).fetchall()
        queue_rows = connection.execute(_QUEUE_ROWS, (session_id,)).fetchall()
        start_row = connection.execute(_HISTORY_START_ROW, (session_id,)).fetchone()
        behind = load_projection_behind(connection, session_id).get(session_id)
    (
        ordinal,
        digest,
        last_activity_at_ms,
        state,
        running_started_at_ms,
        title,
        configuration_json,
        elicitations_json,
        active_turn_json,
        outcome_json,
    ) = row
    session = MaterializedSession(
        session_id=session_id,
        applied_event_ordinal=ordinal,
        applied_event_digest=digest,
        last_activity_at_ms=last_activity_at_ms,
        execution=parse_execution(state, running_started_at_ms, session_id=session_id),
        session_title=title,
        configuration=decode_stored(
            CONFIGURATION_DECODER, configuration_json, "configuration", session_id
        ),
        transcript=_transcript_items(transcript_rows, session_id),
        queued_prompts=[_queued_prompt(r, session_id) for r in queue_rows],
        pending_elicitations=decode_stored(
            ELICITATIONS_DECODER, elicitations_json, "pending elicitations", session_id
        ),
        active_turn=(
            None
            if active_turn_json is None
            else decode_stored(_ACTIVE_TURN, active_turn_json, "active turn", session_id)
        ),
        last_turn_outcome=(
            None
            if outcome_json is None
            else decode_stored(TURN_OUTCOME_DECODER, outcome_json, "last turn outcome", session_id)
        ),
        history_start=(
            None if start_row is None else HistoryStart(ordinal=start_row[0], source=start_row[1])
        ),
        projection_behind=behind,
    )
    try:
        check_session(session)
    except ProjectionError as exc:
        raise ProjectionError(
            f"the stored projection is inconsistent: {exc.detail}", session_id=session_id
        ) from exc
    return session


def load_transcript_item(
    connection: apsw.Connection, session_id: str, stable_id: str
) -> TranscriptItem:
    """One committed transcript item of the session, as :func:`load_materialized_session`
    reads it; :class:`ProjectionError` when the store does not hold it."""
    with transaction(connection, f"load a transcript item of session {session_id}"):
        rows = connection.execute(_ITEM_ROW, (session_id, stable_id)).fetchall()
    if not rows:
        raise ProjectionError(
            f"transcript item {stable_id!r} is not in the store, though its projection "
            "dropped it from memory as committed",
            session_id=session_id,
        )
    (item,) = _transcript_items(rows, session_id)
    return item


def load_transcript_items(
    connection: apsw.Connection,
    session_id: str,
    after: tuple[int, str] | None,
    limit: int,
) -> tuple[list[TranscriptItem], bool, RelayCursor] | None:
    """Up to ``limit`` items after ``after`` (a ``(position, stable_id)`` cursor) in the
    store's order, decoded as :func:`load_materialized_session` decodes them; whether
    more follow; and the session's frontier, all in one read. None: no projection."""
    with transaction(connection, f"load transcript items of session {session_id}"):
        frontier = load_frontier(connection, session_id)
        if frontier is None:
            return None
        if after is None:
            rows = connection.execute(_ITEMS_FROM_START, (session_id, limit + 1)).fetchall()
        else:
            rows = connection.execute(
                _ITEMS_AFTER, (session_id, after[0], after[1], limit + 1)
            ).fetchall()
    more = len(rows) > limit
    return _transcript_items(rows[:limit], session_id), more, frontier


def stored_facts(item: TranscriptItem, ordinal: int) -> str:
    """The ``index_facts`` column of ``item`` written by the event at ``ordinal``:
    ``"<ordinal>:<facts>"`` (schema revision 9). The ordinal makes every write differ
    from the value before it, so the store's trigger forgets the facts only when an
    update changed the body without writing them."""
    return f"{ordinal}:{encode_item_facts(item_facts(item)).decode()}"


def _read_facts(text: str, stable_id: str, session_id: str) -> ItemFacts:
    _, colon, facts = text.partition(":")
    try:
        if not colon:
            raise ValueError("no ordinal prefix")
        return decode_item_facts(facts)
    except ValueError as exc:
        raise ProjectionError(
            f"stored index facts of transcript item {stable_id!r} do not decode: {exc}",
            session_id=session_id,
        ) from exc


class IndexEntries(msgspec.Struct, frozen=True, kw_only=True):
    """A page of a session's transcript as the index sees it: each item's stable id,
    position and :class:`~relaystore.domain.projection.index.ItemFacts`, in the store's
    order; whether more follow; and the frontier the page was read at."""

    entries: list[tuple[str, int, ItemFacts]]
    more: bool
    frontier: RelayCursor


def load_index_entries(
    connection: apsw.Connection,
    session_id: str,
    after: tuple[int, str] | None,
    limit: int,
) -> IndexEntries | None:
    """Up to ``limit`` items' index entries after ``after`` (a ``(position, stable_id)``
    cursor), in one read; an item whose facts the store does not know (written by an
    older build, or changed by a retention pass) is decoded to compute them. None: no
    projection."""
    position, stable_id = (None, None) if after is None else after
    with transaction(connection, f"load the transcript index of session {session_id}"):
        frontier = load_frontier(connection, session_id)
        if frontier is None:
            return None
        statement = _INDEX_FROM_START if after is None else _INDEX_AFTER
        rows = connection.execute(
            statement, (session_id, position, stable_id, limit + 1)
        ).fetchall()
    more = len(rows) > limit
    entries: list[tuple[str, int, ItemFacts]] = []
    for row in rows[:limit]:
        sid, at = str(row[0]), int(row[1])  # type: ignore[arg-type]
        if row[6] is None:
            (item,) = _transcript_items([row[:6]], session_id)
            entries.append((sid, at, item_facts(item)))
        else:
            entries.append((sid, at, _read_facts(str(row[6]), sid, session_id)))
    return IndexEntries(entries=entries, more=more, frontier=frontier)


def load_projection_behind(
    connection: apsw.Connection, session_id: str | None = None
) -> dict[str, ProjectionBehind]:
    """The sessions behind their relay log, by id: ``session_id``'s alone, or (None)
    every one."""
    with transaction(connection, "load the sessions behind their relay log"):
        if session_id is None:
            rows = connection.execute(_BEHIND_ROWS + " ORDER BY session_id").fetchall()
        else:
            rows = connection.execute(
                _BEHIND_ROWS + " WHERE session_id = ?", (session_id,)
            ).fetchall()
    return {
        str(sid): ProjectionBehind(
            ordinal=int(ordinal),  # type: ignore[arg-type]
            kind=str(kind),
            position=str(position),
            path=str(path),
            kept_ordinal=int(kept_ordinal),  # type: ignore[arg-type]
            kept_digest=str(kept_digest),
        )
        for sid, ordinal, kind, position, path, kept_ordinal, kept_digest in rows
    }


def _transcript_items(rows: list[tuple[Any, ...]], session_id: str) -> list[TranscriptItem]:
    bodies = decode_transcript_bodies(rows, session_id)
    items = []
    for (stable_id, position, latest, created, changed, _), body in zip(rows, bodies, strict=True):
        if isinstance(body, AgentBody | ThoughtBody):
            body.chunks = _merge_text_chunks(body.chunks)
        items.append(
            TranscriptItem(
                stable_id=stable_id,
                position=position,
                latest_content_event_ordinal=latest,
                created_at_ms=created,
                last_changed_at_ms=changed,
                body=body,
            )
        )
    return items


def _queued_prompt(row: tuple[Any, ...], session_id: str) -> MaterializedQueuedPrompt:
    command_id, kind_json, content_json, queued_at_ms, accepted_ordinal = row
    where = f"queued command {command_id!r}"
    return MaterializedQueuedPrompt(
        command_id=command_id,
        kind=decode_stored(_QUEUE_KIND, kind_json, f"kind of {where}", session_id),
        content=decode_stored(_CONTENT, content_json, f"content of {where}", session_id),
        queued_at_ms=queued_at_ms,
        accepted_ordinal=accepted_ordinal,
    )


def _merge_text_chunks(chunks: list[JSON]) -> list[JSON]:
    """Merge runs of text chunks of one stream (older stores kept one chunk per token).

    Uses the projection's own rule (:func:`relaystore.domain.projection.streams.merge_content_chunk`), so
    chunks that differ in anything but their text keep their boundary.
    """
    if len(chunks) < 2:
        return chunks
    merged: list[JSON] = [chunks[0]]
    for chunk in chunks[1:]:
        tail = merge_content_chunk(merged[-1:], chunk)
        if len(tail) == 1:
            merged[-1] = tail[0]
        else:
            merged.append(chunk)
    return merged
