"""The transcript lines of mailbox deliveries, in the origin's words.

A delivery line reads ``Delivered {N} mailbox event{s} {how}``, followed, when the
events are known, by ``: {source} — {text}`` for each, joined with ``; ``. ``N`` counts
the delivered keys, not the events carried (an older record carries none, and its line
is the count alone). Sources and texts are shortened as the origin shortens them
(:func:`short_mailbox_text`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

from relaystore.domain.relay import MailboxDeliveryPath, MailboxEvent
from relaystore.domain.text_formats import RUST_WHITESPACE

__all__ = [
    "SOURCE_LIMIT",
    "TEXT_LIMIT",
    "delivery_how",
    "mailbox_delivery_notice",
    "mailbox_event_count",
    "queued_notice",
    "short_mailbox_text",
]

SOURCE_LIMIT = 48
TEXT_LIMIT = 120

_WHITESPACE = frozenset(RUST_WHITESPACE)
"""What the origin trims: Python's ``str.strip`` also trims the separators U+001C..U+001F,
which the origin keeps and then drops as controls."""


def mailbox_event_count(count: int) -> str:
    """``1 mailbox event``, ``2 mailbox events``, ``0 mailbox events``."""
    return f"{count} mailbox event{'' if count == 1 else 's'}"


def short_mailbox_text(value: str, limit: int) -> str:
    """The first line of ``value``, trimmed, without control characters, cut at
    ``limit`` characters with ``…``; ``(empty)`` when nothing is left.

    The first line ends at the first ``\\n`` (a ``\\r`` before it is dropped): the origin
    splits lines there only, unlike :meth:`str.splitlines`.
    """
    line = value.split("\n", 1)[0]
    if line.endswith("\r"):
        line = line[:-1]
    start, end = 0, len(line)
    while start < end and line[start] in _WHITESPACE:
        start += 1
    while end > start and line[end - 1] in _WHITESPACE:
        end -= 1
    kept = [char for char in line[start:end] if unicodedata.category(char) != "Cc"]
    short = "".join(kept[:limit])
    if len(kept) > limit:
        short += "…"
    return short or "(empty)"


def mailbox_delivery_notice(count: int, how: str, events: Sequence[MailboxEvent]) -> str:
    """The line for ``count`` events delivered ``how``, with a summary of each event."""
    notice = f"Delivered {mailbox_event_count(count)} {how}"
    summaries = [
        f"{short_mailbox_text(event.source, SOURCE_LIMIT)} — "
        f"{short_mailbox_text(event.text, TEXT_LIMIT)}"
        for event in events
    ]
    return f"{notice}: {'; '.join(summaries)}" if summaries else notice


def delivery_how(path: MailboxDeliveryPath, hook_event: str | None) -> str:
    """How events went in: ``by tool hook (PostToolUse)``, ``with prompt``, ``in a wake
    prompt``."""
    if path is MailboxDeliveryPath.TOOL_HOOK:
        return "by tool hook" if hook_event is None else f"by tool hook ({hook_event})"
    if path is MailboxDeliveryPath.PROMPT:
        return "with prompt"
    return "in a wake prompt"


def queued_notice(event: MailboxEvent) -> str:
    """The line a ``deliver_mailbox_event`` leaves (its source as written, unshortened)."""
    return f"Mailbox event queued from {event.source}"
