"""Sub-agent relations travel with the store: publish/restore, mirror, backup, the CLI.

A relation is part of its child's record change (``store_changes``), so ``publish``
carries it and its updates, ``restore`` and ``mirror`` write it back under the local ids
(a mirror's qualified ones), a restore of some sessions keeps only relations whose
parent it holds (as the origin's ``load_state`` drops a relation whose parent is not
loaded), and a deleted parent's relation is deleted on the replica too. Through a real
nats-server; the stores are written through the facade, read with the CLI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from relaystore import EventStore, SaveSession
from relaystore.domain.messages import BackupStore, DeleteSession, SaveSubagent
from relaystore.domain.reads import ListSubagents
from relaystore.domain.subagents import SubagentRecord
from relaystore.domain.wire import decode_json
from relaystore.testing import example_session
from tests.actors.nats_support import NatsServer, attempt, run, running_server, store_id

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    (tmp_path / "nats").mkdir()
    with running_server(tmp_path / "nats") as server:
        yield server


def relation(child: str, parent: str = "parent", **changes: object) -> SubagentRecord:
    record = SubagentRecord(
        child_session_id=child,
        parent_session_id=parent,
        task_name=f"task of {child}",
        profile_id="codex",
        initial_prompt="do it",
        request_key=f"key-{child}",
        created_at="2026-09-24T00:00:00Z",
    )
    for name, value in changes.items():
        setattr(record, name, value)
    return record


def family(db: Path) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    with EventStore.open(db) as store:
        for session_id in ("parent", "child-a", "child-b", "loner"):
            store.ask(SaveSession(record=example_session(session_id)))
        store.ask(SaveSubagent(record=relation("child-a")))
        store.ask(SaveSubagent(record=relation("child-b")))


def stored_relation(db: Path, child: str) -> SubagentRecord:
    with apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY) as connection:
        text = connection.execute(
            "SELECT record_json FROM subagent_sessions WHERE child_session_id = ?", (child,)
        ).get
    return decode_json(str(text), SubagentRecord)


def subagents(db: Path, parent: str) -> dict[str, object]:
    document = json.loads(run(db, "subagents", parent, "--json").stdout)
    assert isinstance(document, dict)
    return document


def top_level(db: Path) -> list[str]:
    lines = run(db, "sessions", "--no-all").stdout.decode().splitlines()
    return [line.split("\t")[0] for line in lines]


def test_the_cli_lists_sub_agents_and_top_level_sessions(tmp_path: Path) -> None:
    db = tmp_path / "a" / "store.sqlite3"
    family(db)
    assert top_level(db) == ["loner", "parent"]
    every = run(db, "sessions").stdout.decode().splitlines()
    assert [line.split("\t")[0] for line in every] == ["child-a", "child-b", "loner", "parent"]
    text = run(db, "subagents", "parent").stdout.decode().splitlines()
    assert [line.split("\t")[:2] for line in text] == [
        ["child-a", "task of child-a"],
        ["child-b", "task of child-b"],
    ]
    listed = subagents(db, "parent")
    assert [v["session"]["id"] for v in listed["subagents"]] == ["child-a", "child-b"]  # type: ignore[index, union-attr]
    missing = attempt(db, "subagents", "nobody")
    assert missing.returncode == 1
    assert missing.stderr.count("\n") == 1
    assert "nobody" in missing.stderr


def test_a_backup_keeps_the_relations(tmp_path: Path) -> None:
    db = tmp_path / "a" / "store.sqlite3"
    family(db)
    copy = tmp_path / "copy.sqlite3"
    with EventStore.open(db) as store:
        store.ask(BackupStore(destination=str(copy)))
    assert subagents(copy, "parent") == subagents(db, "parent")
    assert top_level(copy) == ["loner", "parent"]


def test_publish_and_restore_carry_relations_and_their_updates(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = tmp_path / "a" / "store.sqlite3"
    family(original)
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    assert subagents(restored, "parent") == subagents(original, "parent")
    assert top_level(restored) == ["loner", "parent"]

    # An update (the noticed turn) and a deleted parent reach the replica.
    with EventStore.open(original) as store:
        store.ask(SaveSubagent(record=relation("child-a", noticed_turn=4)))
        store.ask(SaveSession(record=example_session("other")))
        store.ask(SaveSubagent(record=relation("other", parent="loner")))
    run(original, "publish", "--nats", nats_server.url, "--once")
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    with EventStore.open(restored, read_only=True) as store:
        listed = store.ask(ListSubagents(parent_session_id="parent"))
        assert listed is not None
        assert [v.session.id for v in listed.subagents] == ["child-a", "child-b"]
    assert stored_relation(restored, "child-a") == stored_relation(original, "child-a")
    assert stored_relation(restored, "child-a").noticed_turn == 4
    assert subagents(restored, "loner") == subagents(original, "loner")
    with EventStore.open(original) as store:
        store.ask(DeleteSession(session_id="parent"))
    run(original, "publish", "--nats", nats_server.url, "--once")
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    assert top_level(restored) == top_level(original) == ["child-a", "child-b", "loner"]


def test_a_partial_restore_keeps_only_relations_whose_parent_it_holds(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = tmp_path / "a" / "store.sqlite3"
    family(original)
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    alone = tmp_path / "b" / "store.sqlite3"
    alone.parent.mkdir()
    run(alone, "restore", "--nats", nats_server.url, "--store", sid, "--session", "child-a")
    assert top_level(alone) == ["child-a"]  # its parent is not here: it is top-level
    both = tmp_path / "c" / "store.sqlite3"
    both.parent.mkdir()
    run(
        both,
        "restore",
        "--nats",
        nats_server.url,
        "--store",
        sid,
        "--session",
        "parent",
        "--session",
        "child-a",
    )
    assert top_level(both) == ["parent"]
    listed = subagents(both, "parent")
    assert [v["session"]["id"] for v in listed["subagents"]] == ["child-a"]  # type: ignore[index, union-attr]


def test_a_mirror_keeps_each_stores_relations_under_its_ids(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    one, two = tmp_path / "one" / "store.sqlite3", tmp_path / "two" / "store.sqlite3"
    family(one)
    family(two)
    for db in (one, two):
        run(db, "publish", "--nats", nats_server.url, "--once")
    mirror = tmp_path / "m" / "mirror.sqlite3"
    mirror.parent.mkdir()
    run(mirror, "mirror", "--nats", nats_server.url)
    ids = {store_id(one)[:8], store_id(two)[:8]}
    qualified = next(
        suffix for suffix in ids if attempt(mirror, "subagents", f"parent.{suffix}").returncode == 0
    )
    assert top_level(mirror) == sorted(
        ["loner", "parent", f"loner.{qualified}", f"parent.{qualified}"]
    )
    plain = subagents(mirror, "parent")
    assert [v["session"]["id"] for v in plain["subagents"]] == ["child-a", "child-b"]  # type: ignore[index, union-attr]
    renamed = subagents(mirror, f"parent.{qualified}")
    assert [
        (v["parent_session_id"], v["session"]["id"])
        for v in renamed["subagents"]  # type: ignore[union-attr]
    ] == [
        (f"parent.{qualified}", f"child-a.{qualified}"),
        (f"parent.{qualified}", f"child-b.{qualified}"),
    ]
