"""The integrity rules of a projection change: the only place they are stated.

:class:`~relaystore.domain.projection.session.SessionProjection` checks every mutation against the
session it holds, :class:`~relaystore.domain.projection.page.PageDelta` checks each mutation it
folds, and the stored projection (:mod:`relaystore.storage.projection`) checks a page's items
against the rows it stores, all through the functions here, so the three agree on
every rule and word every refusal the same way:

* a session's frontier is consistent (ordinal 0 with the genesis digest, else a digest)
  and its id follows the id rule;
* a session title is never blank;
* a transcript item is valid at the event that writes it (:func:`check_item`): a
  non-blank id, a position within the frontier, a latest content ordinal exactly on
  agent messages and within its position and the frontier, a change time not before its
  creation; ids are unique, and a removal names an id;
* a transcript item keeps its position and creation time; its change time and its
  latest content ordinal never move back;
* the prompt queue holds each command once, under a non-blank id, and a queued
  configuration change has a non-blank key and value.

A mutation is checked by :func:`check_mutation` and :func:`check_transcript_changes`, a
whole session (as loaded from the store) by :func:`check_session`. Every refusal is a
:class:`ProjectionError` naming the session and the event's ordinal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

from ..digests import is_relay_digest
from ..errors import InvalidInput, ProjectionError
from ..hashing import RELAY_EVENT_GENESIS_DIGEST
from ..ids import validate_id
from ..materialized import (
    AgentBody,
    MaterializedQueuedPrompt,
    MaterializedSession,
    MaterializedSessionMutation,
    SetConfigKind,
    TranscriptItem,
    TranscriptRemove,
)

__all__ = [
    "ComparedItem",
    "StoredItem",
    "check_item",
    "check_item_change",
    "check_mutation",
    "check_queue",
    "check_session",
    "check_transcript_changes",
]


class ComparedItem(Protocol):
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


def _name(item: TranscriptItem) -> str:
    """How a refusal names ``item`` (built only for a refusal: every item is checked)."""
    return f"transcript item {item.stable_id!r}"


def check_item_change(
    before: ComparedItem, item: TranscriptItem, *, session_id: str, ordinal: int
) -> None:
    """Check that ``item`` may replace ``before`` (the item its id holds now)."""
    if before.position != item.position or before.created_at_ms != item.created_at_ms:
        raise _refusal(
            f"{_name(item)} changed immutable identity fields: position {before.position} -> "
            f"{item.position}, created_at_ms {before.created_at_ms} -> {item.created_at_ms}",
            session_id,
            ordinal,
        )
    if item.last_changed_at_ms < before.last_changed_at_ms:
        raise _refusal(
            f"{_name(item)} moved its changed timestamp backwards ({before.last_changed_at_ms} -> "
            f"{item.last_changed_at_ms})",
            session_id,
            ordinal,
        )
    old, new = before.latest_content_event_ordinal, item.latest_content_event_ordinal
    if old is not None and (new is None or new < old):
        raise _refusal(
            f"{_name(item)} moved its latest content ordinal backwards ({old} -> {new})",
            session_id,
            ordinal,
        )


def check_item(item: TranscriptItem, frontier: int, *, session_id: str, ordinal: int) -> None:
    """Check that ``item`` is valid in a session whose frontier is ``frontier``."""
    if not item.stable_id.strip():
        raise _refusal("transcript item has an empty stable id", session_id, ordinal)
    if not 1 <= item.position <= frontier:
        raise _refusal(
            f"{_name(item)} has position {item.position} outside 1..={frontier}",
            session_id,
            ordinal,
        )
    latest = item.latest_content_event_ordinal
    if isinstance(item.body, AgentBody):
        if latest is None or not item.position <= latest <= frontier:
            raise _refusal(
                f"{_name(item)} is an agent message whose latest content ordinal {latest} "
                f"is outside {item.position}..={frontier}",
                session_id,
                ordinal,
            )
    elif latest is not None:
        raise _refusal(
            f"{_name(item)} is not an agent message but has a latest content ordinal",
            session_id,
            ordinal,
        )
    if item.last_changed_at_ms < item.created_at_ms:
        raise _refusal(
            f"{_name(item)} changed at {item.last_changed_at_ms}, before it was created at "
            f"{item.created_at_ms}",
            session_id,
            ordinal,
        )


def check_queue(queue: list[MaterializedQueuedPrompt], *, session_id: str, ordinal: int) -> None:
    """Check that the prompt queue holds each command once, under a non-blank id, and
    that a queued configuration change has a non-blank key and value."""
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
        kind = entry.kind
        if isinstance(kind, SetConfigKind) and not (
            kind.set_config.key.strip() and kind.set_config.value.strip()
        ):
            raise _refusal(
                f"queued set_config {entry.command_id!r} has a blank key or value",
                session_id,
                ordinal,
            )


def check_session(session: MaterializedSession) -> None:
    """Check every invariant of a whole session (one loaded from the store)."""
    session_id, ordinal = session.session_id, session.applied_event_ordinal
    try:
        validate_id("session", session_id)
    except InvalidInput as exc:
        raise _refusal(exc.detail, session_id, ordinal) from exc
    digest = session.applied_event_digest
    if not is_relay_digest(digest) or (ordinal == 0) != (digest == RELAY_EVENT_GENESIS_DIGEST):
        raise _refusal(f"inconsistent frontier {ordinal} / {digest}", session_id, ordinal)
    if session.session_title is not None and not session.session_title.strip():
        raise _refusal("materialized session title cannot be empty", session_id, ordinal)
    seen: set[str] = set()
    for item in session.transcript:
        check_item(item, ordinal, session_id=session_id, ordinal=ordinal)
        if item.stable_id in seen:
            raise _refusal(f"duplicate transcript item {item.stable_id!r}", session_id, ordinal)
        seen.add(item.stable_id)
    check_queue(session.queued_prompts, session_id=session_id, ordinal=ordinal)


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
        check_item(change.item, ordinal, session_id=session_id, ordinal=ordinal)
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
