"""Fire-and-forget messages: a ``tell`` whose failure is logged, never fatal.

pykka stops an actor whose handler raises while handling a ``tell``. The facade wraps
every told message in :class:`Told`, and :class:`TellSafeActor` handles it like an ask
but logs a failure instead of raising it, so a bad told message never stops an actor.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from relaystore.actors.inbox import BoundedActor

__all__ = ["TellSafeActor", "Told"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Told:
    """A message nobody waits for."""

    message: Any


class TellSafeActor(BoundedActor):
    """An actor whose subclasses implement :meth:`handle` for asks and tells alike.

    Its inbox holds ``capacity`` messages; a full one blocks the sender.
    """

    def __init__(self, *, capacity: int = 64) -> None:
        super().__init__(capacity=capacity)

    def handle(self, message: Any) -> Any:
        """Answer one message (the reply of an ask; ignored for a tell)."""
        raise NotImplementedError

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, Told):
            return self.handle(message)
        try:
            self.handle(message.message)
        except Exception:
            logger.exception("%s failed on a told %s", self, type(message.message).__name__)
        return None
