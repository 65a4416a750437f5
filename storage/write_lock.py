"""The store's write lock: a sidecar file whose ``flock`` marks the store open for writing.

Owns the lock file beside the store (:func:`lock_path`, ``<store>.lock``): taking and
releasing it (:func:`acquire_write_lock`, :func:`release_write_lock`), and the line in it
that names the holder, so a refused writer, a maintenance request or ``doctor`` can say
which process has the store (:func:`read_lock_holder`, :class:`LockHolder`,
:func:`process_alive`). Only the ``flock`` decides; the named holder may be stale.

It opens no SQLite connection and must not: :mod:`.connection` takes the lock before it
opens the writer and releases it after closing.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from dataclasses import dataclass

from ..domain.errors import StoreError, StoreLocked

__all__ = [
    "LockHolder",
    "acquire_write_lock",
    "lock_path",
    "process_alive",
    "read_lock_holder",
    "release_write_lock",
    "stamp_holder",
]

logger = logging.getLogger(__name__)


def lock_path(path: str | os.PathLike[str]) -> str:
    """The sidecar file whose ``flock`` marks the store as open for writing."""
    return os.path.abspath(os.fspath(path)) + ".lock"


@dataclass(frozen=True, slots=True)
class LockHolder:
    """The process the store's lock file names: its ``pid``, its name (``/proc``'s
    ``comm``, when readable) and whether its store takes maintenance requests."""

    pid: int
    takes_requests: bool
    name: str | None = None

    def alive(self) -> bool:
        """Whether the process still runs (see :func:`process_alive`)."""
        return process_alive(self.pid)

    def describe(self) -> str:
        """``process 1234 (python3)``."""
        return f"process {self.pid}" + (f" ({self.name})" if self.name else "")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (where a store's lock and its WAL
    index live, so every process that uses the store is here)."""
    if pid <= 0:  # 0 and below name process groups, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except (OverflowError, ValueError):
        return False
    return True


_LOCK_LINE_BYTES = 256
"""The most of the lock file :func:`read_lock_holder` reads."""


def read_lock_holder(path: str | os.PathLike[str]) -> LockHolder | None:
    """The process the store's lock file names (None: none named, or unreadable).

    The name may be stale (a holder that died leaves it); :meth:`LockHolder.alive`
    says whether that process still runs."""
    try:
        with open(lock_path(path), "rb") as file:
            text = file.read(_LOCK_LINE_BYTES)
        stamp = json.loads(text)
        pid, requests = stamp["pid"], stamp.get("requests", False)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if type(pid) is not int or pid <= 0 or type(requests) is not bool:
        return None
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as file:
            name: str | None = file.read(64).strip() or None
    except OSError:
        name = None
    return LockHolder(pid=pid, takes_requests=requests, name=name)


def stamp_holder(fd: int, *, requests: bool) -> None:
    """Name this process in the lock file it holds (its pid, and whether its store takes
    maintenance requests)."""
    line = json.dumps({"pid": os.getpid(), "requests": requests}).encode() + b"\n"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, line, 0)
    except OSError as exc:  # only the flock matters: a holder left unnamed is no fault
        logger.warning("cannot name the writer in its lock file: %s", exc)


def acquire_write_lock(path: str) -> int:
    """Take the store's write lock (``flock`` on :func:`lock_path`) and name this process in
    it; raises :class:`StoreLocked` naming the holder when another writer has it."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise StoreError(f"cannot create the write lock file {lock}: {exc}", path=path) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        holder = read_lock_holder(path)
        by = "by this or another process" if holder is None else f"by {holder.describe()}"
        raise StoreLocked(
            f"the store is already open for writing ({by}); "
            f"close that writer first, or open this one read-only (lock file {lock})",
            holder_pid=None if holder is None else holder.pid,
            path=path,
        ) from exc
    except OSError as exc:
        os.close(fd)
        raise StoreError(f"cannot lock {lock}: {exc}", path=path) from exc
    stamp_holder(fd, requests=False)
    return fd


def release_write_lock(fd: int) -> None:
    """Release the write lock taken by :func:`acquire_write_lock` and close its file."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
