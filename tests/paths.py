"""Where the tests' data lives inside the repository (CI needs nothing outside it)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL_EXCERPT = ROOT / "tests" / "fixtures" / "real-kimi-v2-excerpt.jsonl"
"""18 lines of a real worker journal (format 2, ordinals 3328-3347, a gap after 3344),
copied from ``shared/fixtures``."""
LIVE_RECORDS = (
    ROOT / "tests" / "fixtures" / "live-record-493425.jsonl",
    ROOT / "tests" / "fixtures" / "live-record-188.jsonl",
)
"""Two one-line live-journal records from the origin's ``snapshot.rs`` tests (format 2,
ordinals 493425 and 188), copied from ``shared/fixtures/origin``."""
