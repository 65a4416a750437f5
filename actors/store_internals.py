"""The one door from relaystore's own modules into an open store: :class:`StoreInternals`.

What ``replay``, ``audit`` and the NATS publisher ask of a store that its public surface
(:class:`~relaystore.EventStore`, :class:`~relaystore.aio.AsyncEventStore`) does not
offer goes through here, typed, instead of through the facades' private attributes
(a test checks that no module outside the facade's own reaches for those). Not public:
not in the contract, not re-exported, and free to change with the modules that use it.

Must not: route or wait (the store's :class:`~relaystore.actors.core.StoreCore` does),
or check what the core checks; each call states the checks it adds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..domain.audit import AuditView
from ..domain.ids import validate_id
from ..domain.messages import ObserveRelayEvents, ProjectionReport
from ..domain.relay.events import RelayEvent, RelayLine
from ..domain.replication import ReplicationRound
from .internal import LoadAuditView, LoadReplicationRound

if TYPE_CHECKING:
    from .aio import AsyncEventStore
    from .core import StoreCore
    from .store import EventStore

__all__ = ["StoreInternals", "store_internals"]


class StoreInternals:
    """What relaystore's own modules ask of an open store beyond its public surface
    (see the module); get one with :func:`store_internals`."""

    __slots__ = ("_core",)

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    def observe_decoded(
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

    def audit_view(self, session_id: str) -> AuditView | None:
        """A session's projection, relay log and feed in one snapshot, for ``audit``
        (None: the store has no projection of it)."""
        validate_id("session", session_id)
        self._core.check_open()
        view: AuditView | None = self._core.ask_blocking(LoadAuditView(session_id=session_id))
        return view

    def replication_round(self, after_seq: int, after_change: int, limit: int) -> ReplicationRound:
        """The changes and API events the publisher sends next, read by one of the
        store's readers in one snapshot. Blocks: the publisher calls it in a worker
        thread."""
        message = LoadReplicationRound(after_seq=after_seq, after_change=after_change, limit=limit)
        round_: ReplicationRound = self._core.ask_blocking(message)
        return round_


def store_internals(store: EventStore | AsyncEventStore) -> StoreInternals:
    """The door into ``store`` for relaystore's own modules (both facades of one store
    share its core, so either gives the same door)."""
    return StoreInternals(store._core)
