"""The writer's group-commit transaction: one ``BEGIN IMMEDIATE``, a savepoint per message.

Guarantees:

* The schema is re-checked under the write lock before any step runs; a refusal rolls
  back and fails the whole batch with :class:`~relaystore.domain.errors.SchemaMismatch`.
* Each step runs in its own savepoint: a step that raises is rolled back alone, and its
  error (an apsw error mapped through :func:`~relaystore.storage.transaction.store_error`)
  is its result; the other steps are unaffected. A step run ``alone`` (the batch's only
  one) skips the savepoint: when it raises, the whole transaction is rolled back, which
  undoes exactly what the savepoint would have, and :meth:`Batch.commit` then commits
  nothing.
* Nothing is reported before ``COMMIT`` returned: :meth:`Batch.commit` raises
  :class:`BatchLost` when ``BEGIN`` or ``COMMIT`` fails, after which nobody can tell what
  the store holds of the batch.
* Except a ``BEGIN`` that another connection's write lock kept waiting past the busy
  timeout: then nothing began, the store is exactly as it was, and entering the batch
  raises :class:`~relaystore.domain.errors.StoreBusy` (transient: the next batch may
  begin).
* An exception from outside the steps (an interrupt between the batch's own statements,
  which ``with`` alone cannot cover: after ``BEGIN`` ran and before the batch knew it,
  or after ``COMMIT`` ran) leaves the connection usable through :func:`settle_batch`: no
  transaction open, and the newest ``seq`` read again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from ..domain.errors import StoreBusy, StoreError, WriterStopped
from .connection import WriterConnection
from .paging import load_latest_seq
from .sequences import LATEST_SEQ
from .transaction import store_error

__all__ = ["Batch", "BatchLost", "settle_batch"]

M = TypeVar("M")


class BatchLost(WriterStopped):
    """``BEGIN`` or ``COMMIT`` failed: the batch may or may not be in the store."""


class Batch:
    """One group-commit transaction on the writer connection.

    Use as ``with Batch(writer) as batch: batch.run(step) ...; batch.commit()``. Leaving
    the block without :meth:`commit` rolls everything back.
    """

    def __init__(self, writer: WriterConnection) -> None:
        self._writer = writer
        self._connection = writer.connection
        self._cursor = writer.connection.cursor()  # one for BEGIN, the seq, COMMIT
        self._open = False
        self._lost: str | None = None  # set when a failed step's ROLLBACK failed too

    def __enter__(self) -> Batch:
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except apsw.BusyError as exc:
            raise _busy(self._connection, exc) from exc
        except apsw.Error as exc:
            raise BatchLost(f"the writer could not begin a transaction: {exc}") from exc
        self._open = True
        try:
            self._writer.check_schema()
        except BaseException:
            self._rollback()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self._rollback()

    def run(
        self, operation: Callable[[apsw.Connection, M], Any], message: M, *, alone: bool = False
    ) -> tuple[Any, Exception | None]:
        """Run ``operation(connection, message)`` in a savepoint: ``(value, None)``, or
        ``(None, error)`` with the step rolled back.

        A :class:`StoreError` (or an apsw error, mapped) is the step's own failure; any
        other exception is returned as it is, for the caller to log as a bug.

        ``alone``: this is the batch's only step, so it runs without a savepoint (two
        statements fewer); if it fails, the whole transaction is rolled back instead
        and no other step may run after it.
        """
        if not self._open:
            raise RuntimeError("the batch's transaction is over")
        try:
            if alone:
                value = operation(self._connection, message)
            else:
                with self._connection:  # a savepoint: a failure undoes only this step
                    value = operation(self._connection, message)
        except StoreError as exc:
            error: Exception = exc
        except apsw.Error as exc:
            error = store_error(exc, "a write", self._connection)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which logs it
            error = exc
        else:
            return value, None
        if alone and not self._rollback():
            self._lost = f"rolling back a failed write failed too ({error})"
        return None, error

    def commit(self) -> int:
        """Commit; return the newest API event ``seq`` now in the store.

        After a step run ``alone`` failed (its transaction already rolled back) there
        is nothing to commit: this only reads the newest ``seq``.
        """
        if self._lost is not None:
            raise BatchLost(f"{self._lost}; the store may or may not hold the last batch")
        if not self._open:
            try:
                return load_latest_seq(self._connection)
            except StoreError as exc:
                raise BatchLost(f"reading the newest seq failed after a rollback ({exc})") from exc
        try:
            row = self._cursor.execute(LATEST_SEQ).fetchone()
            self._cursor.execute("COMMIT")
        except apsw.Error as exc:
            self._rollback()
            raise BatchLost(
                f"commit failed ({exc}); the store may or may not hold the last batch"
            ) from exc
        self._open = False
        return int(row[0]) if row is not None and row[0] is not None else 0

    def _rollback(self) -> bool:
        """Roll the open transaction back; False when the ROLLBACK itself failed."""
        if self._open:
            self._open = False
            try:
                self._cursor.execute("ROLLBACK")
            except apsw.Error:
                # SQLite may have rolled back already (some errors end the transaction).
                return not self._connection.in_transaction
        return True


def settle_batch(writer: WriterConnection) -> int:
    """After an exception escaped a :class:`Batch` from outside its steps: roll back the
    transaction it may have left open, and return the newest API event ``seq`` the
    store holds (its ``COMMIT`` may have run before the exception).

    What was rolled back was never reported (nothing is before ``COMMIT`` returned).
    Raises :class:`BatchLost` when the rollback or the read fails: nobody can tell then
    what the connection holds.
    """
    connection = writer.connection
    try:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        return load_latest_seq(connection)
    except (apsw.Error, StoreError) as exc:
        raise BatchLost(f"settling an interrupted batch failed ({exc})") from exc


def _busy(connection: apsw.Connection, exc: apsw.BusyError) -> StoreBusy:
    waited = connection.pragma("busy_timeout")
    return StoreBusy(
        f"another connection holds SQLite's write lock on the store (waited {waited} ms, "
        f"the busy timeout; {exc}); nothing of this batch was written: retry once the lock "
        "is released",
        path=connection.filename or None,
    )
