"""relaystore's runtime: the pykka actors, the :class:`EventStore` facade, the command line."""

from __future__ import annotations

import logging

from relaystore.actors.store import EventStore

__all__ = ["EventStore"]

logging.getLogger(__name__).addHandler(logging.NullHandler())
