"""Running a maintenance request: what ``relaystore compact``, ``reproject``,
``prune-log``, ``vacuum``, ``delete`` and ``checkpoint`` do to an open store.

:func:`run_request` is the one place each of them is carried out, and the one place
their printed lines are worded: the command runs it on a store it opened itself (no
writer held it), and the maintenance desk of the store a supervisor holds runs it there
(:mod:`relaystore.actors.maintenance_requests`), so the answer is the same either way.
It orchestrates only: every step is a message of the store (its checks, its actor, its
one transaction), so a request stopped midway leaves whole steps behind.

Guarantees: a step's typed error becomes the answer's one line (``error``) and its
type's name (``error_type``); a ``reproject`` of several sessions goes on past one it
cannot rebuild, names it on ``err`` and fails the answer, as the command always did.
"""

from __future__ import annotations

import datetime
import os
from typing import TYPE_CHECKING, Any

from ..domain.errors import StoreError, UnknownSession
from ..domain.ids import validate_id
from ..domain.maintenance import (
    CheckpointRequest,
    CompactRequest,
    DeleteRequest,
    MaintenanceAnswer,
    MaintenanceRequest,
    PruneLogRequest,
    ReprojectRequest,
    VacuumRequest,
)
from ..domain.messages import (
    CompactStore,
    CompactTranscript,
    DeleteSession,
    LoadState,
    LoadStats,
    PruneRelayLog,
    Reproject,
)
from ..domain.reads import LoadSessionDetail
from ..domain.sessions import CheckpointMetadata
from .cli.output import plural
from .internal import RecordCheckpoint

if TYPE_CHECKING:
    from .core import StoreCore

__all__ = ["failed_answer", "run_request"]


def failed_answer(error: StoreError) -> MaintenanceAnswer:
    """The answer of a request refused as a whole by ``error``."""
    return MaintenanceAnswer(
        failed=True, error=" ".join(str(error).split()), error_type=type(error).__name__
    )


def run_request(core: StoreCore, path: str, request: MaintenanceRequest) -> MaintenanceAnswer:
    """Carry out ``request`` on the open store ``core`` (its file: ``path``)."""
    try:
        return _run(_Asker(core), path, request)
    except StoreError as exc:
        return failed_answer(exc)


class _Asker:
    """Asks the store as the facade does: a public message is checked first."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    def __call__(self, message: Any) -> Any:
        if not isinstance(message, RecordCheckpoint):
            self._core.check_message(message)
        self._core.check_open()
        return self._core.ask_blocking(message)


def _run(ask: _Asker, path: str, request: MaintenanceRequest) -> MaintenanceAnswer:
    match request:
        case CompactRequest(session_id=session_id):
            return _compact(ask, session_id)
        case ReprojectRequest(session_ids=session_ids, behind=behind):
            return _reproject(ask, session_ids, behind)
        case PruneLogRequest(session_id=session_id, through_ordinal=through):
            report = ask(PruneRelayLog(session_id=session_id, through_ordinal=through))
            starts = (
                "empty" if report.log_starts_at is None else f"at ordinal {report.log_starts_at}"
            )
            return MaintenanceAnswer(
                out=[
                    f"pruned the relay log of {report.session_id}: "
                    f"{plural(report.pages_pruned, 'page')}, "
                    f"{plural(report.events_pruned, 'event')}; it now starts {starts}"
                ]
            )
        case VacuumRequest():
            vacuumed = ask(CompactStore())
            return MaintenanceAnswer(
                out=[
                    f"vacuumed {path}: {plural(vacuumed.bytes_before, 'byte')} before, "
                    f"{vacuumed.bytes_after} after, {vacuumed.bytes_reclaimed} reclaimed "
                    f"({plural(vacuumed.pages_before, 'page')} of {vacuumed.page_size} bytes "
                    f"before, {vacuumed.pages_after} after)"
                ]
            )
        case DeleteRequest(session_id=session_id):
            validate_id("session", session_id)
            if ask(LoadSessionDetail(session_id=session_id)) is None:
                raise UnknownSession(session_id)
            ask(DeleteSession(session_id=session_id))
            return MaintenanceAnswer(
                out=[
                    f"deleted session {session_id}: its record, events, activity, checkpoint "
                    "and projection (its usage stays)"
                ]
            )
        case CheckpointRequest():
            return _checkpoint(ask, request)
    raise AssertionError(request)  # pragma: no cover - the union is matched whole


def _compact(ask: _Asker, session_id: str | None) -> MaintenanceAnswer:
    if session_id is not None:
        sessions = [session_id]
    else:
        state = ask(LoadState())
        sessions = [sid for sid, record in state.sessions.items() if record.checkpoint]
    out: list[str] = []
    total_items = total_bytes = 0
    for sid in sessions:
        items = reclaimed = 0
        while True:  # one transaction per pass: the writer serves between them
            report = ask(CompactTranscript(session_id=sid))
            items, reclaimed = items + report.items, reclaimed + report.bytes
            if not report.remaining or not report.items:
                break
        out.append(
            f"session {sid}: {plural(items, 'tool call')} compacted, "
            f"{plural(reclaimed, 'byte')} reclaimed"
        )
        total_items, total_bytes = total_items + items, total_bytes + reclaimed
    out.append(
        f"compacted {plural(total_items, 'tool call')} in "
        f"{plural(len(sessions), 'session')}, {plural(total_bytes, 'byte')} reclaimed"
    )
    return MaintenanceAnswer(out=out)


def _reproject(ask: _Asker, given: list[str], behind: bool) -> MaintenanceAnswer:
    sessions = list(given) if given else sorted(ask(LoadState()).sessions)
    out: list[str] = []
    err: list[str] = []
    if behind:
        waiting = ask(LoadStats()).projection_behind
        sessions = [session_id for session_id in sessions if session_id in waiting]
        if not sessions:
            out.append("no session is behind its relay log")
    for session_id in sessions:
        try:
            report = ask(Reproject(session_id=session_id))
        except StoreError as exc:
            err.append(" ".join(str(exc).split()))
            continue
        appended = ", ".join(f"{n} {kind}" for kind, n in sorted(report.appended_by_kind.items()))
        changed = report.first_changed_position
        out.append(
            f"reprojected {session_id}: {plural(report.events_reprojected, 'event')}; "
            f"API events appended: {appended or 'none'}; first changed transcript "
            f"position: {'none' if changed is None else changed}"
        )
        if report.caught_up_from is not None:
            out.append(
                f"  caught up: the projection was behind at ordinal {report.caught_up_from}"
                " and now reaches the frontier"
                if report.behind is None
                else f"  caught up from ordinal {report.caught_up_from}"
            )
        if report.behind is not None:
            out.append(f"  still {report.behind.describe()}")
    return MaintenanceAnswer(out=out, err=err, failed=bool(err))


def _checkpoint(ask: _Asker, request: CheckpointRequest) -> MaintenanceAnswer:
    validate_id("session", request.session_id)
    checkpoint = CheckpointMetadata(
        archive_path=request.archive_path,
        sha256=request.sha256,
        created_at=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        event_frontier=request.through_ordinal,
    )
    replaced = ask(RecordCheckpoint(session_id=request.session_id, checkpoint=checkpoint))
    before = "it had none" if replaced is None else f"it covered ordinal {replaced.event_frontier}"
    return MaintenanceAnswer(
        out=[
            f"recorded the checkpoint of session {request.session_id} through ordinal "
            f"{request.through_ordinal} (archive {os.fspath(request.archive_path)}, "
            f"sha256 {request.sha256}); {before}. compact and prune-log act on it"
        ]
    )
