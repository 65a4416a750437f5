"""Running a maintenance request: what ``relaystore compact``, ``reproject``,
``prune-log``, ``vacuum``, ``delete`` and ``checkpoint`` do to an open store.

:func:`run_request` is the one place each of them is carried out, and the one place
their printed lines are worded: the command runs it on a store it opened itself (no
writer held it), and the maintenance desk of the store a supervisor holds runs it there
(:mod:`relaystore.actors.maintenance.desk`), so the answer is the same either way.
It orchestrates only: every step is a message of the store (its checks, its actor, its
one transaction), so a request stopped midway leaves whole steps behind.

Each request's result is first a typed outcome
(:data:`~relaystore.domain.maintenance.MaintenanceOutcome`, what ``--json`` prints), and
its text lines are worded from that outcome in one place (:func:`answered`).

Guarantees: a step's typed error becomes the answer's one line (``error``) and its
type's name (``error_type``); a ``reproject`` of several sessions goes on past one it
cannot rebuild, names it on ``err`` and fails the answer, as the command always did.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any, Protocol

from ...domain.errors import StoreError, UnknownSession
from ...domain.ids import validate_id
from ...domain.maintenance import (
    CheckpointOutcome,
    CheckpointRequest,
    CompactedSession,
    CompactOutcome,
    CompactRequest,
    DeleteOutcome,
    DeleteRequest,
    MaintenanceAnswer,
    MaintenanceOutcome,
    MaintenanceRequest,
    PruneLogOutcome,
    PruneLogRequest,
    ReprojectedSession,
    ReprojectOutcome,
    ReprojectRequest,
    VacuumOutcome,
    VacuumRequest,
)
from ...domain.messages import (
    CompactStore,
    CompactTranscript,
    DeleteSession,
    LoadState,
    LoadStats,
    PruneRelayLog,
    Reproject,
)
from ...domain.reads import LoadSessionDetail, unknown_session_text
from ...domain.sessions.records import CheckpointMetadata
from ...domain.wording import plural
from ..internal import RecordCheckpoint

__all__ = ["MaintainedStore", "answered", "error_text", "failed_answer", "run_request"]


class MaintainedStore(Protocol):
    """What maintenance asks of an open store: its file, its checks, its blocking ask,
    and closing it. The store's core (:class:`~relaystore.actors.core.StoreCore`) is one;
    it starts the desk, so nothing here imports it: the core, or a command's opener,
    hands it in."""

    @property
    def path(self) -> Path: ...

    def check_open(self) -> None: ...

    def check_message(self, message: object) -> None: ...

    def ask_blocking(self, message: Any, timeout: float | None = None) -> Any: ...

    def close(self) -> None: ...


def failed_answer(error: StoreError) -> MaintenanceAnswer:
    """The answer of a request refused as a whole by ``error``."""
    return MaintenanceAnswer(failed=True, error=error_text(error), error_type=type(error).__name__)


def error_text(error: StoreError) -> str:
    """``error`` as one line of an answer; a session the store lacks is worded as every
    command and route words it (``unknown_session_text``)."""
    if isinstance(error, UnknownSession) and error.session_id is not None:
        return unknown_session_text(error.session_id)
    return " ".join(str(error).split())


def run_request(core: MaintainedStore, path: str, request: MaintenanceRequest) -> MaintenanceAnswer:
    """Carry out ``request`` on the open store ``core`` (its file: ``path``)."""
    try:
        return _carry_out(_Asker(core), path, request)
    except StoreError as exc:
        return failed_answer(exc)


class _Asker:
    """Asks the store as the facade does: a public message is checked first."""

    def __init__(self, core: MaintainedStore) -> None:
        self._core = core

    def __call__(self, message: Any) -> Any:
        if not isinstance(message, RecordCheckpoint):
            self._core.check_message(message)
        self._core.check_open()
        return self._core.ask_blocking(message)


def _carry_out(ask: _Asker, path: str, request: MaintenanceRequest) -> MaintenanceAnswer:
    match request:
        case CompactRequest(session_id=session_id):
            return answered(_compact_sessions(ask, session_id))
        case ReprojectRequest(session_ids=session_ids, behind=behind):
            return answered(_reproject_sessions(ask, session_ids, behind))
        case PruneLogRequest(session_id=session_id, through_ordinal=through):
            report = ask(PruneRelayLog(session_id=session_id, through_ordinal=through))
            return answered(
                PruneLogOutcome(
                    session_id=report.session_id,
                    pages_pruned=report.pages_pruned,
                    events_pruned=report.events_pruned,
                    log_starts_at=report.log_starts_at,
                )
            )
        case VacuumRequest():
            vacuumed = ask(CompactStore())
            return answered(
                VacuumOutcome(
                    path=path,
                    bytes_before=vacuumed.bytes_before,
                    bytes_after=vacuumed.bytes_after,
                    bytes_reclaimed=vacuumed.bytes_reclaimed,
                    pages_before=vacuumed.pages_before,
                    pages_after=vacuumed.pages_after,
                    page_size=vacuumed.page_size,
                    wal_truncated=vacuumed.wal_truncated,
                )
            )
        case DeleteRequest(session_id=session_id):
            validate_id("session", session_id)
            if ask(LoadSessionDetail(session_id=session_id)) is None:
                raise UnknownSession(session_id)
            ask(DeleteSession(session_id=session_id))
            return answered(DeleteOutcome(session_id=session_id))
        case CheckpointRequest():
            return answered(_take_checkpoint(ask, request))
    raise AssertionError(request)  # pragma: no cover - the union is matched whole


def answered(outcome: MaintenanceOutcome) -> MaintenanceAnswer:
    """The answer of a request that ran: its text lines worded from ``outcome`` (the one
    place they are worded), failed when a session of it could not be done."""
    out: list[str] = []
    err: list[str] = []
    match outcome:
        case CompactOutcome():
            for done in outcome.sessions:
                out.append(
                    f"session {done.session_id}: {plural(done.tool_calls, 'tool call')} "
                    f"compacted, {plural(done.bytes_reclaimed, 'byte')} reclaimed"
                )
            out.append(
                f"compacted {plural(outcome.tool_calls, 'tool call')} in "
                f"{plural(len(outcome.sessions), 'session')}, "
                f"{plural(outcome.bytes_reclaimed, 'byte')} reclaimed"
            )
        case ReprojectOutcome():
            if outcome.behind_only and not outcome.sessions and not outcome.failures:
                out.append("no session is behind its relay log")
            for rebuilt in outcome.sessions:
                out.extend(_reprojected_lines(rebuilt))
            err.extend(outcome.failures)
        case PruneLogOutcome():
            starts = (
                "empty" if outcome.log_starts_at is None else f"at ordinal {outcome.log_starts_at}"
            )
            out.append(
                f"pruned the relay log of {outcome.session_id}: "
                f"{plural(outcome.pages_pruned, 'page')}, "
                f"{plural(outcome.events_pruned, 'event')}; it now starts {starts}"
            )
            if outcome.pages_pruned:
                out.append(
                    f"session {outcome.session_id} can no longer be audited or reprojected "
                    "from its relay log (audit reports it pruned): keep its checkpoint "
                    "archive and journals, and audit it with audit --journals"
                )
        case VacuumOutcome():
            out.append(
                f"vacuumed {outcome.path}: {plural(outcome.bytes_before, 'byte')} before, "
                f"{outcome.bytes_after} after, {outcome.bytes_reclaimed} reclaimed "
                f"({plural(outcome.pages_before, 'page')} of {outcome.page_size} bytes "
                f"before, {outcome.pages_after} after)"
            )
            if not outcome.wal_truncated:
                out.append(
                    "the -wal keeps its size until a later checkpoint (a reader held an old "
                    "snapshot); it shrinks when the writer closes"
                )
        case DeleteOutcome():
            out.append(
                f"deleted session {outcome.session_id}: its record, events, activity, "
                "checkpoint and projection (its usage stays)"
            )
        case CheckpointOutcome():
            before = (
                "it had none"
                if outcome.replaced_through is None
                else f"it covered ordinal {outcome.replaced_through}"
            )
            out.append(
                f"recorded the checkpoint of session {outcome.session_id} through ordinal "
                f"{outcome.through_ordinal} (archive {outcome.archive_path}, "
                f"sha256 {outcome.sha256}); {before}. compact and prune-log act on it"
            )
    return MaintenanceAnswer(out=out, err=err, failed=bool(err), outcome=outcome)


def _reprojected_lines(rebuilt: ReprojectedSession) -> list[str]:
    appended = ", ".join(f"{n} {kind}" for kind, n in sorted(rebuilt.appended_by_kind.items()))
    changed = rebuilt.first_changed_position
    lines = [
        f"reprojected {rebuilt.session_id}: {plural(rebuilt.events_reprojected, 'event')}; "
        f"API events appended: {appended or 'none'}; first changed transcript "
        f"position: {'none' if changed is None else changed}"
    ]
    if rebuilt.caught_up_from is not None:
        lines.append(
            f"  caught up: the projection was behind at ordinal {rebuilt.caught_up_from}"
            " and now reaches the frontier"
            if rebuilt.behind is None
            else f"  caught up from ordinal {rebuilt.caught_up_from}"
        )
    if rebuilt.behind is not None:
        lines.append(f"  still {rebuilt.behind.describe()}")
    return lines


def _compact_sessions(ask: _Asker, session_id: str | None) -> CompactOutcome:
    if session_id is not None:
        sessions = [session_id]
    else:
        state = ask(LoadState())
        sessions = [sid for sid, record in state.sessions.items() if record.checkpoint]
    done: list[CompactedSession] = []
    for sid in sessions:
        items = reclaimed = 0
        while True:  # one transaction per pass: the writer serves between them
            report = ask(CompactTranscript(session_id=sid))
            items, reclaimed = items + report.items, reclaimed + report.bytes
            if not report.remaining or not report.items:
                break
        done.append(CompactedSession(session_id=sid, tool_calls=items, bytes_reclaimed=reclaimed))
    return CompactOutcome(
        sessions=done,
        tool_calls=sum(session.tool_calls for session in done),
        bytes_reclaimed=sum(session.bytes_reclaimed for session in done),
    )


def _reproject_sessions(ask: _Asker, given: list[str], behind: bool) -> ReprojectOutcome:
    sessions = list(given) if given else sorted(ask(LoadState()).sessions)
    if behind:
        waiting = ask(LoadStats()).projection_behind
        sessions = [session_id for session_id in sessions if session_id in waiting]
    rebuilt: list[ReprojectedSession] = []
    failures: list[str] = []
    for session_id in sessions:
        try:
            report = ask(Reproject(session_id=session_id))
        except StoreError as exc:
            failures.append(error_text(exc))
            continue
        rebuilt.append(
            ReprojectedSession(
                session_id=session_id,
                events_reprojected=report.events_reprojected,
                appended_by_kind=dict(report.appended_by_kind),
                first_changed_position=report.first_changed_position,
                caught_up_from=report.caught_up_from,
                behind=report.behind,
            )
        )
    return ReprojectOutcome(behind_only=behind, sessions=rebuilt, failures=failures)


def _take_checkpoint(ask: _Asker, request: CheckpointRequest) -> CheckpointOutcome:
    validate_id("session", request.session_id)
    checkpoint = CheckpointMetadata(
        archive_path=request.archive_path,
        sha256=request.sha256,
        created_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        event_frontier=request.through_ordinal,
    )
    replaced = ask(RecordCheckpoint(session_id=request.session_id, checkpoint=checkpoint))
    return CheckpointOutcome(
        session_id=request.session_id,
        through_ordinal=request.through_ordinal,
        archive_path=os.fspath(request.archive_path),
        sha256=request.sha256,
        replaced_through=None if replaced is None else replaced.event_frontier,
    )
