"""relaystore for asyncio: see :class:`~relaystore.actors.aio.AsyncEventStore`."""

from __future__ import annotations

from relaystore.actors.aio import AsyncEventStore

__all__ = ["AsyncEventStore"]
