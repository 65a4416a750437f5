"""The projection context: what projecting one event reads and writes, and item helpers.

Every function here reads the session *before* the event (through the context's
:class:`~relaystore.domain.projection.index.TranscriptIndex`) and writes only into the context's
mutation. Items are never changed in place; a changed item is a new
:class:`TranscriptItem`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import ProjectionError
from ..materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    TranscriptItem,
    TranscriptUpsert,
    UserBody,
)
from ..relay.events import RelayEvent, RelayLine
from ..wire import JSON
from .frozen import Transcript
from .index import TranscriptIndex
from .markers import HARNESS_TURN_ITEM_PREFIX

__all__ = [
    "ProjectionContext",
    "changed",
    "id_text",
    "new_item",
    "push_system",
    "push_system_with_id",
    "set_configuration",
    "upsert",
]


@dataclass(slots=True)
class ProjectionContext:
    """What projecting one event reads (``current``, ``transcript``, ``index``, ``event``)
    and writes (``mutation``)."""

    current: MaterializedSession
    """The session before the event; its transcript is ``transcript``, not ``current``'s."""
    transcript: Transcript
    index: TranscriptIndex
    event: RelayEvent | RelayLine
    """The event projected (a :class:`RelayLine` for a kind projected from its bytes,
    :data:`~relaystore.domain.projection.observations.LINE_HANDLERS`)."""
    mutation: MaterializedSessionMutation
    session_id: str

    def get(self, stable_id: str) -> TranscriptItem | None:
        """The item ``stable_id`` as it was before this event."""
        offset = self.index.positions.get(stable_id)
        return None if offset is None else self.transcript[offset]

    def prompts(self) -> Iterator[TranscriptItem]:
        """The user items of the transcript before this event, oldest first: read through
        the index's turn starts, so only they are decoded (or fetched from the store),
        not every item before them."""
        for stable_id in self.index.turns:
            if stable_id.startswith(HARNESS_TURN_ITEM_PREFIX):
                continue
            item = self.get(stable_id)
            if item is not None and isinstance(item.body, UserBody):
                yield item

    def newest(self) -> TranscriptItem | None:
        """The last item of the transcript before this event (None when it is empty)."""
        return self.transcript[-1] if len(self.transcript) else None

    def error(self, detail: str) -> ProjectionError:
        """A :class:`ProjectionError` located at this session and event."""
        return ProjectionError(detail, session_id=self.session_id, ordinal=self.event.ordinal)

    def open_streams(self, agent: bool) -> list[TranscriptItem]:
        """Open agent (or thought) streams, oldest first."""
        ids = self.index.open_agents if agent else self.index.open_thoughts
        if not ids:
            return []
        items = [item for item in map(self.get, ids) if item is not None]
        items.sort(key=lambda item: (item.position, item.stable_id))
        return items

    def terminal_referrers(self, terminal_id: str) -> list[TranscriptItem]:
        """Tool items whose call or history refers to ``terminal_id``, by stable id."""
        ids = sorted(self.index.referrers.get(terminal_id, ()))
        return [item for item in map(self.get, ids) if item is not None]


def upsert(ctx: ProjectionContext, item: TranscriptItem) -> None:
    """Record ``item``; a later upsert of the same id in this event replaces the earlier."""
    changes = ctx.mutation.transcript
    for offset, change in enumerate(changes):
        if isinstance(change, TranscriptUpsert) and change.item.stable_id == item.stable_id:
            changes[offset] = TranscriptUpsert(item)
            return
    changes.append(TranscriptUpsert(item))


def new_item(
    ctx: ProjectionContext, stable_id: str, body: Any, *, at_ms: int | None = None
) -> TranscriptItem:
    """An item created by this event (position = its ordinal)."""
    when = ctx.event.recorded_at_ms if at_ms is None else at_ms
    return TranscriptItem(
        stable_id=stable_id,
        position=ctx.event.ordinal,
        latest_content_event_ordinal=None,
        created_at_ms=when,
        last_changed_at_ms=when,
        body=body,
    )


def push_system_with_id(ctx: ProjectionContext, stable_id: str, text: str) -> None:
    """Add a System line with a chosen id, created by this event."""
    upsert(ctx, new_item(ctx, stable_id, SystemBody(text=text)))


def push_system(ctx: ProjectionContext, text: str) -> None:
    """Add the System line ``system:{ordinal}``."""
    push_system_with_id(ctx, f"system:{ctx.event.ordinal}", text)


def changed(item: TranscriptItem, at_ms: int, **fields: Any) -> TranscriptItem:
    """A copy of ``item`` with ``fields`` replaced; its change time never moves back."""
    return msgspec.structs.replace(
        item, last_changed_at_ms=max(item.last_changed_at_ms, at_ms), **fields
    )


def id_text(value: JSON) -> str:
    """An ACP id as stable-id text (a non-string id as compact JSON)."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def set_configuration(ctx: ProjectionContext, key: str, value: JSON) -> None:
    """The mutation's configuration: the current one with ``key`` set to ``value``."""
    configuration = dict(ctx.current.configuration)
    configuration[key] = value
    ctx.mutation.configuration = configuration
