"""Writing, reading and pruning the relay log (``relay_log_pages``).

:func:`write_log_page` is called by :func:`storage.projection.commit_page` inside the
page's transaction, so a page and its log row commit or roll back together: the log's
last ordinal is the projection's frontier whenever the log is on. Packing and what the
rows cover are decided in :mod:`relaystore.domain.relay.log`.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.errors import InvalidInput, RelayLogUnavailable, UnknownSession
from ..domain.materialized import MaterializedQueuedPrompt
from ..domain.projection.page import PageDelta
from ..domain.relay.log import (
    LogPageSpan,
    PruneReport,
    StoredRelayLog,
    unpack_lines,
)
from ..domain.relay.payloads import RelayCursor
from .materialized import load_frontier
from .sessions import load_checkpoint_frontier
from .stored_columns import decode_stored
from .transaction import transaction

_SEED_QUEUE = msgspec.json.Decoder(list[MaterializedQueuedPrompt])

__all__ = [
    "load_log_spans",
    "load_logged_line",
    "load_relay_log",
    "prune_relay_log",
    "write_log_page",
]


def write_log_page(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    """Keep ``page``'s events as one log row (inside the caller's transaction)."""
    row = page.log_row()
    if row is None:
        return
    connection.execute(
        "INSERT INTO relay_log_pages(session_id, first_ordinal, last_ordinal, raw_bytes, lines) "
        "VALUES (?, ?, ?, ?, ?)",
        (session_id, row.first_ordinal, row.last_ordinal, row.raw_bytes, row.lines),
    )


def _history_first(connection: apsw.Connection, session_id: str) -> tuple[int, str]:
    row = connection.execute(
        "SELECT first_ordinal, source FROM materialized_history_start WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return (1, "genesis") if row is None else (int(row[0]), str(row[1]))


def load_log_spans(connection: apsw.Connection, session_id: str) -> list[LogPageSpan]:
    """The ordinals each of the session's log pages holds, oldest first."""
    return [
        LogPageSpan(first_ordinal=first, last_ordinal=last)
        for first, last in connection.execute(
            "SELECT first_ordinal, last_ordinal FROM relay_log_pages WHERE session_id = ? "
            "ORDER BY first_ordinal",
            (session_id,),
        )
    ]


def load_relay_log(connection: apsw.Connection, session_id: str) -> StoredRelayLog | None:
    """The session's log pages (compressed) with its frontier and history start, in one
    snapshot; None when the store has no projection of the session."""
    with transaction(connection, f"read the relay log of session {session_id}"):
        frontier = load_frontier(connection, session_id)
        if frontier is None:
            return None
        first, source = _history_first(connection, session_id)
        seed_row = connection.execute(
            "SELECT start_ordinal, start_digest, queued_prompts_json FROM materialized_seeds "
            "WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        pages = [
            (int(low), int(high), bytes(blob))
            for low, high, blob in connection.execute(
                "SELECT first_ordinal, last_ordinal, lines FROM relay_log_pages "
                "WHERE session_id = ? ORDER BY first_ordinal",
                (session_id,),
            )
        ]
    return StoredRelayLog(
        session_id=session_id,
        frontier=frontier,
        history_first=first,
        history_source=source,
        pages=pages,
        seed=None
        if seed_row is None
        else (
            RelayCursor(ordinal=int(seed_row[0]), digest=str(seed_row[1])),
            decode_stored(_SEED_QUEUE, str(seed_row[2]), "seed queue", session_id),
        ),
    )


def load_logged_line(connection: apsw.Connection, session_id: str, ordinal: int) -> bytes | None:
    """The journal line of ``ordinal`` as the session's log keeps it (None: not kept)."""
    row = connection.execute(
        "SELECT first_ordinal, lines FROM relay_log_pages WHERE session_id = ? "
        "AND first_ordinal <= ? AND last_ordinal >= ? ORDER BY first_ordinal DESC LIMIT 1",
        (session_id, ordinal, ordinal),
    ).fetchone()
    if row is None:
        return None
    first = int(row[0])
    lines = unpack_lines(bytes(row[1]), session_id=session_id, first_ordinal=first)
    index = ordinal - first
    return lines[index] if 0 <= index < len(lines) else None


def prune_relay_log(
    connection: apsw.Connection, session_id: str, through_ordinal: int
) -> PruneReport:
    """Delete the session's log pages that end at or before ``through_ordinal``.

    Only a prefix a verified checkpoint covers may go: raises
    :class:`RelayLogUnavailable` when the session has no checkpoint, or its
    checkpoint's event frontier is below ``through_ordinal``. A page that straddles
    ``through_ordinal`` is kept whole. One transaction.
    """
    if through_ordinal < 1:
        raise InvalidInput(
            f"prune the relay log through ordinal 1 or more, not {through_ordinal}",
            session_id=session_id,
        )
    with transaction(connection, f"prune the relay log of session {session_id}"):
        if load_frontier(connection, session_id) is None:
            raise UnknownSession(session_id)
        covered = load_checkpoint_frontier(connection, session_id)
        if covered is None:
            raise RelayLogUnavailable(
                f"cannot prune the relay log of session {session_id}: it has no verified "
                "checkpoint, so no prefix of its history is covered elsewhere",
                session_id=session_id,
            )
        if through_ordinal > covered:
            raise RelayLogUnavailable(
                f"cannot prune the relay log of session {session_id} through ordinal "
                f"{through_ordinal}: its verified checkpoint covers events only through "
                f"ordinal {covered}",
                session_id=session_id,
                ordinal=through_ordinal,
            )
        gone = connection.execute(
            "SELECT count(*), coalesce(sum(last_ordinal - first_ordinal + 1), 0) "
            "FROM relay_log_pages WHERE session_id = ? AND last_ordinal <= ?",
            (session_id, through_ordinal),
        ).fetchone()
        assert gone is not None
        connection.execute(
            "DELETE FROM relay_log_pages WHERE session_id = ? AND last_ordinal <= ?",
            (session_id, through_ordinal),
        )
        first = connection.execute(
            "SELECT min(first_ordinal) FROM relay_log_pages WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    return PruneReport(
        session_id=session_id,
        pages_pruned=int(gone[0]),
        events_pruned=int(gone[1]),
        log_starts_at=None if first is None or first[0] is None else int(first[0]),
    )
