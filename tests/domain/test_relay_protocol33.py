"""Relay protocol 33's wire shapes: every command, kind and observation it added, byte for
byte as the origin's serde definitions at 193f015 write them, and the origin's strictness.

The vectors follow the origin's serde attributes (``deny_unknown_fields`` on commands and
mailbox types, unit variants written without ``data``, ``Option`` fields written as
``null`` or skipped as declared); the legacy mailbox event is the origin's own test
vector (``legacy_mailbox_shape_deserializes_as_plain_text``).
"""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.digests import validate_relay_event_self
from relaystore.domain.errors import InvalidInput
from relaystore.domain.relay import (
    RELAY_PROTOCOL_VERSION,
    MailboxEvent,
    RelayCommand,
    RelayCommandKind,
    RelayEvent,
    RelayObservation,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.wire import decode_json, encode

_EVENT = b'{"key":"github:pr:4623:comment:1","source":"github","wake":true,"text":"Comment on PR #4623","created_at_ms":1789421283703}'
_DIGEST = "1" * 64

COMMANDS = {
    "install_prompt_context": b'{"type":"install_prompt_context","data":{"text":"Repository layout: src/ holds the code."}}',
    "seed_assessment_context": b'{"type":"seed_assessment_context","data":{"expected":{"ordinal":7,"digest":"'
    + _DIGEST.encode()
    + b'"},"context":{"messages":[{"id":"user:c1","role":"user","text":"Implement, test, and commit."}],'
    b'"authorization_complete":true,"assistant_history_omitted":false,"open_assistant_id":null,"final_reply_omitted":false}}}',
    "handback_reminder": b'{"type":"handback_reminder","data":{"completed_command_id":"c1","completed_ordinal":12}}',
    "deliver_mailbox_event": b'{"type":"deliver_mailbox_event","data":{"event":' + _EVENT + b"}}",
    "mailbox_wake": b'{"type":"mailbox_wake","data":{"events":[' + _EVENT + b"]}}",
    "restore_execution_mode": b'{"type":"restore_execution_mode"}',
}

OBSERVATIONS = {
    "mailbox_hook_lease_created": b'{"type":"mailbox_hook_lease_created","data":{"lease":{"lease_id":"lease-1","events":['
    + _EVENT
    + b'],"hook_event":"PostToolUse","expires_at_ms":1789421343703}}}',
    "mailbox_hook_lease_returned (timeout)": b'{"type":"mailbox_hook_lease_returned","data":{"lease_id":"lease-1","reason":"timeout"}}',
    "mailbox_hook_lease_returned (worker_restart)": b'{"type":"mailbox_hook_lease_returned","data":{"lease_id":"l","reason":"worker_restart"}}',
    "mailbox_events_delivered (tool hook)": b'{"type":"mailbox_events_delivered","data":{"event_keys":["k1"],"path":"tool_hook",'
    b'"hook_event":"PostToolUse","events":[' + _EVENT + b'],"lease_id":"lease-1"}}',
    "mailbox_events_delivered (prompt, minimal)": b'{"type":"mailbox_events_delivered","data":{"event_keys":["k1"],"path":"prompt","prompt_command_id":"c9"}}',
    "mailbox_events_delivered (wake)": b'{"type":"mailbox_events_delivered","data":{"event_keys":[],"path":"wake"}}',
    "command_completed restore_execution_mode": b'{"type":"command_completed","data":{"command":"restore_execution_mode","command_id":"m1","outcome":{"type":"configured"}}}',
    "command_rejected restore_execution_mode": b'{"type":"command_rejected","data":{"reason":"command_failed","command_id":"m1","command":"restore_execution_mode","message":"auto mode refused"}}',
}


def _queued(command: bytes) -> bytes:
    return (
        b'{"type":"command_queued","data":{"command_id":"m1","command":'
        + command
        + b',"created_at_ms":1789421283703}}'
    )


@pytest.mark.parametrize("wire", COMMANDS.values(), ids=COMMANDS.keys())
def test_every_new_command_round_trips_byte_for_byte(wire: bytes) -> None:
    command = decode_json(wire, RelayCommand)  # type: ignore[arg-type]
    assert encode(command) == wire
    observation = decode_json(_queued(wire), RelayObservation)  # type: ignore[arg-type]
    assert encode(observation) == _queued(wire)


@pytest.mark.parametrize("wire", OBSERVATIONS.values(), ids=OBSERVATIONS.keys())
def test_every_new_observation_round_trips_byte_for_byte(wire: bytes) -> None:
    observation = decode_json(wire, RelayObservation)  # type: ignore[arg-type]
    assert encode(observation) == wire


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_journal_line_of_each_new_kind_verifies_and_re_encodes(name: str) -> None:
    observation = decode_json(_queued(COMMANDS[name]), RelayObservation)  # type: ignore[arg-type]
    event = RelayEvent.create(ordinal=5, recorded_at_ms=1789421283703, observation=observation)
    line = encode_relay_event(event)
    decoded = decode_relay_event(line)
    validate_relay_event_self(decoded)
    assert encode_relay_event(decoded) == line


def test_the_origins_legacy_mailbox_event_vector() -> None:
    wire = b'{"key":"legacy","source":"github","wake":true,"text":"legacy body","created_at_ms":42}'
    assert encode(decode_json(wire, MailboxEvent)) == wire


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (b'{"key":"k","source":"s","wake":true,"text":"t","created_at_ms":1,"body":{}}', "body"),
        (b'{"key":"k","source":"s","wake":true,"text":"t","created_at_ms":-1}', "created_at_ms"),
        (b'{"key":"k","source":"s","wake":true,"created_at_ms":1}', "text"),
    ],
    ids=["unknown field", "negative time (u64)", "missing text"],
)
def test_a_mailbox_event_is_as_strict_as_the_origins(wire: bytes, field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        decode_json(wire, MailboxEvent)


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (b'{"type":"restore_execution_mode","data":{}}', "data"),
        (b'{"type":"install_prompt_context","data":{"text":"t","extra":1}}', "extra"),
        (
            b'{"type":"handback_reminder","data":{"completed_command_id":"c","completed_ordinal":-1}}',
            "completed_ordinal",
        ),
        (b'{"type":"mailbox_wake","data":{}}', "events"),
        (
            b'{"type":"seed_assessment_context","data":{"expected":{"ordinal":1,"digest":"d"},'
            b'"context":{"messages":[],"authorization_complete":true}}}',
            "assistant_history_omitted",
        ),
        (
            b'{"type":"seed_assessment_context","data":{"expected":{"ordinal":1,"digest":"d"},"context":'
            b'{"messages":[{"id":"i","role":"user","text":"t","x":1}],"authorization_complete":true,"assistant_history_omitted":false}}}',
            "x",
        ),
    ],
    ids=[
        "unit variant with data",
        "unknown command field",
        "negative u64",
        "wake without events",
        "context without a required flag",
        "evidence with an unknown field",
    ],
)
def test_new_commands_refuse_what_the_origin_refuses(wire: bytes, field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        decode_json(wire, RelayCommand)  # type: ignore[arg-type]


def test_a_context_history_defaults_what_the_origin_defaults_and_writes_every_field() -> None:
    wire = (
        b'{"type":"seed_assessment_context","data":{"expected":{"ordinal":1,"digest":"d"},'
        b'"context":{"messages":[],"authorization_complete":false,"assistant_history_omitted":true,"dropped":5}}}'
    )
    command = decode_json(wire, RelayCommand)  # type: ignore[arg-type]
    assert encode(command).endswith(
        b'"context":{"messages":[],"authorization_complete":false,"assistant_history_omitted":true,'
        b'"open_assistant_id":null,"final_reply_omitted":false}}}'
    )


@pytest.mark.parametrize(
    ("wire", "field"),
    [
        (
            b'{"type":"user_shell_output","data":{"command_id":"c","command":"ls","stdout":"","stderr":""}}',
            "stdout_truncated",
        ),
        (b'{"type":"terminal_output","data":{"terminal_id":"t","output":"o"}}', "truncated"),
        (
            b'{"type":"terminal_output","data":{"terminal_id":"t","output":"o","truncated":false,"exit_code":-1}}',
            "exit_code",
        ),
        (b'{"type":"session_configured","data":{}}', "config_options"),
        (
            b'{"type":"command_completed","data":{"command_id":"c","outcome":{"type":"queue_changed","data":{}}}}',
            "removed_command_ids",
        ),
        (
            b'{"type":"command_queued","data":{"command_id":"c","created_at_ms":1,"command":{"type":"continue_authorized_work",'
            b'"data":{"expected":{"ordinal":1,"digest":"d"},"user_command_id":"u","completed_command_id":"c","attempt":256}}}}',
            "attempt",
        ),
    ],
    ids=[
        "shell output truncation flags",
        "terminal truncation flag",
        "terminal exit code is u32",
        "session options",
        "queue change ids",
        "attempt is u8",
    ],
)
def test_existing_observations_are_as_strict_as_the_origins(wire: bytes, field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        decode_json(wire, RelayObservation)  # type: ignore[arg-type]


# The origin's kind(), minimum_protocol() and is_queue_entry() at 193f015, for every command.
TABLE = {
    "install_prompt_context": ("record_notice", 26, False),
    "seed_assessment_context": ("record_notice", 25, False),
    "clear_context": ("clear_context", 15, False),
    "prompt": ("prompt", 1, True),
    "handback_reminder": ("prompt", 26, True),
    "deliver_mailbox_event": ("record_notice", 33, False),
    "mailbox_wake": ("prompt", 33, True),
    "continue_authorized_work": ("prompt", 18, True),
    "set_quota_recovery": ("record_notice", 20, False),
    "resume_after_quota": ("prompt", 20, True),
    "run_user_shell": ("run_user_shell", 5, False),
    "cancel_user_shell": ("cancel_user_shell", 5, False),
    "remove_queued_prompt": ("remove_queued_prompt", 1, False),
    "clear_queued_prompts": ("clear_queued_prompts", 1, False),
    "set_config": ("set_config", 1, True),
    "restore_execution_mode": ("restore_execution_mode", 28, False),
    "goal_control": ("goal_control", 11, False),
    "set_session_mode": ("set_session_mode", 1, False),
    "cancel_turn": ("cancel_turn", 7, False),
    "steer": ("steer", 17, False),
    "cancel_turn_for": ("cancel_turn", 17, False),
    "resolve_steering": ("resolve_steering", 17, False),
    "cancel": ("cancel", 1, False),
    "close": ("close", 1, False),
    "begin_checkpoint": ("begin_checkpoint", 1, False),
    "complete_checkpoint": ("complete_checkpoint", 1, False),
    "release_checkpoint": ("release_checkpoint", 1, False),
    "advance_recovery_floor": ("advance_recovery_floor", 1, False),
    "record_notice": ("record_notice", 1, False),
}


def test_every_command_of_protocol_33_is_known_with_its_kind_protocol_and_queue_rule() -> None:
    variants = {cls.__struct_config__.tag: cls for cls in RelayCommand.__args__}
    assert set(variants) == set(TABLE)
    for tag, (kind, protocol, queued) in TABLE.items():
        cls = variants[tag]
        assert cls.KIND is RelayCommandKind(kind), tag
        assert protocol == cls.MINIMUM_PROTOCOL, tag
        assert cls.QUEUE_ENTRY is queued, tag
        assert cls.MINIMUM_PROTOCOL <= RELAY_PROTOCOL_VERSION


def test_the_protocol_is_36_and_still_reads_33() -> None:
    assert RELAY_PROTOCOL_VERSION == 36
    assert msgspec.json.decode(b'"restore_execution_mode"', type=RelayCommandKind) is (
        RelayCommandKind.RESTORE_EXECUTION_MODE
    )
