"""How a message travels to an actor: an :class:`Envelope` with a reply sink, or none.

pykka stops an actor whose handler raises while handling a ``tell``, and its ``ask``
future can only be waited on by blocking a thread. relaystore therefore sends every
message with ``tell``, inside an :class:`Envelope` whose ``reply`` is any object with
``set`` and ``set_exception`` (a pykka future for a blocking ``ask``, an asyncio bridge
for ``relaystore.aio``, ``None`` for a ``tell``). :class:`TellSafeActor` answers the
envelope and never raises, so a bad message never stops an actor; a failure nobody
waits for is logged.
"""

from __future__ import annotations

import abc
import logging
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

from relaystore.actors.inbox import BoundedActor

__all__ = ["Envelope", "Reply", "TellSafeActor"]

logger = logging.getLogger(__name__)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class Reply(Protocol):
    """Where an actor puts its answer (pykka's future has this shape)."""

    def set(self, value: Any | None = None) -> None: ...

    def set_exception(self, exc_info: ExcInfo | None = None) -> None: ...


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message, and where its answer goes (``None``: nobody waits, failures are logged)."""

    message: Any
    reply: Reply | None = None

    def answer(self, value: Any, error: BaseException | None) -> None:
        """Hand over the result, or log the failure of a message nobody waits for."""
        if error is None:
            if self.reply is not None:
                self.reply.set(value)
        elif self.reply is None:
            logger.error("told %s failed: %s", type(self.message).__name__, error)
        else:
            self.reply.set_exception(exc_info=(type(error), error, error.__traceback__))


class TellSafeActor(BoundedActor):
    """An actor that answers :class:`Envelope` s through :meth:`handle` and never raises.

    Its inbox holds ``capacity`` messages; a full one blocks the sender.
    """

    def __init__(self, *, capacity: int = 64) -> None:
        super().__init__(capacity=capacity)

    @abc.abstractmethod
    def handle(self, message: Any) -> Any:
        """Answer one message; raise a ``StoreError`` to refuse it."""

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, Envelope):
            logger.warning("%s ignored an unexpected message %r", self, message)
            return
        try:
            value = self.handle(message.message)
        except Exception as exc:
            if message.reply is None:
                logger.exception("%s failed on a told %s", self, type(message.message).__name__)
                return
            message.answer(None, exc)
        else:
            message.answer(value, None)
