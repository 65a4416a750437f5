"""Maintenance requests: the keeping a command asks of the process that writes the store.

``relaystore compact``, ``reproject``, ``prune-log``, ``vacuum``, ``delete`` and
``checkpoint`` change the store, and one process writes a store. When a supervisor
holds it, the command does not open a second writer: it records a request (one of the
structs here, stored as its JSON in ``maintenance_requests``), the supervisor's store
takes it, runs it and records a :class:`MaintenanceAnswer`, and the command prints that
answer. This module is the rule of it, pure: what a request is, its states, and the
bounds. :mod:`relaystore.storage.requests` keeps the rows;
:mod:`relaystore.actors.maintenance.runs` runs a request, the desk takes them and the
command waits for them.

A request's life: ``pending`` (recorded; the requester may withdraw it) -> ``running``
(a writer took it; from here nobody withdraws it) -> ``done`` or ``failed`` with its
answer. A writer that stops while one runs leaves it ``running``; the next writer to
open the store fails it as :data:`INTERRUPTED` (each step of a request is its own
transaction, so what it did before the stop is whole, and what it had not done did not
happen). A pending request whose requester is gone is failed as :data:`ABANDONED`
instead of run: nobody waits for its answer.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .errors import InvalidInput, StoreBusy, StoreLocked
from .materialized import ProjectionBehind
from .wire import encode

__all__ = [
    "failed_for_a_lock",
    "ABANDONED",
    "INTERRUPTED",
    "KEPT_ANSWERS",
    "MAX_OPEN_REQUESTS",
    "MAX_REQUEST_BYTES",
    "CheckpointOutcome",
    "CheckpointRequest",
    "CompactOutcome",
    "CompactRequest",
    "CompactedSession",
    "DeleteOutcome",
    "DeleteRequest",
    "MaintenanceAnswer",
    "MaintenanceOutcome",
    "MaintenanceRequest",
    "PruneLogOutcome",
    "PruneLogRequest",
    "ReprojectOutcome",
    "ReprojectRequest",
    "ReprojectedSession",
    "VacuumOutcome",
    "RequestState",
    "StoredRequest",
    "VacuumRequest",
    "decode_request",
    "encode_request",
    "request_kind",
]

MAX_OPEN_REQUESTS = 64
"""The most requests that may wait (pending or running) at once; one more is refused."""
KEPT_ANSWERS = 256
"""How many answered requests the store keeps (the newest), so a command run again with
its request id still finds its answer; older ones are deleted as new ones are answered."""
MAX_REQUEST_BYTES = 64 * 1024
"""The longest request JSON (a ``reproject`` naming many sessions stays far below it)."""

INTERRUPTED = (
    "the store's writer stopped while it ran this request; what it did before the stop "
    "is whole (each step is one transaction): run the command again"
)
ABANDONED = (
    "the command that asked for this request was gone before a writer took it; it was not run"
)

RequestState = Literal["pending", "running", "done", "failed"]


class _Request(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, tag_field="kind"
):
    """A maintenance request (one subclass per command)."""


class CompactRequest(_Request, frozen=True, tag="compact"):
    """``relaystore compact [SESSION]``: retention passes behind each checkpoint."""

    session_id: str | None = None


class ReprojectRequest(_Request, frozen=True, tag="reproject"):
    """``relaystore reproject [SESSION...] [--behind]``."""

    session_ids: list[str] = []
    behind: bool = False


class PruneLogRequest(_Request, frozen=True, tag="prune-log"):
    """``relaystore prune-log SESSION --through N``."""

    session_id: str
    through_ordinal: int


class VacuumRequest(_Request, frozen=True, tag="vacuum"):
    """``relaystore vacuum``."""


class DeleteRequest(_Request, frozen=True, tag="delete"):
    """``relaystore delete SESSION``."""

    session_id: str


class CheckpointRequest(_Request, frozen=True, tag="checkpoint"):
    """``relaystore checkpoint SESSION --through N --archive PATH``: record a verified
    checkpoint (the archive's SHA-256 as the command read it)."""

    session_id: str
    through_ordinal: int
    archive_path: str
    sha256: str


MaintenanceRequest = (
    CompactRequest
    | ReprojectRequest
    | PruneLogRequest
    | VacuumRequest
    | DeleteRequest
    | CheckpointRequest
)

_REQUEST_DECODER = msgspec.json.Decoder(MaintenanceRequest)


def encode_request(request: MaintenanceRequest) -> str:
    """The request's JSON: one spelling per request, so an identical request run again
    finds the open one (the store keeps one open request per spelling)."""
    text = encode(request).decode()
    if len(text) > MAX_REQUEST_BYTES:
        raise InvalidInput(
            f"the {request_kind(request)} request is {len(text)} bytes long; at most "
            f"{MAX_REQUEST_BYTES} are taken (name fewer sessions at a time)"
        )
    return text


def decode_request(text: str) -> MaintenanceRequest:
    """A stored request; :class:`InvalidInput` for one this build does not read."""
    try:
        return _REQUEST_DECODER.decode(text)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"a maintenance request this build does not read: {exc}") from None


def request_kind(request: MaintenanceRequest) -> str:
    """The command the request stands for (its tag)."""
    kind: str = type(request).__struct_config__.tag  # type: ignore[assignment]
    return kind


class _Outcome(msgspec.Struct, frozen=True, kw_only=True, tag_field="command"):
    """What a request did, as fields (one subclass per command, tagged with its name):
    ``--json`` prints them; the answer's text lines are worded from them."""


class CompactedSession(msgspec.Struct, frozen=True, kw_only=True):
    """One session of a ``compact``: the tool calls it forgot and the bytes reclaimed."""

    session_id: str
    tool_calls: int
    bytes_reclaimed: int


class CompactOutcome(_Outcome, frozen=True, tag="compact"):
    """``compact``: each session compacted, and the totals."""

    sessions: list[CompactedSession]
    tool_calls: int
    bytes_reclaimed: int


class ReprojectedSession(msgspec.Struct, frozen=True, kw_only=True):
    """One session of a ``reproject``: the events it re-derived, the API events appended
    per kind, the first transcript position that changed, the ordinal it caught up from
    (if it was behind), and where it is still behind (if it is)."""

    session_id: str
    events_reprojected: int
    appended_by_kind: dict[str, int]
    first_changed_position: int | None
    caught_up_from: int | None
    behind: ProjectionBehind | None


class ReprojectOutcome(_Outcome, frozen=True, tag="reproject"):
    """``reproject``: the sessions rebuilt, and the one line of each it could not
    rebuild (``failures``; the request then failed). ``behind_only``: ``--behind``."""

    behind_only: bool
    sessions: list[ReprojectedSession]
    failures: list[str]


class PruneLogOutcome(_Outcome, frozen=True, tag="prune-log"):
    """``prune-log``: what was pruned, and the first ordinal the log still holds (None:
    the log is now empty)."""

    session_id: str
    pages_pruned: int
    events_pruned: int
    log_starts_at: int | None


class VacuumOutcome(_Outcome, frozen=True, tag="vacuum"):
    """``vacuum``: the store's size before and after, in bytes and in pages."""

    path: str
    bytes_before: int
    bytes_after: int
    bytes_reclaimed: int
    pages_before: int
    pages_after: int
    page_size: int
    wal_truncated: bool = True
    """Whether the ``-wal`` was checkpointed and truncated after it (see
    :class:`~relaystore.domain.reports.VacuumReport`)."""


class DeleteOutcome(_Outcome, frozen=True, tag="delete"):
    """``delete``: the session deleted (its usage stays)."""

    session_id: str


class CheckpointOutcome(_Outcome, frozen=True, tag="checkpoint"):
    """``checkpoint``: the checkpoint recorded, and the ordinal the one it replaced
    covered (None: the session had none)."""

    session_id: str
    through_ordinal: int
    archive_path: str
    sha256: str
    replaced_through: int | None


MaintenanceOutcome = (
    CompactOutcome
    | ReprojectOutcome
    | PruneLogOutcome
    | VacuumOutcome
    | DeleteOutcome
    | CheckpointOutcome
)


class MaintenanceAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """What a request's command prints: ``out`` on stdout, ``err`` on stderr, and whether
    it failed (exit 1). ``error`` is the one line of a request refused as a whole, and
    ``error_type`` the name of its :class:`~relaystore.domain.errors.StoreError`.

    ``outcome`` is what the request did, as fields (``out`` and ``err`` are worded from
    it; None when it was refused as a whole, or answered by an older build), and
    ``writer_pid`` the process whose maintenance desk ran it (None: the command ran it
    on the store it opened itself)."""

    out: list[str] = []
    err: list[str] = []
    failed: bool = False
    error: str | None = None
    error_type: str | None = None
    outcome: MaintenanceOutcome | None = None
    writer_pid: int | None = None


_LOCK_FAILURES = frozenset({StoreBusy.__name__, StoreLocked.__name__})


def failed_for_a_lock(answer: MaintenanceAnswer) -> bool:
    """Whether the run ``answer`` tells failed only because another connection held
    SQLite's lock past the busy timeout (:class:`StoreBusy`, as the writer refuses a
    batch, or :class:`StoreLocked`): nothing of the failed step was written, and a run
    once the lock has passed may succeed."""
    return answer.failed and answer.error_type in _LOCK_FAILURES


class StoredRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A request row as the store keeps it."""

    request_id: str
    kind: str
    request_json: str
    state: RequestState
    requester_pid: int
    taken_by_pid: int | None = None
    answer: MaintenanceAnswer | None = None
    damaged: str | None = None
    """Why the row does not read (an open row read by the desk, which fails it instead
    of stopping on it); None for a row that reads."""
    rowid: int | None = None
    """The damaged row's place in its table (its id may not read); None otherwise."""

    @property
    def answered(self) -> bool:
        return self.state in ("done", "failed")
