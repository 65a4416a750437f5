"""Mailbox events as the origin's ``mj-core/src/mailbox.rs`` (63ed4b3) writes them: both
forms decode and re-encode byte for byte, every body's fields in declared order, the
protocol each body needs, and each body's transcript line."""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.mailbox import (
    GithubComment,
    GithubItemKind,
    GithubPullRequestLifecycle,
    GithubReview,
    GithubReviewComment,
    MailboxEvent,
    MailboxEventBody,
    MailboxPullRequestChange,
    NewGithubItem,
    ParentMessage,
    PlainText,
    SessionMessage,
    SessionSender,
    UserSender,
    mailbox_transcript_line,
    minimum_relay_protocol,
    short_first_line,
)
from relaystore.domain.protocol import (
    RELAY_LEGACY_MAILBOX_PROTOCOL,
    RELAY_PROTOCOL_VERSION,
    RELAY_SESSION_MESSAGE_PROTOCOL,
    RELAY_STRUCTURED_MAILBOX_PROTOCOL,
)
from relaystore.domain.wire import encode

PR = GithubItemKind.PULL_REQUEST

BODIES: list[tuple[bytes, str]] = [
    (
        b'{"type":"new_github_item","kind":"pull_request","number":4623,"title":"T"}',
        "New PR #4623 T",
    ),
    (
        b'{"type":"new_github_item","kind":"issue","number":37,"title":"Track <setup>",'
        b'"repo":"BrokkAi/Repo"}',
        "New issue BrokkAi/Repo#37 Track \u2039setup\u203a",
    ),
    (
        b'{"type":"github_comment","item_kind":"issue","number":5,"title":"t","author":"al",'
        b'"body":"line one\\nline two","repo":"o/r"}',
        "Comment on your issue o/r#5 by al: line one",
    ),
    (
        b'{"type":"github_review","item_kind":"pull_request","number":9,"title":"t",'
        b'"author":"bob","body":"ok","review_state":"APPROVED","repo":"o/r"}',
        "Review on your PR o/r#9 by bob (approved): ok",
    ),
    (
        b'{"type":"github_review","item_kind":"pull_request","number":9,"title":"t",'
        b'"author":"bob","body":""}',
        "Review on your PR #9 by bob: (empty)",
    ),
    (
        b'{"type":"github_review_comment","item_kind":"pull_request","number":9,"title":"t",'
        b'"author":"c","body":"fix <this>"}',
        "Review comment on your PR #9 by c: fix \u2039this\u203a",
    ),
    (
        b'{"type":"github_pull_request_lifecycle","change":"merged","number":1,"title":"t",'
        b'"actor":"unknown"}',
        "Your PR #1 was merged.",
    ),
    (
        b'{"type":"github_pull_request_lifecycle","change":"closed_without_merging",'
        b'"number":1,"title":"t","actor":"x","repo":"o/r"}',
        "Your PR o/r#1 was closed without merging.",
    ),
    (
        b'{"type":"parent_message","text":"Keep the <edge> case."}',
        "Message from your parent agent: Keep the <edge> case.",
    ),
    (
        b'{"type":"session_message","from":{"type":"session","id":"b69","title":"Fix \\"cache\\""},'
        b'"text":"done <now>"}',
        'Message from session "Fix \\"cache\\"": done \u2039now\u203a',
    ),
    (
        b'{"type":"session_message","from":{"type":"session","id":"b69","title":"  "},'
        b'"text":"done"}',
        "Message from session b69: done",
    ),
    (
        b'{"type":"session_message","from":{"type":"user"},"text":"Check <it>."}',
        "Message from the user: Check <it>.",
    ),
    (b'{"type":"plain_text","text":"' + b"x" * 121 + b'"}', "External event: " + "x" * 120 + "…"),
]


@pytest.mark.parametrize(("body", "line"), BODIES)
def test_a_structured_event_reencodes_byte_for_byte_and_has_the_origins_line(
    body: bytes, line: str
) -> None:
    raw = b'{"key":"k","source":"github","wake":true,"created_at_ms":7,"body":' + body + b"}"
    event = msgspec.json.decode(raw, type=MailboxEvent)
    assert encode(event) == raw
    assert event.text is None
    assert mailbox_transcript_line(event) == line


def test_the_protocol_33_form_reencodes_byte_for_byte_and_reads_as_plain_text() -> None:
    raw = b'{"key":"legacy","source":"github","wake":true,"text":"legacy body","created_at_ms":42}'
    event = msgspec.json.decode(raw, type=MailboxEvent)
    assert encode(event) == raw
    assert event.content() == PlainText(text="legacy body")
    assert mailbox_transcript_line(event) == "External event: legacy body"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"key":"k","source":"s","wake":true,"created_at_ms":1}',
        b'{"key":"k","source":"s","wake":true,"text":"a","created_at_ms":1,'
        b'"body":{"type":"plain_text","text":"a"}}',
        b'{"key":"k","source":"s","wake":true,"created_at_ms":1,'
        b'"body":{"type":"plain_text","text":"a","extra":1}}',
        b'{"key":"k","source":"s","wake":true,"created_at_ms":1,'
        b'"body":{"type":"carrier_pigeon","text":"a"}}',
        b'{"key":"k","source":"s","wake":true,"created_at_ms":1,"body":{"type":"session_message",'
        b'"from":{"type":"robot"},"text":"a"}}',
    ],
    ids=["neither", "both", "unknown-field", "unknown-body", "unknown-sender"],
)
def test_what_the_origin_denies_does_not_decode(raw: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(raw, type=MailboxEvent)


def test_each_body_names_the_protocol_it_needs() -> None:
    assert (RELAY_LEGACY_MAILBOX_PROTOCOL, RELAY_STRUCTURED_MAILBOX_PROTOCOL) == (33, 34)
    assert RELAY_SESSION_MESSAGE_PROTOCOL == RELAY_PROTOCOL_VERSION == 36
    legacy: list[MailboxEventBody] = [
        NewGithubItem(kind=PR, number=1, title="t"),
        GithubComment(item_kind=PR, number=1, title="t", author="a", body="b"),
        GithubReview(item_kind=PR, number=1, title="t", author="a", body="b"),
        GithubReviewComment(item_kind=PR, number=1, title="t", author="a", body="b"),
        GithubPullRequestLifecycle(
            change=MailboxPullRequestChange.REOPENED, number=1, title="t", actor="a"
        ),
        PlainText(text="t"),
    ]
    assert {minimum_relay_protocol(body) for body in legacy} == {33}
    assert minimum_relay_protocol(ParentMessage(text="t")) == 34
    assert minimum_relay_protocol(SessionMessage(from_=UserSender(), text="t")) == 36
    assert (
        minimum_relay_protocol(SessionMessage(from_=SessionSender(id="i", title="t"), text="t"))
        == 36
    )


@pytest.mark.parametrize(
    ("value", "limit", "short"),
    [
        ("A review comment arrived.", 120, "A review comment arrived."),
        ("  first line  \nsecond line", 120, "first line"),
        ("windows\r\nline", 120, "windows"),
        ("bell\x07 and\ttab", 120, "bell andtab"),  # a tab is a control character too
        ("x" * 49, 48, "x" * 48 + "…"),
        ("x" * 48, 48, "x" * 48),
        ("", 48, "(empty)"),
        ("   \n text on line two", 48, "(empty)"),
        # U+001C is no white space to the origin: dropped after the trim.
        ("\x1c padded", 48, " padded"),
        ("é" * 5, 3, "ééé…"),  # characters, not bytes
    ],
)
def test_short_first_line_is_the_origins(value: str, limit: int, short: str) -> None:
    assert short_first_line(value, limit) == short
