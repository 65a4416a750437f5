"""Sub-agent relations: which stored session a child of which parent is.

``subagent_sessions`` (schema revision
:data:`~relaystore.storage.schema.SUBAGENTS_REVISION`, :data:`SUBAGENTS_DDL`) holds one
row per child: its parent and the whole :class:`~relaystore.domain.subagents.SubagentRecord`
as JSON. Both ids reference ``sessions`` ``ON DELETE CASCADE``, so deleting either
session deletes the relation in the same transaction (the origin refuses to delete a
parent with children; relaystore's ``DeleteSession`` deletes, and the children become
top-level). Every change to a row numbers a ``record`` change of its child in
``store_changes`` (the triggers here), so ``publish`` carries the relation with the
child's record (:func:`load_subagent_row`) and ``restore``/``mirror`` write it back
(:func:`apply_subagent_row`).

Guarantees: :func:`save_subagent` validates first and writes in one transaction (a
savepoint inside the caller's); a recorded child keeps its parent. Reads are
:func:`list_subagents` (one read transaction).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import msgspec

from ..domain.errors import InvalidInput, UnknownSession
from ..domain.replication import SubagentRow
from ..domain.sessions.checks import quoted
from ..domain.subagents import SubagentList, SubagentRecord, SubagentView
from ..domain.wire import decode_json, encode
from .reads.sessions import load_session_view
from .transaction import transaction

__all__ = [
    "SUBAGENTS_DDL",
    "apply_subagent_row",
    "list_subagents",
    "load_subagent_row",
    "save_subagent",
]

SUBAGENTS_DDL = """
CREATE TABLE IF NOT EXISTS subagent_sessions (
    child_session_id TEXT PRIMARY KEY
        REFERENCES sessions(session_id) ON DELETE CASCADE,
    parent_session_id TEXT NOT NULL
        REFERENCES sessions(session_id) ON DELETE CASCADE,
    record_json TEXT NOT NULL CHECK(json_valid(record_json)),
    CHECK(child_session_id <> parent_session_id)
) STRICT;
CREATE INDEX IF NOT EXISTS subagent_sessions_parent
    ON subagent_sessions(parent_session_id, child_session_id);
""" + "".join(
    f"CREATE TRIGGER IF NOT EXISTS store_changes_subagent_sessions_{when.lower()} "
    f"AFTER {when} ON subagent_sessions BEGIN INSERT INTO store_changes(kind, session_id) "
    f"VALUES ('record', {row}.child_session_id); END;\n"
    for when, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD"))
)
"""The relation table, its parent index, and the triggers numbering its changes."""


def _exists(connection: apsw.Connection, session_id: str) -> bool:
    return (
        connection.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).get
        is not None
    )


def save_subagent(connection: apsw.Connection, record: SubagentRecord) -> None:
    """Record ``record``'s child as a sub-agent of its parent, or update the relation.

    Raises :class:`InvalidInput` for an invalid relation or a child recorded under
    another parent, :class:`UnknownSession` when either session is not stored; nothing
    is written then.
    """
    record.validate()
    child, parent = record.child_session_id, record.parent_session_id
    with transaction(connection, f"save sub-agent {child}"):
        for session_id in (parent, child):
            if not _exists(connection, session_id):
                raise UnknownSession(session_id)
        recorded = connection.execute(
            "SELECT parent_session_id FROM subagent_sessions WHERE child_session_id = ?",
            (child,),
        ).get
        if recorded is not None and str(recorded) != parent:
            raise InvalidInput(
                f"session {child} is recorded as a sub-agent of {quoted(str(recorded))}; "
                f"a sub-agent keeps its parent (not {quoted(parent)})",
                session_id=child,
            )
        connection.execute(
            "INSERT INTO subagent_sessions(child_session_id, parent_session_id, record_json) "
            "VALUES (?, ?, ?) ON CONFLICT(child_session_id) DO UPDATE SET "
            "record_json = excluded.record_json WHERE record_json IS NOT excluded.record_json",
            (child, parent, encode(record).decode()),
        )


def list_subagents(connection: apsw.Connection, parent_session_id: str) -> SubagentList | None:
    """The parent's children ordered by child id, each with its session as the session
    list shows it, in one read transaction; ``None`` when the parent is not stored."""
    with transaction(connection, f"list the sub-agents of {parent_session_id}"):
        if not _exists(connection, parent_session_id):
            return None
        rows = connection.execute(
            "SELECT child_session_id, record_json FROM subagent_sessions "
            "WHERE parent_session_id = ? ORDER BY child_session_id",
            (parent_session_id,),
        ).fetchall()
        views = []
        for child, record_json in rows:
            record = _decode(str(child), str(record_json))
            session = load_session_view(connection, str(child))
            if session is None:  # the FK makes this unreachable; a damaged file is not
                raise UnknownSession(str(child))
            views.append(
                SubagentView(
                    parent_session_id=parent_session_id,
                    task_name=record.task_name,
                    session=session,
                )
            )
    return SubagentList(subagents=views)


def _decode(child: str, record_json: str) -> SubagentRecord:
    try:
        return decode_json(record_json, SubagentRecord)
    except (msgspec.DecodeError, InvalidInput) as exc:
        raise InvalidInput(
            f"stored sub-agent relation does not decode: {exc}; the store may have been "
            "written by another tool",
            session_id=child,
        ) from exc


def load_subagent_row(connection: apsw.Connection, child_session_id: str) -> SubagentRow | None:
    """The child's relation as stored (for a ``record`` change), None when it has none."""
    found = connection.execute(
        "SELECT parent_session_id, record_json FROM subagent_sessions WHERE child_session_id = ?",
        (child_session_id,),
    ).fetchone()
    return None if found is None else SubagentRow(str(found[0]), str(found[1]))


def apply_subagent_row(
    connection: apsw.Connection,
    local: str,
    row: SubagentRow | None,
    local_parent: Callable[[str], str | None],
) -> None:
    """Write a replicated child's relation under its local id (a mirror's qualified one),
    or delete it for None. A relation whose parent this store does not hold (a restore of
    some sessions only) is not kept, as the origin drops a relation whose parent is not
    loaded."""
    parent = None if row is None else local_parent(row.parent_session_id)
    if row is None or parent is None or not _exists(connection, parent):
        connection.execute("DELETE FROM subagent_sessions WHERE child_session_id = ?", (local,))
        return
    record = msgspec.json.decode(row.record_json, type=dict[str, object])
    record["child_session_id"], record["parent_session_id"] = local, parent
    connection.execute(
        "INSERT INTO subagent_sessions(child_session_id, parent_session_id, record_json) "
        "VALUES (?, ?, ?) ON CONFLICT(child_session_id) DO UPDATE SET "
        "parent_session_id = excluded.parent_session_id, record_json = excluded.record_json",
        (local, parent, msgspec.json.encode(record).decode()),
    )
