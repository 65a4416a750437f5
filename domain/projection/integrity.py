"""The integrity rules of a projection change: the only place they are stated.

:class:`~domain.projection.session.SessionProjection` checks every mutation against the
session it holds, :class:`~domain.projection.page.PageDelta` checks each mutation it
folds, and the stored projection (:mod:`storage.projection`) checks a page's items
against the rows it stores, all through the functions here, so the three agree on
every rule and word every refusal the same way:

* a session title is never blank;
* a transcript item is valid at the event that writes it
  (:meth:`~domain.materialized.TranscriptItem.validate`), and a removal names an id;
* a transcript item keeps its position and creation time; its change time and its
  latest content ordinal never move back;
* the prompt queue holds each command once, under a non-blank id.

Every refusal is a :class:`ProjectionError` naming the session and the event's ordinal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from relaystore.domain.errors import InvalidInput, ProjectionError
from relaystore.domain.materialized import (
    MaterializedQueuedPrompt,
    MaterializedSessionMutation,
    TranscriptItem,
    TranscriptRemove,
)

__all__ = [
    "ItemFacts",
    "StoredItem",
    "check_item_change",
    "check_mutation",
    "check_queue",
    "check_transcript_changes",
]


class ItemFacts(Protocol):
    """What the item-change rules compare: a :class:`TranscriptItem` or a stored row."""

    @property
    def position(self) -> int: ...
    @property
    def latest_content_event_ordinal(self) -> int | None: ...
    @property
    def created_at_ms(self) -> int: ...
    @property
    def last_changed_at_ms(self) -> int: ...


class StoredItem(NamedTuple):
    """The facts of a stored transcript row that the item-change rules compare."""

    position: int
    latest_content_event_ordinal: int | None
    created_at_ms: int
    last_changed_at_ms: int


def _refusal(detail: str, session_id: str, ordinal: int) -> ProjectionError:
    return ProjectionError(detail, session_id=session_id, ordinal=ordinal)


def check_item_change(
    before: ItemFacts, item: TranscriptItem, *, session_id: str, ordinal: int
) -> None:
    """Check that ``item`` may replace ``before`` (the item its id holds now)."""
    name = f"transcript item {item.stable_id!r}"
    if before.position != item.position or before.created_at_ms != item.created_at_ms:
        raise _refusal(
            f"{name} changed immutable identity fields: position {before.position} -> "
            f"{item.position}, created_at_ms {before.created_at_ms} -> {item.created_at_ms}",
            session_id,
            ordinal,
        )
    if item.last_changed_at_ms < before.last_changed_at_ms:
        raise _refusal(
            f"{name} moved its changed timestamp backwards ({before.last_changed_at_ms} -> "
            f"{item.last_changed_at_ms})",
            session_id,
            ordinal,
        )
    old, new = before.latest_content_event_ordinal, item.latest_content_event_ordinal
    if old is not None and (new is None or new < old):
        raise _refusal(
            f"{name} moved its latest content ordinal backwards ({old} -> {new})",
            session_id,
            ordinal,
        )


def check_queue(queue: list[MaterializedQueuedPrompt], *, session_id: str, ordinal: int) -> None:
    """Check that the prompt queue holds each command once, under a non-blank id."""
    seen: set[str] = set()
    for entry in queue:
        if not entry.command_id.strip():
            raise _refusal("materialized prompt queue has an empty command id", session_id, ordinal)
        if entry.command_id in seen:
            raise _refusal(
                f"materialized prompt queue contains duplicate command {entry.command_id!r}",
                session_id,
                ordinal,
            )
        seen.add(entry.command_id)


def check_mutation(mutation: MaterializedSessionMutation, *, session_id: str, ordinal: int) -> None:
    """Check the rules a mutation must meet on its own (title, items, removals, queue)."""
    title = mutation.session_title
    if isinstance(title, str) and not title.strip():
        raise _refusal("materialized session title cannot be empty", session_id, ordinal)
    for change in mutation.transcript:
        if isinstance(change, TranscriptRemove):
            if not change.stable_id.strip():
                raise _refusal(
                    "cannot remove a transcript item with an empty stable id", session_id, ordinal
                )
            continue
        try:
            change.item.validate(ordinal)
        except InvalidInput as exc:
            raise _refusal(exc.detail, session_id, ordinal) from exc
    if mutation.queued_prompts is not None:
        check_queue(mutation.queued_prompts, session_id=session_id, ordinal=ordinal)


def check_transcript_changes(
    mutation: MaterializedSessionMutation,
    existing: Callable[[str], TranscriptItem | None],
    *,
    session_id: str,
    ordinal: int,
) -> None:
    """Check the mutation's transcript changes against the items they replace.

    The changes apply in order, so each upsert is checked against the item its id holds
    after the changes before it (None once removed), else ``existing(stable_id)``.
    """
    touched: dict[str, TranscriptItem | None] = {}
    for change in mutation.transcript:
        if isinstance(change, TranscriptRemove):
            touched[change.stable_id] = None
            continue
        item = change.item
        stable_id = item.stable_id
        before = touched[stable_id] if stable_id in touched else existing(stable_id)
        if before is not None:
            check_item_change(before, item, session_id=session_id, ordinal=ordinal)
        touched[stable_id] = item
