"""relaystore's storage layer: the SQLite schema and every read and write of the store.

Plain functions over an apsw connection; no threads, no global state. Writers get their
connection from :func:`relaystore.storage.connection.open_writer` (the only write
connection, locked across processes) and readers from
:func:`relaystore.storage.connection.open_reader`. Every operation is one transaction,
or a savepoint when the caller already holds one, and raises only the errors of
:mod:`relaystore.domain.errors`. Import each name from its module; this package
re-exports nothing. Internal, as the other layers are: the contract is what
:mod:`relaystore` exports.
"""

from __future__ import annotations

__all__: list[str] = []
