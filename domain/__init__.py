"""relaystore's domain: the typed model, the wire codec, digests, the chain rule, the pure
projection, the messages and the errors. Pure: no I/O, no threads.

Internal, as the other layers are (the layout inside may change). The package
re-exports nothing: the contract's names are exported once, by
:mod:`relaystore`; everything is imported from its module (for example
``from relaystore.domain.relay import CommandQueued``), and each module lists its public
names in its own ``__all__``.
"""

from __future__ import annotations

__all__: list[str] = []
