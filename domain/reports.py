"""Replies that describe the store itself: backups, compaction and live metrics."""

from __future__ import annotations

import msgspec

from .materialized import ProjectionBehind

__all__ = ["BackupReport", "StoreMetrics", "StoreStats", "VacuumReport", "stats_document"]


class BackupReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a backup wrote: a complete, verified single-file store at ``path``."""

    path: str
    pages: int
    latest_seq: int
    schema_revision: int


class VacuumReport(msgspec.Struct, frozen=True, kw_only=True):
    """What compaction reclaimed (SQLite pages before and after, of ``page_size`` bytes)."""

    pages_before: int
    pages_after: int
    page_size: int = 4096
    wal_truncated: bool = True
    """Whether the rebuilt pages were checkpointed into the main file and its ``-wal``
    truncated (False: a reader kept an old snapshot; the WAL shrinks at a later
    checkpoint, or when the writer closes)."""

    @property
    def bytes_before(self) -> int:
        """The store's size before, in bytes."""
        return self.pages_before * self.page_size

    @property
    def bytes_after(self) -> int:
        """The store's size after, in bytes."""
        return self.pages_after * self.page_size

    @property
    def bytes_reclaimed(self) -> int:
        """What compaction gave back, in bytes."""
        return self.bytes_before - self.bytes_after


class StoreMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of an open store, cheap enough to poll every second.

    Whose figures they are:

    * **Read from the store** (true whichever process writes it): ``store_id``,
      ``latest_seq`` and ``sessions_behind``. A store with the writer keeps them as its
      writer commits (it is the only writer); a read-only store (``read_only=True``,
      ``relaystore serve``) reads them from the file each time ``metrics()`` is called,
      through a read connection of its own, never through an actor.
    * **This process's own, counted since it opened the store** (0 in a read-only
      store, which has no writer): ``commits``, the latencies and batch sizes,
      ``messages_written``, ``relay_events_applied``, ``api_events_written``,
      ``writer_busy``, ``busy_refusals``, ``relay_lines_held``, ``projector_loads``,
      ``worker_restarts``; and the live ``writer_inbox_depth``, ``live_projectors`` and
      ``followers``.

    Latencies and batch sizes cover the most recent commits (a bounded window).
    ``writer_busy`` is True while another connection's write lock kept the writer's
    newest batch from beginning (until its next commit); ``busy_refusals`` counts the
    batches refused so (each answered with ``StoreBusy``). ``store_id`` is the store's
    own id (schema revision 6): generated once when the store was created or migrated,
    kept by backups and compaction.
    """

    store_id: str
    writer_inbox_depth: int
    live_projectors: int
    followers: int
    commits: int
    commit_latency_p50_ms: float
    commit_latency_p99_ms: float
    batch_size_mean: float
    batch_size_max: int
    messages_written: int
    relay_events_applied: int
    api_events_written: int
    latest_seq: int
    writer_busy: bool = False
    busy_refusals: int = 0
    sessions_behind: int = 0
    """Sessions whose projection waits behind their relay log for a build that knows a
    kind: the store's own count (the writer counts it when it starts and after each
    commit that may change it; a read-only store reads it when asked)."""
    relay_lines_held: int = 0
    """Relay lines this process kept in the log without projecting them."""
    projector_loads: int = 0
    """Sessions' projections loaded from the store since the store opened: a session's
    first event, or one after its projector was stopped to stay within
    ``max_projectors`` or for idling, unless its projection was parked in a projection
    worker (``projection="process"``: see ``max_projectors``). Growing as fast as
    messages arrive means the live set is thrashing: raise ``max_projectors``."""
    projector_starts: int = 0
    """Projectors started since the store opened (each start of a session whose
    projection is not parked loads it: :attr:`projector_loads`)."""
    worker_restarts: int = 0
    """Projection worker processes started again after one died (``projection="process"``);
    each restart reloads the live sessions from the store."""


class StoreStats(msgspec.Struct, frozen=True, kw_only=True):
    """One consistent snapshot of the store's size (``LoadStats``, ``relaystore stats``)."""

    revision: int
    store_id: str
    sessions: int
    latest_seq: int
    events_by_kind: dict[str, int] = msgspec.field(default_factory=dict)
    projection_behind: dict[str, ProjectionBehind] = msgspec.field(default_factory=dict)
    """The sessions whose projection is behind their relay log, by id (see
    :class:`~relaystore.domain.materialized.ProjectionBehind`)."""


def stats_document(stats: StoreStats) -> dict[str, object]:
    """``stats`` as ``relaystore stats --json`` prints it and ``GET /stats`` answers it."""
    return {
        "schema_revision": stats.revision,
        "store_id": stats.store_id,
        "sessions": stats.sessions,
        "latest_seq": stats.latest_seq,
        "events_by_kind": stats.events_by_kind,
        "projection_behind": {
            session_id: msgspec.to_builtins(behind)
            for session_id, behind in stats.projection_behind.items()
        },
    }
