"""The projected goal state, kept as raw JSON under ``configuration["mj_goal_state"]``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..wire import JSON
from .context import ProjectionContext

__all__ = [
    "GOAL_STATE_KEY",
    "Goal",
    "apply_goal_meta",
    "goal_of",
    "goal_running",
]
GOAL_STATE_KEY = "mj_goal_state"
"""Configuration key holding the projected goal state (wire data)."""


@dataclass(slots=True)
class Goal:
    """The projected goal state (``configuration["mj_goal_state"]``); values stay raw JSON."""

    capability: JSON = None
    known: bool = False
    snapshot: JSON = None
    execution: JSON = None
    answered_resume: str | None = None
    pending_resume: str | None = None
    decision: JSON = None

    def running(self) -> bool:
        return isinstance(self.execution, dict) and self.execution.get("status") == "running"

    def to_json(self) -> dict[str, JSON]:
        value: dict[str, JSON] = {}
        if self.capability is not None:
            value["capability"] = self.capability
        value.update(
            known=self.known,
            snapshot=self.snapshot,
            execution=self.execution,
            answered_resume=self.answered_resume,
            pending_resume=self.pending_resume,
            decision=self.decision,
        )
        return value


def goal_of(ctx: ProjectionContext, configuration: Mapping[str, JSON]) -> Goal:
    """The goal state ``configuration`` holds (an empty one when it holds none)."""
    value = configuration.get(GOAL_STATE_KEY)
    if value is None:
        return Goal()
    if not isinstance(value, dict):
        raise ctx.error(f"configuration[{GOAL_STATE_KEY!r}] is not a goal state object")
    goal = Goal(
        capability=value.get("capability"),
        known=value.get("known", False) is True,
        snapshot=_goal_snapshot(ctx, value.get("snapshot")),
        execution=value.get("execution"),
        decision=value.get("decision"),
    )
    for key in ("answered_resume", "pending_resume"):
        text = value.get(key)
        if text is not None and not isinstance(text, str):
            raise ctx.error(f"goal state field {key!r} is not a string")
        setattr(goal, key, text)
    return goal


def _goal_snapshot(ctx: ProjectionContext, value: JSON) -> JSON:
    if value is None:
        return None
    if not (
        isinstance(value, dict)
        and isinstance(value.get("objective"), str)
        and isinstance(value.get("status"), str)
    ):
        raise ctx.error("goal snapshot needs string 'objective' and 'status' fields")
    return value


def _same_goal(left: JSON, right: JSON) -> bool:
    return (
        isinstance(left, dict)
        and isinstance(right, dict)
        and left.get("objective") == right.get("objective")
        and left.get("createdAt") == right.get("createdAt")
    )


def _decision_outdated(snapshot: JSON, decision: dict[str, JSON], was_active: bool) -> bool:
    """A decision lapses when its goal is gone or ended, or a resume is paused again later."""
    status = snapshot.get("status") if isinstance(snapshot, dict) else None
    if not _same_goal(snapshot, decision.get("goal")) or status not in ("active", "paused"):
        return True
    if decision.get("resume") is not True or status != "paused":
        return False
    # _same_goal held, so both the snapshot and the decision's goal are objects.
    new_at, old_at = snapshot.get("updatedAt"), decision["goal"].get("updatedAt")
    return was_active or (type(new_at) is int and type(old_at) is int and new_at > old_at)


_MISSING = object()


def _goal_meta(meta: Mapping[str, JSON]) -> Any:
    if "goal" in meta:
        return meta["goal"]
    jetbrains = meta.get("jetbrains")
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    if isinstance(air, dict) and "goal" in air:
        return air["goal"]
    return _MISSING


def apply_goal_meta(ctx: ProjectionContext, goal: Goal, meta: Mapping[str, JSON]) -> bool:
    """Fold a session_info_update's ``_meta`` into ``goal``; True when anything changed."""
    changed_any = False
    if "mjGoalCapability" in meta:
        goal.capability = meta["mjGoalCapability"]
        changed_any = True
    snapshot = _goal_meta(meta)
    if snapshot is not _MISSING:
        was_active = isinstance(goal.snapshot, dict) and goal.snapshot.get("status") == "active"
        goal.snapshot = _goal_snapshot(ctx, snapshot)
        if isinstance(goal.decision, dict) and _decision_outdated(
            goal.snapshot, goal.decision, was_active
        ):
            goal.decision = None
        goal.known = True
        changed_any = True
    if "execution" in meta:
        execution = meta["execution"]
        if not (
            isinstance(execution, dict)
            and execution.get("version") == 1
            and execution.get("status") in ("running", "idle")
        ):
            raise ctx.error(f"unsupported ACP execution state {execution!r}")
        old = goal.execution if isinstance(goal.execution, dict) else {}
        old_revision, new_revision = old.get("revision"), execution.get("revision")
        if (
            isinstance(old_revision, int)
            and isinstance(new_revision, int)
            and new_revision < old_revision
        ):
            return changed_any
        old_turn, new_turn = old.get("turnId"), execution.get("turnId")
        # An old completion that arrives after a newer native turn started is ignored.
        if (
            execution["status"] == "running"
            or not goal.running()
            or old_turn is None
            or new_turn is None
            or old_turn == new_turn
        ):
            goal.execution = execution
        changed_any = True
    pending = meta.get("mjGoalResumePending")
    if isinstance(pending, str):
        goal.pending_resume = pending
        changed_any = True
    answered = meta.get("mjGoalResumeAnswered")
    if isinstance(answered, str):
        goal.answered_resume = answered
        goal.pending_resume = None
        changed_any = True
    if "mjGoalDecision" in meta:
        goal.decision = meta["mjGoalDecision"]
        changed_any = True
    return changed_any


def goal_running(ctx: ProjectionContext) -> bool:
    """True while the session's goal execution is running (before the event)."""
    return goal_of(ctx, ctx.current.configuration).running()
