"""The one place relaystore reaches into pykka's internals: a bounded inbox, daemon threads.

pykka's inbox is unbounded; :class:`BoundedActor` gives an actor a
``queue.Queue(maxsize=capacity)`` through pykka's ``_create_actor_inbox`` hook (an
implementor API, which is why ``pyproject.toml`` pins pykka's minor version). A full
inbox blocks the sender in ``tell`` and ``ask`` until the actor takes a message, so
backpressure holds from the embedder down to the store. ``tests/actors/test_inbox.py``
pins that behaviour. Everything else that looks at an inbox (the writer's group commit,
the facade's backpressure check, the projector set's idle check, the metrics) goes
through :func:`inbox_of`. A :class:`HeldInbox` also counts the messages its actor took
and has not finished, so that "nothing waits and nothing is in hand" is one atomic check
(the writer's fast path, :class:`~relaystore.actors.writer_pen.WriterPen`).

Actor threads are daemon threads (``use_daemon_thread``): a store nobody closed never
keeps the interpreter from exiting; the facade closes such a store at exit instead (see
:mod:`relaystore.actors.exit_hook`).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any, ClassVar

from pykka import ActorRef, ThreadingActor

__all__ = ["BoundedActor", "HeldInbox", "Inbox", "inbox_of"]


class Inbox(queue.Queue[Any]):
    """A bounded FIFO inbox that its actor can also wait on without taking a message."""

    # The sizes are read without the mutex (a deque's length is one C call): the main
    # thread reads them (a full inbox, the metrics), and a signal handler that runs there
    # while it held the mutex would wait for it for ever, with the actor.

    def qsize(self) -> int:
        return len(self.queue)

    def empty(self) -> bool:
        return not self.queue

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self.queue)

    def count_waiting(self, matches: Callable[[Any], bool]) -> int:
        """How many waiting messages ``matches`` accepts (a snapshot; takes nothing)."""
        with self.mutex:
            return sum(1 for item in self.queue if matches(item))

    def wait_for_message(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until a message waits; True if one does.

        Takes nothing: the actor's loop still takes the message, in order. Only the
        actor's own thread calls this (the one consumer), so ``put``'s single
        ``notify`` of ``not_empty`` reaches it.
        """
        deadline = time.monotonic() + timeout
        with self.not_empty:
            while not self._qsize():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.not_empty.wait(remaining)
            return True


class HeldInbox(Inbox):
    """An inbox that also counts what its actor took and has not finished yet.

    Taking a message (``get``) counts it, under the queue's own mutex, in the same step
    that removes it; the actor says when it is done with :meth:`finish`. So
    :meth:`idle` cannot miss a message between the queue and the actor's hands.
    """

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._held = 0

    def _get(self) -> Any:  # called by ``get`` under ``mutex``
        self._held += 1
        return super()._get()

    def finish(self, count: int) -> None:
        """The actor is done with ``count`` of the messages it took."""
        with self.mutex:
            self._held -= count

    def held(self) -> int:
        """How many messages the actor took and has not finished."""
        with self.mutex:
            return self._held

    def idle(self) -> bool:
        """Whether no message waits and the actor holds none it has not finished."""
        with self.mutex:
            return not self._qsize() and not self._held


class BoundedActor(ThreadingActor):
    """A threading actor, on a daemon thread, whose inbox holds at most ``capacity`` messages."""

    use_daemon_thread = True
    inbox_class: ClassVar[type[Inbox]] = Inbox
    """What the inbox is (an actor that needs :class:`HeldInbox`'s count names it)."""

    def __init__(self, *, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an inbox needs room for a message, got capacity {capacity}")
        self._capacity = capacity
        super().__init__()

    def _create_actor_inbox(self) -> Inbox:  # type: ignore[override]
        return self.inbox_class(maxsize=self._capacity)

    @property
    def inbox(self) -> Inbox:
        """This actor's own inbox (what its thread takes messages from)."""
        inbox: Inbox = self.actor_inbox  # type: ignore[assignment]
        return inbox


def inbox_of(ref: ActorRef[Any]) -> Inbox:
    """The inbox of the actor behind ``ref`` (a :class:`BoundedActor`'s)."""
    inbox: Inbox = ref.actor_inbox  # type: ignore[assignment]
    return inbox
