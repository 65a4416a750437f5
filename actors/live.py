"""The live projectors of a store projecting in threads: at most ``limit`` at once, idle
ones stopped (with ``projection="process"`` the
:class:`~relaystore.actors.workers.runners.SessionRunners` keep the live sessions).

Each live session has a projector actor (a thread holding the session's projection in
memory). :class:`LiveProjectors` bounds them: starting a projector for one more session
than ``limit`` first stops one not working, and any projector unused for
``idle_seconds`` is stopped on the next lookup.

Which one: a session coming back after its projector was stopped for room (one of the
last ``4 * limit`` so stopped, ids only) displaces the projector started most recently
that has not been asked for since it started; any other start displaces the least
recently used. Plain least-recently-used eviction fails a supervisor feeding more
sessions than ``limit`` round robin: the session evicted is always the next one fed,
so every event reloads its session. Here a loop longer than the limit keeps
``limit - 1`` projectors and cycles the rest through one, while a session asked for
again (a hot one) is never the one displaced for a returning session. Simulated (cold
misses over lookups, ``limit`` 256): 300 sessions round robin, 83% of lookups find their
projector (LRU 0%, the two random choices of release 0.3's first cut 60%); 1,000 round
robin 24% (0%, 0.1%); a Zipf-like load over 3,000 sessions 63% (61%, 59%); 50 hot
sessions between a loop of 300 others 83% (49%, 63%).

A stopped projector's state is already committed (it answers a message only after its
pages commit), so the session's next event starts a new projector that reloads the
projection from the store. Memory and threads are therefore bounded by the live set,
not by how many sessions the store has seen.

Guarantees: a projector is stopped for room or idling only when it has no message
waiting or being handled (its inbox's unfinished count, which includes the message in
hand), so its session's next projector never runs beside it; :meth:`retire` (used
before ``DeleteSession``) and :meth:`stop_all` wait for the projector to finish what it
was sent, in order. A message
handed over with :meth:`hand_over` is taken by a live projector of its session: the
projector is held from its lookup until the message is in its inbox (where it is
"working"), so neither room nor idling nor :meth:`retire` stops it in between; one
stopped anyway (it crashed) is replaced and the message handed to the new one. Only
:meth:`stop_all` (the store closing) ends a hand-over, with :class:`StoreClosed`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pykka import ActorDeadError, ActorRef

from ..domain.errors import StoreClosed
from .envelope import Envelope
from .inbox import inbox_of
from .projector import ProjectorActor, working

__all__ = ["GHOSTS", "LiveProjectors"]

GHOSTS = 4
"""How many displaced sessions are remembered, per projector of the limit."""


class LiveProjectors:
    """A bounded set of projector actors, one per live session (see the module doc for
    which one stops when it is full)."""

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
        self._handed = threading.Condition(self._lock)
        """Notified when a hand-over ends (what :meth:`retire` waits for)."""
        self._held: dict[str, int] = {}
        """Sessions whose projector a hand-over holds, and how many hold it (at most
        the threads handing over)."""
        self._live: OrderedDict[str, tuple[ActorRef[ProjectorActor], float]] = OrderedDict()
        """Live projectors, least recently used first."""
        self._unasked: OrderedDict[str, None] = OrderedDict()
        """Live sessions not asked for again since their projector started, oldest first."""
        self._displaced: OrderedDict[str, None] = OrderedDict()
        """Sessions whose projector was stopped for room, oldest first (at most
        ``GHOSTS * limit``)."""
        self._closed = False
        self.started = 0
        self.stopped = 0

    def __len__(self) -> int:
        return len(self._live)

    def get(self, session_id: str) -> ActorRef[ProjectorActor]:
        """The session's projector, started (or restarted after a crash) when needed."""
        ref, victims = self._lookup(session_id, hold=False)
        self._stop_all_of(victims)
        return ref

    def hand_over(
        self, session_id: str, put: Callable[[ActorRef[ProjectorActor]], bool]
    ) -> ActorRef[ProjectorActor] | None:
        """Have ``put`` put a message in the inbox of the session's projector, which
        nothing stops meanwhile but the store closing; return that projector (None when
        ``put`` returned False: it put nothing). A projector that died before the
        message went in (a crash) is replaced and ``put`` called again with the new one.

        The projectors stopped to make room are stopped (and waited for) after ``put``,
        so the session's projector works on the message meanwhile.

        Raises :class:`StoreClosed` once :meth:`stop_all` began.
        """
        victims: list[ActorRef[Any]] = []
        try:
            while True:
                ref, stopping = self._lookup(session_id, hold=True)
                victims += stopping
                try:
                    if not put(ref):
                        return None
                except ActorDeadError:
                    continue  # it died first: the session's next projector takes the message
                finally:
                    with self._lock:
                        self._release(session_id)
                return ref
        finally:
            self._stop_all_of(victims)

    def take(
        self, session_id: str, envelope: Envelope, *, wait: bool
    ) -> ActorRef[ProjectorActor] | None:
        """Hand ``envelope`` to the session's projector (see :meth:`hand_over`): waits
        for room in a full inbox when ``wait``, else takes nothing and returns None."""

        def put(ref: ActorRef[ProjectorActor]) -> bool:
            if wait or not inbox_of(ref).full():
                ref.tell(envelope)  # ActorDeadError: hand_over starts another
                return True
            return False

        return self.hand_over(session_id, put)

    def _lookup(
        self, session_id: str, *, hold: bool
    ) -> tuple[ActorRef[ProjectorActor], list[ActorRef[Any]]]:
        """The session's projector (started when needed) and the projectors taken out
        to make room or for idling, for the caller to stop."""
        now = self._clock()
        with self._lock:
            if self._closed:
                raise StoreClosed()
            entry = self._live.pop(session_id, None)
            ref = entry[0] if entry is not None and entry[0].is_alive() else None
            self._unasked.pop(session_id, None)  # asked for again (or started anew below)
            returning = False
            if ref is None:
                ref = self._start(session_id)
                self.started += 1
                returning = session_id in self._displaced
                self._displaced.pop(session_id, None)
                self._unasked[session_id] = None  # the newest started
            self._live[session_id] = (ref, now)  # now the most recently used
            if hold:
                self._held[session_id] = self._held.get(session_id, 0) + 1
            victims = self._victims(now, returning=returning)
        return ref, victims

    def _stop_all_of(self, victims: list[ActorRef[Any]]) -> None:
        """Stop projectors taken out for room or idling: each has no message waiting or
        being handled and none can be handed to it any more, so its stop is not waited
        for (an asyncio loop handing over never blocks on it)."""
        for victim in victims:
            self._stop(victim, wait=False)

    def _release(self, session_id: str) -> None:
        """End one hand-over's hold on the session's projector (the lock held)."""
        left = self._held.pop(session_id) - 1
        if left:
            self._held[session_id] = left
        self._handed.notify_all()

    def retire(self, session_id: str) -> None:
        """Stop the session's projector once it finished what it was sent (a message
        being handed to it first goes in)."""
        with self._lock:
            self._handed.wait_for(lambda: session_id not in self._held)
            entry = self._live.pop(session_id, None)
            self._unasked.pop(session_id, None)
            self._displaced.pop(session_id, None)
        if entry is not None:
            self._stop(entry[0])

    def stop_all(self) -> None:
        """Stop every projector (each finishes what it was sent first) and start no more."""
        with self._lock:
            self._closed = True
            refs = [ref for ref, _ in self._live.values()]
            self._live.clear()
            self._unasked.clear()
            self._displaced.clear()
        for ref in refs:
            self._stop(ref)

    def _victims(self, now: float, *, returning: bool) -> list[ActorRef[Any]]:
        """Take out the projectors to stop: idle too long, then, while past the limit,
        one not working (see the module doc for which; ``returning``: the session just
        started was displaced before).

        The idle sweep walks from the least recently used entry and stops at the first
        one used recently, so a lookup costs the projectors it stops, not the number
        live; a displacement walks past working projectors only.
        """
        doomed: list[str] = []
        newest = next(reversed(self._live))
        for session_id, (_, used) in self._live.items():
            if session_id == newest or now - used < self._idle:
                break  # in use order: every later entry was used more recently
            if not self._working(session_id):
                doomed.append(session_id)
        victims = [self._take(session_id) for session_id in doomed]
        while len(self._live) > self._limit:
            victim = self._displaceable(newest, returning=returning)
            if victim is None:
                break  # every other projector is working: stop one after its work
            victims.append(self._take(victim))
            self._displaced[victim] = None
            while len(self._displaced) > GHOSTS * self._limit:
                self._displaced.popitem(last=False)
        return victims

    def _displaceable(self, newest: str, *, returning: bool) -> str | None:
        """The projector to stop for room: for a returning session the newest one not
        asked for since it started, else (or if none) the least recently used; never
        ``newest``, a working one or one a hand-over holds; None when all are working."""
        if returning:
            for session_id in reversed(self._unasked):
                if session_id != newest and not self._working(session_id):
                    return session_id
        return next((sid for sid in self._live if sid != newest and not self._working(sid)), None)

    def _take(self, session_id: str) -> ActorRef[Any]:
        self._unasked.pop(session_id, None)
        return self._live.pop(session_id)[0]

    def _working(self, session_id: str) -> bool:
        return session_id in self._held or working(self._live[session_id][0])

    def _stop(self, ref: ActorRef[Any], *, wait: bool = True) -> None:
        with contextlib.suppress(ActorDeadError):
            ref.stop(block=wait)
        with self._lock:
            self.stopped += 1
