"""Which activity changes are published: the rule, over what the store last published.

An ``activity_changed`` event is published for a session only when the activity's
serialized JSON differs from the last one published for it (byte comparison of the
deterministic encoding), in the order given; activity for a session that does not exist
(never saved, or deleted) is dropped, so a forgotten session is never revived.
:mod:`relaystore.storage.activity` reads what was published and writes what this decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import msgspec

from .api_events import (
    ActivityChangedData,
    ApiActivityChanged,
    ApiActivityState,
    ApiEventData,
)
from .errors import InvalidInput
from .wire import encode

__all__ = ["ActivityPlan", "plan_activities", "published_activity", "published_body"]


@dataclass(slots=True)
class ActivityPlan:
    """What to write: the events to append, in order, and each session's new last body."""

    events: list[tuple[str, int, ApiEventData]] = field(default_factory=list)
    published: dict[str, str] = field(default_factory=dict)


def plan_activities(
    published: Mapping[str, str],
    activities: Iterable[tuple[str, ApiActivityState]],
    recorded_at_ms: int,
) -> ActivityPlan:
    """Decide what ``activities`` publish; ``published`` maps every existing session of
    the batch to the body it last published (``""``: none yet)."""
    plan = ActivityPlan()
    last = dict(published)
    for session_id, activity in activities:
        previous = last.get(session_id)
        if previous is None:
            continue  # never saved, or deleted: do not revive it
        body = published_body(activity)
        if previous == body:
            continue
        last[session_id] = plan.published[session_id] = body
        # Built directly: the activity was checked at the boundary (``.of`` would convert
        # it again, a tenth of the write's cost).
        event = ApiActivityChanged(data=ActivityChangedData(activity=activity))
        plan.events.append((session_id, recorded_at_ms, event))
    return plan


def published_body(activity: ApiActivityState) -> str:
    """What a store keeps, and compares, as a session's last published activity: the
    activity's deterministic encoding (the ``activity`` of its ``activity_changed``
    event, byte for byte)."""
    return encode(activity).decode()


_ACTIVITY_CHANGED = msgspec.json.Decoder(ActivityChangedData)


def published_activity(event_type: str, data: bytes, *, where: str) -> str | None:
    """What an API event of ``event_type`` with ``data`` publishes as its session's
    activity, as the store keeps it (:func:`published_body`): an ``activity_changed``
    event's, None for any other kind. A replica keeps a session's activity from the
    newest such event it applies (a store of revision 16 or later numbers no change for
    it). :class:`InvalidInput` naming ``where`` when the data is not an activity."""
    if event_type != "activity_changed":
        return None
    try:
        changed = _ACTIVITY_CHANGED.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise InvalidInput(f"{where}: its activity does not decode: {exc}") from None
    return published_body(changed.activity)
