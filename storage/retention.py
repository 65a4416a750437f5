"""Transcript retention: one pass over a session's checkpoint-covered tool calls.

The rule is :mod:`relaystore.domain.retention`; this module selects the candidates as
the origin does (``tool`` bodies over the floor, in characters, at or below the verified
checkpoint frontier, in position order, one more than a batch to know whether any are
left), rewrites what the rule shrinks and counts the bytes reclaimed, all in one
transaction. Guarantees: timestamps, positions and ordinals are untouched (an item keeps
its place and its ``seq``); a body that does not decode is left as it is; no API event.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.errors import UnknownSession
from ..domain.materialized import ToolBody
from ..domain.retention import (
    RETENTION_BATCH_ITEMS,
    RETENTION_BODY_FLOOR,
    TranscriptRetention,
    retained_body,
)
from ..domain.wire import encode
from .item_views import VIEW_WRITTEN, stored_view
from .materialized import load_frontier
from .sessions import load_checkpoint_frontier
from .transaction import transaction

__all__ = ["compact_transcript"]

_CANDIDATES = """
SELECT stable_id, body_json FROM materialized_transcript_items
WHERE session_id = ?1 AND position <= ?2 AND length(body_json) > ?3
  AND json_extract(CASE WHEN json_valid(body_json) THEN body_json ELSE '{}' END, '$.kind')
      = 'tool'
ORDER BY position, stable_id
LIMIT ?4
"""
_TOOL = msgspec.json.Decoder(ToolBody)


def compact_transcript(
    connection: apsw.Connection, session_id: str, *, frontier: int | None = None
) -> TranscriptRetention:
    """Run one retention pass over ``session_id``'s transcript.

    ``frontier`` defaults to the session's checkpoint ``event_frontier`` (no checkpoint:
    nothing is covered, nothing changes). Raises :class:`UnknownSession` for a session
    the store lacks.
    """
    with transaction(connection, f"compact the transcript of session {session_id}"):
        if load_frontier(connection, session_id) is None:
            raise UnknownSession(session_id)
        covered = load_checkpoint_frontier(connection, session_id) if frontier is None else frontier
        if covered is None:
            return TranscriptRetention()
        rows = connection.execute(
            _CANDIDATES, (session_id, covered, RETENTION_BODY_FLOOR, RETENTION_BATCH_ITEMS + 1)
        ).fetchall()
        items = reclaimed = 0
        for stable_id, stored in rows[:RETENTION_BATCH_ITEMS]:
            text = str(stored)
            try:
                body = _TOOL.decode(text)
            except msgspec.DecodeError:
                continue  # a row this cannot read is a row it must not rewrite
            compacted = retained_body(body, text)
            if compacted is None:
                continue
            new = encode(compacted)
            old_bytes = len(text.encode())
            role, flat = stored_view(compacted)
            connection.execute(
                "UPDATE materialized_transcript_items SET body_json = ?, view_role = ?,"
                f" view_text = ?, {VIEW_WRITTEN} WHERE session_id = ? AND stable_id = ?",
                (new.decode(), role, flat, session_id, stable_id),
            )
            items += 1
            reclaimed += old_bytes - len(new)
    return TranscriptRetention(
        items=items, bytes=reclaimed, remaining=len(rows) > RETENTION_BATCH_ITEMS
    )
