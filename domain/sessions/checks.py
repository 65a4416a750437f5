"""Session checks: the path and timestamp rules every part of a session record is checked with.

Owns the small rules the record (:mod:`.sessions`), its provisioning (:mod:`.session_provisioning`)
and its target (:mod:`.session_targets`) share: how a refused value is quoted in a message,
how a Unix path is split into components and compared the way the origin's Rust ``Path``
compares them, the ``u64`` wire integer, and :func:`validate_timestamp` (RFC 3339).

Pure: no I/O, no record types; it must not know what a session is, only how its fields are
checked.
"""

from __future__ import annotations

import json
from typing import Annotated

import msgspec

from ..errors import InvalidInput
from ..text_formats import is_rfc3339_date_time

__all__ = [
    "U64",
    "ends_with",
    "has_parent",
    "is_absolute",
    "path_components",
    "path_text",
    "quoted",
    "validate_timestamp",
]

U64 = Annotated[int, msgspec.Meta(ge=0)]
"""A Rust ``u64``: decoding refuses negatives (msgspec cannot bound an int above int64, so
values past 2**64-1 are not refused; the origin never writes them)."""


def quoted(value: str) -> str:
    """``value`` quoted the way the origin's ``{:?}`` shows a string in a message."""
    return json.dumps(value, ensure_ascii=False)


def is_absolute(path: str) -> bool:
    """A Unix absolute path (it starts at the root)."""
    return path.startswith("/")


def has_parent(path: str) -> bool:
    """The path climbs out through a ``..`` component."""
    return ".." in path.split("/")


def path_components(path: str) -> tuple[str, ...]:
    """Rust's ``Path::components`` of a Unix path, so paths compare as the origin compares them.

    A root is ``"/"`` (however many slashes), empty and interior ``.`` parts vanish, and a
    leading ``.`` of a relative path stays. ``"/mnt//c/"`` and ``"/mnt/c"`` are equal.
    """
    raw = path.split("/")
    parts = tuple(part for part in raw if part and part != ".")
    if path.startswith("/"):
        return ("/", *parts)
    if raw[0] == ".":
        return (".", *parts)
    return parts


def path_text(components: tuple[str, ...]) -> str:
    """The path :func:`path_components` split, written back as text (for a message)."""
    if components[:1] == ("/",):
        return "/" + "/".join(components[1:])
    return "/".join(components)


def ends_with(path: str, name: str) -> bool:
    """The last component of ``path`` is ``name``."""
    parts = path_components(path)
    return bool(parts) and parts[-1] == name


def validate_timestamp(name: str, value: str) -> None:
    """Raise :class:`InvalidInput` naming ``name`` unless ``value`` is an RFC 3339
    date-time (the origin writes chrono's ``to_rfc3339``, for example
    ``2026-08-12T00:00:00.123456789+00:00``): every timestamp of a record or message."""
    if not is_rfc3339_date_time(value):
        raise InvalidInput(
            f"timestamp ({name}) {quoted(value)} is not an RFC 3339 date-time; "
            "write one such as 2026-08-12T00:00:00Z"
        )
