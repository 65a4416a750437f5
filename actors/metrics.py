"""The figures :meth:`EventStore.metrics` reports: the writer's own running figures, read
from other threads (:class:`WriterStats`), in a read-only store what only the store
itself can tell (:class:`StoreReadings`), the follows iterating now (:class:`Followers`),
and how they make one :class:`~relaystore.domain.reports.StoreMetrics`
(:func:`store_metrics`).

Must not: wait on an actor. Every figure is read from a counter under its own lock (or,
read-only, one short read transaction), so metrics stay cheap enough to poll.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Iterator

from ..domain.reports import StoreMetrics
from ..storage.connection import open_reader
from ..storage.stats import load_live_figures
from ..storage.transaction import Connection

__all__ = ["Followers", "StoreReadings", "WriterStats", "percentile", "store_metrics"]


class WriterStats:
    """Counters and a bounded window of recent commits; the writer records, anyone reads.

    Owned by the store's facade, written only by its writer actor.
    """

    def __init__(self, *, window: int = 1024) -> None:
        self._lock = threading.Lock()
        self._latencies: deque[float] = deque(maxlen=window)
        self._batches: deque[int] = deque(maxlen=window)
        self.commits = 0
        self.messages = 0
        self.relay_events = 0
        self.api_events = 0
        self.busy_refusals = 0
        """Batches refused because another connection held SQLite's write lock."""
        self.busy = False
        """Whether the writer's newest attempt to begin found the lock held (until a commit)."""
        self.relay_lines_held = 0
        """Relay lines kept in the log without being projected (their sessions are behind)."""
        self.sessions_behind = 0
        """Sessions whose projection is behind their relay log, as last counted."""

    def record(
        self,
        *,
        messages: int,
        seconds: float,
        relay_events: int,
        api_events: int,
        held: int = 0,
        sessions_behind: int | None = None,
    ) -> None:
        """One commit of ``messages`` messages that took ``seconds``; ``held`` of its
        ``relay_events`` were kept, not projected; ``sessions_behind`` the count after it
        (None: unchanged)."""
        with self._lock:
            self.relay_lines_held += held
            if sessions_behind is not None:
                self.sessions_behind = sessions_behind
            self.commits += 1
            self.messages += messages
            self.relay_events += relay_events
            self.api_events += api_events
            self._latencies.append(seconds)
            self._batches.append(messages)
            self.busy = False

    def set_sessions_behind(self, count: int) -> None:
        """The count of sessions behind their log, read when the writer starts."""
        with self._lock:
            self.sessions_behind = count

    def record_busy(self) -> None:
        """One batch refused: another connection held the write lock past the busy timeout."""
        with self._lock:
            self.busy_refusals += 1
            self.busy = True

    def window(self) -> tuple[list[float], list[int]]:
        """Copies of the recent commit latencies (seconds) and batch sizes."""
        with self._lock:
            return list(self._latencies), list(self._batches)


class StoreReadings:
    """What a read-only store's metrics read from the store itself, where another
    process writes: the newest committed seq and the sessions behind their relay log.

    Owns one read connection of its own (opened with the store, closed with it). A
    reading is one short read transaction on the caller's thread, under this object's
    lock, never through an actor; after :meth:`close` the last reading stands.
    """

    def __init__(self, connection: Connection) -> None:
        self._lock = threading.Lock()
        self._connection: Connection | None = connection
        self._last = (0, 0)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> StoreReadings:
        """Readings over a read connection of their own
        (:func:`~relaystore.storage.connection.open_reader`)."""
        return cls(open_reader(path))

    def read(self) -> tuple[int, int]:
        """The newest committed seq and the count of sessions behind, read now."""
        with self._lock:
            if self._connection is not None:
                self._last = load_live_figures(self._connection)
            return self._last

    def close(self) -> None:
        """Close the connection (readings after it repeat the last one)."""
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (0.0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Followers:
    """How many follows iterate now (a figure of the metrics)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a signal handler's follow may count in the main thread
        self._count = 0

    @property
    def count(self) -> int:
        """The follows iterating now."""
        with self._lock:
            return self._count

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """Counts a follower while it iterates."""
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1


def store_metrics(
    stats: WriterStats,
    *,
    store_id: str,
    writer_inbox_depth: int,
    followers: int,
    latest_seq: int,
    sessions_behind: int,
    live_projectors: int,
    projector_loads: int,
    projector_starts: int,
    worker_restarts: int,
) -> StoreMetrics:
    """The snapshot of a store's figures: the writer's ``stats`` (its window's latency
    percentiles and batch sizes) and the figures the store's core read."""
    latencies, batches = stats.window()
    return StoreMetrics(
        store_id=store_id,
        writer_inbox_depth=writer_inbox_depth,
        live_projectors=live_projectors,
        followers=followers,
        commits=stats.commits,
        commit_latency_p50_ms=percentile(latencies, 0.5) * 1000,
        commit_latency_p99_ms=percentile(latencies, 0.99) * 1000,
        batch_size_mean=sum(batches) / len(batches) if batches else 0.0,
        batch_size_max=max(batches, default=0),
        messages_written=stats.messages,
        relay_events_applied=stats.relay_events,
        api_events_written=stats.api_events,
        latest_seq=latest_seq,
        writer_busy=stats.busy,
        busy_refusals=stats.busy_refusals,
        sessions_behind=sessions_behind,
        relay_lines_held=stats.relay_lines_held,
        projector_loads=projector_loads,
        projector_starts=projector_starts,
        worker_restarts=worker_restarts,
    )
