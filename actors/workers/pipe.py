"""The pipe to a projection worker, for one conversation, and its silence bound.

A broken pipe raises :class:`WorkerDied` (the worker reaped), as does a worker that says
nothing within the bound (killed): the silence bound the pool gives it, or for a worker
just started, which imports before it can say anything, :data:`BOOT_SECONDS`.

Owns the wait for the worker's next word. Must not: start, route to or restart a worker
(:mod:`~relaystore.actors.workers.pool` does), or decide what crosses the pipe
(:mod:`~relaystore.actors.workers.protocol`).
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from .protocol import Beat

__all__ = ["BOOT_SECONDS", "WorkerDied", "WorkerPipe", "WorkerStart"]

BOOT_SECONDS = 60.0
"""How long a worker just started may take to say its first word (the silence bound, if
longer): it imports before it can beat, and on a busy machine that alone can take
seconds. Past it, the worker is presumed lost as a silent one is."""


class WorkerDied(Exception):
    """The worker's pipe broke mid-conversation."""


class WorkerStart:
    """One start of a worker: whether it said its first word yet (see :data:`BOOT_SECONDS`)."""

    __slots__ = ("spoke",)

    def __init__(self) -> None:
        self.spoke = False


class WorkerPipe:
    """The worker's connection for one conversation: a broken pipe raises :class:`WorkerDied`
    (and the worker is reaped), as does a worker silent for ``silence`` seconds (killed:
    see :data:`~relaystore.actors.workers.pool.SILENCE_SECONDS`); anything else passes. Beats are skipped."""

    def __init__(
        self,
        connection: Connection,
        reap: Callable[[bool], str],
        silence: float,
        started: WorkerStart,
    ) -> None:
        self._connection = connection
        self._reap = reap
        """Reaps the worker (killed first when True); says how it ended."""
        self._silence = silence
        self._started = started

    def send(self, message: object) -> None:
        try:
            self._connection.send(message)
        except BlockingIOError as exc:  # the socket's send timeout: it reads nothing
            raise WorkerDied(self._lost("had no room for a message")) from exc
        except OSError as exc:
            raise WorkerDied(
                f"{exc or type(exc).__name__}; the worker {self._reap(False)}"
            ) from exc

    def recv(self) -> Any:
        while True:
            bound = self._silence if self._started.spoke else max(self._silence, BOOT_SECONDS)
            try:
                if not self._connection.poll(bound):
                    raise WorkerDied(self._lost("said nothing", bound))
                message = self._connection.recv()
            except (EOFError, OSError) as exc:
                raise WorkerDied(
                    f"{exc or 'its pipe closed'}; the worker {self._reap(False)}"
                ) from exc
            self._started.spoke = True
            if not isinstance(message, Beat):
                return message

    def _lost(self, what: str, seconds: float | None = None) -> str:
        return (
            f"it {what} for {seconds or self._silence:g} s, so it is presumed lost (stopped or hung); "
            f"the worker {self._reap(True)}"
        )
