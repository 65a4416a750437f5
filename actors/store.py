"""The :class:`EventStore` facade: what a supervisor embeds.

``EventStore.open`` starts one writer actor (the only write connection), ``readers``
reader actors and, on first use, one projector actor per session. ``ask`` checks a
message (:func:`~relaystore.domain.validation.validate_message`), routes it by its type
and returns its typed reply or raises its typed error. The facade only routes and
waits: its rules live in the modules :class:`~relaystore.actors.core.StoreCore` (which
:class:`~relaystore.aio.AsyncEventStore` shares) calls: the options and checks in
:mod:`~relaystore.actors.settings`, the follow pager in :mod:`~relaystore.actors.pager`,
the figures in :mod:`~relaystore.actors.metrics`; what a message does lives in the actor
that owns it and the storage function it calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar, Unpack

from ..domain.api_events import ApiEvent, ApiEventFilter, RawApiEvent
from ..domain.audit import AuditView
from ..domain.errors import StoreClosed
from ..domain.ids import validate_id
from ..domain.messages import (
    LoadApiEvents,
    LoadRawApiEvents,
    ObserveRelayEvents,
    ProjectionReport,
    Request,
)
from ..domain.relay.events import RelayEvent, RelayLine
from ..storage.connection import Synchronous
from .core import StoreCore
from .facts import StoreFacts
from .internal import LoadAuditView
from .pager import FollowPager
from .settings import OpenOptions

__all__ = ["EventStore", "Synchronous"]

R = TypeVar("R")


class EventStore(StoreFacts):
    """An open relaystore: one writer, some readers, a projector per session.

    Use :meth:`open`; close with :meth:`close` or by leaving a ``with`` block. A store
    left open closes when the interpreter exits (its threads never keep it alive).
    """

    @classmethod
    def open(cls, path: str | os.PathLike[str], **options: Unpack[OpenOptions]) -> EventStore:
        """Open (creating or migrating) the store at ``path``.

        The options are :class:`~relaystore.actors.settings.OpenOptions`, each defaulting
        to its ``DEFAULT_*`` in :mod:`relaystore.actors.settings` (``read_only`` False,
        ``relay_log`` True); :meth:`Settings.check` refuses a bad one with
        :class:`InvalidInput` naming it.

        Raises ``SchemaMismatch`` for a store this build must not touch and
        ``StoreLocked`` when another process (or another ``open`` in this one) holds it
        for writing. ``read_only`` starts readers only: no migration, no lock.
        ``max_batch`` caps how many waiting messages one commit takes (1 turns group
        commit off). ``queue_capacity`` bounds every actor's inbox: the writer's, each
        reader's and each projector's; a full inbox blocks the sender. At most
        ``max_projectors`` sessions keep a projector (a thread and the session's
        projection in memory); past that, an idle one is stopped (for a session
        coming back after its projector was stopped for room, the newest started that
        was not asked for again, else the least recently used), as is any unused for
        ``projector_idle_seconds``; it reloads from the store on its next event. ``relay_log`` keeps every applied relay event's journal line in the store,
        compressed, in the transaction of the page that applied it (the relay log that
        ``reproject`` and ``audit`` rebuild from); turn it off to store only what is
        derived (a session projected while it is off can no longer be reprojected).
        ``projection="process"`` (the default) projects in worker processes (digests,
        the chain rule, the projection and its pages; one per core, at most four),
        each started with the first projector it serves and again if it dies, so that
        work leaves this interpreter; the writer here still commits every page.
        ``"thread"`` projects in each projector's thread (for an interpreter that
        cannot start itself again: an embedded or frozen one).
        """
        return cls(StoreCore.open(path, **options))

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    # -- routing -------------------------------------------------------------------

    def ask(self, message: Request[R], timeout: float | None = None) -> R:
        """Send ``message`` to the actor that owns it and return its typed reply.

        Raises :class:`InvalidInput` for a malformed message (nothing is sent),
        :class:`AskTimeout` when ``timeout`` runs out (the message may still take effect),
        :class:`StoreClosed` after :meth:`close`, ``StoreBusy`` when another connection
        held SQLite's write lock past the busy timeout (nothing was written: retry), and
        the message's own typed errors.
        """
        self._core.check_ask(message, timeout)
        return self._core.ask_blocking(message, timeout)  # type: ignore[no-any-return]

    def _observe_decoded(
        self, session_id: str, events: list[RelayEvent | RelayLine]
    ) -> Callable[[], ProjectionReport]:
        """Hand ``events`` to the session's projector now; the returned call waits for the
        report. For ``replay``, which reads the next batch while the last one projects:
        its events come from the journal decoder, which typed every field, and its
        session id was checked by its first ask, so they are not validated again."""
        self._core.check_open()
        wait: Callable[[], ProjectionReport] = self._core.ask_later(
            ObserveRelayEvents(session_id=session_id, events=events)
        )
        return wait

    def _audit_view(self, session_id: str) -> AuditView | None:
        """A session's projection, relay log and feed in one snapshot, for ``audit``."""
        validate_id("session", session_id)
        self._core.check_open()
        view: AuditView | None = self._core.ask_blocking(LoadAuditView(session_id=session_id))
        return view

    def tell(self, message: Request[Any]) -> None:
        """Send ``message`` without waiting; a failure is logged and stops nothing.

        A malformed message raises :class:`InvalidInput` here, before anything is sent.
        """
        self._core.check_tell(message)
        self._core.send(message, None)

    def wait_for(self, seq: int, timeout: float | None = None) -> bool:
        """Block until an API event with ``seq`` or higher is committed.

        Woken by the writer's commits. In a read-only store (the writer is another
        process) it watches the store's WAL file for changes instead. Returns False when
        ``timeout`` passes first; raises :class:`StoreClosed` when the store closes.
        """
        self._core.check_wait(seq, timeout)
        return self._core.wait_commit(seq, timeout)

    def follow(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> Iterator[ApiEvent]:
        """Iterate committed API events after ``after_seq`` in ``seq`` order, waiting for more.

        This process's commits wake it at once; opened read-only, it sees other
        processes' commits too. It ends when ``timeout`` seconds pass with nothing new
        (``None``: never) or when the store closes.
        """
        return self._follow(self._core.follow_pager(LoadApiEvents, after_seq, filter, timeout))

    def _follow(self, pager: FollowPager[Any]) -> Iterator[Any]:
        with self._core.following():
            while True:
                try:
                    page = self.ask(pager.request())
                except StoreClosed:
                    return
                yield from page.events
                wait = pager.advance(page)
                if wait is None:
                    continue  # more are committed already: read on without waiting
                try:
                    if not self.wait_for(wait, pager.timeout):
                        return
                except StoreClosed:
                    return

    def follow_raw(
        self,
        after_seq: int = 0,
        filter: ApiEventFilter | None = None,
        *,
        timeout: float | None = None,
    ) -> Iterator[RawApiEvent]:
        """What :meth:`follow` yields, each event as its wire bytes (``LoadRawApiEvents``).

        The same events, order, waiting and ending as :meth:`follow`; nothing is decoded.
        """
        pager = self._core.follow_pager(LoadRawApiEvents, after_seq, filter, timeout)
        return self._follow(pager)

    @property
    def latest_seq(self) -> int:
        """The newest committed API event ``seq`` this store has seen."""
        return self._core.commits.latest

    def fetch_latest_seq(self) -> int:
        """The newest committed API event ``seq``, read from the store now."""
        return self.ask(LoadApiEvents(limit=1)).latest_seq

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        """Stop taking messages, let the writer finish what it accepted, stop everything.

        Every ``wait_for`` and ``follow`` ends at once (``wait_for`` raises
        :class:`StoreClosed`). The writer checkpoints on its way out, so the main
        database file alone holds every committed event.
        """
        self._core.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
