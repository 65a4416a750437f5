"""The activity publishing rule, decided without a store."""

from __future__ import annotations

from relaystore.domain.activity import plan_activities
from relaystore.domain.api_events import ApiActivityChanged, ApiActivityState
from relaystore.domain.wire import encode


def _state(name: str) -> ApiActivityState:
    return ApiActivityState(
        state=name, is_idle=False, waiting_for_input=False, capacity_retry=False
    )


def test_only_a_change_is_published_and_a_missing_session_is_never_revived() -> None:
    running = _state("running")
    plan = plan_activities(
        {"a": "", "b": encode(running).decode()},
        [("a", running), ("a", running), ("b", running), ("gone", running), ("a", _state("idle"))],
        7,
    )
    assert [(sid, at, event.data.activity.state) for sid, at, event in plan.events] == [  # type: ignore[union-attr]
        ("a", 7, "running"),
        ("a", 7, "idle"),
    ]
    assert all(isinstance(event, ApiActivityChanged) for _, _, event in plan.events)
    assert plan.published == {"a": encode(_state("idle")).decode()}


def test_an_empty_batch_writes_nothing() -> None:
    plan = plan_activities({"a": ""}, [], 1)
    assert plan.events == []
    assert plan.published == {}


def test_a_replica_keeps_the_activity_an_event_published_as_the_writer_kept_it() -> None:
    """The body a replica keeps from an ``activity_changed`` event is byte for byte the
    one the writer compared and kept when it published it (one rule: published_body)."""
    import msgspec

    from relaystore.domain.activity import published_activity
    from relaystore.domain.replication import WireEvent

    activity = ApiActivityState(
        state="working", is_idle=False, waiting_for_input=True, capacity_retry=False
    )
    plan = plan_activities({"s": ""}, [("s", activity)], 5)
    (_, _, event) = plan.events[0]
    wire = WireEvent(
        seq=1,
        session_id="s",
        recorded_at_ms=5,
        type=event.kind,
        data=msgspec.Raw(encode(event).split(b',"data":', 1)[1][:-1]),
    )
    assert published_activity(wire.type, wire.data, where="here") == plan.published["s"]
    other = WireEvent(
        seq=2, session_id="s", recorded_at_ms=5, type="turn_started", data=msgspec.Raw(b"{}")
    )
    assert published_activity(other.type, other.data, where="here") is None
