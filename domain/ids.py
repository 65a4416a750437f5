"""The id rule: what a session, workspace, profile, bundle or template id may be.

Ids become file names, URL path segments and NATS subject tokens, so they are short and
plain: 1-64 ASCII letters, digits, ``.``, ``-`` or ``_``, and neither ``.`` nor ``..``.
"""

from __future__ import annotations

import json

from .errors import InvalidInput

__all__ = ["validate_id"]

_ID_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def validate_id(kind: str, value: str) -> None:
    """Raise :class:`InvalidInput` unless ``value`` is a valid ``kind`` id.

    ``kind`` names it in the message (``"session"``, ``"workspace"``, ``"profile"``,
    ``"bundle"``, ``"target template"``).
    """
    if (
        not value
        or len(value) > 64
        or value in (".", "..")
        or any(c not in _ID_CHARACTERS for c in value)
    ):
        # A long one is shown shortened: the message is one line of a log or a 400 body.
        shown = json.dumps(value if len(value) <= 80 else f"{value[:80]}…", ensure_ascii=False)
        if len(value) > 80:
            shown += f" ({len(value)} characters)"
        raise InvalidInput(
            f"invalid {kind} id {shown}; use 1-64 ASCII "
            "letters, digits, '.', '-' or '_' (not '.' or '..')"
        )
