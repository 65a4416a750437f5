"""What every benchmark shares: the run context, figures, statistics and the replay loop."""

from __future__ import annotations

import math
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.actors.store import EventStore

__all__ = [
    "Context",
    "drive",
    "Figure",
    "log",
    "median",
    "percentile",
    "replay_journal",
    "timed",
]


@dataclass
class Figure:
    """One measured figure, its baseline measured in the same run, and the aim.

    ``ratio`` is ``value / baseline_value``. ``ok`` is whether the aim is met (None when
    the figure has no aim of its own).
    """

    benchmark: str
    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float
    aim: str = ""
    ok: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.value / self.baseline_value if self.baseline_value else math.nan

    @classmethod
    def against_bare(
        cls,
        benchmark: str,
        name: str,
        value: float,
        bare: float,
        *,
        most: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> Figure:
        """A read's median in µs against the bare apsw ``SELECT``'s median; with
        ``most``, the aim that the ratio be at most that."""
        return cls(
            benchmark=benchmark,
            name=name,
            value=value,
            unit="us",
            baseline="bare apsw SELECT median",
            baseline_value=bare,
            aim="" if most is None else f"ratio <= {most:g}",
            ok=None if most is None else value <= most * bare,
            details=details or {},
        )

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["ratio"] = self.ratio
        return row


@dataclass
class Context:
    """The run: its scale, a scratch folder, and artifacts benchmarks share (a journal,
    the large store) so each is built once per run."""

    quick: bool
    scratch: Path
    seed: int = 7
    cache: dict[str, Any] = field(default_factory=dict)

    def scale(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def shared(self, key: str, build: Callable[[], Any]) -> Any:
        if key not in self.cache:
            self.cache[key] = build()
        return self.cache[key]


def log(message: str) -> None:
    """Progress on stderr, so stdout keeps only the table."""
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (``fraction`` 0.99 for p99)."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def drive(senders: int, seconds: float, send: Callable[[int, int], object]) -> float:
    """Calls/s of ``senders`` threads each calling ``send(sender, i)`` in a loop.

    All start together (a barrier) and stop starting new calls after ``seconds``; the
    rate is every completed call over the time until the last thread finished.
    """
    start = threading.Barrier(senders + 1)
    counts = [0] * senders
    errors: list[BaseException] = []
    deadline = 0.0

    def loop(sender: int) -> None:
        start.wait()
        i = 0
        try:
            while time.perf_counter() < deadline:
                send(sender, i)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            errors.append(exc)
        counts[sender] = i

    threads = [threading.Thread(target=loop, args=(n,), daemon=True) for n in range(senders)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline = began + seconds
    start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


@contextmanager
def timed() -> Iterator[list[float]]:
    """``with timed() as t: ...`` then ``t[0]`` is the elapsed wall time in seconds."""
    box: list[float] = []
    started = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - started)


def replay_journal(
    store: EventStore,
    journal: Path,
    session_id: str = "bench-session",
    on_batch: Callable[[int], object] | None = None,
) -> int:
    """Replay ``journal`` into ``store`` exactly as ``relaystore replay`` does; return events applied.

    :func:`actors.replay.replay_source` creates the session (as the command does for a
    store that lacks it), reads the events with the journal reader and sends them in
    batches to the session's projector, which commits them a page at a time.
    ``on_batch`` gets the running count of applied events after each batch.
    """
    source = resolve_source(journal, session_id=session_id)
    report = replay_source(
        store,
        source,
        on_batch=None if on_batch is None else (lambda running: on_batch(running.applied)),
    )
    return report.applied
