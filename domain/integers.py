"""The integer range every stored number keeps: SQLite's INTEGER, a signed 64-bit value.

The origin's fields are Rust ``i64`` and ``u64``; SQLite stores at most a signed 64-bit
integer, so relaystore refuses what it could not store, at every boundary alike.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

__all__ = ["INT64_MAX", "INT64_MIN", "Int64", "UInt64"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
"""The origin's i64: what SQLite's INTEGER holds."""
UInt64 = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
"""The origin's u64, as far as SQLite can store it: a larger value is refused where it
is read (a journal line naming the field), never later where a row would hold it."""
