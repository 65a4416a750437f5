"""relaystore's runtime: the pykka actors, the :class:`EventStore` facade, the command line.

:class:`EventStore` is imported on first use (:pep:`562`), so the command line can start
(``relaystore --version``) without loading the runtime.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import EventStore
else:  # hidden from type checkers, so that a misspelt name is still an error there

    def __getattr__(name: str) -> object:
        if name != "EventStore":
            raise AttributeError(f"module 'relaystore.actors' has no attribute {name!r}")
        from .store import EventStore

        return EventStore


__all__ = ["EventStore"]

logging.getLogger(__name__).addHandler(logging.NullHandler())
