"""Where a store filled from a stream stands: ``replica_sources`` and what it holds.

``relaystore restore`` and ``relaystore mirror`` (:mod:`relaystore.actors.nats.replica`)
read here, before they apply anything (:mod:`.replica`), how far each source store is
applied (its stream position and its :class:`~relaystore.domain.replication.Mark`),
whether the target is empty, and what it holds that a restore did not write.
"""

from __future__ import annotations

import apsw

from ..domain.replication import Mark
from .transaction import transaction

__all__ = [
    "adopt_store_id",
    "mark_scopes",
    "replica_mark",
    "replica_position",
    "restore_target",
    "target_is_empty",
]


def replica_position(connection: apsw.Connection, store_id: str, stream: str, scope: str) -> int:
    """The stream sequence applied up to for ``store_id`` in ``scope`` (0: none)."""
    row = connection.execute(
        "SELECT stream_seq FROM replica_sources WHERE store_id = ? AND stream = ? AND scope = ?",
        (store_id, stream, scope),
    ).fetchone()
    return 0 if row is None else int(row[0])


def mark_scopes(scope: str) -> tuple[str, str]:
    """The ``replica_sources`` rows (by scope) of a :class:`Mark`: its change and seq."""
    return f"{scope}#change", f"{scope}#seq"


def replica_mark(
    connection: apsw.Connection, store_id: str, stream: str, scope: str
) -> Mark | None:
    """The mark of ``store_id`` applied in ``scope`` ((0, 0): none applied; None: a
    replica of 0.4, which kept only its stream position)."""
    found = dict(
        connection.execute(
            "SELECT scope, stream_seq FROM replica_sources WHERE store_id = ? AND stream = ? "
            "AND scope IN (?, ?, ?)",
            (store_id, stream, scope, *mark_scopes(scope)),
        )
    )
    change_scope, seq_scope = mark_scopes(scope)
    if change_scope in found and seq_scope in found:
        return Mark(int(found[change_scope]), int(found[seq_scope]))
    return None if found.get(scope) else Mark(0, 0)


def restore_target(connection: apsw.Connection, store_id: str) -> tuple[int, int, int]:
    """What the store holds that a restore of ``store_id`` did not write: its sessions
    (and their API events) not restored from that store, and the other stores it
    restores or mirrors (see :func:`~relaystore.domain.replication.check_restore_target`)."""
    with transaction(connection, "check what the store holds"):
        own = connection.execute(
            "SELECT session_id FROM session_contexts UNION SELECT session_id FROM sessions "
            "EXCEPT SELECT session_id FROM replica_sessions WHERE store_id = ?",
            (store_id,),
        ).fetchall()
        events = 0
        if own:
            events = int(
                connection.execute(
                    "SELECT count(*) FROM api_events WHERE session_id NOT IN "
                    "(SELECT session_id FROM replica_sessions WHERE store_id = ?)",
                    (store_id,),
                ).get
            )
        others = connection.execute(
            "SELECT count(DISTINCT store_id) FROM replica_sources WHERE store_id != ?",
            (store_id,),
        ).get
        return len(own), events, int(others)


def target_is_empty(connection: apsw.Connection) -> bool:
    """Whether the store holds no session, no API event and nothing restored yet."""
    with transaction(connection, "check that the store is empty"):
        return all(
            connection.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None
            for table in ("session_contexts", "api_events", "replica_sources")
        )


def adopt_store_id(connection: apsw.Connection, store_id: str) -> None:
    """Give an empty store the id of the store it restores (one transaction), so that
    it publishes on as that store once the restore holds all it published."""
    with transaction(connection, "take the restored store's id"):
        connection.execute(
            "UPDATE store_identity SET store_id = ? WHERE singleton = 1", (store_id,)
        )
