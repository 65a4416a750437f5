"""The transcript's read rules: an item's seq, role and text, and which items begin a turn.

Owns what every transcript read (pages, history, turn summaries, projection tails, the
command line) decides about a stored item, stated once:

* **seq** (:func:`transcript_seq`): an item's place in the transcript feed is
  ``COALESCE(latest_content_event_ordinal, position)``: a streaming agent message keeps
  its position but takes a new seq each time its content grows, so paging by seq
  returns the grown item again instead of missing it.
* **roles** (:data:`ROLE_KINDS`, :func:`item_role`): the stable words ``user``, ``agent``,
  ``thought``, ``tool``, ``terminal``, ``plan``, ``plan_proposal``, ``system``;
  ``terminal`` is the ``terminal_output`` body kind.
* **finished only** (:func:`finished_only_roles`, :func:`is_open_agent_item`): as the
  origin's API reference (63ed4b3) has it, ``finished_only`` pages agent items whose body
  is no longer streaming and implies ``role=agent``; its cursor
  (:func:`~relaystore.domain.paging.transcript_page_cursor`) never passes the earliest
  agent item still open.
* **text** (:func:`item_text`): an item flattened to the text a reader wants.
* **turns** (:func:`is_user_item`, :func:`is_turn_start`, :func:`turn_number`,
  :func:`latest_turn_start`, :func:`provisional_title`, :func:`final_message`): a turn
  starts at a user message (a ``user`` body under a ``user:`` or ``user-`` id) or at a
  harness-started turn marker; the provisional title comes from the oldest titled user
  message; a turn's final message is its newest non-blank agent text.

Pure: it reads no store and must not; storage hands it the rows it read and keeps what
these functions decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import get_args

from .errors import InvalidInput
from .materialized import (
    AgentBody,
    PlanBody,
    PlanProposalBody,
    SystemBody,
    TerminalOutputBody,
    ThoughtBody,
    ToolBody,
    TranscriptBody,
    UserBody,
)
from .projection.markers import HARNESS_TURN_ITEM_PREFIX
from .projection.text import (
    materialized_chunks_text,
    materialized_content_text,
    provisional_session_title,
    sanitize_terminal_text,
)
from .roles import TranscriptRole

__all__ = [
    "ROLE_KINDS",
    "USER_ITEM_PREFIXES",
    "final_message",
    "finished_only_roles",
    "is_open_agent_item",
    "is_turn_start",
    "is_user_item",
    "item_role",
    "item_text",
    "latest_turn_start",
    "provisional_title",
    "transcript_seq",
    "turn_number",
]

ROLE_KINDS: Mapping[str, str] = {
    role: ("terminal_output" if role == "terminal" else role) for role in get_args(TranscriptRole)
}
"""The stored body ``kind`` of each role."""
_ROLES = {kind: role for role, kind in ROLE_KINDS.items()}

USER_ITEM_PREFIXES = ("user:", "user-")
"""The stable id prefixes of the conversation's user messages (a ``user`` body stored
under another id, by another writer, is not one)."""


# -- seq, role, text --------------------------------------------------------------------


def transcript_seq(position: int, latest_content_event_ordinal: int | None) -> int:
    """An item's seq: its latest content ordinal (agent messages), else its position."""
    return position if latest_content_event_ordinal is None else latest_content_event_ordinal


def item_role(body: TranscriptBody) -> TranscriptRole:
    """The stable role word of a transcript body."""
    return _ROLES[_body_kind(body)]  # type: ignore[return-value]


def _body_kind(body: TranscriptBody) -> str:
    return str(type(body).__struct_config__.tag)


def finished_only_roles(roles: tuple[TranscriptRole, ...]) -> tuple[TranscriptRole, ...]:
    """The roles a ``finished_only`` page reads: agent items only.

    Raises :class:`InvalidInput` when ``roles`` names any role but ``agent`` (no role, or
    ``agent`` alone, is accepted): ``finished_only`` implies ``role=agent``.
    """
    others = [role for role in roles if role != "agent"]
    if others:
        raise InvalidInput(
            f"finished_only=true implies role=agent; role {others[0]!r} cannot be combined with it"
        )
    return ("agent",)


def is_open_agent_item(body: TranscriptBody) -> bool:
    """An agent message still streaming: the barrier a ``finished_only`` page stops at."""
    return isinstance(body, AgentBody) and body.streaming


def item_text(body: TranscriptBody) -> str:
    """The item flattened to text: what ``mj transcript`` and the history reader show.

    Messages and thoughts: their visible text (hidden controller context removed); a
    tool call: its title (else its kind); terminal output: the sanitized output; a plan:
    one ``- entry`` line per entry; a proposal or system line: its text.
    """
    if isinstance(body, UserBody):
        return materialized_content_text(body.content)
    if isinstance(body, AgentBody | ThoughtBody):
        return materialized_chunks_text(body.chunks)
    if isinstance(body, ToolBody):
        call = body.call if isinstance(body.call, dict) else {}
        title = call.get("title") or call.get("kind") or "tool call"
        return sanitize_terminal_text(str(title))
    if isinstance(body, TerminalOutputBody):
        return sanitize_terminal_text(body.record.output)
    if isinstance(body, PlanBody):
        entries = body.plan.get("entries") if isinstance(body.plan, dict) else None
        if not isinstance(entries, list):
            return ""
        return "\n".join(
            f"- {sanitize_terminal_text(str(entry.get('content', '')))}"
            for entry in entries
            if isinstance(entry, dict)
        )
    if isinstance(body, PlanProposalBody):
        return sanitize_terminal_text(body.plan)
    assert isinstance(body, SystemBody)
    return sanitize_terminal_text(body.text)


# -- turns ------------------------------------------------------------------------------


def is_user_item(stable_id: str, kind: object) -> bool:
    """Whether the item stored under ``stable_id`` with body kind ``kind`` is one of the
    conversation's user messages."""
    return kind == "user" and stable_id.startswith(USER_ITEM_PREFIXES)


def is_turn_start(stable_id: str, kind: object) -> bool:
    """Whether the item begins a turn: a user message or a harness-started turn marker."""
    return stable_id.startswith(HARNESS_TURN_ITEM_PREFIX) or is_user_item(stable_id, kind)


def turn_number(items: Iterable[tuple[str, object]]) -> int:
    """The number of the turn whose start is the last of ``items`` (``(stable_id, kind)``
    pairs up to and including that start): how many of them begin a turn."""
    return sum(1 for stable_id, kind in items if is_turn_start(stable_id, kind))


def latest_turn_start(items: Iterable[tuple[int, str, object]]) -> int | None:
    """The position where the newest turn began, from ``(position, stable_id, kind)``
    triples newest first (``None``: no turn began); reads no further than that start."""
    return next(
        (position for position, stable_id, kind in items if is_turn_start(stable_id, kind)),
        None,
    )


def provisional_title(user_texts: Iterable[str]) -> str | None:
    """The session's provisional title: that of the oldest user message which gives one
    (``user_texts`` oldest first; reads no further than that message)."""
    return next((t for t in (provisional_session_title(text) for text in user_texts) if t), None)


def final_message(agent_texts: Iterable[str]) -> str | None:
    """A turn's answer: the newest agent text that is not blank (``agent_texts`` newest
    first; reads no further than that text)."""
    return next((text for text in agent_texts if text.strip()), None)
