"""Waiting for other processes' commits in a read-only store: the WAL watcher.

A read-only store has no writer of its own to publish commits, so a wait watches the
store's ``-wal`` file instead: whenever its size or modification time changes (or it
appears or goes), the newest ``seq`` is read again through a reader and published into
the store's :class:`~relaystore.actors.commits.CommitWatch`, which wakes every waiter.
The file is looked at every :data:`WAL_POLL_SECONDS` while something waits, never otherwise;
reading the store happens only when the file changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .commits import CommitWatch

__all__ = ["WAL_POLL_SECONDS", "WalWatcher"]

WAL_POLL_SECONDS = 0.05
"""How often a waiting read-only store looks at its ``-wal`` file."""


class WalWatcher:
    """Publishes another process's commits of ``path`` into ``commits`` while someone waits."""

    def __init__(self, path: Path, commits: CommitWatch, read_latest: Callable[[], int]) -> None:
        self._wal = Path(f"{path}-wal")
        self._commits = commits
        self._read_latest = read_latest

    def wait_for(self, seq: int, timeout: float | None) -> bool:
        """True once ``seq`` is committed; False after ``timeout``; StoreClosed on close."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last_stamp: tuple[float, int] | None = None
        while True:
            stamp = _file_stamp(self._wal)
            if stamp != last_stamp:
                last_stamp = stamp
                self._commits.publish(self._read_latest())
            pause = WAL_POLL_SECONDS
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            if self._commits.wait_for(seq, pause):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False


def _file_stamp(path: Path) -> tuple[float, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime, info.st_size)
