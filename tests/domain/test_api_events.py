"""The global feed: API event bodies, the flattened ApiEvent, activity states and pages."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.api_events import (
    ApiActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiCommandEnded,
    ApiEvent,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
    ApiInputRequired,
    ApiInputResolved,
    ApiLegacyNotice,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnEnded,
    ApiTurnStarted,
    MaterializedTurn,
    decode_api_event_data,
)
from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.errors import InvalidInput
from relaystore.domain.outcomes import (
    ApiTurnOutcome,
    CommandOwner,
    CommandResult,
    CommandResultKind,
    MaterializedTurnOutcome,
    OutcomeReason,
    TurnOutcomeCompleted,
)
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
    RuntimeReceipt,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.strategies import (
    API_EVENT_DATA,
    api_activity_states,
    api_event_data,
    api_event_pages,
    api_events,
    dumps,
    unknown_keys,
)

SEED_TURN_ENDED = (
    b'{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":2,"completed_ordinal":3,'
    b'"completed_at_ms":100,"outcome":{"kind":"completed","stop_reason":"end_turn"}}'
)


def seed_turn_outcome() -> ApiTurnOutcome:
    return ApiTurnOutcome.from_materialized(
        MaterializedTurnOutcome(
            command_id="prompt-1",
            accepted_ordinal=1,
            turn_start_position=2,
            completed_ordinal=3,
            completed_at_ms=100,
            outcome=TurnOutcomeCompleted(stop_reason="end_turn"),
        )
    )


def receipt() -> RuntimeReceipt:
    identity = RuntimeIdentity(
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="provider", version="first")],
    )
    identity.refresh_id()
    return RuntimeReceipt.observed(identity, ordinal=1, at_ms=100)


QUESTION = parse_acp_request(
    "question-1",
    {
        "mode": "form",
        "sessionId": "session-1",
        "message": "Which directory?",
        "requestedSchema": {
            "type": "object",
            "properties": {"directory": {"type": "string"}},
            "required": ["directory"],
        },
    },
)
QUESTION_JSON = (
    b'{"id":"question-1","message":"Which directory?","fields":[{"id":"directory","title":"directory",'
    b'"required":true,"secret":false,"kind":"text"}]}'
)

SHAPES: list[tuple[str, ApiEventData, bytes]] = [
    (
        "runtime_resolved",
        ApiRuntimeResolved.of(receipt=receipt()),
        b'{"type":"runtime_resolved","data":{"receipt":' + encode(receipt()) + b"}}",
    ),
    (
        "turn_started",
        ApiTurnStarted.of(
            turn=MaterializedTurn(
                command_id="prompt-1", accepted_ordinal=1, turn_start_position=2, started_at_ms=2
            )
        ),
        b'{"type":"turn_started","data":{"turn":{"command_id":"prompt-1","accepted_ordinal":1,'
        b'"turn_start_position":2,"started_at_ms":2}}}',
    ),
    (
        "turn_ended",
        ApiTurnEnded.of(turn=seed_turn_outcome()),
        b'{"type":"turn_ended","data":{"turn":' + SEED_TURN_ENDED + b"}}",
    ),
    (
        "command_ended",
        ApiCommandEnded(
            data=CommandResult(
                owner=CommandOwner.DAEMON,
                command_id="op-1",
                command_kind="checkpoint",
                outcome=CommandResultKind.REJECTED,
                reason=OutcomeReason.CHECKPOINT_DEFERRED,
                message="busy",
                related_command_ids=["barrier-1"],
            )
        ),
        b'{"type":"command_ended","data":{"owner":"daemon","command_id":"op-1","command_kind":"checkpoint",'
        b'"outcome":"rejected","reason":"checkpoint_deferred","message":"busy","related_command_ids":["barrier-1"]}}',
    ),
    (
        "session_fault",
        ApiSessionFault.of(reason=OutcomeReason.STARTUP_FAILED, message="no image"),
        b'{"type":"session_fault","data":{"reason":"startup_failed","message":"no image","command_id":null}}',
    ),
    (
        "legacy_notice",
        ApiLegacyNotice.of(original_type="error", message="old"),
        b'{"type":"legacy_notice","data":{"original_type":"error","message":"old","command_id":null}}',
    ),
    (
        "input_required",
        ApiInputRequired.of(turn_id=1),
        b'{"type":"input_required","data":{"turn_id":1}}',
    ),
    (
        "input_resolved",
        ApiInputResolved.of(elicitation_id="question-1", action="accept"),
        b'{"type":"input_resolved","data":{"elicitation_id":"question-1","turn_id":null,"action":"accept"}}',
    ),
    (
        "activity_changed",
        ApiActivityChanged.of(
            activity=ApiActivityState(
                state="running", is_idle=False, waiting_for_input=False, capacity_retry=False
            )
        ),
        b'{"type":"activity_changed","data":{"activity":{"state":"running","details":null,"is_idle":false,'
        b'"waiting_for_input":false,"capacity_retry":false}}}',
    ),
]


def test_every_api_event_kind_has_a_shape_test() -> None:
    assert [kind for kind, _, _ in SHAPES] == list(API_EVENT_DATA)


@pytest.mark.parametrize(
    ("event", "expected"),
    [pytest.param(event, expected, id=kind) for kind, event, expected in SHAPES],
)
def test_each_api_event_kind_writes_the_origin_shape(event: ApiEventData, expected: bytes) -> None:
    assert encode(event) == expected
    assert decode_api_event_data(expected) == event
    assert event.kind == msgspec.json.decode(expected)["type"]


def test_input_required_carries_the_request_when_present() -> None:
    event = ApiInputRequired.of(request=QUESTION, turn_id=None)
    assert (
        encode(event)
        == b'{"type":"input_required","data":{"request":' + QUESTION_JSON + b',"turn_id":null}}'
    )


def test_stored_body_may_list_data_before_type() -> None:
    body = (
        b'{"data":{"original_type":"error","message":"m","command_id":"c"},"type":"legacy_notice"}'
    )
    assert decode_api_event_data(body) == ApiLegacyNotice.of(
        original_type="error", message="m", command_id="c"
    )


def test_origin_error_kind_is_no_longer_a_body() -> None:
    with pytest.raises(InvalidInput, match="error"):
        decode_api_event_data(b'{"type":"error","data":{"command_id":null,"message":"m"}}')


# --- the flattened ApiEvent ------------------------------------------------------------------


def test_api_event_is_flat_with_type_and_data_after_the_time() -> None:
    event = ApiEvent.of(
        seq=2,
        session_id="session-1",
        recorded_at_ms=100,
        event=ApiTurnEnded.of(turn=seed_turn_outcome()),
    )
    raw = msgspec.json.encode(event)
    assert raw == (
        b'{"seq":2,"session_id":"session-1","recorded_at_ms":100,"type":"turn_ended","data":{"turn":'
        + SEED_TURN_ENDED
        + b"}}"
    )
    decoded = msgspec.json.decode(raw, type=ApiEvent)
    assert decoded == event
    assert decoded.kind == "turn_ended"
    assert decoded.event == ApiTurnEnded.of(turn=seed_turn_outcome())


def test_command_ended_event_flattens_the_result_into_data() -> None:
    result = CommandResult.worker("c1", "cancel_turn", CommandResultKind.SUCCEEDED, None, None)
    event = ApiEvent.of(seq=5, session_id="s", recorded_at_ms=7, event=ApiCommandEnded(data=result))
    assert msgspec.json.encode(event) == (
        b'{"seq":5,"session_id":"s","recorded_at_ms":7,"type":"command_ended","data":{"owner":"worker",'
        b'"command_id":"c1","command_kind":"cancel_turn","outcome":"succeeded"}}'
    )


def test_api_event_with_the_retired_error_type_is_refused() -> None:
    raw = b'{"seq":1,"session_id":"s","recorded_at_ms":1,"type":"error","data":{"command_id":null,"message":"m"}}'
    with pytest.raises(msgspec.ValidationError, match="error"):
        msgspec.json.decode(raw, type=ApiEvent)
    with pytest.raises(InvalidInput, match="error"):
        decode_json(raw, ApiEvent)


def test_api_event_whose_data_does_not_fit_its_type_is_refused() -> None:
    raw = (
        b'{"seq":1,"session_id":"s","recorded_at_ms":1,"type":"turn_started","data":{"turn_id":1}}'
    )
    with pytest.raises(InvalidInput, match="turn"):
        decode_json(raw, ApiEvent)


def test_api_event_in_any_key_order_decodes_to_the_same_event() -> None:
    canonical = b'{"seq":3,"session_id":"s","recorded_at_ms":9,"type":"input_required","data":{"turn_id":null}}'
    shuffled = b'{"data":{"turn_id":null},"type":"input_required","recorded_at_ms":9,"session_id":"s","seq":3}'
    assert msgspec.json.decode(shuffled, type=ApiEvent) == msgspec.json.decode(
        canonical, type=ApiEvent
    )
    assert msgspec.json.encode(msgspec.json.decode(shuffled, type=ApiEvent)) == canonical


# --- activity states, filters and pages ------------------------------------------------------


def test_activity_state_encoding_is_deterministic() -> None:
    details = ApiActivityDetails(kind=ApiActivityKind.STEP, step_started_at_ms=5, label="Bash")
    first = ApiActivityState(
        state="running",
        details=details,
        is_idle=False,
        waiting_for_input=False,
        capacity_retry=False,
    )
    second = decode_json(
        b'{"capacity_retry":false,"details":{"label":"Bash","step_started_at_ms":5,"kind":"step"},'
        b'"waiting_for_input":false,"is_idle":false,"state":"running"}',
        ApiActivityState,
    )
    assert first == second
    assert (
        encode(first)
        == encode(second)
        == (
            b'{"state":"running","details":{"kind":"step","step_started_at_ms":5,"label":"Bash"},'
            b'"is_idle":false,"waiting_for_input":false,"capacity_retry":false}'
        )
    )


@pytest.mark.parametrize("missing", ["is_idle", "waiting_for_input", "capacity_retry"])
def test_activity_state_requires_its_flags_as_the_origin_does(missing: str) -> None:
    body = {"state": "running", "is_idle": False, "waiting_for_input": False}
    body["capacity_retry"] = False
    del body[missing]
    with pytest.raises(InvalidInput, match=f"`{missing}`"):
        decode_json(encode(body), ApiActivityState)


def test_activity_state_always_writes_null_details() -> None:
    state = ApiActivityState(
        state="disconnected", is_idle=True, waiting_for_input=False, capacity_retry=False
    )
    assert encode(state) == (
        b'{"state":"disconnected","details":null,"is_idle":true,"waiting_for_input":false,"capacity_retry":false}'
    )


def test_activity_kinds_are_lowercase() -> None:
    assert [kind.value for kind in ApiActivityKind] == [
        "turn",
        "step",
        "background",
        "idle",
        "lifecycle",
    ]


def test_activity_details_refuse_unknown_fields_but_state_ignores_them() -> None:
    with pytest.raises(InvalidInput, match="`tokens`"):
        decode_json(b'{"kind":"turn","tokens":4}', ApiActivityDetails)
    state = decode_json(
        b'{"state":"running","details":null,"mood":"calm","is_idle":false,'
        b'"waiting_for_input":false,"capacity_retry":false}',
        ApiActivityState,
    )
    assert state == ApiActivityState(
        state="running", is_idle=False, waiting_for_input=False, capacity_retry=False
    )


def test_materialized_turn_refuses_unknown_fields() -> None:
    with pytest.raises(InvalidInput, match="`extra`"):
        decode_json(
            b'{"command_id":"c","turn_start_position":1,"started_at_ms":1,"extra":0}',
            MaterializedTurn,
        )


def test_default_filter_writes_every_null() -> None:
    assert encode(ApiEventFilter()) == b'{"session_id":null,"workspace_id":null,"command_id":null}'


def test_empty_page_writes_an_empty_event_list() -> None:
    assert (
        encode(ApiEventPage(next_after_seq=0, latest_seq=0))
        == b'{"events":[],"next_after_seq":0,"latest_seq":0}'
    )


def test_pages_do_not_share_their_event_lists() -> None:
    first = ApiEventPage(next_after_seq=0, latest_seq=0)
    second = ApiEventPage(next_after_seq=0, latest_seq=0)
    first.events.append(
        ApiEvent.of(seq=1, session_id="s", recorded_at_ms=1, event=ApiInputRequired.of())
    )
    assert second.events == []


def test_page_round_trips_through_msgspec() -> None:
    events = [
        ApiEvent.of(seq=seq, session_id="session-1", recorded_at_ms=100, event=event)
        for seq, (_, event, _) in enumerate(SHAPES, start=1)
    ]
    page = ApiEventPage(events=events, next_after_seq=9, latest_seq=12)
    raw = msgspec.json.encode(page)
    decoded = msgspec.json.decode(raw, type=ApiEventPage)
    assert decoded == page
    assert [event.event for event in decoded.events] == [event for _, event, _ in SHAPES]
    assert msgspec.json.encode(decoded) == raw


# --- properties ------------------------------------------------------------------------------

PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", list(API_EVENT_DATA))
@PROPERTY
@given(data=st.data())
def test_canonical_api_event_round_trips_for_every_kind(kind: str, data: st.DataObject) -> None:
    value = data.draw(api_events(kind))
    raw = dumps(value)
    event = msgspec.json.decode(raw, type=ApiEvent)
    assert msgspec.json.encode(event) == raw
    body = dumps({"type": value["type"], "data": value["data"]})
    assert encode(event.event) == body
    assert encode(decode_api_event_data(body)) == body
    assert (
        ApiEvent.of(
            seq=event.seq,
            session_id=event.session_id,
            recorded_at_ms=event.recorded_at_ms,
            event=event.event,
        )
        == event
    )


@settings(max_examples=100, deadline=None)
@given(value=api_activity_states)
def test_canonical_activity_state_round_trips(value: dict[str, Any]) -> None:
    raw = dumps(value)
    assert encode(decode_json(raw, ApiActivityState)) == raw


@settings(max_examples=50, deadline=None)
@given(value=api_event_pages)
def test_canonical_page_round_trips(value: dict[str, Any]) -> None:
    raw = dumps(value)
    assert msgspec.json.encode(msgspec.json.decode(raw, type=ApiEventPage)) == raw


@settings(max_examples=100, deadline=None)
@given(value=api_activity_states.filter(lambda v: v["details"] is not None), data=st.data())
def test_unknown_key_in_activity_details_is_refused_naming_it(
    value: dict[str, Any], data: st.DataObject
) -> None:
    key = data.draw(unknown_keys(set(ApiActivityDetails.__struct_fields__)))
    items = list(value["details"].items())
    items.insert(data.draw(st.integers(0, len(items))), (key, 1))
    value["details"] = dict(items)
    with pytest.raises(InvalidInput, match=f"`{key}`"):
        decode_json(dumps(value), ApiActivityState)


@settings(max_examples=50, deadline=None)
@given(body=api_event_data())
def test_body_with_type_after_data_decodes_the_same(body: dict[str, Any]) -> None:
    flipped = {"data": body["data"], "type": body["type"]}
    assert decode_api_event_data(dumps(flipped)) == decode_api_event_data(dumps(body))
