"""The id rule: what a session, workspace, profile, bundle or template id may be.

Ids become file names, URL path segments and NATS subject tokens, so they are short and
plain: 1-64 ASCII letters, digits, ``.``, ``-`` or ``_``, and neither ``.`` nor ``..``.
"""

from __future__ import annotations

import json

from relaystore.domain.errors import InvalidInput

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
        raise InvalidInput(
            f"invalid {kind} id {json.dumps(value, ensure_ascii=False)}; use 1-64 ASCII "
            "letters, digits, '.', '-' or '_' (not '.' or '..')"
        )
