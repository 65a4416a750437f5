"""The main thread's courier: hands its messages over so that it never holds a lock.

Python runs signal handlers in the main thread, between any two of its bytecodes. A
handler that calls ``ask`` or ``tell`` while the main thread is inside a hand-over
(``queue.Queue.put`` holds the inbox's mutex while it runs Python code; the session's
projector lookup holds the projector set's lock) would wait for a lock the interrupted
code holds: the handler for ever, and the actor that needs that lock with it. So the
main thread never takes those locks: :meth:`Courier.run` gives the hand-over to the
courier's thread through a ``queue.SimpleQueue`` (a put that is one C call, holding
nothing afterwards) and waits for it on a one-shot lock, where a handler may run and
hand over its own message, which the courier takes next. Other threads meet no signal
and hand over themselves.

Owns one thread per store (started with the store, stopped by :meth:`close`). Must not:
route or check a message (its caller, the core, does); it only runs what it is given.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .envelope import OneShotReply, answers_here

__all__ = ["Courier"]

T = TypeVar("T")

_Job = tuple[Callable[[], Any], OneShotReply] | None
"""A hand-over and where its outcome goes; None asks the courier to stop."""


class Courier:
    """Runs the main thread's hand-overs in a thread of its own, in the order given."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, job: Callable[[], T]) -> T:
        """``job()``'s result (or its exception): run by the courier when called in the
        main thread, which then waits holding no lock; run here in any other thread.

        An interrupt while the main thread waits (``KeyboardInterrupt``) leaves the job
        to finish in the courier: a message being handed over still arrives.
        """
        if answers_here():
            return job()
        done = OneShotReply()
        self._jobs.put((job, done))
        if self._stopped:  # stopped meanwhile: the courier may be gone, run what it left
            self._drain()
        result: T = done.get()
        return result

    def close(self) -> None:
        """Stop the courier once it ran every job given before (a later one runs in
        its caller's thread: the store is closed by then, so it only refuses). Does not
        wait: the thread is a daemon and ends by itself."""
        self._stopped = True
        self._jobs.put(None)

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            _run(*job)
        self._drain()

    def _drain(self) -> None:
        """Run every job still queued, here (after :meth:`close`)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is None:  # the courier's own stop: leave it to the courier
                self._jobs.put(None)
                return
            _run(*job)


def _run(job: Callable[[], Any], done: OneShotReply) -> None:
    try:
        value = job()
    except BaseException as exc:  # noqa: BLE001 - the caller raises it, in its own thread
        done.set_exception((type(exc), exc, exc.__traceback__))
    else:
        done.set(value)
