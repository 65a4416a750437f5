"""relaystore publish, tried as a careless operator would, against a real nats-server.

What an operator relies on: two publishers started on one store (by mistake, or a
restart that overlaps the old one) still leave the stream holding the store's feed,
each event once and in order (the ``Nats-Msg-Id`` of each event is its store and seq,
so the server drops the second copy); and a session whose id needs escaping in a
subject keeps its events apart from any other session's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors.nats_support import (
    NatsServer,
    latest_seq,
    publisher,
    running_server,
    store_id,
    wait_until_published,
)
from tests.actors.test_nats_publish import (
    STREAM,
    Replays,
    assert_stream_is_the_feed,
    new_store,
    roots,
    stop,
    wait_for_line,
)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    with running_server(tmp_path) as server:
        yield server


def test_two_publishers_on_one_store_publish_each_event_once(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    db = new_store(tmp_path, "twice")
    first = publisher(db, nats_server.url)
    wait_for_line(first, b"after seq")
    second = publisher(db, nats_server.url)
    try:
        wait_for_line(second, b"after seq")
        with Replays(db, roots(tmp_path, "twice", 4, 200)):
            pass
        wait_until_published(
            nats_server.url, STREAM, f"relaystore.{store_id(db)}.>", latest_seq(db)
        )
    finally:
        logs = [stop(process) for process in (first, second)]
    assert assert_stream_is_the_feed(nats_server.url, db) == 20 * 2 + 4 * 200 * 2
    assert all("Traceback" not in log for log in logs), logs
