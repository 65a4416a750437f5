"""Sub-agent sessions: the relation of a child session to the parent that spawned it.

Mirrors the origin's ``SubagentRecord`` and ``SubagentFinishIdentity``
(``mj-core/src/subagent.rs``; the record with ``reported_finish`` as written by
``save_subagent_session`` in ``mj-controller/src/server/api/tests.rs`` @04067804), field
for field and in declaration order, so ``encode`` writes the bytes serde_json writes:
``noticed_turn`` travels under its historical name ``delivered_turn``; ``model``,
``effort``, ``delivered_turn`` and ``reported_finish`` are written only when set,
``handback_tool`` only when true; unknown keys are refused (``deny_unknown_fields``).

Also the read side's shapes of ``GET /api/v1/sessions/{id}/subagents``
(``SubagentView``, ``SubagentListResponse`` in ``types.rs`` @04067804).

The rule a relation obeys (:meth:`SubagentRecord.validate`): valid session ids, a child
that is not its own parent, a non-blank task, profile, request key and creation time.
Pure: no I/O.
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from .errors import InvalidInput
from .ids import validate_id
from .read_replies import ApiSession
from .sessions.checks import U64, quoted
from .wire import Wire, emitted

__all__ = [
    "SubagentFinishIdentity",
    "SubagentList",
    "SubagentRecord",
    "SubagentView",
    "TerminalFinish",
    "TurnFinish",
]


class TurnFinish(Wire, kw_only=True, tag_field="kind", tag="turn", forbid_unknown_fields=True):
    """A child's finish identified by its turn span (a child resumed with ``send_input``
    finishes once per turn)."""

    start_position: U64
    completed_ordinal: U64
    state: str


class TerminalFinish(
    Wire, kw_only=True, tag_field="kind", tag="terminal", forbid_unknown_fields=True
):
    """A terminal failure without a turn span: its state, detail and the last completed
    turn's ordinal.

    Old records stored an ``updated_at`` string where ``last_completed_ordinal`` is; the
    origin reads it as none, and so does this type (``legacy_updated_at``, never written).
    """

    state: str
    detail: str | None = None
    last_completed_ordinal: U64 | None = None
    legacy_updated_at: str | None = msgspec.field(default=None, name="updated_at")

    def __post_init__(self) -> None:
        self.legacy_updated_at = None


SubagentFinishIdentity: TypeAlias = TurnFinish | TerminalFinish
"""The last child finish whose report a parent's ``wait`` durably returned."""


class SubagentRecord(Wire, kw_only=True, forbid_unknown_fields=True):
    """Durable ownership and launch intent of one child session (the origin's
    ``SubagentRecord``), in the origin's wire order."""

    child_session_id: str
    parent_session_id: str
    task_name: str
    profile_id: str
    model: str | None = None
    effort: str | None = None
    working_directory: str = emitted("")
    """Where the child launches on the parent's target: absolute, or relative to the
    parent's working directory; empty is the parent's own (always written)."""
    initial_prompt: str
    request_key: str
    created_at: str
    noticed_turn: U64 | None = msgspec.field(default=None, name="delivered_turn")
    """The child turn whose completion notice the parent's transcript already recorded."""
    reported_finish: SubagentFinishIdentity | None = None
    handback_tool: bool = False

    def validate(self) -> None:
        """Raise :class:`InvalidInput` (naming the child session and the field) unless the
        relation is one the origin would keep."""
        validate_id("session", self.child_session_id)
        try:
            validate_id("session", self.parent_session_id)
            if self.parent_session_id == self.child_session_id:
                raise InvalidInput(
                    "a session cannot be its own sub-agent (parent_session_id is the child)"
                )
            for name, value in (
                ("task_name", self.task_name),
                ("profile_id", self.profile_id),
                ("request_key", self.request_key),
                ("created_at", self.created_at),
            ):
                if not value.strip():
                    raise InvalidInput(f"sub-agent {name} {quoted(value)} is blank")
        except InvalidInput as error:
            raise error.located(session_id=self.child_session_id) from None


class SubagentView(Wire, kw_only=True):
    """One child of a parent as ``GET .../subagents`` lists it."""

    parent_session_id: str
    task_name: str
    session: ApiSession


class SubagentList(Wire, kw_only=True):
    """``GET /api/v1/sessions/{id}/subagents``: the parent's children, oldest first."""

    subagents: list[SubagentView] = emitted([])
