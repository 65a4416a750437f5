"""Sub-agent relations through the facades: recorded, updated, listed, deleted, migrated.

The record's wire shape is the origin's ``SubagentRecord`` (``mj-core/src/subagent.rs``;
with ``reported_finish`` as ``save_subagent_session`` writes it in
``mj-controller/src/server/api/tests.rs`` @04067804): ``noticed_turn`` under its
historical name ``delivered_turn``, ``model``/``effort``/``delivered_turn``/
``reported_finish`` only when set, ``handback_tool`` only when true, and
``SubagentFinishIdentity`` tagged on ``kind``. The list's shape is ``SubagentView`` and
``SubagentListResponse`` (``types.rs`` @04067804); ``?all=false`` leaves sub-agents out
as ``list_sessions`` does (``query.all || !session.is_subagent_session``, @cd3bffd).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import apsw
import msgspec
import pytest

from relaystore import EventStore, ListSessions, SaveSession
from relaystore.aio import AsyncEventStore
from relaystore.domain.errors import InvalidInput, UnknownSession
from relaystore.domain.messages import DeleteSession, SaveSubagent
from relaystore.domain.reads import ListSubagents
from relaystore.domain.subagents import SubagentRecord, TerminalFinish, TurnFinish
from relaystore.domain.wire import decode_json, encode
from relaystore.testing import example_session

GOLDEN = (
    b'{"child_session_id":"child-1","parent_session_id":"parent-1","task_name":"audit deps",'
    b'"profile_id":"helper","working_directory":"","initial_prompt":"check the lockfile",'
    b'"request_key":"request-1","created_at":"2026-09-24T00:00:00Z","handback_tool":true}'
)


def relation(child: str = "child-1", parent: str = "parent-1", **changes: object) -> SubagentRecord:
    record = SubagentRecord(
        child_session_id=child,
        parent_session_id=parent,
        task_name="audit deps",
        profile_id="helper",
        initial_prompt="check the lockfile",
        request_key="request-1",
        created_at="2026-09-24T00:00:00Z",
        handback_tool=True,
    )
    return msgspec.structs.replace(record, **changes)


def test_the_record_is_the_origins_bytes() -> None:
    assert encode(relation()) == GOLDEN
    assert decode_json(GOLDEN, SubagentRecord) == relation()
    full = relation(
        model="luna",
        effort="high",
        working_directory="crates/core",
        noticed_turn=3,
        reported_finish=TurnFinish(start_position=4, completed_ordinal=9, state="completed"),
        handback_tool=False,
    )
    assert encode(full) == (
        b'{"child_session_id":"child-1","parent_session_id":"parent-1","task_name":"audit deps",'
        b'"profile_id":"helper","model":"luna","effort":"high","working_directory":"crates/core",'
        b'"initial_prompt":"check the lockfile","request_key":"request-1",'
        b'"created_at":"2026-09-24T00:00:00Z","delivered_turn":3,"reported_finish":'
        b'{"kind":"turn","start_position":4,"completed_ordinal":9,"state":"completed"}}'
    )
    terminal = decode_json(
        b'{"kind":"terminal","state":"failed","detail":"quota","updated_at":"2026-09-24"}',
        TerminalFinish,
    )
    assert encode(terminal) == b'{"kind":"terminal","state":"failed","detail":"quota"}'
    with pytest.raises(InvalidInput):
        decode_json(GOLDEN[:-1] + b',"colour":1}', SubagentRecord)


def _stored(store: EventStore, *ids: str) -> None:
    for session_id in ids:
        store.ask(SaveSession(record=example_session(session_id)))


def _ids(store: EventStore, *, every: bool) -> list[str]:
    return [s.id for s in store.ask(ListSessions(all=every)).sessions]


def test_record_update_list_and_delete(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        _stored(store, "parent-1", "child-1", "child-2", "loner")
        store.ask(SaveSubagent(record=relation()))
        store.ask(SaveSubagent(record=relation("child-2", task_name="write docs")))
        assert _ids(store, every=True) == ["child-1", "child-2", "loner", "parent-1"]
        assert _ids(store, every=False) == ["loner", "parent-1"]

        listed = store.ask(ListSubagents(parent_session_id="parent-1"))
        assert listed is not None
        assert [(v.session.id, v.task_name) for v in listed.subagents] == [
            ("child-1", "audit deps"),
            ("child-2", "write docs"),
        ]
        assert encode(listed).startswith(
            b'{"subagents":[{"parent_session_id":"parent-1","task_name":"audit deps",'
            b'"session":{"background_tasks":[],"subagents":{"mode":"native"},"id":"child-1",'
        )
        assert store.ask(ListSubagents(parent_session_id="loner")).subagents == []  # type: ignore[union-attr]
        assert store.ask(ListSubagents(parent_session_id="nobody")) is None

        # Updating: the noticed turn and the reported finish.
        finish = TerminalFinish(state="failed", detail="quota", last_completed_ordinal=7)
        store.ask(SaveSubagent(record=relation(noticed_turn=5, reported_finish=finish)))
        with apsw.Connection(
            str(tmp_path / "store.sqlite3"), flags=apsw.SQLITE_OPEN_READONLY
        ) as db:
            stored = db.execute(
                "SELECT record_json FROM subagent_sessions WHERE child_session_id = 'child-1'"
            ).get
        assert decode_json(str(stored), SubagentRecord) == relation(
            noticed_turn=5, reported_finish=finish
        )

        # A child keeps its parent; both sessions must exist; the relation is valid.
        with pytest.raises(InvalidInput, match="keeps its parent"):
            store.ask(SaveSubagent(record=relation(parent="loner")))
        with pytest.raises(UnknownSession):
            store.ask(SaveSubagent(record=relation("child-9")))
        with pytest.raises(UnknownSession):
            store.ask(SaveSubagent(record=relation(parent="parent-9")))
        with pytest.raises(InvalidInput, match="own sub-agent"):
            store.ask(SaveSubagent(record=relation("loner", parent="loner")))
        with pytest.raises(InvalidInput, match="task_name"):
            store.ask(SaveSubagent(record=relation(task_name=" ")))

        # Deleted with its sessions: the child, then the parent.
        store.ask(DeleteSession(session_id="child-2"))
        assert [
            v.session.id for v in store.ask(ListSubagents(parent_session_id="parent-1")).subagents
        ] == ["child-1"]  # type: ignore[union-attr]
        store.ask(DeleteSession(session_id="parent-1"))
        assert _ids(store, every=False) == ["child-1", "loner"]


def test_the_async_facade_records_and_lists(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with AsyncEventStore.open(tmp_path / "store.sqlite3") as store:
            for session_id in ("parent-1", "child-1"):
                await store.ask(SaveSession(record=example_session(session_id)))
            await store.ask(SaveSubagent(record=relation()))
            listed = await store.ask(ListSubagents(parent_session_id="parent-1"))
            assert listed is not None
            assert [v.session.id for v in listed.subagents] == ["child-1"]
            top = await store.ask(ListSessions(all=False))
            assert [s.id for s in top.sessions] == ["parent-1"]

    asyncio.run(scenario())
