"""A session's lifecycle save: which fields it owns, how it merges, when it is a fault.

:mod:`relaystore.storage.sessions` reads the stored record and writes what these decide.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .api_events import ApiSessionFault
from .outcomes import OutcomeReason
from .sessions.records import SessionRecord

__all__ = ["LIFECYCLE_FIELDS", "keep_viewed", "lifecycle_fault", "merge_lifecycle", "startup_fault"]

LIFECYCLE_FIELDS: tuple[str, ...] = (
    "title",
    "harness_kind",
    "last_profile",
    "target_template_id",
    "state",
    "updated_at",
    "last_error",
    "resource_allocation",
    "last_checkpoint_error",
    "project_directory",
    "managed_worktree",
    "build_cache",
    "target_runtime",
    "target",
)
"""The record fields a lifecycle save owns (plus ``viewed_through_event_ordinal``, which
only moves forward). Everything else (checkpoint, native session id, display titles,
draft, archived flag, mounts, container settings, launch and checkout details,
sub-agents, workspace and bundle) keeps its stored value."""


def merge_lifecycle(
    stored: SessionRecord, record: SessionRecord, also: Iterable[str] = ()
) -> SessionRecord:
    """``stored`` with ``record``'s lifecycle fields (and those named in ``also``)."""
    names = (*LIFECYCLE_FIELDS, "viewed_through_event_ordinal", *also)
    return msgspec.structs.replace(stored, **{name: getattr(record, name) for name in names})


def keep_viewed(record: SessionRecord, previous_viewed: int) -> SessionRecord:
    """``record`` whose ``viewed_through_event_ordinal`` never moves back."""
    if record.viewed_through_event_ordinal < previous_viewed:
        return msgspec.structs.replace(record, viewed_through_event_ordinal=previous_viewed)
    return record


def lifecycle_fault(previous_error: object, record: SessionRecord) -> ApiSessionFault | None:
    """The ``session_fault`` (``lifecycle_failed``) a save yields: exactly when
    ``last_error`` becomes a new non-null value (a re-save of the same error, or a
    cleared one, yields none)."""
    message = record.last_error
    if message is None or message == previous_error:
        return None
    return ApiSessionFault.of(
        reason=OutcomeReason.LIFECYCLE_FAILED, message=message, command_id=None
    )


def startup_fault(message: str) -> ApiSessionFault:
    """The ``session_fault`` (``startup_failed``) a session's failed start yields."""
    return ApiSessionFault.of(reason=OutcomeReason.STARTUP_FAILED, message=message, command_id=None)
