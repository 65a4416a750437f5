"""Relay journal records: the real journal, decoding refusals, skip rules and round trips."""

from __future__ import annotations

import itertools
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.chain import Step, advance
from relaystore.domain.digests import (
    relay_event_digest,
    validate_relay_event_self,
)
from relaystore.domain.errors import ChainFault, InvalidInput, RelayChainError, UnknownRelayKind
from relaystore.domain.outcomes import OutcomeReason, TokenUsage, TurnDiagnostic, UsageScope
from relaystore.domain.relay import (
    MAX_RELAY_LINE_BYTES,
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_GENESIS_DIGEST,
    AdvanceRecoveryFloorCommand,
    AgentInitialized,
    BeginCheckpointCommand,
    CancelCommand,
    CancelledOutcome,
    CancelTurnCommand,
    CancelTurnForCommand,
    CancelUserShellCommand,
    ClearContextCommand,
    ClearQueuedPromptsCommand,
    CloseCommand,
    Closing,
    CommandCompleted,
    CommandInterrupted,
    CommandQueued,
    CommandRejected,
    CommandStarted,
    CompleteCheckpointCommand,
    ContextClearedOutcome,
    ContinueAuthorizedWorkCommand,
    GoalControlCommand,
    HarnessTurnSettled,
    PromptCommand,
    PromptOutcome,
    QueueChangedOutcome,
    QuotaRecovery,
    RecordNoticeCommand,
    RelayCommand,
    RelayCommandKind,
    RelayCursor,
    RelayEvent,
    RelayLine,
    ReleaseCheckpointCommand,
    RemoveQueuedPromptCommand,
    ResolveSteeringCommand,
    ResumeAfterQuotaCommand,
    RunUserShellCommand,
    SessionModesConfigured,
    SessionOpened,
    SessionRestarted,
    SetConfigCommand,
    SetQuotaRecoveryCommand,
    SetSessionModeCommand,
    SteerCommand,
    TerminalOutput,
    UserShellOutcome,
    UserShellOutput,
    UserShellResult,
    UserShellStatus,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.runtime import HarnessKind, RuntimeIdentity, RuntimeProvenance
from relaystore.domain.wire import decode_json, encode, variant_type
from tests.domain.strategies import (
    COMMAND_DATA,
    COMMAND_KINDS,
    OBSERVATION_DATA,
    OUTCOME_DATA,
    command_completed,
    command_queued,
    commands,
    dumps,
    observations,
    outcomes,
    relay_event_lines,
    unknown_keys,
    user_shell_results,
)
from tests.paths import REAL_EXCERPT

FIXTURE = REAL_EXCERPT

DIGEST = "ab" * 32


def line(observation: dict[str, Any] | str, **fields: Any) -> bytes:
    """A journal line around ``observation`` (the digest is not checked by decoding)."""
    head = {"ordinal": 1, "digest": DIGEST, "recorded_at_ms": 5, **fields}
    body = observation if isinstance(observation, str) else json.dumps(observation)
    return (json.dumps(head)[:-1] + ', "observation": ' + body + "}").encode()


def queued(command: dict[str, Any] | str) -> bytes:
    text = command if isinstance(command, str) else json.dumps(command)
    return line(
        '{"type":"command_queued","data":{"command_id":"c1","command":'
        + text
        + ',"created_at_ms":1}}'
    )


def refusal(raw: bytes) -> str:
    with pytest.raises(InvalidInput) as caught:
        decode_relay_event(raw)
    return str(caught.value)


def held(raw: bytes) -> str:
    """A line whose observation this build cannot decode: a newer worker's shape, held
    (never refused for it); the message names what and where."""
    with pytest.raises(UnknownRelayKind) as caught:
        decode_relay_event(raw)
    assert caught.value.fault is ChainFault.UNKNOWN_KIND
    assert caught.value.position == "shape"
    return str(caught.value)


# --- the real journal ----------------------------------------------------------------------


def fixture_lines() -> list[bytes]:
    return FIXTURE.read_bytes().splitlines()


@pytest.mark.parametrize("raw", fixture_lines(), ids=lambda raw: str(json.loads(raw)["ordinal"]))
def test_every_real_journal_line_decodes_verifies_and_reencodes_identically(raw: bytes) -> None:
    event = decode_relay_event(raw)
    validate_relay_event_self(event)
    assert encode_relay_event(event) == raw
    observation_bytes = dumps(json.loads(raw)["observation"])
    assert event.observation_json == observation_bytes
    assert encode(event.observation) == observation_bytes


def test_real_journal_chains_by_ordinal_and_reports_its_one_gap() -> None:
    events = [decode_relay_event(raw) for raw in fixture_lines()]
    gap = next(i for i, event in enumerate(events) if event.ordinal == 3347)
    for previous, event in itertools.pairwise(events[:gap]):
        assert advance(previous.cursor, event, session_id="kimi") is Step.NEXT
    with pytest.raises(RelayChainError) as caught:
        advance(events[gap - 1].cursor, events[gap], session_id="kimi")
    assert caught.value.fault is ChainFault.GAP
    assert "expected ordinal 3345" in str(caught.value)


def test_real_journal_lines_decode_with_a_trailing_newline() -> None:
    raw = fixture_lines()[0]
    assert decode_relay_event(raw + b"\n") == decode_relay_event(raw)


def test_real_journal_line_decodes_from_str_as_from_bytes() -> None:
    raw = fixture_lines()[-1]
    assert decode_relay_event(raw.decode()) == decode_relay_event(raw)


# --- decoding refusals -----------------------------------------------------------------------


def test_line_that_is_not_json_is_refused_as_invalid_input() -> None:
    assert "not valid JSON" in refusal(b'{"ordinal":1,')


def test_wrong_type_names_the_field_path() -> None:
    raw = b'{"ordinal":"1","digest":"x","recorded_at_ms":1,"observation":{"type":"closing"}}'
    assert "$.ordinal" in refusal(raw)


def test_missing_required_event_field_is_named() -> None:
    raw = b'{"ordinal":1,"recorded_at_ms":1,"observation":{"type":"closing"}}'
    assert "`digest`" in refusal(raw)


def newer(raw: bytes) -> UnknownRelayKind:
    with pytest.raises(UnknownRelayKind) as caught:
        decode_relay_event(raw)
    assert caught.value.fault is ChainFault.UNKNOWN_KIND
    return caught.value


def test_unknown_observation_type_is_a_newer_kind_naming_the_path() -> None:
    error = newer(line({"type": "telepathy", "data": {}}))
    assert (error.kind, error.position) == ("telepathy", "observation")
    assert "unknown relay observation 'telepathy' at `$.observation.type`" in str(error)
    assert "newer worker" in str(error)


def test_wrong_type_inside_an_observation_is_held_naming_the_nested_path() -> None:
    message = held(line({"type": "command_started", "data": {"command_id": 7, "started_at_ms": 1}}))
    assert "$.observation.data.command_id" in message


def test_unknown_command_type_is_a_newer_kind_naming_the_path() -> None:
    error = newer(queued({"type": "self_destruct"}))
    assert (error.kind, error.position) == ("self_destruct", "command")
    assert "`$.observation.data.command.type`" in str(error)


def test_unknown_command_kind_and_outcome_are_newer_kinds() -> None:
    completed = {"type": "command_completed", "data": {"command_id": "c", "command": "warp"}}
    completed["data"]["outcome"] = {"type": "closed"}
    assert newer(line(completed)).position == "command kind"
    completed["data"] = {"command_id": "c", "outcome": {"type": "warped"}}
    assert newer(line(completed)).position == "command outcome"


def test_an_unknown_value_elsewhere_is_a_newer_shape() -> None:
    # An enum outside the kind positions (a shell status) is a newer shape, held as one.
    result = {"command": "ls", "stdout": "", "stderr": "", "duration_ms": 1, "status": "odd"}
    observation = {"type": "command_completed", "data": {"command_id": "c"}}
    observation["data"]["outcome"] = {"type": "user_shell", "data": {"result": result}}
    assert "status" in held(line(observation))


def test_a_newer_kind_keeps_the_envelope_and_its_bytes() -> None:
    raw = (
        b'{"format":2,"ordinal":4,"digest":"' + DIGEST.encode() + b'","recorded_at_ms":5,'
        b'"command_id":"c1","observation":{"type":"telepathy","data":{"x":[1, 2]}}}'
    )
    envelope = newer(raw).envelope
    assert isinstance(envelope, RelayLine)
    assert envelope.observation_json == b'{"type":"telepathy","data":{"x":[1, 2]}}'
    assert encode_relay_event(envelope) == raw


def test_unknown_field_in_command_data_is_held_naming_field_and_path() -> None:
    message = held(queued({"type": "run_user_shell", "data": {"command": "ls", "cwd": "/"}}))
    assert "`cwd`" in message
    assert "$.observation.data.command.data" in message


def test_unknown_key_beside_command_type_and_data_is_held() -> None:
    message = held(queued({"type": "prompt", "data": {"prompt": []}, "priority": 1}))
    assert "`priority`" in message


def test_unknown_field_in_relay_cursor_is_held() -> None:
    command = {
        "type": "close",
        "data": {"barrier_command_id": "b", "expected": {"ordinal": 1, "digest": "d", "epoch": 2}},
    }
    message = held(queued(command))
    assert "`epoch`" in message
    assert "$.observation.data.command.data.expected" in message


def test_unknown_field_in_relay_cursor_is_refused_when_decoded_alone() -> None:
    with pytest.raises(InvalidInput, match="`epoch`"):
        decode_json(b'{"ordinal":1,"digest":"d","epoch":2}', RelayCursor)


def test_unknown_field_in_user_shell_result_is_held() -> None:
    result = {
        "command": "ls",
        "stdout": "",
        "stderr": "",
        "duration_ms": 1,
        "status": "exited",
        "pid": 42,
    }
    observation = {
        "type": "command_completed",
        "data": {"command_id": "c", "outcome": {"type": "user_shell", "data": {"result": result}}},
    }
    message = held(line(observation))
    assert "`pid`" in message
    assert "$.observation.data.outcome.data.result" in message


def test_unknown_outcome_reason_is_a_newer_kind() -> None:
    observation = {
        "type": "command_rejected",
        "data": {"reason": "bad_luck", "command_id": "c", "command": "cancel", "message": "m"},
    }
    error = newer(line(observation))
    assert (error.kind, error.position) == ("bad_luck", "reason")


@pytest.mark.parametrize("body", ["5", '{"data":{}}'], ids=["not an object", "no type"])
def test_a_shape_at_the_observation_itself_names_its_path(body: str) -> None:
    assert "$.observation" in held(line(body))


def test_negative_ordinal_is_refused() -> None:
    raw = b'{"ordinal":-1,"digest":"x","recorded_at_ms":1,"observation":{"type":"closing"}}'
    assert "ordinal" in refusal(raw)


def test_format_beyond_a_byte_is_refused() -> None:
    raw = b'{"format":256,"ordinal":1,"digest":"x","recorded_at_ms":1,"observation":{"type":"closing"}}'
    assert "format" in refusal(raw)


def test_line_over_two_mebibytes_is_refused_before_parsing() -> None:
    message = refusal(b" " * (MAX_RELAY_LINE_BYTES + 1))
    assert str(MAX_RELAY_LINE_BYTES) in message


def test_line_of_exactly_two_mebibytes_is_accepted() -> None:
    head = line({"type": "warning", "data": {"message": ""}})
    padded = head.replace(
        b'"message": ""', b'"message": "' + b"x" * (MAX_RELAY_LINE_BYTES - len(head)) + b'"'
    )
    assert len(padded) == MAX_RELAY_LINE_BYTES
    assert decode_relay_event(padded).observation.data.message.startswith("x")


# --- what decoding tolerates -----------------------------------------------------------------


@pytest.mark.parametrize("body", ['{"type":"closing"}', '{"type":"closing","data":null}'])
def test_unit_observation_accepts_missing_or_null_data(body: str) -> None:
    event = decode_relay_event(line(body))
    assert isinstance(event.observation, Closing)
    assert encode(event.observation) == b'{"type":"closing"}'


@pytest.mark.parametrize("body", ['{"type":"cancel"}', '{"type":"cancel","data":null}'])
def test_unit_command_accepts_missing_or_null_data(body: str) -> None:
    event = decode_relay_event(queued(body))
    assert isinstance(event.observation.data.command, CancelCommand)


@pytest.mark.parametrize("body", ['{"type":"configured"}', '{"type":"configured","data":null}'])
def test_unit_command_outcome_accepts_missing_or_null_data(body: str) -> None:
    observation = '{"type":"command_completed","data":{"command_id":"c","outcome":' + body + "}}"
    event = decode_relay_event(line(observation))
    assert encode(event.observation.data.outcome) == b'{"type":"configured"}'


def test_type_may_follow_data_in_observations_commands_and_outcomes() -> None:
    observation = (
        '{"data":{"command_id":"c","outcome":{"data":{"stop_reason":"end_turn"},"type":"prompt"}},'
        '"type":"command_completed"}'
    )
    event = decode_relay_event(line(observation))
    assert isinstance(event.observation, CommandCompleted)
    assert isinstance(event.observation.data.outcome, PromptOutcome)
    command = decode_relay_event(queued('{"data":{"command":"ls"},"type":"run_user_shell"}'))
    assert command.observation.data.command == RunUserShellCommand.of(command="ls")


def test_unknown_fields_in_lenient_structs_are_ignored() -> None:
    observation = {
        "type": "command_completed",
        "data": {
            "command_id": "c",
            "future_field": [1],
            "outcome": {
                "type": "prompt",
                "data": {
                    "stop_reason": "end_turn",
                    "usage": {
                        "scope": "turn",
                        "total_tokens": 3,
                        "input_tokens": 1,
                        "output_tokens": 2,
                        "cache_hint": True,
                    },
                    "latency_ms": 9,
                },
            },
        },
    }
    event = decode_relay_event(line(observation, worker="w-1"))
    usage = event.observation.data.outcome.data.usage
    assert usage == TokenUsage(
        scope=UsageScope.TURN, total_tokens=3, input_tokens=1, output_tokens=2
    )


def test_unknown_fields_in_quota_recovery_are_ignored() -> None:
    recovery = {
        "user_command_id": "u",
        "completed_command_id": "c",
        "profile_id": "p",
        "notice": "n",
        "submitted": False,
        "attempts": 3,
    }
    command = {
        "type": "set_quota_recovery",
        "data": {"expected": {"ordinal": 1, "digest": "d"}, "recovery": recovery},
    }
    decoded = decode_relay_event(queued(command)).observation.data.command
    assert decoded.data.recovery.reset_at_ms is None
    assert decoded.data.recovery.profile_id == "p"


def test_missing_format_reads_as_format_one() -> None:
    raw = line({"type": "closing"}, previous_digest=RELAY_EVENT_GENESIS_DIGEST)
    assert decode_relay_event(raw).format == RELAY_EVENT_FORMAT_V1


def test_harness_turn_settled_reads_missing_prompt_in_flight_as_false_and_writes_it() -> None:
    event = decode_relay_event(line({"type": "harness_turn_settled", "data": {"origin": "idle"}}))
    assert event.observation.data.prompt_in_flight is False
    assert encode(event.observation) == (
        b'{"type":"harness_turn_settled","data":{"origin":"idle","prompt_in_flight":false}}'
    )


def test_agent_initialized_reads_a_string_protocol_version_as_zero() -> None:
    observation = {
        "type": "agent_initialized",
        "data": {"protocol_version": "v1", "capabilities": {}},
    }
    event = decode_relay_event(line(observation))
    assert event.observation.data.protocol_version == 0


def test_agent_initialized_accepts_the_largest_u16_protocol_version() -> None:
    observation = {
        "type": "agent_initialized",
        "data": {"protocol_version": 65535, "capabilities": {}},
    }
    assert decode_relay_event(line(observation)).observation.data.protocol_version == 65535


@pytest.mark.parametrize("version", [65536, -1])
def test_agent_initialized_holds_a_protocol_version_outside_u16(version: int) -> None:
    observation = {
        "type": "agent_initialized",
        "data": {"protocol_version": version, "capabilities": {}},
    }
    assert "protocol_version" in held(line(observation))


# --- skip and default rules, byte for byte ---------------------------------------------------


def test_format_one_event_omits_format_and_carries_previous_digest() -> None:
    event = RelayEvent.create(
        format=1,
        ordinal=1,
        previous_digest=RELAY_EVENT_GENESIS_DIGEST,
        recorded_at_ms=100,
        observation=SessionRestarted.of(),
    )
    assert encode_relay_event(event) == (
        b'{"ordinal":1,"previous_digest":"'
        + RELAY_EVENT_GENESIS_DIGEST.encode()
        + b'","digest":"'
        + event.digest.encode()
        + b'","recorded_at_ms":100,"observation":{"type":"session_restarted"}}'
    )


def test_empty_previous_digest_is_left_out() -> None:
    event = RelayEvent(
        format=1,
        ordinal=1,
        digest=DIGEST,
        recorded_at_ms=100,
        observation=SessionRestarted.of(),
    )
    assert encode_relay_event(event) == (
        b'{"ordinal":1,"digest":"'
        + DIGEST.encode()
        + b'","recorded_at_ms":100,"observation":{"type":"session_restarted"}}'
    )


def test_format_two_event_writes_format_first_and_no_previous_digest() -> None:
    event = RelayEvent.create(ordinal=7, recorded_at_ms=100, observation=SessionRestarted.of())
    assert encode_relay_event(event) == (
        b'{"format":2,"ordinal":7,"digest":"'
        + event.digest.encode()
        + b'","recorded_at_ms":100,"observation":{"type":"session_restarted"}}'
    )


def test_command_id_is_written_before_the_observation_only_when_present() -> None:
    event = RelayEvent.create(
        ordinal=7, recorded_at_ms=100, command_id="c-9", observation=SessionRestarted.of()
    )
    assert b'"recorded_at_ms":100,"command_id":"c-9","observation":' in encode_relay_event(event)
    assert decode_relay_event(encode_relay_event(event)) == event


def test_event_built_in_code_equals_the_same_event_decoded() -> None:
    event = RelayEvent.create(
        ordinal=3, recorded_at_ms=1, observation=CommandStarted.of(command_id="c", started_at_ms=2)
    )
    assert decode_relay_event(encode_relay_event(event)) == event
    assert event.cursor == RelayCursor(ordinal=3, digest=event.digest)


RUNTIME = RuntimeIdentity(
    id=None,
    harness=HarnessKind.KIMI,
    platform="linux-x86_64",
    provenance=RuntimeProvenance.MANAGED_INSTALLATION,
    unavailable_reason="offline",
)

SKIP_RULES: list[tuple[str, Any, bytes]] = [
    (
        "agent_info is always written, runtime only when present",
        AgentInitialized.of(protocol_version=1, capabilities={"loadSession": True}),
        b'{"type":"agent_initialized","data":{"protocol_version":1,"capabilities":{"loadSession":true},"agent_info":null}}',
    ),
    (
        "runtime follows agent_info with every identity field written",
        AgentInitialized.of(protocol_version=1, capabilities={}, runtime=RUNTIME),
        b'{"type":"agent_initialized","data":{"protocol_version":1,"capabilities":{},"agent_info":null,'
        b'"runtime":{"id":null,"harness":"kimi","platform":"linux-x86_64","provenance":"managed_installation",'
        b'"components":[],"unavailable_reason":"offline"}}}',
    ),
    (
        "native_continuity_lost is left out when false",
        SessionOpened.of(native_session_id="n", resumed=False),
        b'{"type":"session_opened","data":{"native_session_id":"n","resumed":false}}',
    ),
    (
        "native_continuity_lost is written when true, replaced id after it",
        SessionOpened.of(
            native_session_id="n",
            resumed=True,
            native_continuity_lost=True,
            replaced_unused_native_session_id="old",
        ),
        b'{"type":"session_opened","data":{"native_session_id":"n","resumed":true,'
        b'"native_continuity_lost":true,"replaced_unused_native_session_id":"old"}}',
    ),
    (
        "session modes are written as null when absent",
        SessionModesConfigured.of(),
        b'{"type":"session_modes_configured","data":{"modes":null}}',
    ),
    (
        "terminal output always writes exit_code and signal",
        TerminalOutput.of(terminal_id="t", output="o", truncated=False),
        b'{"type":"terminal_output","data":{"terminal_id":"t","output":"o","truncated":false,"exit_code":null,"signal":null}}',
    ),
    (
        "harness_turn_settled always writes origin and prompt_in_flight",
        HarnessTurnSettled.of(),
        b'{"type":"harness_turn_settled","data":{"origin":null,"prompt_in_flight":false}}',
    ),
    (
        "user shell output always writes both truncation flags",
        UserShellOutput.of(
            command_id="c",
            command="ls",
            stdout="a",
            stderr="",
            stdout_truncated=False,
            stderr_truncated=False,
        ),
        b'{"type":"user_shell_output","data":{"command_id":"c","command":"ls","stdout":"a","stderr":"",'
        b'"stdout_truncated":false,"stderr_truncated":false}}',
    ),
    (
        "command_completed without classification keeps the old encoding",
        CommandCompleted.of(command_id="c", outcome=CancelledOutcome.of()),
        b'{"type":"command_completed","data":{"command_id":"c","outcome":{"type":"cancelled"}}}',
    ),
    (
        "command_completed writes barrier and kind first",
        CommandCompleted.of(
            command_id="c",
            outcome=CancelledOutcome.of(),
            command=RelayCommandKind.CANCEL_TURN,
            barrier_command_id="b",
        ),
        b'{"type":"command_completed","data":{"barrier_command_id":"b","command":"cancel_turn",'
        b'"command_id":"c","outcome":{"type":"cancelled"}}}',
    ),
    (
        "command_rejected without reason keeps the old encoding",
        CommandRejected.of(command_id="c", command=RelayCommandKind.CLOSE, message="no"),
        b'{"type":"command_rejected","data":{"command_id":"c","command":"close","message":"no"}}',
    ),
    (
        "command_interrupted writes its reason first",
        CommandInterrupted.of(
            command_id="c",
            command=RelayCommandKind.PROMPT,
            message="m",
            reason=OutcomeReason.RUNTIME_STOPPED,
        ),
        b'{"type":"command_interrupted","data":{"reason":"runtime_stopped","command_id":"c",'
        b'"command":"prompt","message":"m"}}',
    ),
    (
        "unit commands have no data key",
        ClearContextCommand.of(),
        b'{"type":"clear_context"}',
    ),
    (
        "begin_checkpoint always writes its reason",
        BeginCheckpointCommand.of(),
        b'{"type":"begin_checkpoint","data":{"reason":null}}',
    ),
    (
        "set_quota_recovery always writes recovery",
        SetQuotaRecoveryCommand.of(expected=RelayCursor(ordinal=4, digest="d")),
        b'{"type":"set_quota_recovery","data":{"expected":{"ordinal":4,"digest":"d"},"recovery":null}}',
    ),
    (
        "quota recovery always writes its reset and retry times",
        QuotaRecovery(
            user_command_id="u",
            completed_command_id="c",
            profile_id="p",
            notice="wait",
            submitted=True,
        ),
        b'{"user_command_id":"u","completed_command_id":"c","profile_id":"p","reset_at_ms":null,'
        b'"retry_at_ms":null,"notice":"wait","submitted":true}',
    ),
    (
        "queue_changed always writes its removed ids",
        QueueChangedOutcome.of(removed_command_ids=[]),
        b'{"type":"queue_changed","data":{"removed_command_ids":[]}}',
    ),
    (
        "context_cleared leaves out an absent memory",
        ContextClearedOutcome.of(native_session_id="n"),
        b'{"type":"context_cleared","data":{"native_session_id":"n"}}',
    ),
    (
        "prompt outcome writes stop_reason, diagnostic, usage in that order",
        PromptOutcome.of(
            usage=TokenUsage(
                scope=UsageScope.TURN, total_tokens=3, input_tokens=1, output_tokens=2
            ),
            diagnostic=TurnDiagnostic(message="boom", http_status=429),
            stop_reason="provider_error",
        ),
        b'{"type":"prompt","data":{"stop_reason":"provider_error","diagnostic":{"message":"boom",'
        b'"http_status":429},"usage":{"scope":"turn","total_tokens":3,"input_tokens":1,"output_tokens":2}}}',
    ),
    (
        "user shell result always writes truncation flags and skips absent exit details",
        UserShellResult(
            command="sleep 9",
            stdout="",
            stderr="",
            duration_ms=9,
            status=UserShellStatus.TIMED_OUT,
        ),
        b'{"command":"sleep 9","stdout":"","stderr":"","stdout_truncated":false,"stderr_truncated":false,'
        b'"duration_ms":9,"status":"timed_out"}',
    ),
    (
        "user shell result writes exit_code, signal and error in place",
        UserShellResult(
            command="x",
            stdout="o",
            stderr="e",
            stdout_truncated=True,
            exit_code=-1,
            signal="SIGKILL",
            duration_ms=1,
            status=UserShellStatus.SIGNALED,
            error="killed",
        ),
        b'{"command":"x","stdout":"o","stderr":"e","stdout_truncated":true,"stderr_truncated":false,'
        b'"exit_code":-1,"signal":"SIGKILL","duration_ms":1,"status":"signaled","error":"killed"}',
    ),
    (
        "token usage skips absent provider details and optional counts",
        TokenUsage(
            scope=UsageScope.LAST_REQUEST,
            total_tokens=5,
            input_tokens=2,
            output_tokens=3,
            cached_write_tokens=1,
        ),
        b'{"scope":"last_request","total_tokens":5,"input_tokens":2,"output_tokens":3,"cached_write_tokens":1}',
    ),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [pytest.param(value, expected, id=rule) for rule, value, expected in SKIP_RULES],
)
def test_skip_and_default_rules_write_the_origin_bytes(value: Any, expected: bytes) -> None:
    assert encode(value) == expected
    assert encode(msgspec.json.decode(expected, type=type(value))) == expected


def test_seed_prompt_command_has_the_published_shape() -> None:
    assert encode(PromptCommand.of(prompt=[])) == b'{"type":"prompt","data":{"prompt":[]}}'


def test_unit_variant_refuses_data_fields() -> None:
    with pytest.raises(InvalidInput, match="cancel"):
        CancelCommand.of(reason="x")


# --- commands: kinds ------------------------------------------------------------------------

EXAMPLE_COMMANDS: dict[str, tuple[Any, str]] = {
    "clear_context": (ClearContextCommand.of(), "clear_context"),
    "prompt": (PromptCommand.of(prompt=[]), "prompt"),
    "continue_authorized_work": (
        ContinueAuthorizedWorkCommand.of(
            expected=RelayCursor(ordinal=1, digest="d"),
            user_command_id="u",
            completed_command_id="c",
            attempt=1,
        ),
        "prompt",
    ),
    "set_quota_recovery": (
        SetQuotaRecoveryCommand.of(expected=RelayCursor(ordinal=1, digest="d")),
        "record_notice",
    ),
    "resume_after_quota": (
        ResumeAfterQuotaCommand.of(
            expected=RelayCursor(ordinal=1, digest="d"), completed_command_id="c"
        ),
        "prompt",
    ),
    "run_user_shell": (RunUserShellCommand.of(command="ls"), "run_user_shell"),
    "cancel_user_shell": (CancelUserShellCommand.of(shell_command_id="s"), "cancel_user_shell"),
    "remove_queued_prompt": (
        RemoveQueuedPromptCommand.of(queued_command_id="q"),
        "remove_queued_prompt",
    ),
    "clear_queued_prompts": (ClearQueuedPromptsCommand.of(), "clear_queued_prompts"),
    "set_config": (SetConfigCommand.of(key="k", value="v"), "set_config"),
    "goal_control": (
        decode_json(b'{"type":"goal_control","data":{"action":"pause"}}', GoalControlCommand),
        "goal_control",
    ),
    "set_session_mode": (SetSessionModeCommand.of(mode_id="m"), "set_session_mode"),
    "cancel_turn": (CancelTurnCommand.of(), "cancel_turn"),
    "steer": (SteerCommand.of(active_prompt_id="a", queued_prompt_id="q"), "steer"),
    "cancel_turn_for": (CancelTurnForCommand.of(active_prompt_id="a"), "cancel_turn"),
    "resolve_steering": (ResolveSteeringCommand.of(steering_id="s"), "resolve_steering"),
    "cancel": (CancelCommand.of(), "cancel"),
    "close": (
        CloseCommand.of(barrier_command_id="b", expected=RelayCursor(ordinal=1, digest="d")),
        "close",
    ),
    "begin_checkpoint": (BeginCheckpointCommand.of(reason="r"), "begin_checkpoint"),
    "complete_checkpoint": (
        CompleteCheckpointCommand.of(barrier_command_id="b"),
        "complete_checkpoint",
    ),
    "release_checkpoint": (
        ReleaseCheckpointCommand.of(barrier_command_id="b"),
        "release_checkpoint",
    ),
    "advance_recovery_floor": (
        AdvanceRecoveryFloorCommand.of(through=RelayCursor(ordinal=1, digest="d")),
        "advance_recovery_floor",
    ),
    "record_notice": (RecordNoticeCommand.of(text="t"), "record_notice"),
}


def test_every_command_variant_of_the_spec_is_exercised() -> None:
    assert list(EXAMPLE_COMMANDS) == list(COMMAND_DATA)


@pytest.mark.parametrize(
    ("tag", "kind"), [(tag, kind) for tag, (_, kind) in EXAMPLE_COMMANDS.items()]
)
def test_command_kind_follows_the_spec_table(tag: str, kind: str) -> None:
    command = EXAMPLE_COMMANDS[tag][0]
    assert variant_type(command) == tag
    assert command.kind() is RelayCommandKind(kind)


def test_command_kinds_are_the_spec_strings_in_declaration_order() -> None:
    assert [kind.value for kind in RelayCommandKind] == COMMAND_KINDS


# --- property: canonical JSON survives decode and encode -------------------------------------

PROPERTY = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_line(raw: bytes, observed: dict[str, Any]) -> RelayEvent:
    """Decode ``raw``; it must verify and encode back to the same bytes."""
    event = decode_relay_event(raw)
    assert encode_relay_event(event) == raw
    assert encode(event.observation) == dumps(observed)
    validate_relay_event_self(event)
    rebuilt = msgspec.structs.replace(event, observation_json=encode(event.observation))
    assert relay_event_digest(rebuilt) == event.digest
    return event


@pytest.mark.parametrize("tag", list(OBSERVATION_DATA))
@PROPERTY
@given(data=st.data())
def test_every_observation_variant_round_trips_to_identical_bytes(
    tag: str, data: st.DataObject
) -> None:
    raw, observed = data.draw(relay_event_lines(observations(tag)))
    event = check_line(raw, observed)
    assert variant_type(event.observation) == tag


@pytest.mark.parametrize("tag", list(COMMAND_DATA))
@PROPERTY
@given(data=st.data())
def test_every_command_variant_round_trips_to_identical_bytes(
    tag: str, data: st.DataObject
) -> None:
    raw, observed = data.draw(relay_event_lines(command_queued(commands(tag))))
    event = check_line(raw, observed)
    command = event.observation.data.command
    assert variant_type(command) == tag
    assert command.kind() is EXAMPLE_COMMANDS[tag][0].kind()
    assert encode(decode_json(dumps(observed["data"]["command"]), RelayCommand)) == dumps(
        observed["data"]["command"]
    )


@pytest.mark.parametrize("tag", list(OUTCOME_DATA))
@PROPERTY
@given(data=st.data())
def test_every_command_outcome_variant_round_trips_to_identical_bytes(
    tag: str, data: st.DataObject
) -> None:
    raw, observed = data.draw(relay_event_lines(command_completed(outcomes(tag))))
    event = check_line(raw, observed)
    assert variant_type(event.observation.data.outcome) == tag


# --- property: deny_unknown_fields refuses any extra key -------------------------------------


def with_key(value: dict[str, Any], key: str, extra: Any, position: int) -> dict[str, Any]:
    items = list(value.items())
    items.insert(position % (len(items) + 1), (key, extra))
    return dict(items)


STRUCT_COMMANDS = [tag for tag, data in COMMAND_DATA.items() if data is not None]


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_unknown_key_in_any_command_data_is_held_naming_the_key(data: st.DataObject) -> None:
    tag = data.draw(st.sampled_from(STRUCT_COMMANDS))
    command = data.draw(commands(tag))
    key = data.draw(unknown_keys(set(command["data"])))
    command["data"] = with_key(
        command["data"], key, data.draw(st.integers()), data.draw(st.integers(0, 9))
    )
    message = held(queued(command))
    assert f"`{key}`" in message
    with pytest.raises(InvalidInput, match=f"`{key}`"):
        decode_json(dumps(command), RelayCommand)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_unknown_key_beside_any_command_tag_is_held(data: st.DataObject) -> None:
    command = data.draw(commands())
    key = data.draw(unknown_keys({"type", "data"}))
    command = with_key(command, key, None, data.draw(st.integers(0, 2)))
    assert f"`{key}`" in held(queued(command))


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_unknown_key_in_user_shell_result_is_held_naming_the_key(data: st.DataObject) -> None:
    result = data.draw(user_shell_results)
    key = data.draw(unknown_keys(set(result) | set(UserShellResult.__struct_fields__)))
    result = with_key(result, key, "x", data.draw(st.integers(0, 12)))
    observation = {
        "type": "command_completed",
        "data": {"command_id": "c", "outcome": {"type": "user_shell", "data": {"result": result}}},
    }
    assert f"`{key}`" in held(line(observation))
    with pytest.raises(InvalidInput, match=f"`{key}`"):
        decode_json(dumps(result), UserShellResult)


def test_user_shell_outcome_decodes_its_result() -> None:
    result = UserShellResult(
        command="ls",
        stdout="a",
        stderr="",
        duration_ms=3,
        status=UserShellStatus.EXITED,
        exit_code=0,
    )
    outcome = UserShellOutcome.of(result=result)
    observed = CommandCompleted.of(command_id="c", outcome=outcome)
    event = decode_relay_event(line(encode(observed).decode()))
    assert event.observation == observed


def test_command_queued_decodes_to_the_typed_command() -> None:
    observed = CommandQueued.of(
        command_id="c1", command=SetConfigCommand.of(key="model", value="k2"), created_at_ms=4
    )
    event = decode_relay_event(line(encode(observed).decode()))
    assert event.observation == observed
    assert event.observation.data.command.kind() is RelayCommandKind.SET_CONFIG
