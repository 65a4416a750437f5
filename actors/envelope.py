"""How a message travels to an actor: an :class:`Envelope` with a reply sink, or none.

pykka stops an actor whose handler raises while handling a ``tell``, and its ``ask``
future can only be waited on by blocking a thread. relaystore therefore sends every
message with ``tell``, inside an :class:`Envelope` whose ``reply`` is any object with
``set`` and ``set_exception`` (a :class:`OneShotReply` for a blocking ``ask``, an asyncio
bridge for ``relaystore.aio``, ``None`` for a ``tell``; a pykka future fits too).
:class:`TellSafeActor` answers the envelope and never raises, so a bad message never
stops an actor; a failure nobody waits for is logged.
"""

from __future__ import annotations

import abc
import logging
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import pykka

from ..domain.errors import InvalidInput
from .inbox import BoundedActor

__all__ = [
    "Answering",
    "answers_here",
    "Envelope",
    "ExcInfo",
    "OneShotReply",
    "Reply",
    "TellSafeActor",
    "Unanswerable",
]

logger = logging.getLogger(__name__)

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class Reply(Protocol):
    """Where an actor puts its answer (pykka's future has this shape)."""

    def set(self, value: Any | None = None) -> None: ...

    def set_exception(self, exc_info: ExcInfo | None = None) -> None: ...


def answers_here() -> bool:
    """Whether a message may be answered in the calling thread instead of being handed
    over (the writer's and the readers' fast paths): not in the main thread, where
    Python runs signal handlers and raises ``KeyboardInterrupt``, which could cut into
    or re-enter the work half done."""
    return threading.current_thread() is not threading.main_thread()


class Answering(Protocol):
    """What a message was handed to (an actor's ref, or the session runners): alive
    while it may still answer."""

    def is_alive(self) -> bool: ...


class OneShotReply:
    """The lightest reply sink a blocked thread can wait on: one lock, set once.

    What a blocking ``ask`` waits on instead of a pykka ``ThreadingFuture`` (a
    ``Condition`` and its waiter lock per wait): the lock is taken when the reply is
    made, and :meth:`set` or :meth:`set_exception` releases it, which wakes the one
    waiter in :meth:`get`. Only the first answer counts; a later one is ignored.
    """

    __slots__ = ("_done", "_error", "_lock", "_value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None

    def set(self, value: Any | None = None) -> None:
        """Answer with ``value`` and wake the waiter."""
        if self._done:
            return
        self._done = True
        self._value = value
        self._lock.release()

    def set_exception(self, exc_info: ExcInfo | None = None) -> None:
        """Answer with an exception (``exc_info`` as ``sys.exc_info()`` gives it)."""
        if self._done:
            return
        self._done = True
        if exc_info is None or exc_info[1] is None:
            self._error = RuntimeError("a reply was failed without an exception")
        else:
            self._error = exc_info[1]
        self._lock.release()

    def get(self, *, timeout: float | None = None) -> Any:
        """The answer: its value, or its exception raised here.

        Raises ``pykka.Timeout`` when no answer comes within ``timeout`` seconds
        (``None``: wait for ever), as a pykka future's ``get`` does, so the store's
        waiting loop treats both alike. The answer stays readable after a timeout.
        """
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise pykka.Timeout(f"{timeout} seconds")
        self._lock.release()  # later calls see the answer at once
        if self._error is not None:
            raise self._error
        return self._value


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


class Unanswerable(InvalidInput):
    """A message sent to an actor that does not take it (a routing bug, or a test's)."""

    def __init__(self, actor: str, message: object) -> None:
        super().__init__(f"the {actor} does not take {type(message).__name__}")


class TellSafeActor(BoundedActor):
    """An actor that answers :class:`Envelope` s through :meth:`handle` and never raises.

    Its inbox holds ``capacity`` messages; a full one blocks the sender.
    """

    def __init__(self, *, capacity: int = 64) -> None:
        super().__init__(capacity=capacity)

    @abc.abstractmethod
    def handle(self, message: Any) -> Any:
        """Answer one message; raise a ``StoreError`` to refuse it (:class:`Unanswerable`
        for a message this actor does not take)."""

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
