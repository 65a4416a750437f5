"""The source of truth through a real nats-server: publish --once, restore, mirror.

A store published with ``relaystore publish --once`` and restored with ``relaystore
restore`` into another folder prints the same ``events`` (bytes), the same ``show``
per session, audits clean and keeps its store id; restoring while the stream is still
being written continues where it stopped; ``mirror`` holds two stores' sessions.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.http_support import start_server, stop_server
from tests.actors.nats_support import (
    NatsServer,
    attempt,
    events_lines,
    journal_root,
    run,
    running_server,
    store_id,
    stream_messages,
)
from tests.actors.replica_support import (
    assert_restored,
    assert_stream_once,
    make_store,
    session_ids,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

STREAM = "RELAYSTORE"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    (tmp_path / "nats").mkdir()
    with running_server(tmp_path / "nats") as server:
        yield server


def _restore(db: Path, url: str, store: str, *extra: str) -> str:
    return run(db, "restore", "--nats", url, "--store", store, *extra).stdout.decode()


def test_a_restored_store_prints_what_the_original_printed(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = make_store(tmp_path / "machine-a", "store")
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    messages = stream_messages(nats_server.url, STREAM, f"relaystore.{sid}.>")
    assert_stream_once(messages)
    assert {"event", "record", "log", "commit"} <= {message.kind for message in messages}
    restored = tmp_path / "machine-b" / "store.sqlite3"
    restored.parent.mkdir()
    _restore(restored, nats_server.url, sid)
    assert_restored(original, restored)
    # The restored store publishes on as the same store: nothing is sent again.
    again = run(restored, "publish", "--nats", nats_server.url, "--once").stderr.decode()
    assert "0 published" in again
    assert "change" in again
    assert len(stream_messages(nats_server.url, STREAM, f"relaystore.{sid}.>")) == len(messages)


def test_restore_continues_where_it_stopped_while_the_stream_is_written(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = make_store(tmp_path / "a", "store", turns=0)
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    first = _restore(restored, nats_server.url, sid)
    assert_restored(original, restored)
    # The source goes on: a new session and more turns of it; published; restored again.
    run(original, "replay", str(journal_root(tmp_path / "roots", "later", 30)))
    run(original, "publish", "--nats", nats_server.url, "--once")
    second = _restore(restored, nats_server.url, sid)
    assert_restored(original, restored)
    assert "35 API events" in first
    assert "60 API events" in second
    assert "0 API events" in _restore(restored, nats_server.url, sid)
    assert "run again" not in first + second  # said only when there is more to do


def test_a_publish_cut_short_is_applied_only_to_its_last_commit_marker(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Messages after a store's last commit marker wait: a restore holds a committed
    state, never half of one."""
    import asyncio

    import nats

    original = make_store(tmp_path / "a", "store", turns=0)
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    before = events_lines(original)

    async def stray_event() -> None:  # an event published with no marker after it
        nc = await nats.connect(nats_server.url)
        line = json.loads(before[-1])
        line["seq"] = line["seq"] + 1
        await nc.jetstream().publish(
            f"relaystore.{sid}.default.{line['session_id']}",
            json.dumps(line, separators=(",", ":")).encode(),
            headers={"Relaystore-Store": sid, "Relaystore-Seq": str(line["seq"])},
        )
        await nc.close()

    asyncio.run(stray_event())
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    said = _restore(restored, nats_server.url, sid)
    assert events_lines(restored) == before
    assert "1 message past the last commit marker wait for the next: run again" in said


def test_restore_refuses_a_store_holding_one_of_the_sessions(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = make_store(tmp_path / "a", "store", turns=0)
    run(original, "publish", "--nats", nats_server.url, "--once")
    other = make_store(tmp_path / "b", "other", turns=0)  # the same example sessions
    before = events_lines(other)
    refused = attempt(other, "restore", "--nats", nats_server.url, "--store", store_id(original))
    assert refused.returncode == 1
    assert f"refusing to restore store {store_id(original)}" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert events_lines(other) == before


def test_restore_of_some_sessions_holds_only_those(tmp_path: Path, nats_server: NatsServer) -> None:
    original = make_store(tmp_path / "a", "store")
    run(original, "publish", "--nats", nats_server.url, "--once")
    wanted = session_ids(original)[0]
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    _restore(restored, nats_server.url, store_id(original), "--session", wanted)
    assert session_ids(restored) == [wanted]
    assert (
        events_lines(restored) == run(original, "events", "--session", wanted).stdout.splitlines()
    )
    assert run(restored, "show", wanted).stdout == run(original, "show", wanted).stdout
    assert attempt(restored, "audit").returncode == 0


def test_mirror_holds_every_store_and_qualifies_a_shared_session_id(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    one = make_store(tmp_path / "one", "store", turns=0)
    two = make_store(tmp_path / "two", "store", turns=5, extra="only-two")
    for db in (one, two):
        run(db, "publish", "--nats", nats_server.url, "--once")
    mirror = tmp_path / "m" / "mirror.sqlite3"
    mirror.parent.mkdir()
    run(mirror, "mirror", "--nats", nats_server.url)
    first, second = store_id(one), store_id(two)
    shared = session_ids(one)
    expected = sorted(shared + ["only-two"] + [f"{session}.{second[:8]}" for session in shared])
    assert sorted(session_ids(mirror)) == expected
    assert len(events_lines(mirror)) == len(events_lines(one)) + len(events_lines(two))
    for session in shared:  # the projections, field for field, under their mirror ids
        assert run(mirror, "show", session).stdout == run(one, "show", session).stdout
        qualified = json.loads(run(mirror, "show", f"{session}.{second[:8]}").stdout)
        origin = json.loads(run(two, "show", session).stdout)
        assert qualified["transcript"] == origin["transcript"]
    assert attempt(mirror, "audit").returncode == 0
    assert store_id(mirror) not in (first, second)
    # serve answers the read routes for the whole fleet from the mirror.
    server = start_server(mirror)
    try:
        listed = server.get("/api/v1/sessions").json()["sessions"]
        assert sorted(entry["id"] for entry in listed) == expected
        qualified_id = f"{shared[0]}.{second[:8]}"
        transcript = server.get(f"/api/v1/sessions/{qualified_id}/transcript")
        assert transcript.status_code == 200
    finally:
        stop_server(server)
    # Rebuildable: a new mirror from the same stream holds the same.
    rebuilt = tmp_path / "m2" / "mirror.sqlite3"
    rebuilt.parent.mkdir()
    run(rebuilt, "mirror", "--nats", nats_server.url)
    assert events_lines(rebuilt) == events_lines(mirror)
    shutil.rmtree(rebuilt.parent)


def test_a_session_deleted_before_it_was_published_restores_without_its_events(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """The feed's holes a deleted session leaves are the store's own: the restore takes
    them (its span deletes a session), holds the same latest seq, and is not refused."""
    from tests.actors.nats_support import latest_seq

    original = make_store(tmp_path / "a", "store", turns=5, extra="gone")
    run(original, "replay", str(journal_root(tmp_path / "roots", "kept", 5)))
    run(original, "delete", "gone")
    run(original, "publish", "--nats", nats_server.url, "--once")
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    said = _restore(restored, nats_server.url, store_id(original))
    assert "run again" not in said
    assert_restored(original, restored)
    assert latest_seq(restored) == latest_seq(original)
