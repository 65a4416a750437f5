"""Replaying a relay journal into an open store, as ``relaystore replay`` does.

:func:`replay_source` resumes at the store's frontier for the session (genesis for a
session the store lacks), reads the journal with
:class:`relaystore.actors.journal.JournalReader`, which judges every event by the chain
rule (:func:`relaystore.domain.chain.advance`) except its digest, and sends the events
in batches of :data:`BATCH` to the session's projector, which hashes, projects and
commits them a page at a time. An exact duplicate line is already applied, as in
``verify``.

:class:`ReplayReport` says what one replay did, for the command's per-session summary:
events read, applied and already applied, API events written, the frontier it left, and
(before reading, when the journal's files or ``relay-state.json`` tell it) how many
events it expects to send, for a progress bar's total.

The record of a session replay creates takes what the journal says: its harness from the
newest runtime receipt among the events applied (an ``agent_initialized`` observation
carrying a runtime; ``codex`` until one is seen), its ``created_at`` from the first event
applied and its ``updated_at`` from the last (RFC 3339, UTC, milliseconds). A later
replay into a record replay made (profile, bundle and target ``replay``/``replay``/
``local``) moves ``updated_at`` (and the harness, at a newer receipt) on; a record the
supervisor saved is never touched.

A bad event or line raises its typed error, located at its file and line: the first
problem in reading order, as ``verify`` reports it. Every complete page before it stays
committed and nothing of the page that holds it does, except at a gap or a line of a kind
this build does not know (fault ``unknown_kind``, written by a newer worker): neither is
damage, so every event before it (the good prefix) is committed. A refused replay leaves the store
as it was: a session the store lacks is created (with a minimal record) only once the
first page is read and its digests verified, and deleted again if that page is refused
before anything of it applied. A torn final line is reported in the result, never
applied.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..domain.chain import GENESIS, check_own_digest
from ..domain.errors import ChainFault, RelayChainError, StoreError
from ..domain.materialized import ProjectionBehind
from ..domain.messages import (
    DeleteSession,
    LoadMaterializedSession,
    ProjectionReport,
    SaveSession,
    SeedProjection,
)
from ..domain.reads import LoadSessionDetail
from ..domain.relay.events import RelayEvent, RelayLine
from ..domain.relay.observations import AgentInitialized
from ..domain.relay.payloads import RelayCursor
from ..domain.runtime import HarnessKind
from ..domain.sessions.records import DEFAULT_WORKSPACE_ID, SessionRecord, SessionState
from .journal import JournalReader, JournalSource, Location, TornTail
from .journal.start import history_start
from .projector import PAGE_SIZE
from .store import EventStore
from .store_internals import store_internals

__all__ = [
    "AHEAD",
    "BATCH",
    "REPLAY_PROFILE",
    "ReplayReport",
    "minimal_record",
    "replay_source",
    "timestamp",
]

BATCH = 4 * PAGE_SIZE
"""Events per ``ObserveRelayEvents``: a whole number of pages, so pages stay aligned."""

AHEAD = 2
"""Batches handed to the projector before the oldest is waited for. A batch sent after
one that fails cannot apply anything: its first event is past the failure, a gap from
the committed frontier, so the first failure is the one reported. With two, a projection
worker finds the next batch waiting when it finishes one."""


logger = logging.getLogger(__name__)

_PREFIX_FAULTS = frozenset({ChainFault.GAP, ChainFault.UNKNOWN_KIND})
"""Faults that are not damage: every event read before one is committed."""


@dataclass
class ReplayReport:
    """What one replay did: events read from the journal and what became of them.

    ``written`` counts the API events committed; ``frontier`` is the session's frontier
    when the replay ended (None while the store lacks the session); ``expected`` is the
    number of events past the starting frontier the journal holds, when its files or its
    ``relay-state.json`` tell it (a progress bar's total: ``read`` runs up to it).
    """

    session_id: str
    read: int = 0
    applied: int = 0
    already_applied: int = 0
    written: int = 0
    frontier: RelayCursor | None = None
    expected: int | None = None
    torn_tails: list[TornTail] = field(default_factory=list)
    held: int = 0
    """Events kept in the relay log but not projected: the session is behind."""
    first_at_ms: int | None = None
    """``recorded_at_ms`` of the first event read (a created record's ``created_at``)."""
    last_at_ms: int | None = None
    """``recorded_at_ms`` of the last event committed (the record's ``updated_at``)."""
    harness: HarnessKind | None = None
    """The harness of the newest runtime receipt committed (None: none seen)."""
    behind: ProjectionBehind | None = None
    """Why the session's projection stopped short of ``frontier`` (None: it did not)."""


REPLAY_PROFILE = "replay"
"""The profile and bundle of a record replay made (its target is ``local``)."""


def minimal_record(
    session_id: str,
    workspace: str | None = None,
    *,
    at: str | None = None,
    updated: str | None = None,
    harness: HarnessKind = HarnessKind.CODEX,
) -> SessionRecord:
    """The record a replay creates for a session the store lacks (validated).

    ``at`` is its created time and ``updated`` its updated time (default ``at``; ``at``
    defaults to now, RFC 3339 in UTC); ``harness`` the harness its journal names.
    """
    stamp = at or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = SessionRecord(
        id=session_id,
        workspace_id=workspace or DEFAULT_WORKSPACE_ID,
        title=f"replayed {session_id}",
        harness_kind=harness,
        last_profile=REPLAY_PROFILE,
        bundle_id=REPLAY_PROFILE,
        target_template_id="local",
        state=SessionState.STOPPED,
        created_at=stamp,
        updated_at=updated or stamp,
    )
    record.validate()
    return record


def replay_source(
    store: EventStore,
    source: JournalSource,
    *,
    workspace: str | None = None,
    on_batch: Callable[[ReplayReport], object] | None = None,
    on_start: Callable[[ReplayReport], object] | None = None,
    from_first: bool = False,
) -> ReplayReport:
    """Replay ``source`` into ``store`` from the store's frontier; see the module doc.

    A session with nothing applied yet starts where its journal does: at a worker root's
    ``relay-seed.json`` frontier when there is one; at the first event's position when
    the journal does not start at ordinal 1 and ``from_first`` is set (without it such a
    journal is refused, a gap from genesis naming the option; see
    :func:`~relaystore.actors.journal.start.history_start`, which ``verify`` shares).

    ``workspace`` is the workspace of a session the store lacks. For progress,
    ``on_start`` gets the report before the first event is read (its ``expected`` and
    starting ``frontier`` set), and ``on_batch`` the running report after each committed
    batch, the last one included. When ``on_batch`` raises (Ctrl-C), the batches already
    handed over are waited for and counted first: the report counts exactly what was
    committed.
    """
    report = ReplayReport(session_id=source.session_id)
    current = store.ask(LoadMaterializedSession(session_id=source.session_id))
    start = GENESIS if current is None else current.kept_frontier
    report.frontier = None if current is None else start
    seeding, note = None, None
    if start.ordinal == 0:
        history = history_start(source, from_first=from_first)
        if history.refusal is not None:
            raise history.refusal
        start, note = history.after, history.note
        if history.origin != "genesis":
            seeding = SeedProjection(
                session_id=source.session_id,
                start=history.after,
                queued_prompts=history.queued_prompts,
                source=history.origin,
            )
    last = source.last_ordinal
    if last is not None:
        report.expected = max(0, last - start.ordinal)
    first_seq = store.latest_seq
    if on_start is not None:
        on_start(report)
    sender = _Sender(store, report, missing=current is None, workspace=workspace, seeding=seeding)
    reader = JournalReader(
        source,
        after=start,
        on_torn_tail=report.torn_tails.append,
        after_note=note,
        keep_unknown=store.relay_log,
    )
    batch: list[RelayEvent | RelayLine] = []
    where: dict[int, Location] = {}
    events = iter(reader)
    flights: deque[Callable[[], None]] = deque()
    """The batches handed over and not yet waited for, oldest first: they project while
    the next one is read."""

    def land(keep: int = 0) -> None:
        while len(flights) > keep:
            flights.popleft()()
            if on_batch is not None:
                try:
                    on_batch(report)
                except BaseException:
                    # The caller stops here (Ctrl-C): the batches handed over commit all
                    # the same, so they are waited for and counted, and the report says
                    # exactly what was committed.
                    with contextlib.suppress(StoreError):
                        while flights:
                            flights.popleft()()
                    raise

    try:
        while True:
            try:
                item = next(events, None)
            except StoreError as fault:
                land()  # a batch before the fault comes first in the journal
                # A bad line or chain fault ends the replay as a bad event would: the
                # complete pages read before it are committed, nothing of the page that
                # holds it. A gap is not damage but missing history (fetch more, replay
                # again), and a line of a newer worker's kind is not damage either
                # (upgrade, replay again): every event before either is the good
                # prefix, and all of it is committed. A bad digest among the events read before the fault comes
                # first in the journal, so it is the one to report.
                whole = isinstance(fault, RelayChainError) and fault.fault in _PREFIX_FAULTS
                keep = len(batch) if whole else len(batch) - len(batch) % PAGE_SIZE
                if keep:
                    sender.observe(batch[:keep], where)
                _check_digests(batch[keep:], source.session_id, where)
                with contextlib.suppress(StoreError):  # the fault is what to report
                    _sync_record(store, report)
                raise
            if item is None:
                break
            event, location = item
            batch.append(event)
            where[event.ordinal] = location
            if report.first_at_ms is None:
                report.first_at_ms = event.recorded_at_ms
            if len(batch) == BATCH:
                land(keep=AHEAD - 1)
                flights.append(sender.submit(batch, where))
                batch, where = [], {}
        land()
        if batch:
            sender.observe(batch, where)
            if on_batch is not None:
                on_batch(report)
        _sync_record(store, report)
    finally:
        report.read += reader.already_applied
        report.already_applied += reader.already_applied
        report.written = store.latest_seq - first_seq
        logger.info(
            "replayed %s into session %s: %d read, %d applied, %d already applied, "
            "%d API events written",
            source.path,
            report.session_id,
            report.read,
            report.applied,
            report.already_applied,
            report.written,
        )
    return report


class _Sender:
    """Sends batches to the session's projector; creates a session the store lacks just
    before its first batch, and deletes it again if that batch applied nothing."""

    def __init__(
        self,
        store: EventStore,
        report: ReplayReport,
        *,
        missing: bool,
        workspace: str | None,
        seeding: SeedProjection | None,
    ) -> None:
        self.store = store
        self.report = report
        self.missing = missing
        self.workspace = workspace
        self.seeding = seeding

    def observe(self, batch: list[RelayEvent | RelayLine], where: dict[int, Location]) -> None:
        self.submit(batch, where)()

    def submit(
        self, batch: list[RelayEvent | RelayLine], where: dict[int, Location]
    ) -> Callable[[], None]:
        """Hand ``batch`` over; the returned call waits for it and counts it in the
        report (or raises its error, located). A session's first batch is waited for
        here: it creates the session, and deletes it again if it applies nothing."""
        if not self.missing and self.seeding is None:
            return _submit(self.store, self.report, batch, where)
        created = False
        if self.missing:
            # The first page is checked before the session exists, so input that is no
            # journal at all (or starts with a bad digest) never creates it.
            _check_digests(batch[:PAGE_SIZE], self.report.session_id, where)
            first = self.report.first_at_ms
            self.store.ask(
                SaveSession(
                    record=minimal_record(
                        self.report.session_id,
                        self.workspace,
                        at=None if first is None else timestamp(first),
                        harness=self.report.harness or HarnessKind.CODEX,
                    )
                )
            )
            self.missing = False
            created = True
        try:
            if self.seeding is not None:
                self.store.ask(self.seeding)
                self.seeding = None
            _submit(self.store, self.report, batch, where)()
        except StoreError:
            if created:
                self._delete_if_empty()
            raise
        return _landed

    def _delete_if_empty(self) -> None:
        session_id = self.report.session_id
        stored = self.store.ask(LoadMaterializedSession(session_id=session_id))
        if stored is not None and stored.kept_frontier.ordinal == 0:
            self.store.ask(DeleteSession(session_id=session_id))


def _check_digests(
    events: list[RelayEvent | RelayLine], session_id: str, where: dict[int, Location]
) -> None:
    """Raise the first bad digest among ``events``, located at its line."""
    for event in events:
        try:
            check_own_digest(event, session_id=session_id)
        except RelayChainError as exc:
            location = where.get(event.ordinal)
            if location is None:
                raise
            raise exc.located(path=str(location.path), line=location.line) from exc


def _landed() -> None:
    """A batch already waited for."""


def _submit(
    store: EventStore,
    report: ReplayReport,
    batch: list[RelayEvent | RelayLine],
    where: dict[int, Location],
) -> Callable[[], None]:
    wait = store_internals(store).observe_decoded(report.session_id, batch)
    return lambda: _count(wait, report, batch, where)


def _count(
    wait: Callable[[], ProjectionReport],
    report: ReplayReport,
    batch: list[RelayEvent | RelayLine],
    where: dict[int, Location],
) -> None:
    report.read += len(batch)
    try:
        result = wait()
    except StoreError as exc:
        location = where.get(exc.ordinal) if exc.ordinal is not None else None
        if location is None and batch:
            location = where.get(batch[0].ordinal)
        if location is not None and exc.path is None:
            raise exc.located(path=str(location.path), line=location.line) from exc
        raise
    report.applied += result.applied
    report.already_applied += result.already_applied
    report.frontier = RelayCursor(ordinal=result.frontier_ordinal, digest=result.frontier_digest)
    if result.applied:
        _note_journal_facts(report, batch, result.frontier_ordinal)
    report.held += result.held
    report.behind = result.behind


def timestamp(at_ms: int) -> str | None:
    """``at_ms`` (Unix milliseconds) as RFC 3339 in UTC, to the millisecond; None past
    year 9999 (a journal may carry any 64-bit time; the record then keeps its own)."""
    try:
        moment = datetime.datetime.fromtimestamp(at_ms // 1000, datetime.UTC)
    except (OverflowError, ValueError, OSError):
        return None
    if moment.year > 9999:
        return None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at_ms % 1000:03d}Z"


def _note_journal_facts(
    report: ReplayReport, batch: list[RelayEvent | RelayLine], frontier: int
) -> None:
    """What a committed batch says for the record: the time of the event at the new
    frontier and the harness of the newest runtime receipt at or before it."""
    for event in batch:
        if event.ordinal > frontier:
            break
        if event.ordinal == frontier:
            report.last_at_ms = event.recorded_at_ms
        observation = event.observation if isinstance(event, RelayEvent) else None
        if isinstance(observation, AgentInitialized) and observation.data.runtime is not None:
            report.harness = observation.data.runtime.harness


def _sync_record(store: EventStore, report: ReplayReport) -> None:
    """Bring a record replay made up to what the committed events say (module doc)."""
    if report.last_at_ms is None:
        return  # nothing committed: the record says what it said
    detail = store.ask(LoadSessionDetail(session_id=report.session_id))
    if detail is None or (detail.profile_id, detail.bundle_id, detail.target_id) != (
        REPLAY_PROFILE,
        REPLAY_PROFILE,
        "local",
    ):
        return
    updated = timestamp(report.last_at_ms) or detail.updated_at
    harness = report.harness or HarnessKind(detail.harness_kind)
    if (updated, harness.value) == (detail.updated_at, detail.harness_kind):
        return
    record = minimal_record(
        report.session_id,
        detail.workspace_id,
        at=detail.created_at,
        updated=updated,
        harness=harness,
    )
    store.ask(SaveSession(record=record))
