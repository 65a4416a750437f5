"""The writer's running figures, read by :meth:`EventStore.metrics` from other threads."""

from __future__ import annotations

import threading
from collections import deque

__all__ = ["WriterStats", "percentile"]


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


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (0.0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
