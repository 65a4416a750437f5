"""A message's integers must fit SQLite's INTEGER: the refusal names the exact field.

The check walks the message's plain form once without tracking paths, and traces the
path only when it finds an integer out of range; both halves are pinned here.
"""

from __future__ import annotations

import pytest

from relaystore.domain.api_events import ApiActivityDetails, ApiActivityKind, ApiActivityState
from relaystore.domain.errors import InvalidInput
from relaystore.domain.integers import INT64_MAX, INT64_MIN
from relaystore.domain.messages import RecordActivities
from relaystore.domain.validation import validate_message


def _state(idle_since_ms: int | None = None) -> ApiActivityState:
    details = (
        None
        if idle_since_ms is None
        else ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=idle_since_ms)
    )
    return ApiActivityState(
        state="idle", details=details, is_idle=True, waiting_for_input=False, capacity_retry=False
    )


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1, 2**200])
def test_an_integer_out_of_range_deep_in_a_message_is_named_by_its_path(value: int) -> None:
    message = RecordActivities(
        activities=[("s-1", _state()), ("s-2", _state(5)), ("s-3", _state(value))],
        recorded_at_ms=1,
    )
    with pytest.raises(InvalidInput) as refused:
        validate_message(message)
    assert str(refused.value) == (
        "RecordActivities.activities[2][1].details.idle_since_ms: "
        "integer outside SQLite's INTEGER range"
    )


def test_integers_at_the_edges_of_the_range_pass() -> None:
    message = RecordActivities(
        activities=[("s-1", _state(INT64_MAX)), ("s-2", _state(INT64_MIN))],
        recorded_at_ms=INT64_MAX,
    )
    validate_message(message)  # no error


def test_the_top_level_field_is_named_too() -> None:
    with pytest.raises(InvalidInput, match=r"^RecordActivities\.recorded_at_ms: integer outside"):
        validate_message(RecordActivities(activities=[], recorded_at_ms=INT64_MAX + 1))
