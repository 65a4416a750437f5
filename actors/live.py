"""The live projectors of a store: at most ``limit`` at once, idle ones stopped.

Each live session has a projector actor (a thread holding the session's projection in
memory). :class:`LiveProjectors` bounds them: starting a projector for one more session
than ``limit`` first stops the least recently used idle one, and any projector unused for
``idle_seconds`` is stopped on the next lookup. A stopped projector's state is already
committed (it answers a message only after its pages commit), so the session's next
event starts a new projector that reloads the projection from the store. Memory and
threads are therefore bounded by the live set, not by how many sessions the store has
seen.

Guarantees: stopping waits for the projector to finish what it was sent, in order;
:meth:`retire` (used before ``DeleteSession``) does the same for one session.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pykka import ActorDeadError, ActorRef

from relaystore.actors.inbox import inbox_of
from relaystore.actors.projector import ProjectorActor
from relaystore.domain.errors import StoreClosed

__all__ = ["LiveProjectors"]


class LiveProjectors:
    """A bounded, least-recently-used set of projector actors, one per live session."""

    def __init__(
        self,
        start: Callable[[str], ActorRef[ProjectorActor]],
        *,
        limit: int,
        idle_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._start = start
        self._limit = limit
        self._idle = idle_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._live: OrderedDict[str, tuple[ActorRef[ProjectorActor], float]] = OrderedDict()
        self._closed = False
        self.started = 0
        self.stopped = 0

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: str) -> ActorRef[ProjectorActor]:
        """The session's projector, started (or restarted after a crash) when needed."""
        now = self._clock()
        with self._lock:
            if self._closed:
                raise StoreClosed()
            entry = self._live.pop(session_id, None)
            ref = entry[0] if entry is not None and entry[0].is_alive() else None
            if ref is None:
                ref = self._start(session_id)
                self.started += 1
            self._live[session_id] = (ref, now)  # now the most recently used
            victims = self._victims(now)
        for victim in victims:
            self._stop(victim)
        return ref

    def retire(self, session_id: str) -> None:
        """Stop the session's projector once it finished what it was sent."""
        with self._lock:
            entry = self._live.pop(session_id, None)
        if entry is not None:
            self._stop(entry[0])

    def stop_all(self) -> None:
        """Stop every projector (each finishes what it was sent first) and start no more."""
        with self._lock:
            self._closed = True
            refs = [ref for ref, _ in self._live.values()]
            self._live.clear()
        for ref in refs:
            self._stop(ref)

    def _victims(self, now: float) -> list[ActorRef[Any]]:
        """Take out the projectors to stop: idle too long, or least recently used past the limit.

        Walks from the least recently used entry and stops at the first one that is
        neither idle too long nor past the limit, so a lookup costs the number of
        projectors it stops (plus busy ones it skips), not the number live.
        """
        doomed: list[str] = []
        victims: list[ActorRef[Any]] = []
        newest = next(reversed(self._live))
        for session_id, (ref, used) in self._live.items():
            if session_id == newest:
                break  # never the newest
            idle = now - used >= self._idle
            if len(self._live) - len(doomed) <= self._limit and not idle:
                break  # in use order: every later entry was used more recently
            if not idle and _busy(ref):
                continue  # past the limit but still working: try the next oldest
            doomed.append(session_id)
            victims.append(ref)
        for session_id in doomed:
            del self._live[session_id]
        return victims

    def _stop(self, ref: ActorRef[Any]) -> None:
        with contextlib.suppress(ActorDeadError):
            ref.stop(block=True)
        with self._lock:
            self.stopped += 1


def _busy(ref: ActorRef[Any]) -> bool:
    return not inbox_of(ref).empty()
