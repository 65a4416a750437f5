"""Auditing a stored session against what its relay events derive: the first divergence.

Pure comparisons for ``relaystore audit`` (:mod:`relaystore.actors.audit` reads the
store and the journals). Three things are compared, in this order, and the first
difference is named:

1. the events (when a journal is audited against a store that kept its relay log):
   the first ordinal whose digest differs between what the store applied and what the
   journal holds (:func:`first_event_divergence`);
2. the projection: the stored materialized session against the derived one, field by
   field in the wire shape, the transcript in the store's order (position, stable id)
   (:func:`first_projection_divergence`), modulo retention: at or below the session's
   checkpoint frontier both sides are compared as retention leaves them
   (:func:`~relaystore.domain.retention.retained_session`), so what a ``compact`` pass
   forgot of an old tool call is no divergence, and nothing else is forgiven;
3. the feed: every API event the rules derive must be in the session's feed, matched by
   canonical body as a multiset (the rule :mod:`relaystore.domain.projection.rebuild`
   uses to append). A derived event the feed lacks is a divergence, named with the
   first stored event of the same kind that nothing derived matched (the likely damaged
   row). Stored events nothing derives are not: the supervisor writes events of its own
   (lifecycle, checkpoints, activity) and an older build's rules may have derived more
   (:func:`first_feed_divergence`).

Beside the projection, each item's stored role and text (schema revision 12, what pages
read instead of flattening the body) must be the stored body's
(:func:`first_view_divergence`): a damaged one is named as a projection field.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from .api_events import ApiEvent, ApiEventData
from .materialized import MaterializedSession
from .relay.events import RelayEvent, RelayLine
from .relay.log import LogCoverage, StoredRelayLog
from .retention import retained_session
from .transcript_views import item_role, item_text
from .wire import encode

__all__ = [
    "AuditResult",
    "AuditView",
    "Divergence",
    "first_event_divergence",
    "first_feed_divergence",
    "first_projection_divergence",
    "first_view_divergence",
    "pruned_through",
]


class Divergence(msgspec.Struct, frozen=True, kw_only=True):
    """Where a stored session first differs from what its events derive."""

    where: str
    """``ordinal N``, ``projection.FIELD`` or ``api event seq S``."""
    stored: str
    derived: str
    ordinal: int | None = None
    field: str | None = None
    seq: int | None = None

    def __str__(self) -> str:
        return f"{self.where}: stored {self.stored}, derived {self.derived}"


class AuditResult(msgspec.Struct, frozen=True, kw_only=True):
    """One session's audit: what it was derived from and its first divergence, if any."""

    session_id: str
    source: str
    """``log`` or the journal paths."""
    events: int
    api_events: int
    divergence: Divergence | None = None
    refused: str | None = None
    """Why the session could not be audited (its log does not hold its history, ...)."""
    pruned: str | None = None
    """Why the session was not re-derived from its log: ``prune-log`` removed a prefix
    its verified checkpoint covers (:func:`pruned_through`). Neither a divergence nor a
    refusal: the session still matches; its journals (``--journals``) still audit it."""

    @property
    def matches(self) -> bool:
        return self.divergence is None and self.refused is None


class AuditView(msgspec.Struct, frozen=True, kw_only=True):
    """What an audit compares, read from the store in one snapshot: the session's
    projection, its relay log and its feed as one committed state, so a writer that
    commits meanwhile never puts one ahead of another."""

    projection: MaterializedSession
    log: StoredRelayLog
    feed: list[ApiEvent]
    """The session's API events, in seq order."""
    retention_frontier: int | None = None
    """The session's checkpoint frontier (None: no checkpoint): retention may have
    shrunk tool calls at or below it."""
    stored_views: dict[str, tuple[str, str]] = msgspec.field(default_factory=dict)
    """Each item's stored role and text by stable id, where the store knows them."""


def pruned_through(coverage: LogCoverage, retention_frontier: int | None) -> int | None:
    """The last ordinal pruned from a session's log, when the only thing its log lacks is
    a prefix its verified checkpoint (through ``retention_frontier``) covers: what
    ``prune-log`` leaves. None otherwise (a whole log, a hole, a missing tail, or a
    missing prefix no checkpoint covers: the log was off, or damaged)."""
    if retention_frontier is None or coverage.complete or coverage.hole_after is not None:
        return None
    if coverage.first_ordinal is None:
        through = coverage.frontier
    elif coverage.last_ordinal != coverage.frontier or (
        coverage.first_ordinal <= coverage.history_first
    ):
        return None
    else:
        through = coverage.first_ordinal - 1
    return through if through <= retention_frontier else None


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown(value: object) -> str:
    return "(absent)" if value is _ABSENT else _clip(encode(value).decode())


def first_event_divergence(
    applied: Sequence[RelayEvent | RelayLine], journal: Sequence[RelayEvent | RelayLine]
) -> Divergence | None:
    """The first ordinal both hold whose digests differ (``applied``: the store's log)."""
    theirs = {event.ordinal: event for event in journal}
    for event in applied:
        other = theirs.get(event.ordinal)
        if other is not None and other.digest != event.digest:
            return Divergence(
                where=f"ordinal {event.ordinal}",
                stored=f"digest {event.digest}",
                derived=f"digest {other.digest} (the journal's event differs from the one "
                "the store applied)",
                ordinal=event.ordinal,
            )
    return None


def _canonical(session: MaterializedSession) -> object:
    ordered = sorted(session.transcript, key=lambda item: (item.position, item.stable_id))
    return msgspec.to_builtins(msgspec.structs.replace(session, transcript=ordered))


def first_projection_divergence(
    stored: MaterializedSession,
    derived: MaterializedSession,
    retention_frontier: int | None = None,
) -> Divergence | None:
    """The first field (in the wire shape) where ``stored`` differs from ``derived``,
    both as retention leaves them at or below ``retention_frontier`` (see the module)."""
    found = _first_difference(
        _canonical(retained_session(stored, retention_frontier)),
        _canonical(retained_session(derived, retention_frontier)),
        "projection",
    )
    if found is None:
        return None
    path, mine, theirs = found
    ordinal = stored.applied_event_ordinal if path.startswith("projection.applied_event") else None
    return Divergence(
        where=path, stored=_shown(mine), derived=_shown(theirs), field=path, ordinal=ordinal
    )


def first_view_divergence(
    stored: MaterializedSession, views: dict[str, tuple[str, str]]
) -> Divergence | None:
    """The first item (in the store's order) whose stored role or text (``views``, by
    stable id) is not its stored body's, named ``projection.transcript[N].role`` or
    ``.text``; items without a stored view are not compared."""
    ordered = sorted(stored.transcript, key=lambda item: (item.position, item.stable_id))
    for index, item in enumerate(ordered):
        view = views.get(item.stable_id)
        if view is None:
            continue
        for name, mine, theirs in (
            ("role", view[0], item_role(item.body)),
            ("text", view[1], item_text(item.body)),
        ):
            if mine != theirs:
                path = f"projection.transcript[{index}].{name}"
                return Divergence(
                    where=path, stored=_shown(mine), derived=_shown(theirs), field=path
                )
    return None


_ABSENT = object()
"""A key or list item one side does not have."""


def _first_difference(mine: object, theirs: object, path: str) -> tuple[str, object, object] | None:
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*mine, *(k for k in theirs if k not in mine)]:
            found = _first_difference(
                mine.get(key, _ABSENT), theirs.get(key, _ABSENT), f"{path}.{key}"
            )
            if found is not None:
                return found
        return None
    if isinstance(mine, list) and isinstance(theirs, list):
        for index in range(max(len(mine), len(theirs))):
            found = _first_difference(
                mine[index] if index < len(mine) else _ABSENT,
                theirs[index] if index < len(theirs) else _ABSENT,
                f"{path}[{index}]",
            )
            if found is not None:
                return found
        return None
    if mine != theirs or type(mine) is not type(theirs):
        return path, mine, theirs
    return None


def first_feed_divergence(
    derived: Sequence[ApiEventData], stored: Sequence[tuple[int, str, str]]
) -> Divergence | None:
    """The first derived API event the feed lacks (``stored``: ``(seq, type, body)`` of
    the session's events in seq order); see the module doc."""
    have = Counter(body for _, _, body in stored)
    missing: list[tuple[str, str]] = []
    for event in derived:
        body = encode(event).decode()
        if have[body] > 0:
            have[body] -= 1
        else:
            missing.append((event.kind, body))
    if not missing:
        return None
    kind, body = missing[0]
    unmatched = Counter(have)
    for seq, stored_kind, stored_body in stored:
        if stored_kind == kind and unmatched[stored_body] > 0:
            return Divergence(
                where=f"api event seq {seq}",
                stored=_clip(stored_body),
                derived=_clip(body),
                seq=seq,
            )
    return Divergence(
        where=f"api event {kind}", stored="nothing (the feed lacks it)", derived=_clip(body)
    )
