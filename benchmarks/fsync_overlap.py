"""Could group commit hide fsync? A measurement (a script, not a test, not a change).

The writer commits a batch, and SQLite's ``COMMIT`` at ``synchronous=FULL`` returns only
after the WAL's fsync: the writer's one connection cannot run the next batch's
statements meanwhile. The only pipeline one connection allows is committing at
``synchronous=OFF`` (COMMIT returns once the WAL frames are written, not synced) and
fsyncing the WAL file from another thread while the next batch's statements run,
acknowledging a batch only after an fsync that began after its COMMIT returned. That is
what this script measures, with the writer's own :class:`~relaystore.storage.batch.Batch`
performing ``RecordActivities`` messages (one API event each), ``--batch`` messages a
commit (8: what the writer gathers from 8 senders):

* ``FULL``: statements, then COMMIT with its fsync, serially (today);
* ``OFF``: no fsync at all (the ceiling; not durable);
* ``OFF + fsync``: COMMIT at OFF, then ``os.fsync`` of the WAL, serially;
* ``OFF + fsync overlapped``: the fsync of batch N runs in a thread while batch N+1's
  statements run (the pipeline).

Prints batches/s and each against ``FULL``. Why it is not a change: at ``OFF`` SQLite
also skips the fsyncs of its checkpoints (the WAL is copied into the database file and
then restarted without the database file being synced), so the store would have to run
every checkpoint itself at ``FULL``; and a batch's durability would rest on an fsync
relaystore makes on a file SQLite owns. Run from the repository root::

    python benchmarks/fsync_overlap.py [--seconds 3] [--batch 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from relaystore.actors.writer import perform
from relaystore.domain.api_events import ApiActivityState
from relaystore.domain.messages import RecordActivities, SaveSession
from relaystore.storage.batch import Batch
from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.testing import example_session

_STATES = [
    ApiActivityState(
        state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    for i in range(2)
]


def _statements(writer: WriterConnection, batch: int, counter: list[int]) -> Batch:
    """Begin a batch and run ``batch`` RecordActivities in it (not committed)."""
    transaction = Batch(writer).__enter__()
    for _ in range(batch):
        i = counter[0] = counter[0] + 1
        message = RecordActivities(
            activities=[(f"session-{i % 8}", _STATES[(i // 8) % 2])], recorded_at_ms=i
        )
        _value, error = transaction.run(perform, message)
        if error is not None:
            raise error
    return transaction


def _serial(writer: WriterConnection, batch: int, wal: int | None) -> Callable[[], None]:
    counter = [0]

    def one() -> None:
        transaction = _statements(writer, batch, counter)
        transaction.commit()
        if wal is not None:
            os.fsync(wal)

    return one


class _Overlapped:
    """COMMIT at OFF, then the WAL's fsync in a thread while the next batch runs."""

    def __init__(self, writer: WriterConnection, batch: int, wal: int) -> None:
        self._writer, self._batch, self._wal = writer, batch, wal
        self._counter = [0]
        self._synced: threading.Thread | None = None
        self.acknowledged = 0

    def one(self) -> None:
        transaction = _statements(self._writer, self._batch, self._counter)
        if self._synced is not None:  # the previous batch's fsync ran meanwhile
            self._synced.join()
            self.acknowledged += 1
        transaction.commit()
        self._synced = threading.Thread(target=os.fsync, args=(self._wal,))
        self._synced.start()

    def drain(self) -> None:
        if self._synced is not None:
            self._synced.join()
            self.acknowledged += 1
            self._synced = None


def _rate(seconds: float, call: Callable[[], None]) -> float:
    for _ in range(5):
        call()
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        call()
        done += 1
    return done / (time.perf_counter() - started)


def _measure(mode: str, folder: Path, seconds: float, batch: int) -> float:
    path = folder / f"{mode.replace(' ', '-')}-{time.monotonic_ns()}.sqlite3"
    synchronous = "FULL" if mode == "FULL" else "OFF"
    writer = open_writer(path, synchronous=synchronous)  # type: ignore[arg-type]
    try:
        with Batch(writer) as first:
            for n in range(8):
                first.run(perform, SaveSession(record=example_session(f"session-{n}", "bench")))
            first.commit()
        wal = os.open(f"{path}-wal", os.O_RDONLY) if "fsync" in mode else None
        try:
            if mode == "OFF + fsync overlapped":
                assert wal is not None
                pipeline = _Overlapped(writer, batch, wal)
                rate = _rate(seconds, pipeline.one)
                pipeline.drain()
                return rate
            return _rate(seconds, _serial(writer, batch, wal))
        finally:
            if wal is not None:
                os.close(wal)
    finally:
        writer.close()


MODES = ("FULL", "OFF", "OFF + fsync", "OFF + fsync overlapped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=8, help="messages a commit")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="relaystore-fsync-", dir="/var/tmp") as scratch:
        for round_ in range(args.rounds):
            for mode in MODES:  # interleaved: the disk's noise hits every mode alike
                rates[mode].append(_measure(mode, Path(scratch), args.seconds, args.batch))
            line = ", ".join(f"{mode} {rates[mode][-1]:,.0f}" for mode in MODES)
            print(f"round {round_ + 1}: batches/s {line}", file=sys.stderr)
    full = statistics.median(rates["FULL"])
    print(f"{args.batch} RecordActivities a batch, median of {args.rounds} rounds:")
    for mode in MODES:
        rate = statistics.median(rates[mode])
        print(f"  {mode:<24} {rate:>8,.0f} batches/s  {rate / full:5.2f}x FULL")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
