"""The integer range every stored number keeps: SQLite's INTEGER, a signed 64-bit value.

The origin's fields are Rust ``i64`` and ``u64``; SQLite stores at most a signed 64-bit
integer, so relaystore refuses what it could not store, at every boundary alike.
"""

from __future__ import annotations

__all__ = ["INT64_MAX", "INT64_MIN"]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
