"""What both facades say about an open store: :class:`StoreFacts`.

Owns the one wording of the store's path, mode and figures for
:class:`~relaystore.EventStore` and :class:`~relaystore.aio.AsyncEventStore`. Must not:
route or wait (the :class:`~relaystore.actors.core.StoreCore` they share does).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..domain.reports import StoreMetrics

if TYPE_CHECKING:
    from .core import StoreCore

__all__ = ["StoreFacts"]


class StoreFacts:
    """What both facades say about the open store, read from the core they share (one
    wording for :class:`~relaystore.EventStore` and :class:`~relaystore.aio.AsyncEventStore`)."""

    _core: StoreCore

    @property
    def path(self) -> Path:
        """The store's file."""
        return self._core.path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened ``read_only`` (readers only)."""
        return self._core.read_only

    @property
    def relay_log(self) -> bool:
        """Whether the store keeps the relay log (and so keeps lines of kinds this build
        does not know, holding their session behind, instead of refusing them)."""
        return self._core.relay_log

    def metrics(self) -> StoreMetrics:
        """A snapshot of the store's figures; never blocks on an actor, cheap enough to
        poll every second."""
        return self._core.metrics()
