"""The one redaction rule: every URL's credentials masked, the rest of a message kept."""

from __future__ import annotations

import pytest

from relaystore.domain.redaction import redact


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("nats://user:pw@host:4222", "nats://user:***@host:4222"),
        ("at tls://TOKEN@host, then", "at tls://***@host, then"),
        ("'nats://u:p@ss@h:1' is not", "'nats://u:***@h:1' is not"),
        ("nats://u:p/w?x#y@h:1/", "nats://u:***@h:1/"),
        ("nats://a:b@h1,nats://t@h2", "nats://a:***@h1,nats://***@h2"),
        ("unrecognized arguments: user:pw@host:4222", "unrecognized arguments: user:***@host:4222"),
        ("nats://:pw@h", "nats://***@h"),
    ],
)
def test_credentials_are_masked_and_the_server_is_still_named(text: str, shown: str) -> None:
    assert redact(text) == shown


@pytest.mark.parametrize(
    "text", ["nats://127.0.0.1:4222", "dev@relaystore.invalid", "session s-1 at ordinal 3", ""]
)
def test_text_without_credentials_is_unchanged(text: str) -> None:
    assert redact(text) == text
