"""Elicitation: ACP parsing, serde-exact wire round trips, and answer validation."""

from __future__ import annotations

import copy
import json
import string
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, strategies as st

from relaystore.domain.elicitation.acp import (
    MAX_ELICITATION_BYTES,
    MAX_FIELDS,
    MAX_OPTIONS,
    MAX_TEXT_BYTES,
    parse_acp_request,
)
from relaystore.domain.elicitation.answers import validate_field_value, validate_response
from relaystore.domain.elicitation.forms import (
    ElicitationAccept,
    ElicitationCancel,
    ElicitationDecline,
    ElicitationField,
    ElicitationFieldKind,
    ElicitationOption,
    ElicitationRequest,
    ElicitationValue,
    decode_elicitation_response,
)
from relaystore.domain.errors import InvalidInput
from relaystore.domain.wire import decode_json, encode

# --- helpers --------------------------------------------------------------------------------


def acp(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> Any:
    """Minimal valid ACP form params around ``properties``."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    params: dict[str, Any] = {
        "mode": "form",
        "sessionId": "session-1",
        "message": "Answer please",
        "requestedSchema": schema,
    }
    params.update(extra)
    return params


def only_field(properties: dict[str, Any], required: list[str] | None = None) -> bytes:
    """The wire bytes of the single field parsed from ``properties``."""
    request = parse_acp_request("elicit-1", acp(properties, required))
    assert len(request.fields) == 1
    return encode(request.fields[0])


def serde_float(value: float) -> str:
    """serde_json's (ryu's) rendering of a finite f64, built independently of msgspec."""
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    length, k = len(digits), exponent
    kk = length + k
    if k >= 0 and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * -kk + digits
    elif length == 1:
        body = f"{digits}e{kk - 1}"
    else:
        body = f"{digits[0]}.{digits[1:]}e{kk - 1}"
    return sign + body


def serde_json(value: Any) -> bytes:
    """Compact serde_json bytes for plain JSON values (dicts in their own order)."""

    def render(item: Any) -> str:
        if item is None:
            return "null"
        if isinstance(item, bool):
            return "true" if item else "false"
        if isinstance(item, int):
            return str(item)
        if isinstance(item, float):
            return serde_float(item)
        if isinstance(item, str):
            return json.dumps(item, ensure_ascii=False)
        if isinstance(item, list):
            return "[" + ",".join(render(entry) for entry in item) + "]"
        assert isinstance(item, dict)
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{render(v)}" for k, v in item.items())
            + "}"
        )

    return render(value).encode()


# --- the seed example -----------------------------------------------------------------------


def test_seed_example_encodes_exactly_as_the_origin() -> None:
    request = parse_acp_request(
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
    assert encode(request) == (
        b'{"id":"question-1","message":"Which directory?","fields":[{"id":"directory",'
        b'"title":"directory","required":true,"secret":false,"kind":"text"}]}'
    )


# --- each field kind parses and round-trips byte-exactly ------------------------------------

KIND_CASES = [
    pytest.param(
        {
            "name": {
                "type": "string",
                "title": "Your name",
                "description": "As on the badge",
                "default": "Ada",
                "minLength": 1,
                "maxLength": 40,
                "pattern": "^[A-Z]",
                "format": "email",
            }
        },
        ["name"],
        '{"id":"name","title":"Your name","description":"As on the badge","required":true,'
        '"secret":false,"kind":"text","default":"Ada","min_length":1,"max_length":40,'
        '"pattern":"^[A-Z]","format":"email"}',
        id="text-with-every-constraint",
    ),
    pytest.param(
        {"note": {"type": "string", "oneOf": []}},
        None,
        '{"id":"note","title":"note","required":false,"secret":false,"kind":"text"}',
        id="text-from-empty-oneOf",
    ),
    pytest.param(
        {
            "arch": {
                "type": "string",
                "title": "CI architecture",
                "default": "reusable",
                "oneOf": [
                    {
                        "const": "reusable",
                        "title": "Reusable workflow",
                        "description": "Thin callers",
                        "_meta": {"_claude/askUserQuestionOption": {"preview": "ci.yml"}},
                    },
                    {"const": "inline"},
                ],
            }
        },
        None,
        '{"id":"arch","title":"CI architecture","required":false,"secret":false,'
        '"kind":"single_select","options":[{"value":"reusable","title":"Reusable workflow",'
        '"description":"Thin callers","preview":"ci.yml"},{"value":"inline","title":"inline"}],'
        '"default":"reusable"}',
        id="single-select-from-oneOf",
    ),
    pytest.param(
        {"color": {"type": "string", "enum": ["red", "green"]}},
        None,
        '{"id":"color","title":"color","required":false,"secret":false,"kind":"single_select",'
        '"options":[{"value":"red","title":"red"},{"value":"green","title":"green"}]}',
        id="single-select-from-enum",
    ),
    pytest.param(
        {
            "targets": {
                "type": "array",
                "default": ["linux"],
                "minItems": 1,
                "maxItems": 2,
                "items": {"anyOf": [{"const": "linux", "title": "Linux"}, {"const": "macos"}]},
            }
        },
        None,
        '{"id":"targets","title":"targets","required":false,"secret":false,'
        '"kind":"multi_select","options":[{"value":"linux","title":"Linux"},'
        '{"value":"macos","title":"macos"}],"default":["linux"],"min_items":1,"max_items":2}',
        id="multi-select-from-anyOf",
    ),
    pytest.param(
        {"targets": {"type": "array", "default": [], "items": {"enum": ["linux", "macos"]}}},
        None,
        '{"id":"targets","title":"targets","required":false,"secret":false,'
        '"kind":"multi_select","options":[{"value":"linux","title":"linux"},'
        '{"value":"macos","title":"macos"}]}',
        id="multi-select-from-enum-skips-empty-default",
    ),
    pytest.param(
        {"confirm": {"type": "boolean", "default": True}},
        None,
        '{"id":"confirm","title":"confirm","required":false,"secret":false,"kind":"boolean",'
        '"default":true}',
        id="boolean",
    ),
    pytest.param(
        {"workers": {"type": "integer", "default": 4, "minimum": -1, "maximum": 8}},
        ["workers"],
        '{"id":"workers","title":"workers","required":true,"secret":false,"kind":"integer",'
        '"default":4,"minimum":-1,"maximum":8}',
        id="integer",
    ),
    pytest.param(
        {"ratio": {"type": "number", "default": 1, "minimum": 0, "maximum": 1e16}},
        None,
        '{"id":"ratio","title":"ratio","required":false,"secret":false,"kind":"number",'
        '"default":1.0,"minimum":0.0,"maximum":1e16}',
        id="number-writes-whole-numbers-as-floats",
    ),
    pytest.param(
        {
            "token__other": {
                "type": "string",
                "_meta": {
                    "codex": {"questionId": "token", "isOtherAnswer": True, "isSecret": True}
                },
            }
        },
        None,
        '{"id":"token__other","title":"token__other","required":false,"secret":true,'
        '"custom_answer_for":"token","kind":"text"}',
        id="codex-secret-other-answer",
    ),
    pytest.param(
        {
            "scope_note": {
                "type": "string",
                "title": "Additional answer or note",
                "_meta": {"codex": {"questionId": "scope", "role": "user_note"}},
            }
        },
        None,
        '{"id":"scope_note","title":"Additional answer or note","required":false,'
        '"secret":false,"custom_answer_for":"scope","kind":"text"}',
        id="codex-user-note",
    ),
    pytest.param(
        {
            "q_custom": {
                "type": "string",
                "title": "Other",
                "_meta": {
                    "_askUserQuestionCustomAnswer": {"questionId": "q", "isCustomAnswer": True}
                },
            }
        },
        None,
        '{"id":"q_custom","title":"Other","required":false,"secret":false,'
        '"custom_answer_for":"q","kind":"text"}',
        id="claude-custom-answer",
    ),
]


@pytest.mark.parametrize(("properties", "required", "wire"), KIND_CASES)
def test_each_field_kind_parses_from_acp_and_round_trips_byte_exactly(
    properties: dict[str, Any], required: list[str] | None, wire: str
) -> None:
    assert only_field(properties, required) == wire.encode()
    decoded = decode_json(wire, ElicitationField)
    assert encode(decoded) == wire.encode()


def test_whole_request_round_trips_with_title_and_description() -> None:
    params = acp({"confirm": {"type": "boolean"}})
    params["requestedSchema"]["title"] = "Deploy"
    params["requestedSchema"]["description"] = "Pick carefully"
    wire = encode(parse_acp_request("e-9", params))
    assert wire == (
        b'{"id":"e-9","message":"Answer please","title":"Deploy","description":"Pick carefully",'
        b'"fields":[{"id":"confirm","title":"confirm","required":false,"secret":false,'
        b'"kind":"boolean"}]}'
    )
    assert encode(decode_json(wire, ElicitationRequest)) == wire


def test_fields_keep_the_order_properties_were_received_in() -> None:
    properties = {name: {"type": "boolean"} for name in ("zeta", "alpha", "mid")}
    request = parse_acp_request("e", acp(properties))
    assert [field.id for field in request.fields] == ["zeta", "alpha", "mid"]


def test_codex_metadata_without_other_marker_sets_no_custom_answer() -> None:
    field = parse_acp_request(
        "e",
        acp(
            {"scope": {"type": "string", "_meta": {"codex": {"questionId": "x", "isOther": True}}}}
        ),
    ).fields[0]
    assert field.custom_answer_for is None
    assert field.custom_answer_option is None


def test_codex_marker_without_question_id_falls_back_to_claude_marker() -> None:
    meta = {
        "codex": {"isOtherAnswer": True},
        "_askUserQuestionCustomAnswer": {"questionId": "q", "isCustomAnswer": True},
    }
    field = parse_acp_request("e", acp({"other": {"type": "string", "_meta": meta}})).fields[0]
    assert field.custom_answer_for == "q"


def test_null_optional_schema_texts_count_as_absent() -> None:
    params = acp({"x": {"type": "string", "title": None, "default": None, "minLength": None}})
    params["requestedSchema"]["title"] = None
    request = parse_acp_request("e", params)
    assert request.title is None
    assert request.fields[0].title == "x"


def test_request_id_scope_may_be_any_value_and_schema_type_may_be_omitted() -> None:
    params: dict[str, Any] = {
        "mode": "form",
        "requestId": None,
        "message": "Hi",
        "requestedSchema": {},
    }
    request = parse_acp_request("e", params)
    assert request.fields == []


def test_limits_are_inclusive() -> None:
    many = {f"f{i}": {"type": "boolean"} for i in range(MAX_FIELDS)}
    assert len(parse_acp_request("e", acp(many)).fields) == MAX_FIELDS
    options = [str(i) for i in range(MAX_OPTIONS)]
    field = parse_acp_request("e", acp({"pick": {"type": "string", "enum": options}})).fields[0]
    assert field.options is not None
    assert len(field.options) == MAX_OPTIONS
    params = acp({})
    params["message"] = "é" * (MAX_TEXT_BYTES // 2)
    assert parse_acp_request("e", params).message == params["message"]


# --- refusals -------------------------------------------------------------------------------


def with_schema(**schema: Any) -> Any:
    return {"mode": "form", "sessionId": "s", "message": "m", "requestedSchema": schema}


def one(prop: Any) -> Any:
    return acp({"f": prop})


REFUSALS = [
    pytest.param(
        acp({}, _meta={"blob": "x" * MAX_ELICITATION_BYTES}), "65536 bytes", id="over-64KiB"
    ),
    pytest.param([], "elicitation params must be an object", id="params-not-object"),
    pytest.param(
        {"mode": "url", "requestId": 1, "message": "Open", "url": "https://example.com"},
        "only supports form elicitations",
        id="url-mode",
    ),
    pytest.param({"sessionId": "s", "message": "m"}, "mode must be a string", id="no-mode"),
    pytest.param(
        {"mode": "form", "sessionId": 7, "message": "m", "requestedSchema": {}},
        "no sessionId or requestId scope",
        id="no-scope",
    ),
    pytest.param(
        {"mode": "form", "sessionId": "s", "requestedSchema": {}},
        "message must be a string",
        id="no-message",
    ),
    pytest.param(
        {"mode": "form", "sessionId": "s", "message": "é" * 8193, "requestedSchema": {}},
        "elicitation message is too long (16386 bytes",
        id="message-over-16KiB",
    ),
    pytest.param(
        {"mode": "form", "sessionId": "s", "message": "m"},
        "no requestedSchema",
        id="no-requestedSchema",
    ),
    pytest.param(
        {"mode": "form", "sessionId": "s", "message": "m", "requestedSchema": []},
        "requestedSchema must be an object",
        id="schema-not-object",
    ),
    pytest.param(with_schema(type="array"), 'type must be "object"', id="schema-type-array"),
    pytest.param(with_schema(title=5), "requestedSchema.title must be a string", id="title-type"),
    pytest.param(
        with_schema(description="d" * (MAX_TEXT_BYTES + 1)),
        "requestedSchema.description is too long",
        id="description-over-16KiB",
    ),
    pytest.param(
        with_schema(properties=[]), "requestedSchema.properties must be an object", id="props"
    ),
    pytest.param(
        with_schema(properties={f"f{i}": {"type": "boolean"} for i in range(MAX_FIELDS + 1)}),
        "33 fields; at most 32",
        id="too-many-fields",
    ),
    pytest.param(
        with_schema(required="f"), "requestedSchema.required must be an array", id="required"
    ),
    pytest.param(
        with_schema(required=["f", 1]), "required entries must be strings", id="required-entry"
    ),
    pytest.param(
        acp({"x" * (MAX_TEXT_BYTES + 1): {"type": "boolean"}}),
        "elicitation field id",
        id="field-id-over-16KiB",
    ),
    pytest.param(one("string"), "properties['f'] must be an object", id="property-not-object"),
    pytest.param(one({}), "properties['f'].type must be a string", id="no-type"),
    pytest.param(one({"type": "object"}), "field 'f' has unsupported type 'object'", id="object"),
    pytest.param(one({"type": "string", "oneOf": {}}), "['f'].oneOf must be an array", id="oneOf"),
    pytest.param(
        one({"type": "string", "oneOf": [{"const": str(i)} for i in range(MAX_OPTIONS + 1)]}),
        "oneOf has 101 options; at most 100",
        id="too-many-oneOf",
    ),
    pytest.param(
        one({"type": "string", "oneOf": [{"title": "no const"}]}),
        "oneOf[0].const must be a string",
        id="option-without-const",
    ),
    pytest.param(
        one({"type": "string", "oneOf": ["a"]}), "oneOf[0] must be an object", id="option-type"
    ),
    pytest.param(
        one(
            {
                "type": "string",
                "oneOf": [
                    {
                        "const": "a",
                        "_meta": {
                            "_claude/askUserQuestionOption": {"preview": "p" * (MAX_TEXT_BYTES + 1)}
                        },
                    }
                ],
            }
        ),
        "oneOf[0] preview is too long",
        id="preview-over-16KiB",
    ),
    pytest.param(
        one({"type": "string", "enum": ["a", 1]}), "enum[1] must be a string", id="enum-entry"
    ),
    pytest.param(
        one({"type": "string", "enum": [str(i) for i in range(MAX_OPTIONS + 1)]}),
        "enum has 101 options",
        id="too-many-enum",
    ),
    pytest.param(one({"type": "string", "pattern": "("}), "invalid pattern", id="bad-pattern"),
    pytest.param(
        one({"type": "string", "minLength": -1}), "minLength must be a non-negative", id="neg"
    ),
    pytest.param(
        one({"type": "string", "maxLength": 2.0}), "maxLength must be a non-negative", id="float"
    ),
    pytest.param(
        one({"type": "string", "minLength": True}), "minLength must be a non-negative", id="bool"
    ),
    pytest.param(one({"type": "string", "default": 3}), "['f'].default must be a string", id="d"),
    pytest.param(one({"type": "array"}), "field 'f' has no items schema", id="no-items"),
    pytest.param(one({"type": "array", "items": []}), "items must be an object", id="items-type"),
    pytest.param(one({"type": "array", "items": {}}), "items.enum must be an array", id="no-opts"),
    pytest.param(
        one({"type": "array", "items": {"anyOf": []}}), "has no options", id="empty-options"
    ),
    pytest.param(
        one({"type": "array", "items": {"anyOf": [{"const": str(i)} for i in range(101)]}}),
        "items.anyOf has 101 options",
        id="too-many-anyOf",
    ),
    pytest.param(
        one({"type": "array", "items": {"enum": ["a"]}, "default": "a"}),
        "['f'].default must be an array",
        id="multi-default",
    ),
    pytest.param(
        one({"type": "array", "items": {"enum": ["a"]}, "default": [1]}),
        "default entries must be strings",
        id="multi-default-entry",
    ),
    pytest.param(
        one({"type": "array", "items": {"enum": ["a"]}, "maxItems": -2}),
        "maxItems must be a non-negative",
        id="max-items",
    ),
    pytest.param(one({"type": "boolean", "default": "yes"}), "must be a boolean", id="bool-def"),
    pytest.param(one({"type": "integer", "default": 1.5}), "default must be an integer", id="i"),
    pytest.param(
        one({"type": "integer", "maximum": 2**63}), "maximum must be an integer", id="big"
    ),
    pytest.param(one({"type": "number", "default": "1"}), "default must be a number", id="num"),
    pytest.param(one({"type": "number", "minimum": False}), "minimum must be a number", id="nb"),
    pytest.param(
        one({"type": "number", "maximum": float("inf")}), "maximum must be finite", id="inf"
    ),
]


@pytest.mark.parametrize(("params", "message"), REFUSALS)
def test_unsupported_or_oversized_acp_params_are_refused_with_an_actionable_message(
    params: Any, message: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_acp_request("e", params)
    assert message in str(caught.value)


def test_refusal_messages_use_the_product_name_relaystore() -> None:
    with pytest.raises(InvalidInput, match="relaystore only supports form elicitations"):
        parse_acp_request("e", {"mode": "url", "requestId": 1})


# --- wire refusals and normalisation --------------------------------------------------------


@pytest.mark.parametrize(
    ("field_json", "message"),
    [
        pytest.param('"kind":"text","options":[]', "a text field has no `options`", id="foreign"),
        pytest.param('"kind":"boolean","minimum":1', "has no `minimum`", id="foreign-range"),
        pytest.param('"kind":"single_select"', "needs `options`", id="select-without-options"),
        pytest.param('"kind":"text","default":true', "`default` must be a string", id="text-def"),
        pytest.param('"kind":"integer","default":1.5', "`default` must be an integer", id="int"),
        pytest.param('"kind":"integer","minimum":9223372036854775808', "`minimum`", id="i64"),
        pytest.param('"kind":"number","default":"x"', "`default` must be a finite", id="num"),
        pytest.param('"kind":"boolean","default":1', "`default` must be a boolean", id="bool"),
        pytest.param('"kind":"text","min_length":-1', "min_length", id="neg-length"),
        pytest.param('"kind":"text","flavour":"x"', "unknown field `flavour`", id="unknown"),
        pytest.param('"kind":"slider"', "kind", id="unknown-kind"),
    ],
)
def test_decoding_a_field_with_the_wrong_shape_is_refused_naming_the_field(
    field_json: str, message: str
) -> None:
    wire = f'{{"id":"q","message":"m","fields":[{{"id":"f","title":"f","required":false,{field_json}}}]}}'
    with pytest.raises(InvalidInput) as caught:
        decode_json(wire, ElicitationRequest)
    assert message in str(caught.value)
    assert "$.fields[0]" in str(caught.value)


def test_building_a_field_with_another_kinds_constraint_raises_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="a boolean field has no `options`"):
        ElicitationField(
            id="f",
            title="f",
            required=False,
            kind=ElicitationFieldKind.BOOLEAN,
            options=[ElicitationOption(value="a", title="a")],
        )


def test_secret_defaults_to_false_on_read_and_is_always_written() -> None:
    field = decode_json('{"id":"f","title":"f","required":true,"kind":"boolean"}', ElicitationField)
    assert field.secret is False
    assert (
        encode(field) == b'{"id":"f","title":"f","required":true,"secret":false,"kind":"boolean"}'
    )


def test_missing_required_or_fields_keys_are_refused() -> None:
    with pytest.raises(InvalidInput, match="required"):
        decode_json('{"id":"f","title":"f","kind":"boolean"}', ElicitationField)
    with pytest.raises(InvalidInput, match="fields"):
        decode_json('{"id":"q","message":"m"}', ElicitationRequest)


def test_accept_response_sorts_content_and_skips_it_when_empty() -> None:
    response = decode_elicitation_response(
        '{"content":{"b":[],"a":"x","c":1.5,"d":true,"e":2},"action":"accept"}'
    )
    assert isinstance(response, ElicitationAccept)
    assert encode(response) == (
        b'{"action":"accept","content":{"a":"x","b":[],"c":1.5,"d":true,"e":2}}'
    )
    assert encode(ElicitationAccept()) == b'{"action":"accept"}'
    assert decode_elicitation_response('{"action":"accept"}') == ElicitationAccept()


def test_accept_integers_beyond_64_bits_become_numbers_like_serde() -> None:
    response = decode_elicitation_response(
        '{"action":"accept","content":{"n":18446744073709551615}}'
    )
    assert encode(response) == b'{"action":"accept","content":{"n":1.8446744073709552e19}}'


def test_decline_and_cancel_round_trip_and_ignore_extra_keys_like_serde() -> None:
    assert encode(ElicitationDecline()) == b'{"action":"decline"}'
    assert encode(ElicitationCancel()) == b'{"action":"cancel"}'
    assert decode_elicitation_response('{"action":"cancel","content":{}}') == ElicitationCancel()
    assert decode_elicitation_response('{"action":"decline"}').action_name == "decline"


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ('{"action":"accept","extra":1}', "unknown field `extra`"),
        ('{"action":"maybe"}', "action"),
        ('{"content":{}}', "action"),
        ('{"action":"accept","content":{"a":{"nested":1}}}', "content"),
    ],
)
def test_malformed_responses_are_refused(wire: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        decode_elicitation_response(wire)
    assert message in str(caught.value)


# --- validate_response ----------------------------------------------------------------------


@pytest.fixture
def form() -> ElicitationRequest:
    return parse_acp_request(
        "form-1",
        acp(
            {
                "workers": {"type": "integer", "minimum": 1, "maximum": 8},
                "ratio": {"type": "number", "minimum": 0.0, "maximum": 1.0},
                "targets": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 2,
                    "items": {"enum": ["linux", "macos", "windows"]},
                },
                "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 4},
                "code": {"type": "string", "pattern": "[0-9]{3}"},
                "email": {"type": "string", "format": "email"},
                "site": {"type": "string", "format": "uri"},
                "day": {"type": "string", "format": "date"},
                "when": {"type": "string", "format": "date-time"},
                "other": {"type": "string", "format": "hostname"},
                "scope": {"type": "string", "oneOf": [{"const": "narrow"}, {"const": "wide"}]},
                "scope_note": {
                    "type": "string",
                    "_meta": {"codex": {"questionId": "scope", "role": "user_note"}},
                },
                "confirm": {"type": "boolean"},
            },
            required=["workers", "scope"],
        ),
    )


def answer(**content: ElicitationValue) -> ElicitationAccept:
    base: dict[str, ElicitationValue] = {"workers": 2, "scope": "narrow"}
    base.update(content)
    return ElicitationAccept(content=base)


ACCEPTED = [
    pytest.param({}, id="minimal"),
    pytest.param({"ratio": 1}, id="whole-integer-for-number"),
    pytest.param({"ratio": 0.5}, id="number"),
    pytest.param({"targets": ["linux", "macos"]}, id="multi-select"),
    pytest.param({"name": "éé"}, id="length-counts-characters"),
    pytest.param({"code": "ab123cd"}, id="pattern-is-searched-not-anchored"),
    pytest.param({"email": "ada@example.com"}, id="email"),
    pytest.param({"site": "https://example.com/a?b#c"}, id="uri"),
    pytest.param({"site": "mailto:ada@example.com"}, id="uri-non-special"),
    pytest.param({"day": "2024-02-29"}, id="date-leap-day"),
    pytest.param({"day": "2024-1-5"}, id="date-unpadded-like-chrono"),
    pytest.param({"when": "2024-02-29T12:30:00.5+01:00"}, id="date-time"),
    pytest.param({"when": "2024-02-29 12:30:00Z"}, id="date-time-space"),
    pytest.param({"other": "anything goes"}, id="unknown-format-passes"),
    pytest.param({"scope": "wide"}, id="single-select"),
    pytest.param({"confirm": False}, id="boolean"),
]


@pytest.mark.parametrize("content", ACCEPTED)
def test_answers_that_fit_the_form_are_accepted(
    form: ElicitationRequest, content: dict[str, ElicitationValue]
) -> None:
    validate_response(form, answer(**content))


def test_custom_answer_partner_satisfies_a_required_select(form: ElicitationRequest) -> None:
    validate_response(form, ElicitationAccept(content={"workers": 3, "scope_note": "only parser"}))


def test_decline_and_cancel_need_no_answers(form: ElicitationRequest) -> None:
    validate_response(form, ElicitationDecline())
    validate_response(form, ElicitationCancel())


REFUSED = [
    pytest.param({"nope": "x"}, "'nope', which is not a field", id="unknown-id"),
    pytest.param({"workers": None}, "field 'workers' is required", id="required-missing"),
    pytest.param({"scope": None, "scope_note": "  \u3000"}, "'scope' is required", id="blank-note"),
    pytest.param({"scope": " \t"}, "field 'scope' is required; the answer is blank", id="blank"),
    pytest.param({"workers": 9}, "field 'workers' is outside the allowed range", id="int-range"),
    pytest.param({"workers": 2.0}, "field 'workers' has an incompatible value", id="int-float"),
    pytest.param({"workers": True}, "field 'workers' has an incompatible value", id="int-bool"),
    pytest.param({"workers": "four"}, "'workers' has an incompatible value", id="int-string"),
    pytest.param({"ratio": 1.5}, "field 'ratio' is outside the allowed range", id="num-range"),
    pytest.param({"targets": []}, "'targets' needs more selections", id="too-few"),
    pytest.param({"targets": ["linux", "macos", "windows"]}, "too many selections", id="many"),
    pytest.param({"targets": ["plan9"]}, "not one of the offered options: 'plan9'", id="member"),
    pytest.param({"targets": "linux"}, "'targets' has an incompatible value", id="multi-type"),
    pytest.param({"name": "a"}, "'Name' (field 'name') is too short", id="short"),
    pytest.param({"name": "abcde"}, "'Name' (field 'name') is too long", id="long"),
    pytest.param({"code": "12"}, "field 'code' does not match the required format", id="pattern"),
    pytest.param({"email": "ada@localhost"}, "'email' must be an email address", id="email"),
    pytest.param({"email": "ada@.example.com"}, "must be an email address", id="email-dot"),
    pytest.param({"site": "not a uri"}, "'site' must be a URI", id="uri"),
    pytest.param({"site": "https://"}, "'site' must be a URI", id="uri-no-host"),
    pytest.param({"site": "http://a:99999"}, "'site' must be a URI", id="uri-port"),
    pytest.param({"day": "2023-02-29"}, "'day' must be a YYYY-MM-DD date", id="date-invalid"),
    pytest.param({"day": "2024-01-01T00:00"}, "must be a YYYY-MM-DD date", id="date-trailing"),
    pytest.param({"when": "2024-02-29T12:30Z"}, "must be an RFC 3339 date-time", id="dt-no-sec"),
    pytest.param({"when": "2024-02-29T24:00:00Z"}, "RFC 3339 date-time", id="dt-hour"),
    pytest.param({"when": "2024-02-29T12:00:00"}, "RFC 3339 date-time", id="dt-no-offset"),
    pytest.param({"scope": "sideways"}, "'scope' is not one of the offered options", id="select"),
    pytest.param({"confirm": "true"}, "'confirm' has an incompatible value", id="bool-string"),
]


@pytest.mark.parametrize(("content", "message"), REFUSED)
def test_answers_that_break_the_form_are_refused_naming_the_field(
    form: ElicitationRequest, content: dict[str, ElicitationValue | None], message: str
) -> None:
    values = {"workers": 2, "scope": "narrow", **content}
    response = ElicitationAccept(
        content={key: value for key, value in values.items() if value is not None}
    )
    with pytest.raises(InvalidInput) as caught:
        validate_response(form, response)
    assert message in str(caught.value)


# --- property tests: canonical wire JSON round-trips; unknown keys are refused --------------

TEXT = st.text(max_size=8)
COUNT = st.integers(min_value=0, max_value=2**64 - 1)
I64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
F64 = st.floats(allow_nan=False, allow_infinity=False)


def canonical(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A wire object with serde's skip rules applied (``None`` means skipped)."""
    return {key: value for key, value in pairs if value is not None}


OPTION = st.builds(
    lambda value, title, description, preview: canonical(
        [("value", value), ("title", title), ("description", description), ("preview", preview)]
    ),
    TEXT,
    TEXT,
    st.none() | TEXT,
    st.none() | TEXT,
)
OPTIONS = st.lists(OPTION, max_size=3)

VARIANTS: dict[str, st.SearchStrategy[list[tuple[str, Any]]]] = {
    "text": st.tuples(
        st.none() | TEXT, st.none() | COUNT, st.none() | COUNT, st.none() | TEXT, st.none() | TEXT
    ).map(
        lambda v: list(
            zip(("default", "min_length", "max_length", "pattern", "format"), v, strict=True)
        )
    ),
    "single_select": st.tuples(OPTIONS, st.none() | TEXT).map(
        lambda v: [("options", v[0]), ("default", v[1])]
    ),
    "multi_select": st.tuples(
        OPTIONS,
        st.none() | st.lists(TEXT, min_size=1, max_size=3),
        st.none() | COUNT,
        st.none() | COUNT,
    ).map(lambda v: list(zip(("options", "default", "min_items", "max_items"), v, strict=True))),
    "boolean": (st.none() | st.booleans()).map(lambda v: [("default", v)]),
    "integer": st.tuples(st.none() | I64, st.none() | I64, st.none() | I64).map(
        lambda v: list(zip(("default", "minimum", "maximum"), v, strict=True))
    ),
    "number": st.tuples(st.none() | F64, st.none() | F64, st.none() | F64).map(
        lambda v: list(zip(("default", "minimum", "maximum"), v, strict=True))
    ),
}


@st.composite
def field_wire(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(VARIANTS)))
    common = [
        ("id", draw(TEXT)),
        ("title", draw(TEXT)),
        ("description", draw(st.none() | TEXT)),
        ("required", draw(st.booleans())),
        ("secret", draw(st.booleans())),
        ("custom_answer_for", draw(st.none() | TEXT)),
        ("custom_answer_option", draw(st.none() | TEXT)),
        ("kind", kind),
    ]
    return canonical(common + draw(VARIANTS[kind]))


REQUEST = st.builds(
    lambda id_, message, title, description, fields: canonical(
        [
            ("id", id_),
            ("message", message),
            ("title", title),
            ("description", description),
            ("fields", fields),
        ]
    ),
    TEXT,
    TEXT,
    st.none() | TEXT,
    st.none() | TEXT,
    st.lists(field_wire(), max_size=4),
)


@given(REQUEST)
def test_canonical_request_wire_round_trips_byte_exactly(request_wire: dict[str, Any]) -> None:
    data = serde_json(request_wire)
    assert encode(decode_json(data, ElicitationRequest)) == data


VALUE = st.one_of(TEXT, I64, F64, st.booleans(), st.lists(TEXT, max_size=3))


@given(st.dictionaries(TEXT, VALUE, max_size=4))
def test_canonical_accept_wire_round_trips_byte_exactly(content: dict[str, Any]) -> None:
    ordered = dict(sorted(content.items()))
    data = serde_json(canonical([("action", "accept"), ("content", ordered or None)]))
    assert encode(decode_elicitation_response(data)) == data


FIELD_NAMES = set(ElicitationField.__struct_fields__)
KNOWN = {
    "request": set(ElicitationRequest.__struct_fields__),
    "field": FIELD_NAMES,
    "option": set(ElicitationOption.__struct_fields__),
}
UNKNOWN_NAME = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=12)


@given(REQUEST, UNKNOWN_NAME, st.data())
def test_unknown_keys_in_deny_unknown_structs_are_refused_naming_the_key(
    request_wire: dict[str, Any], name: str, data: st.DataObject
) -> None:
    # Every object that is a deny_unknown_fields struct: the request, its fields, options.
    targets: list[tuple[str, dict[str, Any]]] = []
    mutated = copy.deepcopy(request_wire)
    targets.append(("request", mutated))
    for field in mutated["fields"]:
        targets.append(("field", field))
        targets.extend(("option", option) for option in field.get("options", []))
    which, target = data.draw(st.sampled_from(targets))
    if name in KNOWN[which]:
        name = name + "_extra_" + which
    target[name] = data.draw(st.none() | st.integers() | TEXT)
    with pytest.raises(InvalidInput) as caught:
        decode_json(serde_json(mutated), ElicitationRequest)
    assert f"unknown field `{name}`" in str(caught.value)


@given(st.dictionaries(TEXT, VALUE, max_size=3), UNKNOWN_NAME)
def test_unknown_keys_in_an_accept_response_are_refused_naming_the_key(
    content: dict[str, Any], name: str
) -> None:
    if name in ("action", "content"):
        name = name + "_extra"
    data = serde_json({"action": "accept", "content": content, name: 1})
    with pytest.raises(InvalidInput) as caught:
        decode_elicitation_response(data)
    assert f"unknown field `{name}`" in str(caught.value)


def test_serde_float_oracle_matches_known_serde_outputs() -> None:
    # Pins the test's own oracle against values serde_json is known to print.
    expected = {1.0: "1.0", 1e16: "1e16", 1e-7: "1e-7", 1e-5: "0.00001", 0.1: "0.1"}
    for value, text in expected.items():
        assert serde_float(value) == text
    assert serde_float(-0.0) == "-0.0"
    assert serde_float(1.5e300) == "1.5e300"
    assert serde_float(123456789.125) == "123456789.125"


# --- secret fields: the answer never appears in a message (issue 11) --------------------------

SECRET_MARK = "hunter2-"
"""Every secret string answer starts with this; no field metadata below contains it."""
SECRET_TEXT = st.text(max_size=10).map(lambda text: SECRET_MARK + text)
BIG = 10**12
"""Secret numbers are at least this large in magnitude: far outside every bound below, and
their digits cannot hide inside a bound, a length or an item count of a message."""
SECRET_INT = st.integers(min_value=BIG, max_value=2**63 - 1) | st.integers(
    min_value=-(2**63), max_value=-BIG
)
SECRET_FLOAT = st.floats(min_value=BIG, max_value=1e300) | st.floats(
    min_value=-1e300, max_value=-BIG
)
SECRET_VALUE: st.SearchStrategy[ElicitationValue] = st.one_of(
    SECRET_TEXT,
    SECRET_INT,
    SECRET_FLOAT,
    st.booleans(),
    st.lists(SECRET_TEXT | st.sampled_from(["north", "south"]), max_size=4),
)
BOUND = st.none() | st.integers(min_value=-9999, max_value=9999)
SMALL = st.none() | st.integers(min_value=0, max_value=4)
REGIONS = [
    ElicitationOption(value="north", title="North"),
    ElicitationOption(value="south", title="South"),
]


def secret_field(kind: ElicitationFieldKind, **variant: Any) -> ElicitationField:
    return ElicitationField(
        id="pin", title="PIN code", required=True, secret=True, kind=kind, **variant
    )


SECRET_FIELD = st.one_of(
    st.builds(
        lambda low, high, pattern, fmt: secret_field(
            ElicitationFieldKind.TEXT, min_length=low, max_length=high, pattern=pattern, format=fmt
        ),
        SMALL,
        SMALL,
        st.sampled_from([None, "^[0-9]+$", "("]),
        st.sampled_from([None, "email", "uri", "date", "date-time"]),
    ),
    st.just(secret_field(ElicitationFieldKind.SINGLE_SELECT, options=REGIONS)),
    st.builds(
        lambda low, high: secret_field(
            ElicitationFieldKind.MULTI_SELECT, options=REGIONS, min_items=low, max_items=high
        ),
        SMALL,
        SMALL,
    ),
    st.just(secret_field(ElicitationFieldKind.BOOLEAN)),
    st.builds(
        lambda low, high: secret_field(ElicitationFieldKind.INTEGER, minimum=low, maximum=high),
        BOUND,
        BOUND,
    ),
    st.builds(
        lambda low, high: secret_field(ElicitationFieldKind.NUMBER, minimum=low, maximum=high),
        BOUND,
        BOUND,
    ),
)


def renderings(value: ElicitationValue) -> set[str]:
    """Every way a message could spell ``value`` (or a piece of it)."""
    if isinstance(value, list):
        return {text for entry in value for text in renderings(entry)}
    if isinstance(value, str):
        return {value, repr(value), value[:40]}
    return {str(value), repr(value), str(float(value)) if isinstance(value, int) else str(value)}


def secret_messages(field: ElicitationField, value: ElicitationValue) -> list[str]:
    """The messages validating ``value`` produces, directly and through a whole response."""
    messages: list[str] = []
    request = ElicitationRequest(id="form-1", message="Enter the PIN", fields=[field])

    def direct() -> None:
        validate_field_value(field, value)

    def whole() -> None:
        validate_response(request, ElicitationAccept(content={"pin": value}))

    for check in (direct, whole):
        try:
            check()
        except InvalidInput as exc:
            messages += [str(exc), exc.detail, *map(str, exc.args), repr(exc)]
    return messages


@given(SECRET_FIELD, SECRET_VALUE)
def test_a_secret_answer_never_appears_in_any_validation_message(
    field: ElicitationField, value: ElicitationValue
) -> None:
    messages = secret_messages(field, value)
    for message in messages:
        assert "pin" in message  # the field is named...
        for shown in renderings(value):
            if isinstance(value, list) and shown in ("north", "south", "'north'", "'south'"):
                continue  # an offered option is not a secret of this answer
            assert shown not in message  # ...its value never


SECRET_REFUSALS = [
    pytest.param(
        secret_field(ElicitationFieldKind.SINGLE_SELECT, options=REGIONS),
        "hunter2-correct-horse",
        "is not one of the offered options",
        id="single-select",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.MULTI_SELECT, options=REGIONS),
        ["north", "hunter2-correct-horse"],
        "is not one of the offered options",
        id="multi-select",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.INTEGER, minimum=0, maximum=9999),
        73195,
        "is outside the allowed range [0, 9999]",
        id="integer",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.NUMBER, minimum=0, maximum=1),
        73195.25,
        "is outside the allowed range [0.0, 1.0]",
        id="number",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.TEXT, pattern="^[0-9]{4}$"),
        "hunter2-correct-horse",
        "does not match the required format",
        id="text-pattern",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.TEXT, max_length=4),
        "hunter2-correct-horse",
        "is too long",
        id="text-length",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.TEXT, format="email"),
        "hunter2-correct-horse",
        "must be an email address",
        id="text-format",
    ),
    pytest.param(
        secret_field(ElicitationFieldKind.BOOLEAN),
        "hunter2-correct-horse",
        "has an incompatible value",
        id="boolean",
    ),
]


@pytest.mark.parametrize(("field", "value", "problem"), SECRET_REFUSALS)
def test_every_kind_of_secret_refusal_names_the_field_and_the_problem_not_the_value(
    field: ElicitationField, value: ElicitationValue, problem: str
) -> None:
    messages = secret_messages(field, value)
    assert len(messages) == 8  # refused directly and inside a response
    for message in messages:
        assert "'PIN code' (field 'pin')" in message
        assert problem in message
        assert "hunter2" not in message
        assert "73195" not in message


def test_a_field_that_is_not_secret_still_quotes_the_refused_answer() -> None:
    field = ElicitationField(
        id="region",
        title="region",
        required=True,
        kind=ElicitationFieldKind.INTEGER,
        minimum=0,
        maximum=9999,
    )
    with pytest.raises(InvalidInput, match=r"outside the allowed range \[0, 9999\]: 73195"):
        validate_field_value(field, 73195)
