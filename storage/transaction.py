"""One transaction over an apsw connection, with apsw errors mapped to relaystore's.

This is the one boundary where ``apsw.Error`` becomes a :class:`~relaystore.domain.errors.StoreError`:
every storage function runs its SQL inside :func:`transaction`, so no apsw error
crosses above ``storage``. The mapping (the cause is always kept as ``__cause__``):

=========================================  =============================================
apsw error                                 raised
=========================================  =============================================
``ConstraintError``                        :class:`~relaystore.domain.errors.InvalidInput`
``BusyError``, ``LockedError``             :class:`~relaystore.domain.errors.StoreLocked`
``NotADBError``                            :class:`~relaystore.domain.errors.InvalidInput`
``ReadOnlyError``                          :class:`~relaystore.domain.errors.InvalidInput`
``CorruptError`` (malformed pages)         :class:`~relaystore.domain.errors.InvalidInput` (damaged)
``UnicodeDecodeError`` (text not UTF-8)    :class:`~relaystore.domain.errors.InvalidInput` (damaged)
anything else (I/O, full disk)             :class:`~relaystore.domain.errors.StoreError` (the root)
=========================================  =============================================

A plain ``StoreError`` means a failure this layer cannot classify; the writer fails
that message (its savepoint is rolled back) and stops only when a commit itself fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from ..domain.errors import InvalidInput, StoreError, StoreLocked

__all__ = ["Connection", "is_foreign_key_violation", "store_error", "transaction"]

Connection = apsw.Connection
"""The connection every storage function takes (layers above storage name it by this)."""


def store_error(
    exc: apsw.Error | UnicodeDecodeError, action: str, connection: apsw.Connection | None
) -> StoreError:
    """The relaystore error for ``exc`` raised while doing ``action`` (see module table)."""
    path = _filename(connection)
    if isinstance(exc, UnicodeDecodeError):  # a TEXT value written as other bytes
        return InvalidInput(
            f"{action}: the store holds text that is not UTF-8 ({exc}); it was edited or "
            "damaged: restore it from a backup, or run relaystore audit to find where",
            path=path,
        )
    if isinstance(exc, apsw.ConstraintError):
        return InvalidInput(f"{action} violates a store constraint: {exc}", path=path)
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreLocked(
            f"{action} could not take the SQLite lock within the busy timeout "
            f"(another connection holds it): {exc}",
            path=path,
        )
    if isinstance(exc, apsw.NotADBError):
        return InvalidInput(f"{action}: the file is not a SQLite database ({exc})", path=path)
    if isinstance(exc, apsw.CorruptError):
        # The file is a bad input, as a foreign file is: the same data reads the same
        # way every time. The damage stays where it is; a backup is the way back.
        return InvalidInput(
            f"{action}: the store is damaged (SQLite: {exc}); restore it from a backup, "
            "or recover what is readable with sqlite3's .recover",
            path=path,
        )
    if isinstance(exc, apsw.ReadOnlyError):
        return InvalidInput(
            f"{action} needs a writable store, but this connection is read-only: {exc}",
            path=path,
        )
    return StoreError(f"{action} failed in SQLite: {type(exc).__name__}: {exc}", path=path)


@contextmanager
def transaction(
    connection: apsw.Connection, action: str, *, join: bool = False
) -> Iterator[apsw.Connection]:
    """Run the block as one transaction; ``action`` names it in error messages.

    Outermost, it begins with the connection's ``transaction_mode`` (``IMMEDIATE`` on
    the writer, ``DEFERRED`` on readers) and commits at the end; nested inside another
    transaction it is a SAVEPOINT, so the caller's transaction decides. Any exception
    rolls the block back; apsw errors are re-raised as relaystore errors.

    ``join``: nested, the block runs in the caller's transaction without a savepoint of
    its own (two statements fewer), so a failure leaves what the block wrote for the
    caller to undo: only for a block that is one statement (which SQLite undoes alone),
    or whose callers never catch its error and go on (the writer's batch undoes a failed
    step: each runs in its savepoint, or alone in a transaction rolled back whole).
    """
    if join and connection.in_transaction:
        try:
            yield connection
        except (apsw.Error, UnicodeDecodeError) as exc:
            raise store_error(exc, action, connection) from exc
        return
    try:
        with connection:
            yield connection
    except (apsw.Error, UnicodeDecodeError) as exc:
        raise store_error(exc, action, connection) from exc


def is_foreign_key_violation(exc: apsw.Error) -> bool:
    """True when ``exc`` is SQLite's FOREIGN KEY constraint failure."""
    code: object = getattr(exc, "extendedresult", None)
    return code == apsw.SQLITE_CONSTRAINT_FOREIGNKEY


def _filename(connection: apsw.Connection | None) -> str | None:
    if connection is None:
        return None
    try:
        return connection.filename or None
    except apsw.ConnectionClosedError:
        return None
