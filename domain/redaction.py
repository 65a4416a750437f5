"""A secret never appears in a message: the one rule that masks credentials in text.

Guarantees: :func:`redact` masks the user info of every URL in a text, whatever the
scheme (``nats://user:pass@host`` → ``nats://user:***@host``; a token,
``nats://TOKEN@host`` → ``nats://***@host``), and the ``USER:PASSWORD@`` of an address
given without a scheme. Everything else is left as it is, so a message still names the
host and port it is about. Every message that echoes a server URL or the command line
(the NATS publisher's and fleet feed's log lines and errors, the command line's usage
errors and its one-line failures) passes through it. relaystore takes no other secret
(no token, nkey or credentials-file option), so none can be echoed.
"""

from __future__ import annotations

import re

__all__ = ["MASK", "redact"]

MASK = "***"
"""What a secret is replaced with."""

_USER_INFO = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)?(?P<info>[^\s,'\"@]+(?:@[^\s,'\"@]+)*)@"
)
"""A URL's ``scheme://user-info@`` (the scheme optional). The user info runs to the last
``@`` before a space, comma or quote, so a password holding a stray ``@``, ``/``, ``?``
or ``#`` (which a URL parser would split elsewhere) is masked whole."""


def _masked(match: re.Match[str]) -> str:
    scheme, info = match["scheme"] or "", match["info"]
    if not scheme and ":" not in info:
        return match[0]  # ``name@host`` without a scheme: an address, not a credential
    user, colon, _ = info.partition(":")
    return f"{scheme}{user}:{MASK}@" if colon and user else f"{scheme}{MASK}@"


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it masked (see the module doc)."""
    return _USER_INFO.sub(_masked, text) if "@" in text else text
