"""How a mutation replaces a session's whole-value fields: the one statement of the fold.

A :class:`~relaystore.domain.projection.session.SessionProjection` folds each mutation
into its in-memory session; a :class:`~relaystore.domain.projection.page.PageDelta`
folds the same mutations into the page it will write. Both call :func:`fold_fields`, so
the two can never disagree on a field; each then handles only what is its own (the
transcript and frontier of a session; the coalesced transcript changes, finished turns,
config results and API events of a page).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..materialized import MaterializedSession, MaterializedSessionMutation, _Unset

if TYPE_CHECKING:
    from .page import PageDelta

__all__ = ["fold_fields"]


def fold_fields(
    target: MaterializedSession | PageDelta, mutation: MaterializedSessionMutation
) -> None:
    """Fold ``mutation``'s whole-value fields into ``target``.

    Activity only moves forward; ``None`` (or unset) leaves a field as it is; a cleared
    turn outcome is cleared before a new one is written.
    """
    activity = mutation.last_activity_at_ms
    if activity is not None:
        current = target.last_activity_at_ms
        target.last_activity_at_ms = activity if current is None else max(current, activity)
    if mutation.execution is not None:
        target.execution = mutation.execution
    if not isinstance(mutation.session_title, _Unset):
        target.session_title = mutation.session_title
    if mutation.configuration is not None:
        target.configuration = mutation.configuration
    if mutation.queued_prompts is not None:
        target.queued_prompts = mutation.queued_prompts
    if mutation.pending_elicitations is not None:
        target.pending_elicitations = mutation.pending_elicitations
    if not isinstance(mutation.active_turn, _Unset):
        target.active_turn = mutation.active_turn
    if mutation.clear_turn_outcome:
        target.last_turn_outcome = None
    if mutation.last_turn_outcome is not None:
        target.last_turn_outcome = mutation.last_turn_outcome
