"""``relaystore audit``: re-derive sessions and compare them with what the store holds.

:func:`audit_session` derives a session from its relay log in the store, or from a
worker journal given (read with every digest and link checked, up to the store's
frontier), with this build's rules, and compares (:mod:`relaystore.domain.audit`): the
events the store applied against the journal's, the stored projection against the
derived one, and the session's API events against the derived ones. It only reads, so
it runs on a store opened read-only, beside a running writer: the projection, the log
and the feed it compares are read in one snapshot
(:func:`relaystore.storage.audit.load_audit_view`), so a page the writer commits
meanwhile is in all three or in none.
"""

from __future__ import annotations

from ..domain.audit import (
    AuditResult,
    AuditView,
    Divergence,
    first_event_divergence,
    first_feed_divergence,
    first_projection_divergence,
    first_view_divergence,
    pruned_through,
)
from ..domain.errors import RelayLogUnavailable, StoreError
from ..domain.materialized import HistoryStart, MaterializedSession
from ..domain.projection.rebuild import Rebuilt, rebuild, rebuild_from
from ..domain.reads import unknown_session_text
from ..domain.relay.events import RelayEvent, RelayLine
from ..domain.wire import encode
from .journal import JournalReader, JournalSource
from .journal.start import history_start
from .store import EventStore
from .store_internals import store_internals

__all__ = ["audit_session"]


def _feed(view: AuditView) -> list[tuple[int, str, str]]:
    """``(seq, type, body)`` of the session's API events, in seq order."""
    return [
        (event.seq, event.type, encode({"type": event.type, "data": event.data}).decode())
        for event in view.feed
    ]


def _from_journal(
    source: JournalSource, stored: MaterializedSession
) -> tuple[Rebuilt, list[RelayEvent | RelayLine], Divergence | None]:
    """Derive the session from ``source`` up to the stored frontier."""
    history = history_start(source, from_first=True)
    start = MaterializedSession.empty(source.session_id)
    if history.origin == "seed":
        start.applied_event_ordinal = history.after.ordinal
        start.applied_event_digest = history.after.digest
        start.queued_prompts = list(history.queued_prompts)
        start.history_start = HistoryStart(ordinal=history.after.ordinal + 1, source="seed")
    after = history.after if history.origin == "seed" else None
    frontier = stored.kept_frontier.ordinal
    events: list[RelayEvent | RelayLine] = []
    for event, _ in JournalReader(source, check_chain=True, after=after, keep_unknown=True):
        if event.ordinal > frontier:
            break
        events.append(event)
    rebuilt = rebuild_from(start, events)
    short = None
    reached = rebuilt.projection.frontier.ordinal
    if reached < frontier:
        short = Divergence(
            where=f"ordinal {reached + 1}",
            stored=f"events applied through ordinal {frontier}",
            derived=f"the journal ends at ordinal {reached}",
            ordinal=reached + 1,
        )
    return rebuilt, events, short


def audit_session(
    store: EventStore, session_id: str, journal: JournalSource | None = None
) -> AuditResult:
    """Audit one session against its log, or against ``journal`` when given."""
    source = "log" if journal is None else str(journal.path)
    view = store_internals(store).audit_view(session_id)
    if view is None:
        return AuditResult(
            session_id=session_id,
            source=source,
            events=0,
            api_events=0,
            refused=unknown_session_text(session_id),
        )
    stored, log, feed = view.projection, view.log, _feed(view)
    through = pruned_through(log.coverage, view.retention_frontier)
    if journal is None and through is not None:
        return AuditResult(
            session_id=session_id,
            source=source,
            events=0,
            api_events=len(feed),
            pruned=(
                f"its relay log was pruned through ordinal {through}, which its verified "
                f"checkpoint covers (through ordinal {view.retention_frontier}): the log no "
                "longer re-derives it; audit it against its journals with --journals"
            ),
        )
    try:
        if journal is None:
            rebuilt = rebuild(log, action="audit")
            applied: list[RelayEvent | RelayLine] = []
            journal_events: list[RelayEvent | RelayLine] = []
            short = None
        else:
            rebuilt, journal_events, short = _from_journal(journal, stored)
            applied = list(log.events()) if log.pages else []
    except RelayLogUnavailable as exc:
        return AuditResult(
            session_id=session_id,
            source=source,
            events=0,
            api_events=len(feed),
            refused=exc.detail,
        )
    except StoreError as exc:  # a damaged log or journal cannot be derived at all
        return AuditResult(
            session_id=session_id,
            source=source,
            events=0,
            api_events=len(feed),
            divergence=Divergence(
                where="derivation", stored="(the stored history)", derived=f"refused: {exc}"
            ),
        )
    derived = rebuilt.projection.session
    divergence = (
        first_event_divergence(applied, journal_events)
        or short
        or first_projection_divergence(stored, derived, view.retention_frontier)
        or first_view_divergence(stored, view.stored_views)
        or first_feed_divergence([event for _, _, event in rebuilt.page.api_events], feed)
    )
    return AuditResult(
        session_id=session_id,
        source=source,
        events=rebuilt.page.applied,
        api_events=len(feed),
        divergence=divergence,
    )
