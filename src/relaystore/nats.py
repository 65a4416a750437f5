"""relaystore past one machine: publish a store's API events to NATS JetStream, and read
the merged feed of a fleet of stores (the ``relaystore[nats]`` extra, nats-py).

* :class:`Publisher` (asyncio): follows an :class:`~relaystore.aio.AsyncEventStore` and
  publishes each committed API event once, in ``seq`` order, to
  ``PREFIX.STORE_ID.WORKSPACE.SESSION``; resumes from the stream after any crash.
* :class:`FleetFeed`: an async iterator of :class:`FleetEvent` s, every store's events
  in its ``seq`` order, durable or ephemeral.

Importing :mod:`relaystore` never imports this module or nats-py.
"""

from __future__ import annotations

from relaystore.actors.nats.common import (
    DEFAULT_STREAM,
    DEFAULT_SUBJECT_PREFIX,
    DUPLICATE_WINDOW_SECONDS,
    filter_subject,
    subject_token,
)
from relaystore.actors.nats.fleet import FleetEvent, FleetFeed
from relaystore.actors.nats.publish import Publisher, PublisherMetrics

__all__ = [
    "DEFAULT_STREAM",
    "DEFAULT_SUBJECT_PREFIX",
    "DUPLICATE_WINDOW_SECONDS",
    "FleetEvent",
    "FleetFeed",
    "Publisher",
    "PublisherMetrics",
    "filter_subject",
    "subject_token",
]
