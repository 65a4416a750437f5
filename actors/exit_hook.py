"""A store's exit hook, and the process it belongs to.

Actor threads are daemon threads (:mod:`relaystore.actors.inbox`), so a store nobody
closed never keeps the process alive (a supervisor that crashes exits; nothing
acknowledged is lost, since an ask returns only after its commit). A clean interpreter
exit closes every store still open: each store registers its own close with
:mod:`atexit` when it opens (:meth:`OwningProcess.register`) and unregisters it when it
closes. That registry is atexit's own; relaystore keeps no module-level list of open
stores. A process forked after a store opened inherits the store but none of its
threads: there :meth:`OwningProcess.forked` is true, so the store's close does nothing
(the child exits at once and leaves the parent's store, workers and files alone), and
:meth:`OwningProcess.check` raises :class:`StoreClosed` naming the process the store
belongs to.

Owns the opening process's id and the store's one atexit registration. Must not: close
anything itself (it calls the close it was given), or keep a list of stores.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable

from ..domain.errors import StoreClosed

__all__ = ["OwningProcess"]


class OwningProcess:
    """The process that opened a store (the only one its actors and workers serve), and
    the store's ``close`` as that process's exit hook."""

    def __init__(self, close: Callable[[], None]) -> None:
        self.pid = os.getpid()
        """The process that opened the store."""
        self._close = close

    def forked(self) -> bool:
        """Whether this is a process forked after the store opened (not its own)."""
        return os.getpid() != self.pid

    def check(self) -> None:
        """Raise :class:`StoreClosed` in a process forked after the store opened: its
        actors are threads of the parent process, which the child does not have."""
        if self.forked():
            raise StoreClosed(
                f"the store belongs to process {self.pid}, which opened it; this process "
                f"({os.getpid()}) was forked from it and cannot use it (open it here instead)"
            )

    def register(self) -> None:
        """Close the store when the interpreter exits (once it opened)."""
        atexit.register(self._close)

    def unregister(self) -> None:
        """The store closed: nothing is left to close at exit."""
        atexit.unregister(self._close)
