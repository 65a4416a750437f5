"""A stored session as the origin's API shows it: lifecycle, chat phase, title, errors.

Owns the rules that turn a stored session record and its projection into an
:class:`~relaystore.domain.read_replies.ApiSession`: the lifecycle category of each
state (:func:`lifecycle_of`), the chat phase of an execution state
(:func:`chat_phase_of`), the state's spelling (:func:`state_label`), the outcome shown
on the detail (:func:`api_turn_outcome`), the starting selection
(:func:`start_selection`), which recorded error is published (:func:`published_error`),
and the whole view (:func:`api_session`).

The origin's rules, where its code was read: ``SessionRecord::start_selection`` and
``public_error``/``is_public_lifecycle_error`` (``mj-core/src/state.rs`` @d12c1fd), and
the viewer row's ``launch_error``, ``has_error`` and ``subagents``
(``mj-controller/src/server/viewer_types.rs``, the stored version @02290ee, which the
``ApiSession`` of ``types.rs`` @04067804 and @e1ec72d copies).

Pure: storage decodes the rows and calls :func:`api_session`; nothing here reads a store.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ..api_events import ApiActivityState
from ..elicitation.forms import ElicitationRequest
from ..materialized import (
    ExecutionClosed,
    ExecutionClosing,
    ExecutionRunning,
    MaterializedExecutionState,
)
from ..outcomes import MaterializedTurnOutcome
from ..projection.goal import GOAL_STATE_KEY
from ..projection.text import normalize_session_title
from ..read_replies import ApiSession, ChatPhase, ConfigOption, Lifecycle, SessionFacts
from ..wire import JSON
from .records import NativeSubagents, SessionState, SubagentPolicy, subagent_policy

__all__ = [
    "LIFECYCLE_FAILURE_PREFIXES",
    "api_session",
    "api_turn_outcome",
    "chat_phase_of",
    "is_public_lifecycle_error",
    "lifecycle_of",
    "published_error",
    "start_selection",
    "state_label",
]

LIFECYCLE_FAILURE_PREFIXES: tuple[str, ...] = (
    "the suspension did not finish",
    "the move did not finish",
    "the destruction did not finish",
    "the close did not finish",
)
"""How a sentence the origin's controller composed for the person about a failed
lifecycle operation begins (wire constants; the last is the spelling before the verb was
renamed). Such a sentence is safe to publish whatever state the session is in."""

_RAW_ERROR_STATES = frozenset({SessionState.ERROR, SessionState.STOPPED})
"""The states whose raw recorded error is published (a failed launch, a failed resume
rolled back to stopped); a live session's raw error chain names paths and hosts."""

_LIFECYCLE: Mapping[SessionState, Lifecycle] = {
    SessionState.PROVISIONING: "starting",
    SessionState.RUNNING: "live",
    SessionState.DISCONNECTED: "live",
    SessionState.CHECKPOINTING: "suspending",
    SessionState.CLOSING: "suspending",
    SessionState.DESTROYING: "suspending",
    SessionState.STOPPED: "suspended",
    SessionState.PARKED: "suspended",
    SessionState.LOST: "suspended",
    SessionState.ERROR: "failed",
    SessionState.DESTROYED_WITH_DATA_LOSS: "failed",
}


def lifecycle_of(state: SessionState) -> Lifecycle:
    """The origin's lifecycle category of a session state."""
    return _LIFECYCLE[state]


def chat_phase_of(execution: MaterializedExecutionState | None) -> ChatPhase:
    """The chat phase of a projection's execution state (no projection: idle)."""
    if isinstance(execution, ExecutionRunning):
        return "running"
    if isinstance(execution, ExecutionClosing):
        return "closing"
    if isinstance(execution, ExecutionClosed):
        return "closed"
    return "idle"


def state_label(state: SessionState) -> str:
    """The state as the origin's session list spells it (``Running``, ``DestroyedWithDataLoss``)."""
    return "".join(part.capitalize() for part in state.value.split("-"))


def is_public_lifecycle_error(error: str) -> bool:
    """Whether ``error`` is a lifecycle sentence composed for the person (see
    :data:`LIFECYCLE_FAILURE_PREFIXES`)."""
    return error.startswith(LIFECYCLE_FAILURE_PREFIXES)


def published_error(state: SessionState, last_error: str | None) -> str | None:
    """The recorded error the API publishes: all of it for a session stopped or in the
    error state, else only a lifecycle sentence (:func:`is_public_lifecycle_error`)."""
    if last_error is None:
        return None
    if state in _RAW_ERROR_STATES or is_public_lifecycle_error(last_error):
        return last_error
    return None


def start_selection(
    checkout: JSON | None, launch_base: str | None, launch_branch: str | None
) -> tuple[str | None, str | None, str | None]:
    """``(at, branch, base)`` from the record: ``at`` is the exact checkout's commit,
    ``branch`` the checkout's branch or else the launch branch, ``base`` the launch base
    or else ``at``. A checkout that is not an object, or whose commit or branch is not
    text, names none of them (relaystore carries it as opaque JSON)."""
    at: str | None = None
    branch: str | None = None
    if isinstance(checkout, dict):
        commit, named = checkout.get("commit"), checkout.get("branch")
        at = commit if isinstance(commit, str) else None
        branch = named if isinstance(named, str) else None
    return at, branch if branch is not None else launch_branch, launch_base or at


def api_turn_outcome(turn: MaterializedTurnOutcome) -> MaterializedTurnOutcome:
    """The last outcome as the session detail shows it: usage and diagnostic left out
    (usage has its own page; the diagnostic travels as ``last_turn_diagnostic``)."""
    return msgspec.structs.replace(turn, usage=None, diagnostic=None)


def api_session(
    record: SessionFacts,
    *,
    workspace_id: str,
    execution: MaterializedExecutionState | None,
    session_title: str | None,
    configuration: Mapping[str, JSON],
    pending_elicitations: list[ElicitationRequest],
    queued_prompts: int,
    activity: ApiActivityState | None,
    last_turn_outcome: MaterializedTurnOutcome | None = None,
) -> ApiSession:
    """The API's view of one stored session and its projection.

    ``execution`` is ``None`` for a session never projected (idle). The title is the
    override, else the projection's title, else the record's. ``is_idle``: the chat is
    idle with nothing queued. ``has_error``: the record holds an error (the origin also
    counts a configuration problem, which relaystore has no configuration to find);
    ``error`` is :func:`published_error`'s. ``subagents`` is the record's policy
    (``native`` when it names none); ``at``, ``branch`` and ``base`` are
    :func:`start_selection`'s.
    ``config_options`` lists the configuration's settings other than relaystore's own
    ``mj_*`` keys, their stored values as ``current`` (the store keeps no choices).
    ``last_turn_outcome`` (detail only) is shown without usage and diagnostic; the
    diagnostic becomes ``last_turn_diagnostic``.
    """
    title = (
        (record.session_title_override and normalize_session_title(record.session_title_override))
        or (session_title and normalize_session_title(session_title))
        or record.title
    )
    phase = chat_phase_of(execution)
    at, branch, base = start_selection(record.checkout, record.launch_base, record.launch_branch)
    policy: SubagentPolicy | None = subagent_policy(record.subagents)
    return ApiSession(
        subagents=NativeSubagents() if policy is None else policy,
        at=at,
        branch=branch,
        base=base,
        id=record.id,
        workspace_id=workspace_id,
        title=title,
        harness_kind=record.harness_kind,
        profile_id=record.last_profile,
        target_id=record.target_template_id,
        bundle_id=record.bundle_id,
        state=state_label(record.state),
        lifecycle=lifecycle_of(record.state),
        chat_phase=phase,
        is_idle=phase == "idle" and queued_prompts == 0,
        activity_state=None if activity is None else msgspec.to_builtins(activity),
        has_error=record.last_error is not None,
        error=published_error(record.state, record.last_error),
        created_at=record.created_at,
        updated_at=record.updated_at,
        last_turn_outcome=None
        if last_turn_outcome is None
        else api_turn_outcome(last_turn_outcome),
        last_turn_diagnostic=None if last_turn_outcome is None else last_turn_outcome.diagnostic,
        config_options=[
            ConfigOption(key=key, label=key, current=value)
            for key, value in configuration.items()
            if key != GOAL_STATE_KEY and not key.startswith("mj_")
        ],
        pending_elicitations=list(pending_elicitations),
    )
