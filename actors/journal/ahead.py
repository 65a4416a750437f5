"""Reading a journal ahead of its consumer: batches through a bounded queue.

:class:`ReadAhead` runs a journal reader's iterator in its own thread and hands its
events over in batches of ``size``, at most ``depth`` batches ahead of the consumer, so
reading and decoding the next batch overlaps with whatever the consumer does with this
one (a replay: projecting and committing it). Under the GIL this pays where the consumer
waits in C code that releases it (SQLite, fsync), not where it runs Python; the bounded
queue keeps memory at ``depth`` batches however far the reader could run.

A fault that ends reading (the reader's typed :class:`StoreError`) travels in order: it
arrives with the batch of events read before it, after every earlier batch. Closing
(leaving the ``with`` block, or :meth:`ReadAhead.close`) stops the thread and waits for
it, whether or not the batches were all taken.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType

from relaystore.actors.journal.reader import Location
from relaystore.domain.errors import StoreError
from relaystore.domain.relay import RelayEvent

__all__ = ["ReadAhead", "ReadBatch"]

_POLL_SECONDS = 0.1
"""How often a reader blocked on a full queue looks whether it was closed."""


@dataclass(slots=True)
class ReadBatch:
    """Events read in a row, where each was read, and the fault that ended reading."""

    events: list[RelayEvent] = field(default_factory=list)
    where: dict[int, Location] = field(default_factory=dict)
    """The location of each event, by ordinal."""
    fault: StoreError | None = None
    """The error reading stopped at, right after ``events`` (None: reading goes on)."""


class _Crash:
    """An unexpected exception in the reading thread, handed to the consumer."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class ReadAhead:
    """Reads ``events`` in a thread, ``size`` at a time, at most ``depth`` batches ahead."""

    def __init__(
        self, events: Iterator[tuple[RelayEvent, Location]], *, size: int, depth: int = 2
    ) -> None:
        if size < 1 or depth < 1:
            raise ValueError(f"size and depth must be at least 1, got {size} and {depth}")
        self._events = events
        self._size = size
        self._queue: queue.Queue[ReadBatch | _Crash | object] = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="relaystore-read-ahead", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[ReadBatch]:
        """The batches in reading order; the last one has a ``fault`` if reading failed.

        A batch is never empty unless it carries the fault. An unexpected exception in
        the reading thread is raised here.
        """
        while True:
            item = self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Crash):
                raise item.error
            assert isinstance(item, ReadBatch)
            yield item
            if item.fault is not None:
                return

    def close(self) -> None:
        """Stop reading and wait for the thread (batches not taken are dropped)."""
        self._closed.set()
        while self._thread.is_alive():
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(_POLL_SECONDS)

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self) -> None:
        try:
            self._read()
        finally:
            close = getattr(self._events, "close", None)
            if close is not None:  # a generator: close its files now, in this thread
                close()

    def _read(self) -> None:
        batch = ReadBatch()
        try:
            for event, location in self._events:
                batch.events.append(event)
                batch.where[event.ordinal] = location
                if len(batch.events) == self._size:
                    if not self._put(batch):
                        return
                    batch = ReadBatch()
        except StoreError as fault:
            batch.fault = fault
            self._put(batch)
            return
        except BaseException as error:  # noqa: BLE001 - handed to the consumer, who raises it
            self._put(_Crash(error))
            return
        if batch.events and not self._put(batch):
            return
        self._put(_END)

    def _put(self, item: object) -> bool:
        """Queue ``item``, waiting for room; False when closed first."""
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
            except queue.Full:
                continue
            return True
        return False
