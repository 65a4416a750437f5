"""relaystore: the event store a coding-agent supervisor embeds.

This module is the contract (``relaystore-api.md``): the :class:`EventStore` facade,
every message and reply, the wire types users construct or read, and the error tree.
The layers install as subpackages: :mod:`relaystore.domain` (pure types, codec,
digests, projection), :mod:`relaystore.storage` (apsw) and :mod:`relaystore.actors`
(pykka, the facade, journal reading, the command line).

Names are imported when first used (:pep:`562`), so ``import relaystore`` and the
command line's ``--version`` stay cheap; the first contract name asked for imports
:mod:`relaystore._contract`, where each name is registered once, and the runtime with it.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._contract import *  # noqa: F403 - the contract, registered once in _contract

    __version__: str
    __all__: list[str]
else:  # hidden from type checkers, so that a misspelt name is still an error there

    def _contract_names() -> list[str]:
        """The public names of :mod:`relaystore._contract` and ``__version__``, sorted."""
        contract = importlib.import_module("relaystore._contract")
        return sorted({*(n for n in vars(contract) if not n.startswith("_")), "__version__"})

    def __getattr__(name: str) -> object:
        """Import a contract name on first use (and keep it, as an import would)."""
        if name == "__version__":
            from importlib.metadata import PackageNotFoundError, version

            try:
                value: object = version("relaystore")
            except PackageNotFoundError:  # pragma: no cover - a bare source tree
                value = "0+unknown"
        elif name == "__all__":
            value = _contract_names()
        elif name.startswith("_"):
            raise AttributeError(f"module 'relaystore' has no attribute {name!r}")
        else:
            contract = importlib.import_module("relaystore._contract")
            if name not in vars(contract):
                raise AttributeError(f"module 'relaystore' has no attribute {name!r}")
            value = vars(contract)[name]
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_contract_names()})


logging.getLogger(__name__).addHandler(logging.NullHandler())
