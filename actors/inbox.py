"""The one place relaystore reaches into pykka's implementor API: a bounded inbox.

pykka's inbox is unbounded; :class:`BoundedActor` gives an actor a
``queue.Queue(maxsize=capacity)`` through pykka's ``_create_actor_inbox`` hook (an
implementor API, which is why ``pyproject.toml`` pins pykka's minor version). A full
inbox blocks the sender in ``tell`` and ``ask`` until the actor takes a message, so
backpressure holds from the embedder down to the store. ``tests/actors/test_inbox.py``
pins that behaviour.
"""

from __future__ import annotations

import queue
from typing import Any

from pykka import ThreadingActor

__all__ = ["BoundedActor"]


class BoundedActor(ThreadingActor):
    """A threading actor whose inbox holds at most ``capacity`` messages."""

    def __init__(self, *, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an inbox needs room for a message, got capacity {capacity}")
        self._capacity = capacity
        super().__init__()

    def _create_actor_inbox(self) -> queue.Queue[Any]:  # type: ignore[override]
        return queue.Queue(maxsize=self._capacity)

    @property
    def waiting(self) -> int:
        """How many messages wait in the inbox now."""
        inbox: queue.Queue[Any] = self.actor_inbox  # type: ignore[assignment]
        return inbox.qsize()
