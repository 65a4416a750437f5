"""The transcript's external-events item: one System line per session that lists every
mailbox event queued for it, in the origin's words.

As the origin's ``mj-transcript/src/projection/observation.rs`` (0477819) has it: the first
``deliver_mailbox_event`` creates ``system:mailbox:external-events`` (``External events:``
and the event's line); each later one appends ``\\n  - LINE`` to the same item and moves its
change time. A delivery (``mailbox_events_delivered``), a hook lease and a wake prompt
write nothing. Each line is :func:`relaystore.domain.mailbox.mailbox_transcript_line`.

Owns: the item's id and how it grows. Must not: word an event's line (``domain.mailbox``
does).
"""

from __future__ import annotations

from ..mailbox import MailboxEvent, mailbox_transcript_line
from ..materialized import SystemBody
from .context import (
    ProjectionContext,
    changed,
    push_system_with_id,
    upsert,
)

__all__ = ["MAILBOX_EVENTS_ITEM_ID", "mailbox_event_queued"]

MAILBOX_EVENTS_ITEM_ID = "system:mailbox:external-events"
"""The stable id of a session's one external-events item."""


def mailbox_event_queued(ctx: ProjectionContext, event: MailboxEvent) -> None:
    """Add ``event``'s line to the session's external-events item (made by the first)."""
    line = mailbox_transcript_line(event)
    existing = ctx.get(MAILBOX_EVENTS_ITEM_ID)
    if existing is None:
        push_system_with_id(ctx, MAILBOX_EVENTS_ITEM_ID, f"External events:\n  - {line}")
    elif isinstance(existing.body, SystemBody):
        text = f"{existing.body.text}\n  - {line}"
        upsert(ctx, changed(existing, ctx.event.recorded_at_ms, body=SystemBody(text=text)))
