"""The activity message the actor tests send (a support module, not a test module)."""

from __future__ import annotations

from relaystore import ApiActivityState, RecordActivities


def activity(n: int, session_id: str = "session-1", *, prefix: str = "state-") -> RecordActivities:
    """One activity of ``session_id``, named ``{prefix}{n}`` (a change for every new ``n``),
    recorded at ``n``."""
    state = ApiActivityState(
        state=f"{prefix}{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    return RecordActivities(activities=[(session_id, state)], recorded_at_ms=n)
