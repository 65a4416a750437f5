"""Web origins (``scheme://host[:port]``), as ``relaystore serve --cors-origin`` takes them.

Its own module, importing nothing but the error tree, so the command line checks the
option without loading the HTTP stack.

Guarantees: :func:`validate_origin` accepts exactly the serialized origin a browser
sends in its ``Origin`` header for an ``http`` or ``https`` page (lower-case scheme and
host; no default port, path, query, fragment, credentials or trailing slash) and
raises :class:`~relaystore.domain.errors.InvalidInput` naming the value otherwise, so an origin that no browser could send is refused instead of never matching.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from .errors import InvalidInput

__all__ = ["validate_origin", "validate_origins"]

_ORIGIN = re.compile(
    r"(?P<scheme>https?)://"
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?)"
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def validate_origin(text: str) -> str:
    """``text`` if it is a web origin such as ``https://app.example:8443``; else InvalidInput."""
    if type(text) is not str:
        raise InvalidInput(f"an origin must be a str, got {type(text).__name__}")
    match = _ORIGIN.fullmatch(text)
    port = match["port"] if match else None
    default = {"http": "80", "https": "443"}.get(match["scheme"]) if match else None
    if match is None or (port is not None and (port == default or not 0 < int(port) <= 65535)):
        raise InvalidInput(
            f"origin {text[:100]!r} is not a web origin: give scheme://host[:port] as a "
            "browser sends it (http or https, lower case, no default port, no path and "
            "no trailing slash), for example https://app.example:8443"
        )
    return text


def validate_origins(origins: Collection[str]) -> tuple[str, ...]:
    """Every one of ``origins`` checked by :func:`validate_origin` (a lone str is refused)."""
    if isinstance(origins, str):
        raise InvalidInput(f"give the origins as a list, not the one str {origins[:100]!r}")
    return tuple(validate_origin(origin) for origin in origins)
