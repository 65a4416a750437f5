"""Writing a session's projection rebuilt from its relay log: one transaction.

:func:`commit_reprojection` takes the whole-history page
:func:`relaystore.domain.projection.rebuild.rebuild` made, and in one transaction
checks that the session is still at the page's end (nothing was applied since the log
was read), resets the session's materialized rows to its history start, writes the
page over them (:func:`storage.projection.commit_page`, without a new log row: the log
is what was read) and appends only the API events the feed lacks
(:func:`~relaystore.domain.projection.rebuild.feed_to_append`). Retention is a rule of
the projection, so it applies again, in the same transaction, to the rebuilt transcript
behind the session's checkpoint (:func:`storage.retention.compact_transcript`, every
pass): a body ``compact`` shrank stays shrunk. Committed API events are never rewritten
or deleted; the relay log, the session record, its checkpoint and its history start are
left as they are.
"""

from __future__ import annotations

from collections import Counter

import apsw

from ..domain.errors import ProjectionError, UnknownSession
from ..domain.projection.page import PageDelta
from ..domain.projection.rebuild import (
    ReprojectReport,
    caught_up_from,
    feed_to_append,
    first_changed_position,
)
from .materialized import load_frontier, load_materialized_session
from .paging import load_latest_seq
from .projection import commit_page
from .retention import compact_transcript
from .transaction import transaction

__all__ = ["commit_reprojection", "reset_projection"]


def reset_projection(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    """Empty the session's materialized rows and set its frontier to ``page.start``
    (inside the caller's transaction)."""
    for table in (
        "materialized_transcript_items",
        "materialized_queued_prompts",
        "api_config_results",
        "session_turn_usage",
        "session_provider_cost",
        "projection_behind",
    ):
        connection.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
    connection.execute(
        "UPDATE materialized_sessions SET applied_event_ordinal = ?, applied_event_digest = ?, "
        "last_activity_at_ms = NULL, execution_state = 'idle', running_started_at_ms = NULL, "
        "session_title = NULL, configuration_json = '{}', pending_elicitations_json = '[]', "
        "active_turn_json = NULL, last_turn_outcome_json = NULL WHERE session_id = ?",
        (page.start.ordinal, page.start.digest, session_id),
    )


def commit_reprojection(
    connection: apsw.Connection, session_id: str, page: PageDelta
) -> ReprojectReport:
    """Replace the session's projection by ``page`` (a whole history); see the module doc.

    Raises :class:`UnknownSession` for a session without a projection and
    :class:`ProjectionError` (nothing written) when the stored frontier is not the
    page's end: events were applied after the log was read.
    """
    with transaction(connection, f"reproject session {session_id}"):
        stored = load_frontier(connection, session_id)
        if stored is None:
            raise UnknownSession(session_id)
        if stored != page.end:
            raise ProjectionError(
                f"the session moved to ordinal {stored.ordinal} while it was reprojected from "
                f"its log up to ordinal {page.end.ordinal}; nothing was changed, reproject it "
                "again",
                session_id=session_id,
            )
        before = load_materialized_session(connection, session_id)
        assert before is not None
        bodies = [
            str(body)
            for (body,) in connection.execute(
                "SELECT body FROM api_events WHERE session_id = ?", (session_id,)
            )
        ]
        appended = feed_to_append(page.api_events, bodies)
        page.api_events = appended
        first_seq = load_latest_seq(connection) + 1 if appended else None
        reset_projection(connection, session_id, page)
        commit_page(connection, session_id, page, log=False, logged=True)
        retention = compact_transcript(connection, session_id)
        while retention.remaining and retention.items:  # every pass, in this transaction
            retention = compact_transcript(connection, session_id)
        after = load_materialized_session(connection, session_id)
        assert after is not None
    kinds = Counter(event.kind for _, _, event in appended)
    return ReprojectReport(
        session_id=session_id,
        events_reprojected=page.applied,
        appended_by_kind=dict(kinds),
        first_appended_seq=first_seq,
        first_changed_position=first_changed_position(before.transcript, after.transcript),
        frontier_ordinal=page.end.ordinal,
        behind=after.projection_behind,
        caught_up_from=caught_up_from(before.projection_behind, after.projection_behind),
    )
