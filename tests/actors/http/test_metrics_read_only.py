"""Counts that are true where they are read: a read-only store's metrics.

What an operator relies on: a session whose projection waits behind its relay log shows
the same wherever it is looked at, ``relaystore stats --json``, a read-only
``EventStore.metrics()`` and ``GET /metrics`` from ``relaystore serve`` (which opens the
store read-only), while another process writes the store; and the read-only figures
follow that writer's later commits without reopening.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from relaystore import EventStore
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import cli_process
from tests.actors.http_support import start_server, stop_server

pytestmark = pytest.mark.integration  # its stores project in worker processes

FUTURE = b'{"type":"mailbox_digest_sent","data":{"count":3}}'
"""A line of a kind this build does not know: its session's projection waits before it."""


def _put_behind(store: EventStore, session_id: str) -> None:
    store.ask(SaveSession(record=example_session(session_id=session_id)))
    builder = JournalBuilder()
    builder.prompt_turn("Hello")
    newer = builder.newer_line(FUTURE)
    report = store.ask(ObserveRelayEvents(session_id=session_id, events=[*builder.events, newer]))
    assert report.behind is not None


def _scraped(text: str, name: str) -> float:
    found = re.search(rf"^relaystore_{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, text
    return float(found.group(1))


def test_a_session_behind_shows_in_stats_read_only_metrics_and_serve_alike(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as writer:  # another process's view of a live writer
        _put_behind(writer, "behind-1")
        assert writer.metrics().sessions_behind == 1
        stats = cli_process(db, "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        assert list(json.loads(stats.stdout)["projection_behind"]) == ["behind-1"]
        server = start_server(db)
        try:
            with EventStore.open(db, read_only=True) as reader:
                seen = reader.metrics()
                assert (seen.sessions_behind, seen.latest_seq) == (1, writer.latest_seq)
                text = server.get("/metrics").text
                assert _scraped(text, "sessions_behind") == 1
                assert _scraped(text, "latest_seq") == writer.latest_seq

                # The writer goes on: the read-only figures follow without reopening.
                _put_behind(writer, "behind-2")
                seen = reader.metrics()
                assert (seen.sessions_behind, seen.latest_seq) == (2, writer.latest_seq)
                text = server.get("/metrics").text
                assert _scraped(text, "sessions_behind") == 2
                assert _scraped(text, "latest_seq") == writer.latest_seq
                # The writer's own figures are its own: a read-only store has none.
                assert (seen.commits, seen.messages_written) == (0, 0)
            assert reader.metrics().sessions_behind == 2  # closed: the last reading stands
        finally:
            stop_server(server)
