"""Replaying a relay journal into an open store, as ``relaystore replay`` does.

:func:`replay_source` resumes at the store's frontier for the session (creating a
minimal session record when the store lacks it), reads the journal with
:class:`actors.journals.JournalReader`, and sends the events in batches of
:data:`BATCH` to the session's projector, which verifies, projects and commits them a
page at a time. A bad event or line raises its typed error, located at its file and
line; every complete page before it stays committed and nothing of the page that holds
it does. A torn final line is reported in the result, never applied.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field

from relaystore.actors.journals import JournalReader, JournalSource, Location, TornTail
from relaystore.actors.projector import PAGE_SIZE
from relaystore.actors.store import EventStore
from relaystore.domain.errors import StoreError
from relaystore.domain.messages import LoadMaterializedSession, ObserveRelayEvents, SaveSession
from relaystore.domain.relay import RelayEvent
from relaystore.domain.runtime import HarnessKind
from relaystore.domain.sessions import DEFAULT_WORKSPACE_ID, SessionRecord, SessionState

__all__ = ["BATCH", "ReplayReport", "minimal_record", "replay_source"]

BATCH = 4 * PAGE_SIZE
"""Events per ``ObserveRelayEvents``: a whole number of pages, so pages stay aligned."""


@dataclass
class ReplayReport:
    """What one replay did: events read from the journal and what became of them."""

    session_id: str
    read: int = 0
    applied: int = 0
    already_applied: int = 0
    torn_tails: list[TornTail] = field(default_factory=list)


def minimal_record(
    session_id: str, workspace: str | None = None, *, at: str | None = None
) -> SessionRecord:
    """The record a replay creates for a session the store lacks (validated).

    ``at`` is its created and updated time (default: now, RFC 3339 in UTC).
    """
    stamp = at or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = SessionRecord(
        id=session_id,
        workspace_id=workspace or DEFAULT_WORKSPACE_ID,
        title=f"replayed {session_id}",
        harness_kind=HarnessKind.CODEX,
        last_profile="replay",
        bundle_id="replay",
        target_template_id="local",
        state=SessionState.STOPPED,
        created_at=stamp,
        updated_at=stamp,
    )
    record.validate()
    return record


def replay_source(
    store: EventStore,
    source: JournalSource,
    *,
    workspace: str | None = None,
    on_batch: Callable[[ReplayReport], object] | None = None,
) -> ReplayReport:
    """Replay ``source`` into ``store`` from the store's frontier; see the module doc.

    ``workspace`` is the workspace of a session the store lacks; ``on_batch`` gets the
    running report after each committed batch (for progress).
    """
    report = ReplayReport(session_id=source.session_id)
    current = store.ask(LoadMaterializedSession(session_id=source.session_id))
    if current is None:
        store.ask(SaveSession(record=minimal_record(source.session_id, workspace)))
    after = None if current is None or current.applied_event_ordinal == 0 else current.frontier
    reader = JournalReader(source, after=after, on_torn_tail=report.torn_tails.append)
    batch: list[RelayEvent] = []
    where: dict[int, Location] = {}
    try:
        for event, location in reader:
            batch.append(event)
            where[event.ordinal] = location
            if len(batch) == BATCH:
                _observe(store, report, batch, where)
                if on_batch is not None:
                    on_batch(report)
                batch, where = [], {}
    except StoreError:
        # A bad line ends the replay as a bad event would: the complete pages read
        # before it are committed, nothing of the page that holds it.
        complete = len(batch) - len(batch) % PAGE_SIZE
        if complete:
            _observe(store, report, batch[:complete], where)
        raise
    if batch:
        _observe(store, report, batch, where)
    return report


def _observe(
    store: EventStore, report: ReplayReport, batch: list[RelayEvent], where: dict[int, Location]
) -> None:
    report.read += len(batch)
    try:
        result = store.ask(ObserveRelayEvents(session_id=report.session_id, events=batch))
    except StoreError as exc:
        location = where.get(exc.ordinal) if exc.ordinal is not None else None
        if location is None and batch:
            location = where.get(batch[0].ordinal)
        if location is not None and exc.path is None:
            raise exc.located(path=str(location.path), line=location.line) from exc
        raise
    report.applied += result.applied
    report.already_applied += result.already_applied
