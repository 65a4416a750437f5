"""The reads of ``relaystore audit``: a session's projection (with each item's stored
role and text), relay log, feed and checkpoint frontier (what retention may have acted
on) at once.

Guarantees: :func:`load_audit_view` reads the three in one read transaction, so they
are one committed state. A page's projection, its log row and its API events commit in
one transaction (:func:`relaystore.storage.projection.commit_page`), so beside a writer
that keeps committing, the log never holds events the projection has not applied and
the feed never lacks an event the projection derived: a clean store audits clean.
"""

from __future__ import annotations

import apsw

from ..domain.api_events import ApiEvent, ApiEventFilter
from ..domain.audit import AuditView
from ..domain.paging import MAX_PAGE_LIMIT
from .materialized import load_materialized_session
from .paging import load_api_events
from .relay_log import load_relay_log
from .sessions import load_checkpoint_frontier
from .transaction import transaction

__all__ = ["load_audit_view"]


def load_audit_view(connection: apsw.Connection, session_id: str) -> AuditView | None:
    """The session's projection, log and feed in one snapshot (None: no projection)."""
    with transaction(connection, f"read session {session_id} for an audit"):
        projection = load_materialized_session(connection, session_id)
        log = load_relay_log(connection, session_id)
        if projection is None or log is None:
            return None
        checkpoint = load_checkpoint_frontier(connection, session_id)
        views = {
            str(stable_id): (str(role), str(text))
            for stable_id, role, text in connection.execute(
                "SELECT stable_id, view_role, view_text FROM materialized_transcript_items"
                " WHERE session_id = ? AND view_role IS NOT NULL AND view_text IS NOT NULL",
                (session_id,),
            )
        }
        feed: list[ApiEvent] = []
        only = ApiEventFilter(session_id=session_id)
        after = 0
        while True:
            page = load_api_events(connection, only, after, MAX_PAGE_LIMIT)
            if not page.events:
                break
            feed.extend(page.events)
            after = page.next_after_seq
    return AuditView(
        projection=projection,
        log=log,
        feed=feed,
        retention_frontier=checkpoint,
        stored_views=views,
    )
