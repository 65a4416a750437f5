"""Relay digests: the origin's vectors, the legacy fallback and chain validation."""

from __future__ import annotations

import hashlib
import json

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from relaystore.domain.chain import (
    GENESIS,
    Step,
    advance,
    checked_frontier,
)
from relaystore.domain.digests import (
    RELAY_EVENT_DIGEST_DOMAIN_V1,
    RELAY_EVENT_DIGEST_DOMAIN_V2,
    is_relay_digest,
    relay_event_digest,
    validate_frontier,
    validate_relay_event_self,
)
from relaystore.domain.errors import ChainFault, RelayChainError
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.relay import (
    RELAY_EVENT_GENESIS_DIGEST,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    Notice,
    PromptCommand,
    PromptOutcome,
    RelayCommandKind,
    RelayCursor,
    RelayEvent,
    SessionOpened,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.wire import encode
from tests.domain.strategies import dumps, relay_event_lines

# --- the origin's published vectors (origin-domain.md §2.7) --------------------------------

V2_LINE = (
    b'{"format":2,"ordinal":493425,"digest":"28c6574464b1361ad00dedd7cb04dac0c617948e290936082f1fd354334b262e",'
    b'"recorded_at_ms":1789421283703,"observation":{"type":"session_opened","data":'
    b'{"native_session_id":"fe6031fb-9af5-49ca-a587-5a816de61f86","resumed":false}}}'
)
LEGACY_DIGEST = "83a8ded900c35360e8998e6b7710902475145370bdaa88ce1fa186cb5d108636"
LEGACY_SESSION = "020bb831-ec40-49ac-bbcb-a702135deb5d"
LEGACY_LINE = (
    b'{"format":2,"ordinal":188,"digest":"' + LEGACY_DIGEST.encode() + b'",'
    b'"recorded_at_ms":1789436362441,"observation":{"type":"session_opened","data":'
    b'{"native_session_id":"' + LEGACY_SESSION.encode() + b'","resumed":true,'
    b'"native_continuity_lost":false}}}'
)
SEED_TURN_DIGESTS = [
    "8a48a58151e0956de89f0c277b9156b021ae850b27e905f3d0df4b5e8d1e1b8d",
    "179bbba0f42d6b8c48f35dd542e2e6b06bc473d13e54c0cf4b4f1a253ec3dc75",
    "a6aff09e636ffa8e59dcb3548acbeebddd663a1a0f75068cbe781d5ec9c7ac2a",
]


def test_domain_constants_are_the_origin_bytes() -> None:
    assert RELAY_EVENT_DIGEST_DOMAIN_V1 == b"hel-relay-event-v1\x00"
    assert RELAY_EVENT_DIGEST_DOMAIN_V2 == b"hel-relay-event-v2\x00"
    assert RELAY_EVENT_GENESIS_DIGEST == "0" * 64


def test_v2_vector_line_decodes_verifies_and_reencodes() -> None:
    event = decode_relay_event(V2_LINE)
    validate_relay_event_self(event)
    assert relay_event_digest(event) == event.digest
    assert encode_relay_event(event) == V2_LINE


def test_v2_vector_built_in_code_gets_the_published_digest_and_line() -> None:
    event = RelayEvent.create(
        ordinal=493425,
        recorded_at_ms=1789421283703,
        observation=SessionOpened.of(
            native_session_id="fe6031fb-9af5-49ca-a587-5a816de61f86", resumed=False
        ),
    )
    assert encode_relay_event(event) == V2_LINE


def legacy_event(**data: object) -> RelayEvent:
    fields = {"native_session_id": LEGACY_SESSION, "resumed": True, **data}
    built = RelayEvent.create(
        ordinal=188, recorded_at_ms=1789436362441, observation=SessionOpened.of(**fields)
    )
    return msgspec.structs.replace(built, digest=LEGACY_DIGEST)


def test_legacy_flag_vector_verifies_only_through_the_session_opened_fallback() -> None:
    event = legacy_event()
    assert relay_event_digest(event) != LEGACY_DIGEST
    validate_relay_event_self(event)


def test_legacy_flag_vector_as_a_raw_line_verifies_and_keeps_its_bytes() -> None:
    event = decode_relay_event(LEGACY_LINE)
    assert event.observation.data.native_continuity_lost is False
    validate_relay_event_self(event)
    assert encode_relay_event(event) == LEGACY_LINE
    assert encode(event.observation) == (
        b'{"type":"session_opened","data":{"native_session_id":"'
        + LEGACY_SESSION.encode()
        + b'","resumed":true}}'
    )


@pytest.mark.parametrize(
    "changed",
    [
        {"resumed": False},
        {"native_continuity_lost": True},
        {"replaced_unused_native_session_id": "spare"},
    ],
    ids=["other content", "continuity lost", "replaced session"],
)
def test_legacy_fallback_does_not_accept_other_session_opened_content(
    changed: dict[str, object],
) -> None:
    with pytest.raises(RelayChainError) as caught:
        validate_relay_event_self(legacy_event(**changed))
    assert caught.value.fault is ChainFault.BAD_DIGEST


def test_legacy_fallback_applies_only_to_session_opened() -> None:
    event = RelayEvent.create(
        ordinal=188, recorded_at_ms=1789436362441, observation=Notice.of(message="m")
    )
    with pytest.raises(RelayChainError):
        validate_relay_event_self(msgspec.structs.replace(event, digest=LEGACY_DIGEST))


def seed_turn() -> list[RelayEvent]:
    """The seed's turn() as a format 1 chain recorded at 100."""
    observations = [
        CommandQueued.of(
            command_id="prompt-1", command=PromptCommand.of(prompt=[]), created_at_ms=1
        ),
        CommandStarted.of(command_id="prompt-1", started_at_ms=2),
        CommandCompleted.of(
            command_id="prompt-1", outcome=PromptOutcome.of(stop_reason="end_turn")
        ),
    ]
    events: list[RelayEvent] = []
    previous = RELAY_EVENT_GENESIS_DIGEST
    for ordinal, observation in enumerate(observations, start=1):
        event = RelayEvent.create(
            format=1,
            ordinal=ordinal,
            previous_digest=previous,
            recorded_at_ms=100,
            observation=observation,
        )
        events.append(event)
        previous = event.digest
    return events


def test_seed_turn_v1_chain_reproduces_the_three_published_digests() -> None:
    assert [event.digest for event in seed_turn()] == SEED_TURN_DIGESTS


def test_seed_turn_chain_validates_link_by_link_from_genesis() -> None:
    previous = GENESIS
    for event in seed_turn():
        assert advance(previous, event, session_id="session-1") is Step.NEXT
        previous = event.cursor


def test_seed_turn_lines_round_trip_and_verify() -> None:
    for event in seed_turn():
        raw = encode_relay_event(event)
        assert raw.startswith(b'{"ordinal":')
        decoded = decode_relay_event(raw)
        assert decoded == event
        validate_relay_event_self(decoded)


# --- classification fields and the digest ---------------------------------------------------


def independent_digest(fmt: int, payload: dict[str, object]) -> str:
    domain = RELAY_EVENT_DIGEST_DOMAIN_V1 if fmt == 1 else RELAY_EVENT_DIGEST_DOMAIN_V2
    return hashlib.sha256(domain + dumps(payload)).hexdigest()


@pytest.mark.parametrize("fmt", [1, 2])
@pytest.mark.parametrize("variant", [CommandRejected, CommandInterrupted])
def test_absent_reason_keeps_the_pre_classification_digest(fmt: int, variant: type) -> None:
    observation = variant.of(command_id="c", command=RelayCommandKind.CANCEL, message="gone")
    previous = RELAY_EVENT_GENESIS_DIGEST if fmt == 1 else ""
    event = RelayEvent.create(
        format=fmt, ordinal=1, previous_digest=previous, recorded_at_ms=9, observation=observation
    )
    old_shape = {
        "type": variant.__struct_config__.tag,
        "data": {"command_id": "c", "command": "cancel", "message": "gone"},
    }
    payload: dict[str, object] = {"ordinal": 1}
    if fmt == 1:
        payload["previous_digest"] = previous
    payload |= {"recorded_at_ms": 9, "observation": old_shape}
    assert event.digest == independent_digest(fmt, payload)


@pytest.mark.parametrize("fmt", [1, 2])
def test_absent_barrier_and_kind_keep_the_pre_classification_digest(fmt: int) -> None:
    observation = CommandCompleted.of(
        command_id="c", outcome=PromptOutcome.of(stop_reason="end_turn")
    )
    previous = RELAY_EVENT_GENESIS_DIGEST if fmt == 1 else ""
    event = RelayEvent.create(
        format=fmt, ordinal=1, previous_digest=previous, recorded_at_ms=9, observation=observation
    )
    old_shape = {
        "type": "command_completed",
        "data": {
            "command_id": "c",
            "outcome": {"type": "prompt", "data": {"stop_reason": "end_turn"}},
        },
    }
    payload: dict[str, object] = {"ordinal": 1}
    if fmt == 1:
        payload["previous_digest"] = previous
    payload |= {"recorded_at_ms": 9, "observation": old_shape}
    assert event.digest == independent_digest(fmt, payload)


@pytest.mark.parametrize("fmt", [1, 2])
def test_setting_a_reason_changes_the_digest(fmt: int) -> None:
    previous = RELAY_EVENT_GENESIS_DIGEST if fmt == 1 else ""

    def rejected(reason: OutcomeReason | None) -> RelayEvent:
        observation = CommandRejected.of(
            command_id="c", command=RelayCommandKind.CLOSE, message="m", reason=reason
        )
        return RelayEvent.create(
            format=fmt,
            ordinal=1,
            previous_digest=previous,
            recorded_at_ms=9,
            observation=observation,
        )

    digests = {
        rejected(None).digest,
        rejected(OutcomeReason.ADMISSION_REJECTED).digest,
        rejected(OutcomeReason.COMMAND_FAILED).digest,
    }
    assert len(digests) == 3


def test_removing_a_reason_from_a_recorded_line_breaks_its_digest() -> None:
    event = RelayEvent.create(
        ordinal=4,
        recorded_at_ms=9,
        observation=CommandInterrupted.of(
            command_id="c",
            command=RelayCommandKind.CANCEL,
            message="m",
            reason=OutcomeReason.WORKER_RESTARTED,
        ),
    )
    tampered = encode_relay_event(event).replace(b'"reason":"worker_restarted",', b"")
    with pytest.raises(RelayChainError) as caught:
        validate_relay_event_self(decode_relay_event(tampered))
    assert caught.value.fault is ChainFault.BAD_DIGEST


def test_command_id_is_covered_by_the_digest() -> None:
    plain = RelayEvent.create(ordinal=1, recorded_at_ms=1, observation=Notice.of(message="m"))
    tagged = RelayEvent.create(
        ordinal=1, recorded_at_ms=1, command_id="c", observation=Notice.of(message="m")
    )
    assert plain.digest != tagged.digest
    assert tagged.digest == independent_digest(
        2,
        {
            "ordinal": 1,
            "recorded_at_ms": 1,
            "command_id": "c",
            "observation": {"type": "notice", "data": {"message": "m"}},
        },
    )


def test_decoded_event_digest_covers_the_bytes_it_was_read_from() -> None:
    observation = {"type": "notice", "data": {"message": "m", "added_by_a_newer_worker": [1, 2]}}
    payload = {"ordinal": 5, "recorded_at_ms": 1, "observation": observation}
    digest = independent_digest(2, payload)
    raw = dumps(
        {
            "format": 2,
            "ordinal": 5,
            "digest": digest,
            "recorded_at_ms": 1,
            "observation": observation,
        }
    )
    event = decode_relay_event(raw)
    validate_relay_event_self(event)
    assert encode_relay_event(event) == raw


# --- digest refusals -------------------------------------------------------------------------


def event_v1(ordinal: int = 1, previous: str = RELAY_EVENT_GENESIS_DIGEST) -> RelayEvent:
    return RelayEvent.create(
        format=1,
        ordinal=ordinal,
        previous_digest=previous,
        recorded_at_ms=1,
        observation=Notice.of(message="m"),
    )


def event_v2(ordinal: int = 1) -> RelayEvent:
    return RelayEvent.create(ordinal=ordinal, recorded_at_ms=1, observation=Notice.of(message="m"))


def chain_error(call: object, *args: object, **kwargs: object) -> RelayChainError:
    with pytest.raises(RelayChainError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    return caught.value


def test_v2_event_with_a_previous_digest_is_refused() -> None:
    event = msgspec.structs.replace(event_v2(), previous_digest=RELAY_EVENT_GENESIS_DIGEST)
    error = chain_error(relay_event_digest, event, session_id="s-1")
    assert error.fault is ChainFault.BAD_DIGEST
    assert "previous_digest" in str(error)
    assert chain_error(validate_relay_event_self, event).fault is ChainFault.BAD_DIGEST


@pytest.mark.parametrize("previous", ["", "A" * 64, "0" * 63, "0" * 65, "g" * 64])
def test_v1_event_with_a_malformed_previous_digest_is_refused(previous: str) -> None:
    event = msgspec.structs.replace(event_v1(), previous_digest=previous)
    error = chain_error(relay_event_digest, event, session_id="s-1")
    assert error.fault is ChainFault.BAD_DIGEST
    assert "session s-1" in str(error)
    assert "ordinal 1" in str(error)
    with pytest.raises(RelayChainError):
        RelayEvent.create(
            format=1,
            ordinal=1,
            previous_digest=previous,
            recorded_at_ms=1,
            observation=Notice.of(message="m"),
        )


@pytest.mark.parametrize("fmt", [0, 3, 255])
def test_unknown_format_is_its_own_fault(fmt: int) -> None:
    event = msgspec.structs.replace(event_v2(ordinal=9), format=fmt)
    error = chain_error(validate_relay_event_self, event, session_id="s-1")
    assert error.fault is ChainFault.UNKNOWN_FORMAT
    assert str(fmt) in error.detail
    assert "session s-1" in str(error)
    assert "ordinal 9" in str(error)
    assert chain_error(relay_event_digest, event).fault is ChainFault.UNKNOWN_FORMAT


def test_format_three_line_decodes_but_does_not_verify() -> None:
    raw = encode_relay_event(event_v2()).replace(b'"format":2', b'"format":3')
    event = decode_relay_event(raw)
    assert event.format == 3
    assert chain_error(validate_relay_event_self, event).fault is ChainFault.UNKNOWN_FORMAT


@pytest.mark.parametrize("digest", ["", "A" * 64, "0" * 63, "z" * 64])
def test_malformed_event_digest_is_a_bad_digest(digest: str) -> None:
    event = msgspec.structs.replace(event_v2(), digest=digest)
    assert chain_error(validate_relay_event_self, event).fault is ChainFault.BAD_DIGEST


def test_tampered_content_is_a_bad_digest_naming_session_and_ordinal() -> None:
    raw = encode_relay_event(event_v2(ordinal=12)).replace(b'"message":"m"', b'"message":"n"')
    error = chain_error(validate_relay_event_self, decode_relay_event(raw), session_id="s-1")
    assert error.fault is ChainFault.BAD_DIGEST
    assert str(error).startswith("session s-1, ordinal 12: ")
    assert error.session_id == "s-1"
    assert error.ordinal == 12


def test_fault_without_a_session_names_only_the_ordinal() -> None:
    event = msgspec.structs.replace(event_v2(ordinal=12), digest="f" * 64)
    error = chain_error(validate_relay_event_self, event)
    assert str(error).startswith("ordinal 12: ")
    assert "session" not in str(error)


# --- chain validation ------------------------------------------------------------------------


def test_gap_is_reported_with_expected_and_found_ordinals() -> None:
    error = chain_error(advance, GENESIS, event_v2(ordinal=3), session_id="s-1")
    assert error.fault is ChainFault.GAP
    assert "session s-1" in str(error)
    assert "ordinal 3" in str(error)
    assert "expected ordinal 1" in str(error)


def test_v1_event_linking_to_another_digest_is_a_fork() -> None:
    first = event_v1()
    stranger = event_v1(ordinal=2, previous="c" * 64)
    error = chain_error(advance, first.cursor, stranger, session_id="s-1")
    assert error.fault is ChainFault.FORK
    assert "session s-1" in str(error)
    assert "ordinal 2" in str(error)


def test_v2_events_are_chained_by_ordinal_only() -> None:
    assert advance(RelayCursor(ordinal=4, digest="e" * 64), event_v2(ordinal=5)) is Step.NEXT


def test_chain_validation_also_checks_the_event_digest() -> None:
    event = msgspec.structs.replace(event_v1(), digest="f" * 64)
    assert chain_error(advance, GENESIS, event).fault is ChainFault.BAD_DIGEST


def test_a_malformed_frontier_from_outside_is_a_bad_digest() -> None:
    assert chain_error(checked_frontier, 0, "0").fault is ChainFault.BAD_DIGEST


def test_frontier_at_genesis_and_after_events_is_valid() -> None:
    validate_frontier(0, RELAY_EVENT_GENESIS_DIGEST)
    validate_frontier(3, SEED_TURN_DIGESTS[2])


@pytest.mark.parametrize(
    ("ordinal", "digest"),
    [
        (0, SEED_TURN_DIGESTS[0]),
        (5, RELAY_EVENT_GENESIS_DIGEST),
        (5, "XYZ"),
        (0, ""),
    ],
    ids=["genesis ordinal, other digest", "genesis digest, later ordinal", "malformed", "empty"],
)
def test_inconsistent_or_malformed_frontier_is_refused(ordinal: int, digest: str) -> None:
    error = chain_error(validate_frontier, ordinal, digest, session_id="s-1")
    assert error.fault is ChainFault.BAD_DIGEST
    assert f"session s-1, ordinal {ordinal}" in str(error)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("0" * 64, True),
        ("0123456789abcdef" * 4, True),
        ("0" * 63, False),
        ("0" * 65, False),
        ("F" * 64, False),
        ("g" * 64, False),
    ],
)
def test_relay_digest_is_exactly_64_lowercase_hex(value: str, valid: bool) -> None:
    assert is_relay_digest(value) is valid


# --- properties ------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_any_canonical_line_verifies_and_any_other_digest_does_not(data: st.DataObject) -> None:
    raw, _ = data.draw(relay_event_lines())
    event = decode_relay_event(raw)
    validate_relay_event_self(event)
    position = data.draw(st.integers(0, 63))
    digit = data.draw(
        st.sampled_from("0123456789abcdef").filter(lambda c: c != event.digest[position])
    )
    altered = event.digest[:position] + digit + event.digest[position + 1 :]
    with pytest.raises(RelayChainError):
        validate_relay_event_self(msgspec.structs.replace(event, digest=altered))


@settings(max_examples=50, deadline=None)
@given(
    messages=st.lists(st.text(max_size=8), min_size=2, max_size=6),
    fmt=st.sampled_from([1, 2]),
    broken=st.data(),
)
def test_a_chain_built_in_code_validates_and_a_skipped_event_is_a_gap(
    messages: list[str], fmt: int, broken: st.DataObject
) -> None:
    events: list[RelayEvent] = []
    cursor = GENESIS
    for ordinal, message in enumerate(messages, start=1):
        event = RelayEvent.create(
            format=fmt,
            ordinal=ordinal,
            previous_digest=cursor.digest if fmt == 1 else "",
            recorded_at_ms=ordinal,
            observation=Notice.of(message=message),
        )
        assert advance(cursor, event) is Step.NEXT
        events.append(event)
        cursor = event.cursor
    skip = broken.draw(st.integers(0, len(events) - 2))
    before = GENESIS if skip == 0 else events[skip - 1].cursor
    error = chain_error(advance, before, events[skip + 1])
    assert error.fault is ChainFault.GAP


def test_json_dumps_of_the_v2_payload_matches_the_published_digest() -> None:
    line = json.loads(V2_LINE)
    payload = {
        "ordinal": line["ordinal"],
        "recorded_at_ms": line["recorded_at_ms"],
        "observation": line["observation"],
    }
    assert (
        independent_digest(2, payload)
        == line["digest"]
        == relay_event_digest(decode_relay_event(V2_LINE))
    )


@pytest.mark.parametrize("digest", ["A" * 64, "0" * 63, "", "g" * 64])
@pytest.mark.parametrize("envelope", ["sound", "unknown format", "v2 with a link"])
def test_a_malformed_digest_is_reported_before_what_its_envelope_breaks(
    digest: str, envelope: str
) -> None:
    """The digest's form is the first rule a verification reports, whatever else the
    envelope breaks (verifying hashes first, so the order is kept by hand)."""
    event = msgspec.structs.replace(event_v2(ordinal=4), digest=digest)
    if envelope == "unknown format":
        event = msgspec.structs.replace(event, format=3)
    elif envelope == "v2 with a link":
        event = msgspec.structs.replace(event, previous_digest=RELAY_EVENT_GENESIS_DIGEST)
    error = chain_error(validate_relay_event_self, event, session_id="s-1")
    assert error.fault is ChainFault.BAD_DIGEST
    assert "is not 64 lowercase hexadecimal characters" in error.detail
    assert "ordinal 4" in str(error)
