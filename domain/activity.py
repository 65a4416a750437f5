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

from .api_events import (
    ActivityChangedData,
    ApiActivityChanged,
    ApiActivityState,
    ApiEventData,
)
from .wire import encode

__all__ = ["ActivityPlan", "plan_activities"]


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
        body = encode(activity).decode()
        if previous == body:
            continue
        last[session_id] = plan.published[session_id] = body
        # Built directly: the activity was checked at the boundary (``.of`` would convert
        # it again, a tenth of the write's cost).
        event = ApiActivityChanged(data=ActivityChangedData(activity=activity))
        plan.events.append((session_id, recorded_at_ms, event))
    return plan
