"""A stored session as the origin's API shows it: lifecycle, chat phase, title, errors.

Owns the rules that turn a stored session record and its projection into an
:class:`~relaystore.domain.read_replies.ApiSession`: the lifecycle category of each
state (:func:`lifecycle_of`), the chat phase of an execution state
(:func:`chat_phase_of`), the state's spelling (:func:`state_label`), the outcome shown
on the detail (:func:`api_turn_outcome`), and the whole view (:func:`api_session`).

Pure: storage decodes the rows and calls :func:`api_session`; nothing here reads a store.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .api_events import ApiActivityState
from .elicitation import ElicitationRequest
from .materialized import (
    ExecutionClosed,
    ExecutionClosing,
    ExecutionRunning,
    MaterializedExecutionState,
)
from .outcomes import MaterializedTurnOutcome
from .projection.goal import GOAL_STATE_KEY
from .projection.text import normalize_session_title
from .read_replies import ApiSession, ChatPhase, ConfigOption, Lifecycle, SessionFacts
from .sessions import SessionState
from .wire import JSON

__all__ = ["api_session", "api_turn_outcome", "chat_phase_of", "lifecycle_of", "state_label"]

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
    idle with nothing queued. ``has_error``: the record holds an error or the state is
    ``error``; ``error`` is published only for a session in the error state (raw error
    text of a running session stays private, as the origin keeps it).
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
    failed = record.state is SessionState.ERROR
    return ApiSession(
        checkout=record.checkout,
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
        has_error=failed or record.last_error is not None,
        error=record.last_error if failed else None,
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
