"""Hypothesis strategies that write the origin's canonical JSON without msgspec.

Every strategy here draws a plain Python value laid out exactly as serde writes the type:
keys in the declaration order of the spec tables (``origin-domain.md``), skip rules
applied, always-emitted options present as ``None``. :func:`dumps` turns such a value into
wire bytes with the standard library's encoder (its escaping equals serde_json's), so the
expected bytes in the property tests never come from the codec under test.

Variant strategies are keyed by their wire ``type`` so tests can cover every variant
explicitly instead of hoping ``one_of`` reaches them all.
"""

from __future__ import annotations

import hashlib
import json
import string
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "API_EVENT_DATA",
    "COMMAND_DATA",
    "OBSERVATION_DATA",
    "OUTCOME_DATA",
    "SKIP",
    "activity_details",
    "api_activity_states",
    "api_event_data",
    "api_event_pages",
    "api_events",
    "api_turn_outcomes",
    "command_results",
    "command_completed",
    "command_queued",
    "commands",
    "dumps",
    "elicitation_requests",
    "json_values",
    "materialized_turn_outcomes",
    "materialized_turns",
    "obj",
    "observations",
    "outcomes",
    "relay_cursors",
    "relay_event_lines",
    "runtime_identities",
    "runtime_receipts",
    "token_usages",
    "turn_diagnostics",
    "turn_results",
    "unknown_keys",
    "user_shell_results",
    "variant",
]

# -- building blocks --------------------------------------------------------------------


class _Skip:
    def __repr__(self) -> str:
        return "SKIP"


SKIP: Any = _Skip()
"""Marks a skip-if-none field that is absent; :func:`obj` leaves it out."""


def dumps(value: Any) -> bytes:
    """Compact JSON exactly as serde_json writes it (raw UTF-8, serde's escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def obj(**fields: Any) -> dict[str, Any]:
    """A JSON object with the fields in the given order, skipped fields left out."""
    return {key: value for key, value in fields.items() if value is not SKIP}


def variant(tag: str, data: Any = SKIP) -> dict[str, Any]:
    """An adjacently tagged value: ``type`` first, no ``data`` for a unit variant."""
    return obj(type=tag, data=data)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A skip-if-none field: absent or a value."""
    return st.just(SKIP) | strategy


def nullable(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An always-emitted option: ``null`` or a value."""
    return st.none() | strategy


TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
"""Any string serde can write: control characters, quotes, U+2028, astral characters."""
IDS = st.text(string.ascii_lowercase + string.digits + "-_:", min_size=1, max_size=12)
U8 = st.integers(0, 255)
U16 = st.integers(0, 2**16 - 1)
U32 = st.integers(0, 2**32 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
STORED_U64 = st.integers(0, 2**63 - 1)
"""A u64 field relaystore stores (``UInt64``): what SQLite's INTEGER holds."""
DIGESTS = st.text("0123456789abcdef", min_size=64, max_size=64)
# Floats whose Python repr has no exponent ([1e-4, 1e16)) are written identically by ryu.
_MAGNITUDES = st.floats(min_value=1e-4, max_value=1e15)
PLAIN_FLOATS = st.just(0.0) | _MAGNITUDES | _MAGNITUDES.map(lambda f: -f)

OUTCOME_REASONS = [
    "controller_disconnected",
    "owner_lost_on_restart",
    "worker_restarted",
    "runtime_stopped",
    "runtime_failure",
    "requested_cancellation",
    "admission_rejected",
    "command_failed",
    "provider_failure",
    "quota_limit",
    "unrecognized_stop_reason",
    "nonzero_exit",
    "signaled",
    "timed_out",
    "startup_failed",
    "lifecycle_failed",
    "runtime_unavailable",
    "checkpoint_failed",
    "checkpoint_deferred",
    "controller_restarted",
    "legacy_unclassified",
]
COMMAND_KINDS = [
    "steer",
    "resolve_steering",
    "clear_context",
    "prompt",
    "run_user_shell",
    "cancel_user_shell",
    "remove_queued_prompt",
    "clear_queued_prompts",
    "set_config",
    "restore_execution_mode",
    "goal_control",
    "set_session_mode",
    "cancel_turn",
    "cancel",
    "close",
    "begin_checkpoint",
    "complete_checkpoint",
    "release_checkpoint",
    "advance_recovery_floor",
    "record_notice",
]
REASONS = st.sampled_from(OUTCOME_REASONS)
KINDS = st.sampled_from(COMMAND_KINDS)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | I64 | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=8,
)
"""Opaque JSON (ACP payloads): objects keep the order their keys were drawn in."""
json_objects = st.dictionaries(TEXT, json_values, max_size=4)


@st.composite
def unknown_keys(draw: st.DrawFn, known: frozenset[str] | set[str]) -> str:
    """A key name no field of the struct uses."""
    return draw(
        st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(lambda k: k not in known)
    )


# -- relay: cursors, commands, outcomes -------------------------------------------------


@st.composite
def relay_cursors(draw: st.DrawFn) -> dict[str, Any]:
    return obj(ordinal=draw(STORED_U64), digest=draw(DIGESTS | TEXT))


@st.composite
def _quota_recoveries(draw: st.DrawFn) -> dict[str, Any]:
    return obj(
        user_command_id=draw(IDS),
        completed_command_id=draw(IDS),
        profile_id=draw(IDS),
        reset_at_ms=draw(nullable(I64)),
        retry_at_ms=draw(nullable(I64)),
        notice=draw(TEXT),
        submitted=draw(st.booleans()),
    )


def _fixed(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A struct whose fields are drawn from ``fields``, in that order; SKIP drops one."""

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        return obj(**{name: draw(strategy) for name, strategy in fields.items()})

    return build()


COMMAND_DATA: dict[str, st.SearchStrategy[dict[str, Any]] | None] = {
    "clear_context": None,
    "prompt": _fixed(prompt=st.lists(json_objects, max_size=3)),
    "continue_authorized_work": _fixed(
        expected=relay_cursors(), user_command_id=IDS, completed_command_id=IDS, attempt=U8
    ),
    "set_quota_recovery": _fixed(expected=relay_cursors(), recovery=nullable(_quota_recoveries())),
    "resume_after_quota": _fixed(expected=relay_cursors(), completed_command_id=IDS),
    "run_user_shell": _fixed(command=TEXT),
    "cancel_user_shell": _fixed(shell_command_id=IDS),
    "remove_queued_prompt": _fixed(queued_command_id=IDS),
    "clear_queued_prompts": None,
    "set_config": _fixed(key=TEXT, value=TEXT),
    "goal_control": _fixed(action=st.sampled_from(["pause", "resume", "clear"])),
    "set_session_mode": _fixed(mode_id=TEXT),
    "cancel_turn": None,
    "steer": _fixed(active_prompt_id=IDS, queued_prompt_id=IDS),
    "cancel_turn_for": _fixed(active_prompt_id=IDS),
    "resolve_steering": _fixed(steering_id=IDS),
    "cancel": None,
    "close": _fixed(barrier_command_id=IDS, expected=relay_cursors()),
    "begin_checkpoint": _fixed(reason=nullable(TEXT)),
    "complete_checkpoint": _fixed(barrier_command_id=IDS),
    "release_checkpoint": _fixed(barrier_command_id=IDS),
    "advance_recovery_floor": _fixed(through=relay_cursors()),
    "record_notice": _fixed(text=TEXT),
}
"""Every RelayCommand variant (bbdef44b declaration order): wire type → data, or None."""


def _tagged(
    table: dict[str, st.SearchStrategy[dict[str, Any]] | None], tag: str
) -> st.SearchStrategy[dict[str, Any]]:
    data = table[tag]
    if data is None:
        return st.just(variant(tag))
    return data.map(lambda body: variant(tag, body))


def commands(tag: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A RelayCommand: the named variant, or any."""
    if tag is not None:
        return _tagged(COMMAND_DATA, tag)
    return st.sampled_from(list(COMMAND_DATA)).flatmap(commands)


user_shell_results = _fixed(
    command=TEXT,
    stdout=TEXT,
    stderr=TEXT,
    stdout_truncated=st.booleans(),
    stderr_truncated=st.booleans(),
    exit_code=optional(I32),
    signal=optional(TEXT),
    duration_ms=STORED_U64,
    status=st.sampled_from(
        ["exited", "signaled", "timed_out", "cancelled", "interrupted", "failed"]
    ),
    error=optional(TEXT),
)
turn_diagnostics = _fixed(
    message=TEXT, code=optional(TEXT), http_status=optional(U16), reset_at=optional(TEXT)
)


def _token_usage(provider_details: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return _fixed(
        provider_details=provider_details,
        scope=st.sampled_from(["turn", "last_request", "unspecified"]),
        total_tokens=U64,
        input_tokens=U64,
        output_tokens=U64,
        thought_tokens=optional(U64),
        cached_read_tokens=optional(U64),
        cached_write_tokens=optional(U64),
    )


@st.composite
def _provider_usages(draw: st.DrawFn) -> dict[str, Any]:
    model_usage = draw(st.dictionaries(TEXT, _token_usage(st.just(SKIP)), max_size=2))
    return obj(
        cost=draw(optional(_fixed(usd_ticks=U64, usd=TEXT, is_partial=st.booleans()))),
        model_calls=draw(optional(U64)),
        api_duration_ms=draw(optional(U64)),
        elapsed_ms=draw(optional(U64)),
        model_usage=model_usage or SKIP,
    )


token_usages = _token_usage(optional(_provider_usages()))

OUTCOME_DATA: dict[str, st.SearchStrategy[dict[str, Any]] | None] = {
    "context_cleared": _fixed(native_session_id=IDS, memory=optional(TEXT)),
    "prompt": _fixed(
        stop_reason=TEXT, diagnostic=optional(turn_diagnostics), usage=optional(token_usages)
    ),
    "user_shell": _fixed(result=user_shell_results),
    "user_shell_cancelled": None,
    "configured": None,
    "goal_controlled": None,
    "session_mode_set": None,
    "cancelled": None,
    "steered": _fixed(queued_command_id=IDS),
    "steering_returned": _fixed(queued_command_id=IDS),
    "closed": None,
    "queue_changed": _fixed(removed_command_ids=st.lists(IDS, max_size=3)),
    "checkpoint_completed": None,
    "checkpoint_released": None,
    "recovery_floor_advanced": None,
    "notice_recorded": None,
}
"""Every RelayCommandOutcome variant: wire type → data, or None for a unit variant."""


def outcomes(tag: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A RelayCommandOutcome: the named variant, or any."""
    if tag is not None:
        return _tagged(OUTCOME_DATA, tag)
    return st.sampled_from(list(OUTCOME_DATA)).flatmap(outcomes)


# -- elicitation and runtime ------------------------------------------------------------

_options = st.lists(
    _fixed(value=TEXT, title=TEXT, description=optional(TEXT), preview=optional(TEXT)),
    min_size=1,
    max_size=3,
)
_FIELD_KINDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "text": {
        "default": optional(TEXT),
        "min_length": optional(U64),
        "max_length": optional(U64),
        "format": optional(st.sampled_from(["email", "uri", "date", "date-time"])),
    },
    "single_select": {"options": _options, "default": optional(TEXT)},
    "multi_select": {
        "options": _options,
        "default": optional(st.lists(TEXT, min_size=1, max_size=2)),
        "min_items": optional(U64),
        "max_items": optional(U64),
    },
    "boolean": {"default": optional(st.booleans())},
    "integer": {"default": optional(I64), "minimum": optional(I64), "maximum": optional(I64)},
    "number": {
        "default": optional(PLAIN_FLOATS),
        "minimum": optional(PLAIN_FLOATS),
        "maximum": optional(PLAIN_FLOATS),
    },
}


@st.composite
def _elicitation_fields(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(list(_FIELD_KINDS)))
    common = obj(
        id=draw(IDS),
        title=draw(TEXT),
        description=draw(optional(TEXT)),
        required=draw(st.booleans()),
        secret=draw(st.booleans()),
        custom_answer_for=draw(optional(IDS)),
        custom_answer_option=draw(optional(TEXT)),
        kind=kind,
    )
    extra = obj(**{name: draw(strategy) for name, strategy in _FIELD_KINDS[kind].items()})
    return {**common, **extra}


elicitation_requests = _fixed(
    id=IDS,
    message=TEXT,
    title=optional(TEXT),
    description=optional(TEXT),
    fields=st.lists(_elicitation_fields(), max_size=3),
)

_IDENTITY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": nullable(TEXT),
    "harness": st.sampled_from(["codex", "claude", "kimi", "grok", "muse"]),
    "platform": TEXT,
    "provenance": st.sampled_from(["managed_installation", "target_installation"]),
    "components": st.lists(
        _fixed(name=TEXT, version=nullable(TEXT), sha256=nullable(DIGESTS)), max_size=3
    ),
    "unavailable_reason": nullable(TEXT),
}
runtime_identities = _fixed(**_IDENTITY_FIELDS)
runtime_receipts = _fixed(**_IDENTITY_FIELDS, event_ordinal=U64, observed_at_ms=I64)

# -- observations and events ------------------------------------------------------------

_native_agent_events = st.one_of(
    _fixed(
        kind=st.just("spawned"),
        session_id=IDS,
        parent_session_id=nullable(IDS),
        name=TEXT,
        task=TEXT,
        capabilities=json_values,
    ),
    _fixed(kind=st.just("state"), session_id=IDS, state=TEXT),
    _fixed(kind=st.just("update"), session_id=IDS, update=json_objects),
    st.sampled_from(["replay_begin", "replay_commit", "disconnected"]).map(lambda k: {"kind": k}),
)
_session_updates = st.fixed_dictionaries(
    {
        "sessionUpdate": st.sampled_from(
            ["agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"]
        )
    }
).flatmap(lambda head: json_objects.map(lambda rest: {**head, **rest}))


@st.composite
def _session_opened(draw: st.DrawFn) -> dict[str, Any]:
    return obj(
        native_session_id=draw(IDS),
        resumed=draw(st.booleans()),
        native_continuity_lost=draw(st.just(SKIP) | st.just(True)),
        replaced_unused_native_session_id=draw(optional(IDS)),
    )


def _command_ended() -> st.SearchStrategy[dict[str, Any]]:
    return _fixed(reason=optional(REASONS), command_id=IDS, command=KINDS, message=TEXT)


OBSERVATION_DATA: dict[str, st.SearchStrategy[dict[str, Any]] | None] = {
    "steering_unconfirmed": _fixed(command_id=IDS, message=TEXT),
    "native_agent": _fixed(event=_native_agent_events),
    "agent_initialized": _fixed(
        protocol_version=U16,
        capabilities=json_objects,
        agent_info=nullable(
            _fixed(name=TEXT, title=optional(TEXT), version=TEXT, _meta=optional(json_objects))
        ),
        runtime=optional(runtime_identities),
    ),
    "session_opened": _session_opened(),
    "session_configured": _fixed(config_options=st.lists(json_objects, max_size=3)),
    "session_modes_configured": _fixed(modes=nullable(json_objects)),
    "session_update": _fixed(update=_session_updates),
    "permission_auto_approved": _fixed(option_id=IDS, option_name=TEXT),
    "elicitation_requested": _fixed(request=elicitation_requests),
    "elicitation_resolved": _fixed(
        elicitation_id=IDS, action=st.sampled_from(["accept", "decline", "cancel"])
    ),
    "elicitations_cleared": None,
    "command_queued": _fixed(command_id=IDS, command=commands(), created_at_ms=I64),
    "command_started": _fixed(command_id=IDS, started_at_ms=I64),
    "command_completed": _fixed(
        barrier_command_id=optional(IDS),
        command=optional(KINDS),
        command_id=IDS,
        outcome=outcomes(),
    ),
    "retry_assessment_started": _fixed(command_id=IDS, evidence=json_objects),
    "retry_assessment_resolved": _fixed(
        command_id=IDS, assessment_ordinal=STORED_U64, retryable=st.booleans()
    ),
    "command_rejected": _command_ended(),
    "command_interrupted": _command_ended(),
    "user_shell_output": _fixed(
        command_id=IDS,
        command=TEXT,
        stdout=TEXT,
        stderr=TEXT,
        stdout_truncated=st.booleans(),
        stderr_truncated=st.booleans(),
    ),
    "configuration_updated": _fixed(key=TEXT, value=TEXT),
    "checkpoint_ready": _fixed(command_id=IDS, through=STORED_U64),
    "session_fault": _fixed(reason=REASONS, message=TEXT),
    "warning": _fixed(message=TEXT),
    "session_restarted": None,
    "terminal_output": _fixed(
        terminal_id=IDS,
        output=TEXT,
        truncated=st.booleans(),
        exit_code=nullable(U32),
        signal=nullable(TEXT),
    ),
    "notice": _fixed(message=TEXT),
    "harness_turn_started": _fixed(started_at_ms=I64),
    "harness_turn_settled": _fixed(origin=nullable(TEXT), prompt_in_flight=st.booleans()),
    "closing": None,
    "closed": None,
}
"""Every RelayObservation variant of bbdef44b, in declaration order."""


def observations(tag: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """A RelayObservation: the named variant, or any."""
    if tag is not None:
        return _tagged(OBSERVATION_DATA, tag)
    return st.sampled_from(list(OBSERVATION_DATA)).flatmap(observations)


def command_queued(command: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A ``command_queued`` observation carrying ``command``."""
    data = _fixed(command_id=IDS, command=command, created_at_ms=I64)
    return data.map(lambda body: variant("command_queued", body))


def command_completed(
    outcome: st.SearchStrategy[dict[str, Any]],
) -> st.SearchStrategy[dict[str, Any]]:
    """A ``command_completed`` observation carrying ``outcome``."""
    data = _fixed(
        barrier_command_id=optional(IDS), command=optional(KINDS), command_id=IDS, outcome=outcome
    )
    return data.map(lambda body: variant("command_completed", body))


_DOMAINS = {1: b"hel-relay-event-v1\x00", 2: b"hel-relay-event-v2\x00"}


@st.composite
def relay_event_lines(
    draw: st.DrawFn, observation: st.SearchStrategy[dict[str, Any]] | None = None
) -> tuple[bytes, dict[str, Any]]:
    """A journal line with a correct digest, and its observation as a plain value.

    The digest is computed here from §2.7 (hashlib over the domain and a ``json.dumps``
    payload), independently of ``domain.digests``.
    """
    fmt = draw(st.sampled_from([1, 2]))
    ordinal = draw(U64.filter(lambda n: n > 0))
    previous = draw(DIGESTS) if fmt == 1 else SKIP
    recorded_at_ms = draw(st.integers(0, 2**63 - 1))  # no clock reads before 1970
    command_id = draw(optional(IDS))
    observed = draw(observation if observation is not None else observations())
    payload = obj(
        ordinal=ordinal,
        previous_digest=previous,
        recorded_at_ms=recorded_at_ms,
        command_id=command_id,
        observation=observed,
    )
    digest = hashlib.sha256(_DOMAINS[fmt] + dumps(payload)).hexdigest()
    line = obj(
        format=SKIP if fmt == 1 else fmt,
        ordinal=ordinal,
        previous_digest=previous,
        digest=digest,
        recorded_at_ms=recorded_at_ms,
        command_id=command_id,
        observation=observed,
    )
    return dumps(line), observed


# -- outcomes and API events ------------------------------------------------------------

_TURN_RESULT_KINDS = st.sampled_from(
    ["completed", "input_required", "cancelled", "rejected", "interrupted", "failed"]
)
turn_results = _fixed(
    kind=_TURN_RESULT_KINDS,
    reason=optional(REASONS),
    message=optional(TEXT),
    stop_reason=optional(TEXT),
)


@st.composite
def command_results(draw: st.DrawFn) -> dict[str, Any]:
    return obj(
        owner=draw(st.sampled_from(["worker", "daemon"])),
        command_id=draw(IDS),
        command_kind=draw(KINDS | st.just("checkpoint")),
        outcome=draw(st.sampled_from(["succeeded", "cancelled", "rejected", "failed"])),
        reason=draw(optional(REASONS)),
        message=draw(optional(TEXT)),
        related_command_ids=draw(st.lists(IDS, min_size=1, max_size=3) | st.just(SKIP)),
    )


api_turn_outcomes = _fixed(
    command_id=IDS,
    accepted_ordinal=optional(U64),
    turn_start_position=optional(U64),
    completed_ordinal=U64,
    completed_at_ms=I64,
    outcome=turn_results,
    diagnostic=optional(turn_diagnostics),
    usage=optional(token_usages),
)
_turn_outcome_kinds = st.one_of(
    _fixed(kind=st.just("completed"), stop_reason=TEXT),
    _fixed(kind=st.just("rejected"), message=TEXT, reason=optional(REASONS)),
    _fixed(kind=st.just("interrupted"), message=TEXT, reason=optional(REASONS)),
)
materialized_turn_outcomes = _fixed(
    diagnostic=optional(turn_diagnostics),
    usage=optional(token_usages),
    command_id=IDS,
    accepted_ordinal=optional(U64),
    turn_start_position=optional(U64),
    completed_ordinal=U64,
    completed_at_ms=I64,
    outcome=_turn_outcome_kinds,
)
materialized_turns = _fixed(
    command_id=IDS,
    accepted_ordinal=optional(U64),
    turn_start_position=U64,
    started_at_ms=I64,
    steered_into=optional(IDS),
)
activity_details = _fixed(
    kind=st.sampled_from(["turn", "step", "background", "idle", "lifecycle"]),
    turn_started_at_ms=optional(I64),
    step_started_at_ms=optional(I64),
    background_started_at_ms=optional(I64),
    idle_since_ms=optional(I64),
    last_activity_at_ms=optional(I64),
    label=optional(TEXT),
)
api_activity_states = _fixed(
    state=st.sampled_from(["running", "disconnected", "idle"]) | TEXT,
    details=nullable(activity_details),
    is_idle=st.booleans(),
    waiting_for_input=st.booleans(),
    capacity_retry=st.booleans(),
)

API_EVENT_DATA: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "runtime_resolved": _fixed(receipt=runtime_receipts),
    "turn_started": _fixed(turn=materialized_turns),
    "turn_ended": _fixed(turn=api_turn_outcomes),
    "command_ended": command_results(),
    "session_fault": _fixed(reason=REASONS, message=TEXT, command_id=nullable(IDS)),
    "legacy_notice": _fixed(original_type=TEXT, message=TEXT, command_id=nullable(IDS)),
    "input_required": _fixed(request=optional(elicitation_requests), turn_id=nullable(U64)),
    "input_resolved": _fixed(elicitation_id=IDS, turn_id=nullable(U64), action=TEXT),
    "activity_changed": _fixed(activity=api_activity_states),
}
"""Every ApiEventData variant: wire type → data."""


def api_event_data(tag: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
    """An API event body ``{"type", "data"}``: the named kind, or any."""
    if tag is not None:
        return API_EVENT_DATA[tag].map(lambda data: variant(tag, data))
    return st.sampled_from(list(API_EVENT_DATA)).flatmap(api_event_data)


@st.composite
def api_events(draw: st.DrawFn, tag: str | None = None) -> dict[str, Any]:
    """A flattened ApiEvent: ``seq``, ``session_id``, ``recorded_at_ms``, ``type``, ``data``."""
    body = draw(api_event_data(tag))
    return {"seq": draw(U64), "session_id": draw(IDS), "recorded_at_ms": draw(I64), **body}


api_event_pages = _fixed(
    events=st.lists(api_events(), max_size=3), next_after_seq=U64, latest_seq=U64
)
