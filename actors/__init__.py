"""relaystore's runtime: the pykka actors, the :class:`~relaystore.EventStore` facade,
journal reading, the command line, the HTTP server and the NATS publisher.

Internal, as the other layers are: the contract is what :mod:`relaystore` exports (each
name registered once, in :mod:`relaystore._contract`); the layout inside this package may
change. The package re-exports nothing, so ``relaystore --version`` starts without loading
the runtime; each module lists its public names in its own ``__all__``.
"""

from __future__ import annotations

import logging

__all__: list[str] = []

logging.getLogger(__name__).addHandler(logging.NullHandler())
