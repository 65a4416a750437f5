"""The writer's group-commit transaction: one ``BEGIN IMMEDIATE``, a savepoint per message.

Guarantees:

* The schema is re-checked under the write lock before any step runs; a refusal rolls
  back and fails the whole batch with :class:`~relaystore.domain.errors.SchemaMismatch`.
* Each step runs in its own savepoint: a step that raises is rolled back alone, and its
  error (an apsw error mapped through :func:`~relaystore.storage.transaction.store_error`)
  is its result; the other steps are unaffected.
* Nothing is reported before ``COMMIT`` returned: :meth:`Batch.commit` raises
  :class:`BatchLost` when ``BEGIN`` or ``COMMIT`` fails, after which nobody can tell what
  the store holds of the batch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

import apsw

from relaystore.domain.errors import StoreError, WriterStopped
from relaystore.storage.connection import WriterConnection
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.transaction import store_error

__all__ = ["Batch", "BatchLost"]

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
        self._open = False

    def __enter__(self) -> Batch:
        try:
            self._connection.execute("BEGIN IMMEDIATE")
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
        self, operation: Callable[[apsw.Connection, M], Any], message: M
    ) -> tuple[Any, Exception | None]:
        """Run ``operation(connection, message)`` in a savepoint: ``(value, None)``, or
        ``(None, error)`` with the step rolled back.

        A :class:`StoreError` (or an apsw error, mapped) is the step's own failure; any
        other exception is returned as it is, for the caller to log as a bug.
        """
        try:
            with self._connection:  # a savepoint: a failure undoes only this step
                value = operation(self._connection, message)
        except StoreError as exc:
            return None, exc
        except apsw.Error as exc:
            return None, store_error(exc, "a write", self._connection)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which logs it
            return None, exc
        return value, None

    def commit(self) -> int:
        """Commit; return the newest API event ``seq`` now in the store."""
        try:
            latest = load_latest_seq(self._connection)
            self._connection.execute("COMMIT")
        except (apsw.Error, StoreError) as exc:
            self._rollback()
            raise BatchLost(
                f"commit failed ({exc}); the store may or may not hold the last batch"
            ) from exc
        self._open = False
        return latest

    def _rollback(self) -> None:
        if self._open:
            self._open = False
            with contextlib.suppress(apsw.Error):
                self._connection.execute("ROLLBACK")
