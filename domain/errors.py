"""The errors relaystore raises, all rooted at :class:`StoreError`.

The tree::

    StoreError
    ├── InvalidInput        a message, record, relay line or argument fails validation
    ├── RelayChainError     gap, fork, duplicate with another digest, bad digest, unknown format
    │   └── UnknownRelayKind  a command, outcome, observation or reason newer than this build
    ├── ProjectionError     a relay event the projection cannot apply (integrity rules)
    ├── RelayLogUnavailable a session's relay log cannot rebuild it (off, pruned) or be pruned
    ├── SchemaMismatch      needs migration, incompatible floor, invalid metadata, rollback
    ├── UnknownSession      a write that needs an existing session
    ├── LifecycleConflict   a checkpoint begun while another lifecycle operation runs
    ├── WriterStopped       the writer refused further work after an unclassified failure
    ├── WorkerLost          the projection worker process died twice on one message
    ├── AskTimeout          an ask got no reply within its timeout (also a TimeoutError)
    ├── StoreClosed         a message after ``close()``
    ├── StoreLocked         another process holds the store for writing
    ├── RequestUnanswered   no writer took a maintenance request in time (withdrawn,
    │                       nothing done; also a TimeoutError)
    ├── StoreForked         the store's history is not what a stream published under its
    │                       id (a backup restored after later events were published)
    └── StoreBusy           another connection held SQLite's write lock past the busy
                            timeout; nothing of the batch was written: retry

Every error builds a message a person can act on and keeps its context (session,
ordinal, file, line) as attributes, so callers can react without parsing text.
"""

from __future__ import annotations

import enum

from .protocol import RELAY_PROTOCOL_VERSION

__all__ = [
    "AskTimeout",
    "ChainFault",
    "InvalidInput",
    "LifecycleConflict",
    "ProjectionError",
    "RelayChainError",
    "RelayLogUnavailable",
    "RequestUnanswered",
    "SchemaMismatch",
    "SchemaMismatchReason",
    "StoreClosed",
    "StoreBusy",
    "StoreError",
    "StoreForked",
    "StoreLocked",
    "UnknownRelayKind",
    "UnknownSession",
    "WorkerLost",
    "WriterStopped",
]


class StoreError(Exception):
    """Root of every error relaystore raises on purpose.

    ``session_id``, ``ordinal``, ``path`` and ``line`` say where the problem is, when
    known; ``detail`` is the bare description without that location prefix.
    """

    def __init__(
        self,
        detail: str,
        *,
        session_id: str | None = None,
        ordinal: int | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.detail = detail
        self.session_id = session_id
        self.ordinal = ordinal
        self.path = path
        self.line = line
        super().__init__(self._compose())

    def _compose(self) -> str:
        where: list[str] = []
        if self.path is not None:
            where.append(f"{self.path}:{self.line}" if self.line is not None else self.path)
        if self.session_id is not None:
            where.append(f"session {self.session_id}")
        if self.ordinal is not None:
            where.append(f"ordinal {self.ordinal}")
        return f"{', '.join(where)}: {self.detail}" if where else self.detail

    def located(
        self,
        *,
        session_id: str | None = None,
        ordinal: int | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> StoreError:
        """Return a copy of this error of the same type with more location filled in."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.session_id = self.session_id if session_id is None else session_id
        clone.ordinal = self.ordinal if ordinal is None else ordinal
        clone.path = self.path if path is None else path
        clone.line = self.line if line is None else line
        Exception.__init__(clone, clone._compose())
        return clone

    def __reduce__(self) -> tuple[object, ...]:
        # Errors cross thread and process boundaries (futures, CLI subprocesses).
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type[StoreError], state: dict[str, object]) -> StoreError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error._compose())
    return error


class InvalidInput(StoreError):
    """A message, record, relay line or argument fails validation."""


class ChainFault(enum.Enum):
    """What kind of break a :class:`RelayChainError` reports."""

    GAP = "gap"
    FORK = "fork"
    BAD_DIGEST = "bad_digest"
    UNKNOWN_FORMAT = "unknown_format"
    ORDINAL_OUT_OF_RANGE = "ordinal_out_of_range"
    UNKNOWN_KIND = "unknown_kind"
    """A command, outcome, observation or reason this build does not know: the line was
    written by a newer worker (see :class:`UnknownRelayKind`)."""


class RelayChainError(StoreError):
    """A relay event breaks the chain: gap, fork, bad digest or unknown format.

    ``fault`` says which, so a caller can tell a gap (fetch more) from a fork (stop).
    """

    def __init__(
        self,
        fault: ChainFault,
        detail: str,
        *,
        session_id: str | None = None,
        ordinal: int | None = None,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        self.fault = fault
        super().__init__(detail, session_id=session_id, ordinal=ordinal, path=path, line=line)


class UnknownRelayKind(RelayChainError):
    """A journal line of a kind this build does not know: a newer worker wrote it.

    ``fault`` is :attr:`ChainFault.UNKNOWN_KIND`; ``kind`` is the unknown value as read,
    ``position`` what it names (``observation``, ``command``, ``command kind``,
    ``command outcome`` or ``reason``), ``path`` where in the line it stands, and
    ``envelope`` the event's :class:`~relaystore.domain.relay.RelayLine`, from which its
    digest can still be checked (:func:`relaystore.domain.digests.validate_relay_event_self`), so
    a line of a newer worker can be told from a damaged one.
    """

    def __init__(
        self,
        kind: str,
        position: str,
        path: str,
        envelope: object,
        *,
        session_id: str | None = None,
        ordinal: int | None = None,
    ) -> None:
        self.kind = kind
        self.position = position
        self.envelope = envelope
        super().__init__(
            ChainFault.UNKNOWN_KIND,
            f"unknown relay {position} {kind!r} at `{path}`: this journal was written by a "
            f"newer worker than this build reads (relay protocol {RELAY_PROTOCOL_VERSION}); "
            "upgrade relaystore to "
            "replay it",
            session_id=session_id,
            ordinal=ordinal,
        )


class ProjectionError(StoreError):
    """A relay event that the materialized projection cannot apply."""


class RelayLogUnavailable(StoreError):
    """A session's relay log cannot do what was asked: it does not hold the session's
    whole history (the log was off for a while, or a prefix was pruned), so the session
    cannot be reprojected; or a prune would remove events no verified checkpoint covers."""


class UnknownSession(StoreError):
    """A write that needs an existing session found none."""

    def __init__(self, session_id: str) -> None:
        super().__init__("unknown session; save it first", session_id=session_id)


class LifecycleConflict(StoreError):
    """A checkpoint operation collides with another lifecycle operation or owner."""


class WriterStopped(StoreError):
    """The writer refused work after a failure it could not classify."""


class WorkerLost(StoreError):
    """The projection worker process died twice while projecting one message.

    Every page committed before it stays committed; the session reloads from the store
    with its next event (a new worker is started for it).
    """


class AskTimeout(StoreError, TimeoutError):
    """An ``ask`` got no reply within its timeout.

    The message was handed over before the time ran out, so it may still take effect:
    a write may commit after this was raised. Ask again (a re-sent relay event is
    idempotent) or read the store to learn what happened.
    """


STORE_CLOSED = "the store is closed; open it again to send messages"
"""What :class:`StoreClosed` says unless told more (the one wording of it)."""


class StoreClosed(StoreError):
    """The store was closed before the message was accepted."""

    def __init__(self, detail: str = STORE_CLOSED, *, path: str | None = None) -> None:
        super().__init__(detail, path=path)


class StoreLocked(StoreError):
    """Another process holds the store open for writing: ``holder_pid`` is that process
    when the lock file names it (a writer of this build stamps its pid there)."""

    def __init__(
        self, detail: str, *, holder_pid: int | None = None, path: str | None = None
    ) -> None:
        self.holder_pid = holder_pid
        super().__init__(detail, path=path)


class RequestUnanswered(StoreError, TimeoutError):
    """No writer took a maintenance request within its time.

    The request was withdrawn before anyone took it, so nothing of it was done; run the
    command again (when the store's writer takes requests, or is gone). ``request_id``
    names it.
    """

    def __init__(self, detail: str, *, request_id: str, path: str | None = None) -> None:
        self.request_id = request_id
        super().__init__(detail, path=path)


class StoreForked(StoreError):
    """The store's history is not the one a NATS stream holds under its store id.

    A backup restored after later events were published: its seqs run behind, or its
    events differ from, the ones published under the same id. Publishing it under that
    id would give the id two histories; ``relaystore new-store-id`` gives the restored
    store an id of its own. ``store_id`` and ``stream_seq`` say which id and which seq.
    """

    def __init__(self, detail: str, *, store_id: str, stream_seq: int) -> None:
        self.store_id = store_id
        self.stream_seq = stream_seq
        super().__init__(detail)


class StoreBusy(StoreError):
    """Another connection held SQLite's write lock longer than the writer's busy timeout.

    Transient and retryable: nothing of the refused batch was written, and the writer
    goes on serving (its next batch waits for the lock again). An operator's ``sqlite3``
    shell, a backup or a replication tool holding a write transaction causes it; the
    store's own writer never does. ``EventStore.metrics()`` counts these refusals.
    """


class SchemaMismatchReason(enum.Enum):
    """Why a store's schema cannot be used by this build."""

    NEEDS_MIGRATION = "needs_migration"
    INCOMPATIBLE = "incompatible"
    INVALID_METADATA = "invalid_metadata"
    ROLLBACK = "rollback"


class SchemaMismatch(StoreError):
    """The store's schema revision cannot be used by this build as it is.

    ``found`` is the store's revision, ``supported`` this build's, ``minimum`` the
    store's compatibility floor (for ``INCOMPATIBLE``) or the revision seen before (for
    ``ROLLBACK``).
    """

    def __init__(
        self,
        reason: SchemaMismatchReason,
        *,
        found: int,
        supported: int,
        minimum: int | None = None,
        path: str | None = None,
    ) -> None:
        self.reason = reason
        self.found = found
        self.supported = supported
        self.minimum = minimum
        super().__init__(_schema_text(reason, found, supported, minimum), path=path)


def _schema_text(
    reason: SchemaMismatchReason, found: int, supported: int, minimum: int | None
) -> str:
    if reason is SchemaMismatchReason.NEEDS_MIGRATION:
        return (
            f"relaystore schema {found} is not the supported schema {supported}; "
            "open the store for writing once to migrate it"
        )
    if reason is SchemaMismatchReason.INCOMPATIBLE:
        return (
            f"relaystore schema {found} requires at least build schema {minimum} for reads and "
            f"writes; this build supports {supported}; upgrade relaystore or restore a backup "
            "made by the older build"
        )
    if reason is SchemaMismatchReason.ROLLBACK:
        return (
            f"relaystore schema rolled back from {minimum} to {found} underneath this writer; "
            f"refusing writes from build schema {supported}"
        )
    return (
        f"relaystore schema {found} has missing or invalid compatibility metadata; "
        f"refusing access from build schema {supported}"
    )
