"""The store's options and the facades' argument checks: what ``open`` takes and what
``ask``, ``tell``, ``wait_for`` and ``follow`` accept, each check with one wording.

Owns :class:`OpenOptions` (the keyword options both facades' ``open`` take), their
defaults (the one place they are written), :class:`Settings` (the options checked),
and the checks of a timeout (:func:`check_timeout`), a message (:func:`check_message`)
and a ``wait_for`` seq (:func:`check_seq`), with the error an ask that timed out
raises (:func:`ask_timeout`).

Must not: open, start or route anything (no actors, no storage). It only says whether
an argument is acceptable, raising :class:`~relaystore.domain.errors.InvalidInput`
naming the first bad one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict, get_args

from ..domain.errors import AskTimeout, InvalidInput
from ..domain.messages import PUBLIC_MESSAGES, Request
from ..domain.validation import validate_message
from ..storage.connection import Synchronous
from .routing import INTERNAL_MESSAGES

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_PROJECTORS",
    "DEFAULT_PROJECTION",
    "DEFAULT_PROJECTOR_IDLE_SECONDS",
    "DEFAULT_QUEUE_CAPACITY",
    "DEFAULT_READERS",
    "DEFAULT_SYNCHRONOUS",
    "MAX_READERS",
    "MAX_TIMEOUT",
    "OpenOptions",
    "ProjectionMode",
    "Settings",
    "ask_timeout",
    "check_message",
    "check_seq",
    "check_timeout",
]

MAX_TIMEOUT = threading.TIMEOUT_MAX
"""The longest timeout either facade takes, in seconds: the longest a thread can wait."""

MAX_READERS = 64
"""The most reader actors one store starts."""

ProjectionMode = Literal["thread", "process"]
"""Where projectors project: in their actor's thread, or in a worker process
(:mod:`relaystore.actors.workers.proxy`)."""

DEFAULT_READERS = 2
DEFAULT_QUEUE_CAPACITY = 256
DEFAULT_SYNCHRONOUS: Synchronous = "FULL"
DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_PROJECTORS = 256
DEFAULT_PROJECTOR_IDLE_SECONDS = 300.0
DEFAULT_PROJECTION: ProjectionMode = "process"
"""The defaults of :meth:`EventStore.open`'s options, the one place they are written (its
signature and :meth:`Settings.check` both name these)."""


class OpenOptions(TypedDict, total=False):
    """The keyword options of :meth:`EventStore.open` (``AsyncEventStore.open`` takes the same).

    Defaults and their meaning: see :meth:`relaystore.EventStore.open`.
    """

    readers: int
    queue_capacity: int
    synchronous: Synchronous
    read_only: bool
    max_batch: int
    max_projectors: int
    projector_idle_seconds: float
    relay_log: bool
    projection: ProjectionMode


@dataclass(frozen=True, slots=True)
class Settings:
    """Checked options of an open store."""

    path: Path
    readers: int
    capacity: int
    synchronous: Synchronous
    read_only: bool
    max_batch: int
    max_projectors: int
    projector_idle_seconds: float
    relay_log: bool = True
    projection: ProjectionMode = DEFAULT_PROJECTION

    @classmethod
    def check(
        cls,
        path: object,
        *,
        readers: object = DEFAULT_READERS,
        queue_capacity: object = DEFAULT_QUEUE_CAPACITY,
        synchronous: object = DEFAULT_SYNCHRONOUS,
        read_only: object = False,
        max_batch: object = DEFAULT_MAX_BATCH,
        max_projectors: object = DEFAULT_MAX_PROJECTORS,
        projector_idle_seconds: object = DEFAULT_PROJECTOR_IDLE_SECONDS,
        relay_log: object = True,
        projection: object = DEFAULT_PROJECTION,
    ) -> Settings:
        """The settings, or :class:`InvalidInput` naming the first bad option."""
        try:
            where = Path(path)  # type: ignore[arg-type]
            if "\x00" in str(where):
                raise ValueError("embedded null byte")
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"EventStore.open: path must name a file ({exc})") from exc
        counts: dict[str, int] = {}
        for name, value in (
            ("readers", readers),
            ("queue_capacity", queue_capacity),
            ("max_batch", max_batch),
            ("max_projectors", max_projectors),
        ):
            if type(value) is not int or value < 1:
                raise InvalidInput(f"EventStore.open: {name} must be an int of at least 1")
            counts[name] = value
        if counts["readers"] > MAX_READERS:
            # Each reader is a thread with its own connection and file handles.
            raise InvalidInput(f"EventStore.open: readers must be at most {MAX_READERS}")
        for name, flag in (("read_only", read_only), ("relay_log", relay_log)):
            if type(flag) is not bool:
                raise InvalidInput(f"EventStore.open: {name} must be True or False")
        modes: tuple[Synchronous, ...] = get_args(Synchronous)
        if synchronous not in modes:
            raise InvalidInput(f"EventStore.open: synchronous must be one of {', '.join(modes)}")
        projections: tuple[ProjectionMode, ...] = get_args(ProjectionMode)
        if projection not in projections:
            raise InvalidInput(
                f"EventStore.open: projection must be one of {', '.join(projections)}"
            )
        idle = projector_idle_seconds
        if type(idle) not in (int, float) or not idle > 0:  # type: ignore[operator]
            raise InvalidInput("EventStore.open: projector_idle_seconds must be a number > 0")
        return cls(
            where,
            counts["readers"],
            counts["queue_capacity"],
            synchronous,
            read_only is True,
            counts["max_batch"],
            counts["max_projectors"],
            float(idle),  # type: ignore[arg-type]
            relay_log is True,
            projection,
        )


def check_timeout(timeout: object) -> None:
    """Raise :class:`InvalidInput` unless ``timeout`` is ``None`` or 0..MAX_TIMEOUT seconds."""
    if timeout is not None and (
        type(timeout) not in (int, float) or not 0 <= timeout <= MAX_TIMEOUT  # type: ignore[operator]
    ):
        raise InvalidInput(
            f"timeout must be None or a number of seconds from 0 to {MAX_TIMEOUT:.0f}"
        )


def ask_timeout(message: object, timeout: float | None) -> AskTimeout:
    """The error of an ask whose reply did not come within ``timeout``."""
    return AskTimeout(
        f"{type(message).__name__} got no reply within {timeout} s; it was handed over and "
        "may still take effect"
    )


def check_message(message: object) -> None:
    """Raise :class:`InvalidInput` unless ``message`` is a well-formed public message:
    the actors' own messages (:mod:`relaystore.actors.internal`) are refused by type,
    then :func:`~relaystore.domain.validation.validate_message` checks its fields."""
    if isinstance(message, INTERNAL_MESSAGES):
        raise InvalidInput(
            f"{type(message).__name__} is internal to relaystore's actors; "
            "ask and tell take only the public messages"
        )
    if isinstance(message, Request) and not isinstance(message, PUBLIC_MESSAGES):
        raise InvalidInput(f"{type(message).__name__} is not a relaystore message")
    validate_message(message)


def check_seq(seq: object) -> None:
    """Raise :class:`InvalidInput` unless ``seq`` (what ``wait_for`` waits for) is an
    int >= 0."""
    if type(seq) is not int or seq < 0:
        raise InvalidInput("wait_for: seq must be an int >= 0")
