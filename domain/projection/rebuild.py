"""Rebuilding a session's projection from its relay log with the current rules.

:func:`rebuild` projects every logged event of a session from its history start into a
fresh :class:`SessionProjection` and one :class:`PageDelta` that holds the whole
history (the page a reprojection writes over the reset projection). Pure: the log is
read by the store, the rows are written by :mod:`relaystore.storage.reproject`.

Matching the feed (:func:`feed_to_append`). The feed is append-only, so a rebuild
never rewrites or deletes a committed API event; it appends the derived events the
feed lacks. Events are matched as a multiset of their canonical bodies (``{"type",
"data"}`` as the store writes them, so equal events are equal bytes): for each body,
as many derived events as the session's stored events with that body are already in
the feed; the rest are appended, in the order the rules derived them, at the time the
rules give them, with fresh seqs. Stored events the rules no longer derive stay (they
were published). Matching by body only, not by position in the feed, keeps a second
reprojection with the same rules a no-op (appended events have later seqs than the
events around them, so any order-sensitive match would append them again).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

from ..api_events import ApiEventData
from ..errors import RelayLogUnavailable
from ..materialized import (
    HistoryStart,
    MaterializedSession,
    ProjectionBehind,
    TranscriptItem,
)
from ..relay.events import RelayEvent, RelayLine
from ..relay.log import StoredRelayLog
from ..seed import start_before
from ..wire import encode
from .page import PageDelta
from .session import SessionProjection

__all__ = [
    "Rebuilt",
    "ReprojectReport",
    "caught_up_from",
    "feed_to_append",
    "first_changed_position",
    "rebuild",
    "rebuild_from",
]


class ReprojectReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :class:`~relaystore.domain.messages.Reproject` changed in one session."""

    session_id: str
    events_reprojected: int
    """Relay events projected again from the log."""
    appended_by_kind: dict[str, int]
    """API events appended to the feed, by kind (empty: the feed already had them all)."""
    first_appended_seq: int | None
    first_changed_position: int | None
    """The lowest transcript position whose item the new rules changed, added or removed
    (None: the transcript is as it was)."""
    frontier_ordinal: int
    behind: ProjectionBehind | None = None
    """Where the rebuilt projection still waits behind the log (a kind this build does
    not know either; None: it reaches the frontier)."""
    caught_up_from: int | None = None
    """The ordinal the session was behind at before, when this build projected past it."""


@dataclass(slots=True)
class Rebuilt:
    """A session projected again from its log: the projection and the whole-history page."""

    projection: SessionProjection
    page: PageDelta


def rebuild(stored: StoredRelayLog, *, action: str = "reproject") -> Rebuilt:
    """Project the whole of ``stored`` (a session's log) with the current rules.

    Raises :class:`RelayLogUnavailable` when the log does not hold the session's whole
    history (see :class:`~relaystore.domain.relay.log.LogCoverage`), or the history
    starts at a checkpoint seed the store did not keep (seeded before schema revision
    8); the chain and projection errors of a damaged log otherwise. A seeded history
    starts from its seed's cursor and queued prompts. Lines of a kind this build does
    not know are kept, not projected: the rebuilt session is behind from the first.
    """
    session_id = stored.session_id
    coverage = stored.coverage
    if not coverage.complete:
        raise coverage.refusal(session_id, action)
    start = MaterializedSession.empty(session_id)
    if stored.history_source == "seed":
        if stored.seed is None:
            raise RelayLogUnavailable(
                f"cannot {action} session {session_id}: its history starts at a checkpoint "
                "seed that an older build applied without keeping its queued prompts; "
                "replay its journals into a new store to rebuild it",
                session_id=session_id,
            )
        cursor, queue = stored.seed
        start.applied_event_ordinal, start.applied_event_digest = cursor.ordinal, cursor.digest
        start.queued_prompts = list(queue)
        start.history_start = HistoryStart(ordinal=cursor.ordinal + 1, source="seed")
    return rebuild_from(start, stored.events())


def rebuild_from(start: MaterializedSession, events: Iterable[RelayEvent | RelayLine]) -> Rebuilt:
    """Project ``events`` onto ``start`` (an empty projection at the history's start,
    which the caller hands over). A start at genesis whose first event is past ordinal 1
    starts before that event (a journal whose earlier segments are gone)."""
    stream = iter(events)
    first = next(stream, None)
    session = start
    if first is not None and first.ordinal > 1 and session.applied_event_ordinal == 0:
        cursor = start_before(first)
        session.applied_event_ordinal, session.applied_event_digest = cursor.ordinal, cursor.digest
        session.history_start = HistoryStart(ordinal=first.ordinal, source="first_event")
    projection = SessionProjection(session, session_id=session.session_id, hold_unknown=True)
    page = PageDelta.starting_at(session.session_id, projection.frontier)
    if first is not None:
        for event in itertools.chain((first,), stream):
            mutation = projection.apply(event, digest_checked=True)
            if mutation is not None:
                page.add(event, mutation, applied_at_end=True)
    return Rebuilt(projection=projection, page=page)


def feed_to_append(
    derived: Sequence[tuple[str, int, ApiEventData]], stored_bodies: Iterable[str]
) -> list[tuple[str, int, ApiEventData]]:
    """The derived events the feed lacks (see the module doc), in derived order."""
    have = Counter(stored_bodies)
    missing = []
    for row in derived:
        body = encode(row[2]).decode()
        if have[body] > 0:
            have[body] -= 1
        else:
            missing.append(row)
    return missing


def caught_up_from(before: ProjectionBehind | None, after: ProjectionBehind | None) -> int | None:
    """The ordinal a session was behind at, when a rebuild projected past it."""
    if before is None or (after is not None and after.ordinal <= before.ordinal):
        return None
    return before.ordinal


def first_changed_position(
    before: Sequence[TranscriptItem], after: Sequence[TranscriptItem]
) -> int | None:
    """The lowest position at which ``before`` and ``after`` hold different items."""
    old = _by_position(before)
    new = _by_position(after)
    changed = [
        position for position in old.keys() | new.keys() if old.get(position) != new.get(position)
    ]
    return min(changed, default=None)


def _by_position(items: Sequence[TranscriptItem]) -> dict[int, list[bytes]]:
    found: dict[int, list[bytes]] = {}
    for item in sorted(items, key=lambda item: (item.position, item.stable_id)):
        found.setdefault(item.position, []).append(encode(item))
    return found
