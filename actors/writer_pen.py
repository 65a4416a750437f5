"""The writer's pen: who uses the write connection now (see :class:`WriterPen`).

A lone blocking ``ask`` from a thread other than the main one that finds the writer
idle runs its batch in the asking thread, under the pen's lock, instead of two thread
hops (the fast path of :mod:`~relaystore.actors.writer`); the writer's thread takes the
same lock for each message it handles, so the connection has one user at a time.

Owns the lock and the decision whether a caller may write now. Must not: run a batch
itself (the writer's ``write`` it is attached to does) or touch a connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..domain.messages import CompactStore
from .envelope import Envelope, answers_here
from .inbox import HeldInbox

__all__ = ["WriterPen"]


class WriterPen:
    """Who uses the write connection now: the writer's thread, or one asking thread.

    The writer holds :attr:`lock` while it handles a message (taking it into a batch,
    committing, answering); :meth:`write_now` runs a message in the caller's thread only
    when it can take the lock without waiting and the writer's inbox is idle.
    """

    __slots__ = ("_inbox", "_write", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._inbox: HeldInbox | None = None
        self._write: Callable[[Envelope], bool] | None = None

    def attach(self, inbox: HeldInbox, write: Callable[[Envelope], bool]) -> None:
        """The writer's inbox, and how it runs one message as a batch of its own (False:
        it would rather wait for company, see :meth:`WriterActor._write_alone`)."""
        self._inbox, self._write = inbox, write

    def retire(self) -> None:
        """No more fast path (the writer is closing its connection; hold :attr:`lock`)."""
        self._write = None

    def write_now(self, envelope: Envelope) -> bool:
        """Run ``envelope`` as a batch of its own in this thread, answered as the writer
        answers it, if this is not the main thread and the writer is idle and expects no
        other sender; False: nothing happened, hand it over.

        Never waits for the writer (only try-acquires the lock). Never runs in the main
        thread, where signals arrive (see the module). Not for the event loop's thread:
        the batch commits here, fsync included.
        """
        if not answers_here():
            return False
        inbox = self._inbox
        if inbox is None or isinstance(envelope.message, CompactStore) or not inbox.idle():
            return False  # busy: leave the pen alone (the writer takes it for each message)
        if not self.lock.acquire(blocking=False):
            return False
        try:  # idle again under the pen: the writer took nothing since
            write = self._write
            return write is not None and inbox.idle() and write(envelope)
        finally:
            self.lock.release()
