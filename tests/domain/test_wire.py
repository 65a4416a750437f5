"""The codec writes serde_json's bytes: string escapes, ryu floats, skip and emit rules."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from relaystore.domain.api_events import ApiActivityChanged, ApiActivityDetails, MaterializedTurn
from relaystore.domain.errors import InvalidInput
from relaystore.domain.materialized import AgentBody, UserBody
from relaystore.domain.outcomes import MaterializedTurnOutcome
from relaystore.domain.relay import (
    ClosedOutcome,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCommandKind,
    RelayCursor,
    SessionRestarted,
    UserShellOutput,
    UserShellResult,
)
from relaystore.domain.wire import Wire, decode_json, emitted, encode, json_value
from tests.domain.strategies import (
    activity_details,
    dumps,
    json_values,
    materialized_turn_outcomes,
    materialized_turns,
    relay_cursors,
    unknown_keys,
    user_shell_results,
)


def serde_text(value: str) -> bytes:
    """serde_json's string bytes, via the stdlib encoder (origin-domain.md §1.8)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# --- string escaping -------------------------------------------------------------------------

SPECIAL_STRINGS = [
    *(chr(code) for code in range(0x20)),
    '"',
    "\\",
    "/",
    "\x7f",
    "\u0085",
    "\u2028",
    "\u2029",
    "\ufeff",
    "é",
    "日本",
    "\U0001f600",
    "\U0010ffff",
    'mixed "quotes", \\slashes\\, tabs\tand\nnewlines \u2028 \U0001f680',
]


@pytest.mark.parametrize("value", SPECIAL_STRINGS, ids=lambda value: f"U+{ord(value[0]):04X}")
def test_strings_are_escaped_exactly_as_serde_json_does(value: str) -> None:
    assert encode(value) == serde_text(value)
    assert msgspec.json.encode(value) == serde_text(value)


def test_control_characters_use_short_escapes_or_lowercase_hex() -> None:
    assert encode("\b\f\n\r\t") == b'"\\b\\f\\n\\r\\t"'
    assert encode("\x00\x1f\x0b") == b'"\\u0000\\u001f\\u000b"'


def test_del_slash_and_line_separators_are_written_raw() -> None:
    assert encode("\x7f/\u2028\u2029") == b'"' + "\x7f/\u2028\u2029".encode() + b'"'


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="utf-8")))
def test_any_string_is_escaped_as_serde_json_does(value: str) -> None:
    assert encode(value) == serde_text(value)
    assert msgspec.json.decode(encode(value)) == value


@settings(max_examples=100, deadline=None)
@given(json_values)
def test_any_opaque_json_value_is_written_as_serde_json_does(value: Any) -> None:
    assert encode(value) == dumps(value)


@settings(max_examples=100, deadline=None)
@given(ordinal=st.integers(0, 2**64 - 1), digest=st.text(st.characters(codec="utf-8")))
def test_strings_inside_structs_are_escaped_as_serde_json_does(ordinal: int, digest: str) -> None:
    assert encode(RelayCursor(ordinal=ordinal, digest=digest)) == dumps(
        {"ordinal": ordinal, "digest": digest}
    )


# --- floats ----------------------------------------------------------------------------------


def ryu(value: float) -> str:
    """serde_json's float text: ryu's shortest digits laid out by ryu's ``format64`` rules."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    length = len(digits)
    kk = length + exponent  # 10^(kk-1) <= value < 10^kk
    if exponent >= 0 and kk <= 16:
        body = digits + "0" * exponent + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, b"1.0"), (1e16, b"1e16"), (1e-7, b"1e-7"), (0.1, b"0.1"), (1e21, b"1e21")],
)
def test_floats_are_formatted_like_ryu(value: float, text: bytes) -> None:
    assert encode(value) == text
    assert ryu(value).encode() == text


@pytest.mark.parametrize(
    "value",
    [
        1e15,
        9999999999999998.0,
        1e17,
        123456789012345678.0,
        1e-4,
        1e-5,
        1.5e-5,
        1e-6,
        0.5,
        -2.5,
        -0.0,
        0.0,
        5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        math.pi,
        1 / 3,
    ],
)
def test_float_layout_boundaries_match_ryu(value: float) -> None:
    assert encode(value).decode() == ryu(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_finite_float_is_formatted_like_ryu(value: float) -> None:
    assert encode(value).decode() == ryu(value)
    assert msgspec.json.decode(encode(value)) == value


# --- skip rules and emitted defaults ---------------------------------------------------------


class Probe(Wire, kw_only=True):
    skipped: int | None = None
    flag: bool = False
    always: str | None = emitted(None)
    always_flag: bool = emitted(False)
    items: list[int] = emitted([])
    table: dict[str, int] = emitted({})
    seeded: list[int] = emitted([1, 2])


def test_plain_defaults_are_skipped_and_emitted_defaults_are_written() -> None:
    assert encode(Probe()) == (
        b'{"always":null,"always_flag":false,"items":[],"table":{},"seeded":[1,2]}'
    )
    assert encode(Probe(skipped=0, flag=True)).startswith(b'{"skipped":0,"flag":true,"always":null')


def test_emitted_fields_are_optional_on_read() -> None:
    assert msgspec.json.decode(b"{}", type=Probe) == Probe()


def test_emitted_never_shares_a_mutable_default_between_instances() -> None:
    first, second = Probe(), Probe()
    assert first.items is not second.items
    assert first.table is not second.table
    assert first.seeded is not second.seeded
    first.items.append(1)
    first.table["k"] = 1
    first.seeded.append(3)
    assert Probe() == second
    assert second.items == []
    assert second.table == {}
    assert second.seeded == [1, 2]


def test_decoded_instances_do_not_share_emitted_defaults() -> None:
    first = msgspec.json.decode(b"{}", type=Probe)
    second = msgspec.json.decode(b"{}", type=Probe)
    first.items.append(5)
    assert second.items == []


def test_domain_structs_do_not_share_emitted_lists() -> None:
    first, second = UserBody(), UserBody()
    first.content.append("x")
    assert second.content == []
    chunks, others = AgentBody(), AgentBody()
    chunks.chunks.append({})
    assert others.chunks == []


# --- decode_json and json_value --------------------------------------------------------------


def test_decode_json_names_the_input_and_field_path() -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_json(b'{"ordinal":"x","digest":"d"}', RelayCursor, what="recovery cursor")
    message = str(caught.value)
    assert message.startswith("invalid recovery cursor:")
    assert "$.ordinal" in message


def test_decode_json_names_the_type_by_default() -> None:
    with pytest.raises(InvalidInput, match="RelayCursor"):
        decode_json(b"[", RelayCursor)


def test_decode_json_accepts_text_and_bytes() -> None:
    assert decode_json('{"ordinal":1,"digest":"d"}', RelayCursor) == decode_json(
        b'{"ordinal":1,"digest":"d"}', RelayCursor
    )


def test_json_value_keeps_the_wire_key_order() -> None:
    value = json_value(Probe(skipped=3))
    assert list(value) == ["skipped", "always", "always_flag", "items", "table", "seeded"]
    assert dumps(value) == encode(Probe(skipped=3))


# --- deny_unknown_fields ---------------------------------------------------------------------

DENY_UNKNOWN: list[tuple[type, st.SearchStrategy[dict[str, Any]]]] = [
    (RelayCursor, relay_cursors()),
    (UserShellResult, user_shell_results),
    (MaterializedTurnOutcome, materialized_turn_outcomes),
    (MaterializedTurn, materialized_turns),
    (ApiActivityDetails, activity_details),
]


@pytest.mark.parametrize(
    ("kind", "strategy"), DENY_UNKNOWN, ids=[kind.__name__ for kind, _ in DENY_UNKNOWN]
)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_deny_unknown_structs_refuse_any_extra_key_naming_it(
    kind: type, strategy: st.SearchStrategy[dict[str, Any]], data: st.DataObject
) -> None:
    value = data.draw(strategy)
    raw = dumps(value)
    assert encode(decode_json(raw, kind)) == raw
    key = data.draw(unknown_keys(set(kind.__struct_fields__)))
    items = list(value.items())
    items.insert(data.draw(st.integers(0, len(items))), (key, data.draw(json_values)))
    with pytest.raises(InvalidInput, match=f"`{key}`"):
        decode_json(dumps(dict(items)), kind)


# -- Variant.of checks its fields ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (
            lambda: CommandStarted.of(command_id=3, started_at_ms=1),
            r"command_started.*`data\.command_id`",
        ),
        (lambda: CommandStarted.of(command_id="c1", started_at_ms="1"), r"`data\.started_at_ms`"),
        (lambda: CommandStarted.of(command_id="c1", started_at_ms=True), r"`data\.started_at_ms`"),
        (lambda: CommandStarted.of(command_id=None, started_at_ms=1), r"`data\.command_id`"),
        (lambda: CommandStarted.of(command_id="c1"), r"CommandStarted\.of.*`started_at_ms`"),
        (lambda: CommandStarted.of(command_id="c1", started_at_ms=1, at=2), r"unknown field 'at'"),
        (
            lambda: CommandQueued.of(command_id="c1", command="prompt", created_at_ms=1),
            r"command_queued.*`data\.command`",
        ),
        (
            lambda: CommandQueued.of(
                command_id="c1", command=PromptOutcome.of(stop_reason="x"), created_at_ms=1
            ),
            r"`data\.command`",
        ),
        (lambda: PromptCommand.of(prompt="not a list"), r"PromptCommand\.of.*`data\.prompt`"),
        (lambda: CommandCompleted.of(command_id="c1", outcome="end_turn"), r"`data\.outcome`"),
        (
            lambda: CommandCompleted.of(
                command_id="c1", command="nope", outcome=ClosedOutcome.of()
            ),
            r"`data\.command`",
        ),
        (
            lambda: ApiActivityChanged.of(activity={"state": 1}),
            r"activity_changed.*`data\.activity\.state`",
        ),
        (lambda: SessionRestarted.of(reason="x"), r"session_restarted takes no data"),
    ],
)
def test_variant_of_refuses_a_field_of_the_wrong_type_naming_variant_and_field(
    build: Any, named: str
) -> None:
    with pytest.raises(InvalidInput, match=named):
        build()


def test_variant_of_takes_wire_spellings_of_structs_and_enums() -> None:
    completed = CommandCompleted.of(
        command_id="c1", command="prompt", outcome={"type": "prompt", "data": {"stop_reason": "x"}}
    )
    assert completed == CommandCompleted.of(
        command_id="c1",
        command=RelayCommandKind.PROMPT,
        outcome=PromptOutcome.of(stop_reason="x"),
    )
    assert PromptCommand.of(prompt=({"type": "text", "text": "t"},)).data.prompt == [
        {"type": "text", "text": "t"}
    ]


def test_variant_of_keeps_given_structs_and_fills_defaults() -> None:
    command = PromptCommand.of(prompt=[])
    queued = CommandQueued.of(command_id="c1", command=command, created_at_ms=1)
    assert queued.data.command is command
    output = UserShellOutput.of(
        command_id="c1",
        command="ls",
        stdout="",
        stderr="",
        stdout_truncated=False,
        stderr_truncated=False,
    )
    assert output.data.stdout_truncated is False
    assert encode(output) == (
        b'{"type":"user_shell_output","data":{"command_id":"c1","command":"ls","stdout":"",'
        b'"stderr":"","stdout_truncated":false,"stderr_truncated":false}}'
    )


def test_a_bad_variant_never_reaches_the_projection_as_an_attribute_error() -> None:
    # Before the check, a str command was accepted here and failed later, inside the
    # projector, as an AttributeError.
    with pytest.raises(InvalidInput, match="CommandQueued"):
        CommandQueued.of(command_id="c1", command="prompt", created_at_ms=1)
