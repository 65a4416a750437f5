"""What the replication tests share: stores to publish, and "the restored store equals
the original" as a user checks it (``events`` bytes, ``show`` per session, ``audit``,
the store id). A support module, not a test module."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.actors.nats_support import attempt, events_lines, journal_root, run, store_id
from tests.paths import ROOT

__all__ = [
    "EXAMPLES",
    "assert_restored",
    "assert_stream_once",
    "make_store",
    "session_ids",
]

EXAMPLES = ROOT / "examples" / "worker-root"
"""Three example worker roots (three sessions)."""


def make_store(folder: Path, name: str, *, turns: int = 40, extra: str = "gen") -> Path:
    """A store holding the examples and one generated session of ``turns`` turns."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / f"{name}.sqlite3"
    run(db, "replay", str(EXAMPLES))
    if turns:
        run(db, "replay", str(journal_root(folder / "roots", extra, turns)))
    return db


def session_ids(db: Path) -> list[str]:
    return [line.split("\t")[0] for line in run(db, "sessions").stdout.decode().splitlines()]


def assert_restored(original: Path, restored: Path) -> None:
    """The restored store prints what the original prints and audits clean."""
    assert events_lines(restored) == events_lines(original)
    sessions = session_ids(original)
    assert session_ids(restored) == sessions
    for session in sessions:
        assert run(restored, "show", session).stdout == run(original, "show", session).stdout
    audit = attempt(restored, "audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert store_id(restored) == store_id(original)


def assert_stream_once(messages: list[object]) -> None:
    """No event seq and no change number twice in the stream, and no change missing."""
    seqs = [m.seq for m in messages if m.kind == "event"]  # type: ignore[attr-defined]
    changes = [m.change for m in messages if m.kind in ("record", "start", "log")]  # type: ignore[attr-defined]
    assert not [seq for seq, n in Counter(seqs).items() if n > 1]
    assert not [change for change, n in Counter(changes).items() if n > 1]
    assert sorted(changes) == list(range(1, len(changes) + 1))
