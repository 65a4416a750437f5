"""Whose files a reader may make beside a store: a reader never locks its writer out.

SQLite makes a WAL store's ``-wal`` and ``-shm`` beside it when the first connection
opens it, a read-only one too, owned by that process's user and with the store file's
mode. Made by the store's owner (the writer's user), or by root (SQLite then gives them
the store file's owner and group), they are harmless. Made by any other user, they stay
after that reader ends, and the writer can no longer open its own store (SQLite cannot
write a ``-wal`` it does not own). :func:`check_reader_files` refuses such a reader
before it opens anything, naming the fix; a reader that finds both files already there
(its writer has the store open) makes nothing and is let in, and so is one whose folder
it cannot write (it opens the store immutable, see :mod:`.connection`).

Must not: open a connection or change a file; it reads the files' owners and decides.
"""

from __future__ import annotations

import os
import pwd

from ..domain.errors import StoreError

__all__ = ["SIDE_FILES", "check_reader_files", "makes_foreign_files"]

SIDE_FILES = ("-wal", "-shm")
"""The files SQLite makes beside a WAL store (``PATH-wal``, ``PATH-shm``)."""


def makes_foreign_files(*, user: int, owner: int, missing: int, folder_writable: bool) -> bool:
    """Whether a reader run as ``user`` would leave the store's owner (``owner``) files it
    cannot write: ``missing`` side files would be made, by neither the owner nor root."""
    return folder_writable and missing > 0 and user not in (0, owner)


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def check_reader_files(where: str, *, folder_writable: bool) -> None:
    """Refuse (:class:`StoreError`, naming the fix) to read the store at ``where`` as a
    user whose open would make its ``-wal`` or ``-shm`` files its writer cannot write."""
    user = os.geteuid()
    try:
        owner = os.stat(where).st_uid
    except OSError:
        return  # no store to protect: opening it reports what is wrong
    missing = [suffix for suffix in SIDE_FILES if not os.path.lexists(where + suffix)]
    if not makes_foreign_files(
        user=user, owner=owner, missing=len(missing), folder_writable=folder_writable
    ):
        return
    name = _user_name(owner)
    writer = f"{name} (uid {owner})" if name else f"uid {owner}"
    fix = f"run this as {name} (sudo -u {name} ..., or User={name} in a systemd unit)"
    raise StoreError(
        f"refusing to read the store as uid {user}: opening it would make its "
        f"{' and '.join(missing)} owned by uid {user}, which its writer, {writer}, the "
        "store file's owner, could not write; " + (fix if name else f"run this as uid {owner}"),
        path=where,
    )
