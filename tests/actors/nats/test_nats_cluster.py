"""A real three-node JetStream cluster: one node killed mid-publish and mid-restore.

Three ``nats-server -js`` nodes clustered over loopback routes (own store folders and
server names) hold an R3 stream. The node the publisher is connected to is killed
(SIGKILL) while it publishes and restarted; the node a restore reads from is killed
while it restores and restarted. Nothing the stream acknowledged is lost or repeated,
and the restored store, on another folder, equals the original: ``events`` byte for
byte, ``show`` per session, ``audit`` exit 0, the same store id.
"""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path

import pytest

from relaystore.actors.nats.replica import ReplicaReader
from tests.actors.cli_support import ENV, TIMEOUT, command
from tests.actors.nats_support import (
    NatsCluster,
    events_lines,
    journal_root,
    latest_seq,
    publisher,
    run,
    running_cluster,
    store_id,
    stream_messages,
    wait_until_published,
)
from tests.actors.replica_support import assert_restored, assert_stream_once, make_store

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

STREAM = "RELAYSTORE"
_CONNECTED = re.compile(rb"publishing store \w+ to stream \w+ on (nats://[\d.:]+) after seq")


def _connected_node(process: subprocess.Popen[bytes]) -> str:
    """The URL the publisher says it connected to (its log line on stderr)."""
    assert process.stderr is not None
    while True:
        line = process.stderr.readline()
        assert line, "the publisher ended before it connected"
        found = _CONNECTED.search(line)
        if found:
            return found.group(1).decode()


def _publish_through_a_lost_node(
    cluster: NatsCluster, db: Path, later: Path, timeout: float = TIMEOUT
) -> None:
    """Publish ``db``; kill the publisher's node once it published, commit ``later``
    while that node is down, restart it; then a second publisher finishes the rest."""
    sid = store_id(db)
    process = publisher(db, cluster.url)
    try:
        node = cluster.node(_connected_node(process))
        wait_until_published(cluster.url, STREAM, f"relaystore.{sid}.*.*", 1)
        node.stop(signal.SIGKILL)
        run(db, "replay", str(later))
        wait_until_published(
            cluster.url, STREAM, f"relaystore.{sid}.*.*", latest_seq(db), timeout=timeout
        )
        node.start()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=TIMEOUT)
        assert process.stderr is not None
        process.stderr.close()
    assert process.returncode == 0
    # Whatever the first one left (changes after its last event): resumed, not repeated.
    finish = subprocess.run(
        command(db, "publish", "--nats", cluster.url, "--once"),
        env=ENV,
        capture_output=True,
        timeout=timeout,
    )
    assert finish.returncode == 0, finish.stderr.decode()


def _restore_through_a_lost_node(
    cluster: NatsCluster, sid: str, target: Path, chunk: int = 20
) -> ReplicaReader:
    """Restore ``sid`` into ``target``, killing the node the restore reads from once it
    applied its first span; the node is restarted after the restore ends."""
    killed: list[NatsCluster | object] = []

    async def restore() -> ReplicaReader:
        applied = asyncio.Event()
        reader = ReplicaReader(
            str(target),
            cluster.url,
            store_id=sid,
            batch=min(chunk, 1000),
            chunk=chunk,
            on_apply=applied.set,
        )
        task = asyncio.create_task(reader.run())
        waiting = asyncio.create_task(applied.wait())
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if reader.connected_url is not None:
            node = cluster.node(reader.connected_url)
            node.stop(signal.SIGKILL)
            killed.append(node)
        await task
        waiting.cancel()
        return reader

    reader = asyncio.run(restore())
    for node in killed:
        node.start()  # type: ignore[attr-defined]
    assert killed, "the restore ended before a node could be killed under it"
    return reader


def test_a_node_killed_mid_publish_and_mid_restore_loses_and_repeats_nothing(
    tmp_path: Path,
) -> None:
    original = make_store(tmp_path / "machine-a", "store", turns=60)
    later = journal_root(tmp_path / "later-roots", "later", 60)
    sid = store_id(original)
    with running_cluster(tmp_path / "cluster", STREAM) as cluster:
        _publish_through_a_lost_node(cluster, original, later)
        messages = stream_messages(cluster.url, STREAM, f"relaystore.{sid}.>")
        assert_stream_once(messages)
        assert [m.data for m in messages if m.kind == "event"] == events_lines(original)

        restored = tmp_path / "machine-b" / "store.sqlite3"
        restored.parent.mkdir()
        reader = _restore_through_a_lost_node(cluster, sid, restored)
        assert reader.reconnects >= 1
        # Run again: it continues, and there is nothing left.
        assert (
            "0 API events"
            in run(restored, "restore", "--nats", cluster.url, "--store", sid).stdout.decode()
        )
    assert_restored(original, restored)


@pytest.mark.slow
def test_a_generated_100k_event_store_through_a_lost_node(tmp_path: Path) -> None:
    """The same, for a store of 100k API events (50k prompt turns in 10 sessions)."""
    folder = tmp_path / "machine-a"
    original = make_store(folder, "store", turns=0)
    for index in range(10):
        run(original, "replay", str(journal_root(folder / "roots", f"big-{index}", 5000)))
    later = journal_root(tmp_path / "later-roots", "later", 200)
    with running_cluster(tmp_path / "cluster", STREAM) as cluster:
        _publish_through_a_lost_node(cluster, original, later, timeout=600)
        restored = tmp_path / "machine-b" / "store.sqlite3"
        restored.parent.mkdir()
        _restore_through_a_lost_node(cluster, store_id(original), restored, chunk=20_000)
        run(restored, "restore", "--nats", cluster.url, "--store", store_id(original))
    assert latest_seq(original) >= 100_000
    assert_restored(original, restored)
