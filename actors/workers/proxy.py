"""The projector's side of projection in a worker process: a proxy that retries.

With ``EventStore.open(projection="process")`` each session's projector actor runs a
:class:`RemoteProjection`: it hands its message to the worker the store's
:class:`~relaystore.actors.workers.pool.WorkerPool` gave it, and answers the worker's
callbacks (:mod:`~relaystore.actors.workers.protocol`): each page the worker made goes to
the writer through the ``send_page`` it was given, and loads and asks through ``load``,
``load_paged`` and ``ask``.

Guarantees: an ask returns after its pages committed, as in the thread path. If the
worker process dies (SIGKILL, a crash, or presumed lost: see
:data:`~relaystore.actors.workers.pool.SILENCE_SECONDS`), the proxy waits for every page
it already handed to the writer, starts a new worker and sends the message again once;
the new worker loads the session from the store, so events whose pages committed are
re-deliveries it leaves alone (nothing is applied twice) and the report counts them as
the first attempt applied them. A second death while projecting the same message raises
:class:`~relaystore.domain.errors.WorkerLost`; every page committed before it stays
committed. The message's last page comes back with ``Done`` and is committed here; the
reply stands only if it committed exactly as sent, else the message runs again without
deferring (see :class:`~relaystore.actors.workers.protocol.Done`).

Owns the conversation and its retries. Must not: start or kill a process (the pool
does) or project anything itself (the worker does).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

import msgspec

from ...domain.errors import RelayChainError, StoreError, WorkerLost
from ...domain.messages import ObserveRelayEvents, ProjectionReport, ProjectorMessage
from ...domain.projection import PageDelta
from ...domain.projection.page_wire import decode_page
from ..envelope import Unanswerable
from ..projector import PageCommit, PagedLoader, PageSender, SessionLoader
from .pool import WorkerDied, WorkerPool
from .protocol import Call, CallResult, Done, Observe, PageOut, Run, encode_events, sendable

__all__ = ["RemoteProjection"]

logger = logging.getLogger(__name__)


class _Redo(Exception):
    """A deferred last page did not commit as sent (see :class:`~relaystore.actors.workers.protocol.Done`)."""


class RemoteProjection:
    """A projector actor's :class:`~relaystore.actors.projector.Projection` run by the
    store's worker process: the proxy side of a conversation (see the module doc)."""

    def __init__(
        self,
        session_id: str,
        pool: WorkerPool,
        *,
        load: SessionLoader,
        send_page: PageSender,
        ask: Callable[[Any], Any],
        load_paged: PagedLoader,
    ) -> None:
        self._session_id = session_id
        self._pool = pool
        self._index = pool.attach(session_id)
        self._worker = pool.worker(self._index)
        self._load = load
        self._send_page = send_page
        self._ask = ask
        self._load_paged = load_paged

    @property
    def worker_index(self) -> int:
        """The pool's index of the worker this session's projection lives in."""
        return self._index

    def handle(self, message: Any) -> Any:
        if not isinstance(message, ProjectorMessage):
            raise Unanswerable("projector", message)
        applied_before = 0
        """Events the pages of earlier attempts committed."""
        deaths = 0
        defer = True
        while True:
            committed: list[int] = []
            try:
                value = self._converse(message, committed, defer=defer)
            except WorkerDied as died:
                deaths += 1
                if deaths == 2:
                    raise WorkerLost(
                        f"the projection worker died twice projecting this message ({died}); "
                        "every page committed before stays committed",
                        session_id=self._session_id,
                    ) from None
                logger.warning(
                    "projection worker died projecting session %s (%s); starting another",
                    self._session_id,
                    died,
                )
            except _Redo:
                defer = False  # the core settles it this time
            else:
                break
            applied_before += sum(committed)
        if (
            applied_before
            and isinstance(message, ObserveRelayEvents)
            and isinstance(value, ProjectionReport)
        ):
            # The last attempt found the earlier attempts' committed pages already applied.
            moved = min(applied_before, value.already_applied)
            value = msgspec.structs.replace(
                value,
                applied=value.applied + moved,
                already_applied=value.already_applied - moved,
            )
        return value

    def close(self) -> None:
        """The projector stops: its session's projection stays parked in the worker for
        the session's next projector (see :mod:`~relaystore.actors.workers.pool`)."""
        self._pool.detach(self._index, self._session_id)

    def _converse(self, message: Any, committed: list[int], *, defer: bool) -> Any:
        """One conversation; ``committed`` gets the applied count of each page that
        committed (also when the worker dies). :class:`_Redo`: the deferred last page
        did not commit as sent; send the message again without ``defer``."""
        pending: dict[int, PageCommit] = {}
        session_id = self._session_id
        try:
            with self._worker.conversation() as connection:
                if isinstance(message, ObserveRelayEvents):
                    events = encode_events(message.events)
                    connection.send(Observe(session_id, events, defer))
                else:
                    connection.send(Run(session_id, message, defer))
                while True:
                    out = connection.recv()
                    if isinstance(out, PageOut):
                        page = decode_page(out.page)
                        pending[out.number] = self._send_page(session_id, page)
                    elif isinstance(out, Call):
                        connection.send(self._answer(out, pending, committed))
                    elif isinstance(out, Done):
                        done = out
                        break
        except WorkerDied:
            for wait in pending.values():  # settle what the writer was handed
                with contextlib.suppress(StoreError):
                    committed.append(wait()[1])
            raise
        # The worker is free: it projects another session while this page commits.
        if done.page is not None:
            self._commit_last(decode_page(done.page), committed)
        if done.error is not None:
            raise done.error
        return done.value

    def _commit_last(self, page: PageDelta, committed: list[int]) -> None:
        """Commit the page a :class:`~relaystore.actors.workers.protocol.Done` handed back; unless it committed exactly as
        sent, the worker forgets the session (its projection assumed the page; before
        this session's next conversation) and :class:`_Redo` or the commit's error is
        raised."""
        try:
            stored, applied = self._send_page(self._session_id, page)()
        except RelayChainError:  # the store is partway through the page: the core settles it
            self._worker.forget(self._session_id)
            raise _Redo() from None
        except BaseException:
            self._worker.forget(self._session_id)
            raise
        committed.append(applied)
        if applied != page.applied or stored != page.end:  # the store was ahead
            self._worker.forget(self._session_id)
            raise _Redo()

    def _answer(
        self, call: Call, pending: dict[int, PageCommit], committed: list[int]
    ) -> CallResult:
        try:
            if call.what == "wait":
                stored, applied = pending.pop(call.argument)()
                committed.append(applied)
                return CallResult((stored, applied))
            if call.what == "ask":
                return CallResult(self._ask(call.argument))
            if call.what == "load":
                return CallResult(self._load(call.argument))
            session, entries = self._load_paged(call.argument)
            return CallResult((session, list(entries)))
        except Exception as exc:  # noqa: BLE001 - raised in the worker, as in the thread path
            return CallResult(None, sendable(exc))
