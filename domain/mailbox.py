"""A session's mailbox events: their wire shapes and the one-line account of each.

A :class:`MailboxEvent` is what ``deliver_mailbox_event``, ``mailbox_wake``,
``mailbox_events_delivered`` and a hook lease carry, as the origin's ``mj-core/src/mailbox.rs``
(63ed4b3) defines it. Two forms are read, and each is written back as it was read (a
journal line's digest covers its bytes):

* the structured form of relay protocol 34 onward, ``{key, source, wake, created_at_ms,
  body}``, whose ``body`` is a :data:`MailboxEventBody` tagged on ``type``;
* protocol 33's text form, ``{key, source, wake, text, created_at_ms}``, which the origin
  reads as a :class:`PlainText` body.

Exactly one of ``text`` and ``body`` is present; both, or neither, is refused.

:func:`mailbox_transcript_line` is the origin's ``describe_mailbox_event(..).transcript_line``:
the line a queued event leaves in the transcript's external-events item.

Owns: the wire types, the protocol each body needs, and the transcript wording. Must not:
know about transcripts or projections (those are ``domain.projection.mailbox``'s).
"""

from __future__ import annotations

import enum
import unicodedata
from typing import ClassVar

import msgspec

from .integers import UInt64
from .protocol import (
    RELAY_LEGACY_MAILBOX_PROTOCOL,
    RELAY_SESSION_MESSAGE_PROTOCOL,
    RELAY_STRUCTURED_MAILBOX_PROTOCOL,
)
from .text_formats import RUST_WHITESPACE
from .wire import Wire, encode

__all__ = [
    "GithubComment",
    "GithubItemKind",
    "GithubPullRequestLifecycle",
    "GithubReview",
    "GithubReviewComment",
    "MailboxEvent",
    "MailboxEventBody",
    "MailboxPullRequestChange",
    "NewGithubItem",
    "ParentMessage",
    "PlainText",
    "Sender",
    "SessionMessage",
    "SessionSender",
    "UserSender",
    "mailbox_transcript_line",
    "minimum_relay_protocol",
    "short_first_line",
]


class GithubItemKind(enum.Enum):
    """What a GitHub item is."""

    ISSUE = "issue"
    PULL_REQUEST = "pull_request"


class MailboxPullRequestChange(enum.Enum):
    """A lifecycle change the GitHub watcher reports for a session's pull request."""

    MERGED = "merged"
    CLOSED_WITHOUT_MERGING = "closed_without_merging"
    REOPENED = "reopened"


# -- the sender of a session message --------------------------------------------------


class SessionSender(
    Wire, kw_only=True, tag_field="type", tag="session", forbid_unknown_fields=True
):
    """Another agent session: its durable id and its display title."""

    id: str
    title: str


class UserSender(Wire, kw_only=True, tag_field="type", tag="user", forbid_unknown_fields=True):
    """The user."""


Sender = SessionSender | UserSender
"""Who wrote a :class:`SessionMessage`."""


# -- bodies ------------------------------------------------------------------------------


class _Body(Wire, kw_only=True, tag_field="type", forbid_unknown_fields=True):
    MINIMUM_PROTOCOL: ClassVar[int] = RELAY_LEGACY_MAILBOX_PROTOCOL


class NewGithubItem(_Body, tag="new_github_item"):
    kind: GithubItemKind
    number: UInt64
    title: str
    repo: str | None = None


class _Authored(_Body):
    """What a comment, a review and a review comment share, in the origin's field order
    (a subclass's own fields follow)."""

    item_kind: GithubItemKind
    number: UInt64
    title: str
    author: str
    body: str


class GithubComment(_Authored, tag="github_comment"):
    repo: str | None = None


class GithubReview(_Authored, tag="github_review"):
    review_state: str | None = None
    repo: str | None = None


class GithubReviewComment(_Authored, tag="github_review_comment"):
    repo: str | None = None


class GithubPullRequestLifecycle(_Body, tag="github_pull_request_lifecycle"):
    change: MailboxPullRequestChange
    number: UInt64
    title: str
    actor: str
    repo: str | None = None


class ParentMessage(_Body, tag="parent_message"):
    MINIMUM_PROTOCOL = RELAY_STRUCTURED_MAILBOX_PROTOCOL
    text: str


class SessionMessage(_Body, tag="session_message"):
    MINIMUM_PROTOCOL = RELAY_SESSION_MESSAGE_PROTOCOL
    from_: Sender = msgspec.field(name="from")
    text: str


class PlainText(_Body, tag="plain_text"):
    text: str


MailboxEventBody = (
    NewGithubItem
    | GithubComment
    | GithubReview
    | GithubReviewComment
    | GithubPullRequestLifecycle
    | ParentMessage
    | SessionMessage
    | PlainText
)
"""A mailbox event's structured content, tagged on ``type``."""


def minimum_relay_protocol(body: MailboxEventBody) -> int:
    """The oldest relay protocol that understands ``body``'s wire shape (protocol 33
    receives the GitHub bodies and plain text as text; a parent's message needs 34, a
    session's 36)."""
    return body.MINIMUM_PROTOCOL


class MailboxEvent(Wire, kw_only=True, forbid_unknown_fields=True):
    """One event addressed to a session's durable mailbox.

    ``key`` is the producer's deduplication identity; ``source`` is free text
    (``github``, ``parent``, ``api``, ``session_message`` are seen); ``created_at_ms`` is
    unsigned on the wire. Exactly one of ``body`` (the structured form) and ``text``
    (protocol 33's form) is set, and the event is written in the form it was read in.

    Guarantees: decoding then encoding a line of either form gives its bytes back.
    """

    key: str
    source: str
    wake: bool
    text: str | None = None
    created_at_ms: UInt64
    body: MailboxEventBody | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.body is None):
            raise TypeError(
                "a mailbox event has exactly one of `body` (structured) and `text` "
                "(protocol 33); this one has " + ("both" if self.body is not None else "neither")
            )

    def content(self) -> MailboxEventBody:
        """The event's body: protocol 33's text read as :class:`PlainText`, as the
        origin reads it."""
        if self.body is not None:
            return self.body
        assert self.text is not None
        return PlainText(text=self.text)


# -- the transcript line ---------------------------------------------------------------

_WHITESPACE = frozenset(RUST_WHITESPACE)
"""What the origin trims: Python's ``str.strip`` also trims the separators U+001C..U+001F,
which the origin keeps and then drops as controls."""


def _rust_trim(value: str) -> str:
    start, end = 0, len(value)
    while start < end and value[start] in _WHITESPACE:
        start += 1
    while end > start and value[end - 1] in _WHITESPACE:
        end -= 1
    return value[start:end]


def short_first_line(value: str, limit: int) -> str:
    """The first line of ``value``, trimmed, without control characters, cut at
    ``limit`` characters with ``…``; ``(empty)`` when nothing is left.

    The first line ends at the first ``\\n`` (a ``\\r`` before it is dropped): the origin
    splits lines there only, unlike :meth:`str.splitlines`.
    """
    line = value.split("\n", 1)[0]
    if line.endswith("\r"):
        line = line[:-1]
    kept = [char for char in _rust_trim(line) if unicodedata.category(char) != "Cc"]
    short = "".join(kept[:limit])
    if len(kept) > limit:
        short += "…"
    return short or "(empty)"


def _escape(text: str) -> str:
    """Untrusted text cannot open or close a tag: ``<`` and ``>`` become U+2039 and U+203A."""
    return text.replace("<", "\u2039").replace(">", "\u203a")


def _reference(repo: str | None, number: int) -> str:
    return f"{'' if repo is None else _escape(repo)}#{number}"


def _item_kind(kind: GithubItemKind) -> str:
    return "issue" if kind is GithubItemKind.ISSUE else "PR"


def _session_message_header(sender: Sender) -> str:
    if isinstance(sender, UserSender):
        return "Message from the user:"
    if _rust_trim(sender.title):
        return f"Message from session {encode(sender.title).decode()}:"
    return f"Message from session {sender.id}:"


def _line(body: MailboxEventBody) -> str:
    match body:
        case NewGithubItem(kind=kind, number=number, title=title, repo=repo):
            title_line = short_first_line(_escape(title), 120)
            return f"New {_item_kind(kind)} {_reference(repo, number)} {title_line}"
        case GithubComment(item_kind=kind, number=number, author=author, body=text, repo=repo):
            return (
                f"Comment on your {_item_kind(kind)} {_reference(repo, number)} by "
                f"{_escape(author)}: {short_first_line(text, 96)}"
            )
        case GithubReview(number=number, author=author, body=text, review_state=state, repo=repo):
            shown = (
                ""
                if state is None
                else f" ({_escape(state.translate(_ASCII_LOWER).replace('_', ' '))})"
            )
            return (
                f"Review on your PR {_reference(repo, number)} by {_escape(author)}{shown}: "
                f"{short_first_line(text, 96)}"
            )
        case GithubReviewComment(
            item_kind=kind, number=number, author=author, body=text, repo=repo
        ):
            return (
                f"Review comment on your {_item_kind(kind)} {_reference(repo, number)} by "
                f"{_escape(author)}: {short_first_line(text, 96)}"
            )
        case GithubPullRequestLifecycle(change=change, number=number, actor=actor, repo=repo):
            actor = _escape(actor)
            by = "" if actor in ("", "unknown") else f" by {actor}"
            reference = _reference(repo, number)
            if change is MailboxPullRequestChange.MERGED:
                return f"Your PR {reference} was merged{by}."
            if change is MailboxPullRequestChange.CLOSED_WITHOUT_MERGING:
                return f"Your PR {reference} was closed without merging."
            return f"Your PR {reference} was reopened."
        case ParentMessage(text=text):
            return f"Message from your parent agent: {short_first_line(text, 96)}"
        case SessionMessage(from_=sender, text=text):
            return f"{_session_message_header(sender)} {short_first_line(text, 96)}"
        case PlainText(text=text):
            return f"External event: {short_first_line(text, 120)}"
    raise AssertionError(f"unhandled mailbox body {body!r}")  # pragma: no cover


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
"""Rust's ``to_ascii_lowercase``: only ASCII letters change."""


def _trusted(body: MailboxEventBody) -> bool:
    """A parent's message and the user's own are trusted; everything else is escaped."""
    return isinstance(body, ParentMessage) or (
        isinstance(body, SessionMessage) and isinstance(body.from_, UserSender)
    )


def mailbox_transcript_line(event: MailboxEvent) -> str:
    """The one-line human account of ``event`` (the origin's ``transcript_line``).

    Titles and bodies are shortened to their first line (120 or 96 characters), a merge
    with an empty or ``unknown`` actor names nobody, and every line but a trusted
    message's has ``<`` and ``>`` escaped as U+2039 and U+203A.
    """
    body = event.content()
    line = _line(body)
    return line if _trusted(body) else _escape(line)
