"""Stable-id prefixes and fixed texts of the projection: wire data.

They are shared with the origin's journals and stores, so they keep the origin's
spelling; changing one changes what a stored transcript means.
"""

from __future__ import annotations

__all__ = [
    "CONTEXT_BOUNDARY_PREFIX",
    "CONTEXT_BOUNDARY_TEXT",
    "CONTINUATION_PROMPT",
    "FALLBACK_TERMINAL_META_KEY",
    "FALLBACK_TERMINAL_TOOL_ID_PREFIX",
    "HANDBACK_REMINDER_TEXT",
    "HARNESS_TURN_ITEM_PREFIX",
    "HARNESS_TURN_OUTCOME_PREFIX",
    "HARNESS_TURN_TEXT",
    "PLAN_REVIEW_ID_PREFIX",
    "PLAN_REVIEW_MESSAGE_PREFIX",
    "SESSION_RESTART_ITEM_PREFIX",
    "SESSION_RESTART_TEXT",
    "TURN_INTERRUPTED_ITEM_PREFIX",
    "TURN_INTERRUPTED_TEXT",
    "WORK_INTERRUPTED_ITEM_PREFIX",
]
SESSION_RESTART_ITEM_PREFIX = "system:session-restarted:"
SESSION_RESTART_TEXT = "[session restarted]"
WORK_INTERRUPTED_ITEM_PREFIX = "system:work-interrupted:"
TURN_INTERRUPTED_ITEM_PREFIX = "system:turn-interrupted:"
TURN_INTERRUPTED_TEXT = "Interrupted"
HARNESS_TURN_ITEM_PREFIX = "harness-turn:"
HARNESS_TURN_TEXT = "Agent continued on its own"
HARNESS_TURN_OUTCOME_PREFIX = "harness-turn-"
"""The ``command_id`` of a harness-started turn's outcome: ``harness-turn-{position}`` of
its ``harness-turn:`` line (a dash, where the line's id has a colon)."""
CONTEXT_BOUNDARY_PREFIX = "system:context-cleared:"
"""Stable-id prefix of the line a context clear leaves (``{prefix}{command_id}``).

The origin's value was not found in the source that was read; relaystore chooses this
spelling, in the family of the other ``system:`` markers.
"""
CONTEXT_BOUNDARY_TEXT = "Context cleared — a new conversation starts here."
PLAN_REVIEW_ID_PREFIX = "plan-review-"
PLAN_REVIEW_MESSAGE_PREFIX = "Review the agent's plan:\n\n"
FALLBACK_TERMINAL_META_KEY = "hel.dev/fallback-terminal"
FALLBACK_TERMINAL_TOOL_ID_PREFIX = "hel-terminal:"
CONTINUATION_PROMPT = (
    "Continue the unfinished work already requested by the user, following their latest "
    "instructions. This message supplies no new approval or missing information. If a "
    "genuine decision, required approval, or external action remains necessary, explain "
    "it and stop."
)
"""The text the worker sends for ``continue_authorized_work`` and ``resume_after_quota``."""

HANDBACK_REMINDER_TEXT = (
    "[handback reminder] Your turn ended without delivering a report. If your assigned task "
    "is finished, call the mj-agents handback tool now with your full report, then stop. If it "
    "is not finished, continue working on it, and hand back when it is done."
)
"""The prompt a ``handback_reminder`` command gives the agent (and the transcript)."""
