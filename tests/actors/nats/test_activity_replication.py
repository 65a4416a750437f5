"""A session's activity travels with its feed: since revision 16 an activity change is
not numbered as a record change, so ``restore`` and ``mirror`` keep each session's
activity from the newest ``activity_changed`` event they apply. A change after the
session's last record change reaches the replica; so does a later one. Through a real
nats-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from relaystore import EventStore, ListSessions, RecordActivities, SaveSession
from relaystore.domain.api_events import ApiActivityState
from relaystore.testing import example_session
from tests.actors.nats_support import NatsServer, run, running_server, store_id

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/restore processes


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    (tmp_path / "nats").mkdir()
    with running_server(tmp_path / "nats") as server:
        yield server


def _activity(state: str, *, idle: bool) -> ApiActivityState:
    return ApiActivityState(
        state=state, is_idle=idle, waiting_for_input=False, capacity_retry=False
    )


def _activities(db: Path) -> dict[str, object]:
    """Each session's activity as the session list answers it."""
    with EventStore.open(db, read_only=True) as store:
        listed = store.ask(ListSessions())
    return {session.id: session.activity_state for session in listed.sessions}


def _record(store: EventStore, session_id: str, *states: str) -> None:
    for at, state in enumerate(states, start=1):
        activity = _activity(state, idle=state == "idle")
        store.ask(RecordActivities(activities=[(session_id, activity)], recorded_at_ms=at))


def test_restore_and_mirror_keep_the_activity_the_feed_published_last(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    original = tmp_path / "a" / "store.sqlite3"
    original.parent.mkdir()
    with EventStore.open(original) as store:
        store.ask(SaveSession(record=example_session("s1")))
        store.ask(SaveSession(record=example_session("s2")))
        _record(store, "s1", "starting")
        # The session's record changes (a rename), then its activity twice more.
        renamed = msgspec.structs.replace(example_session("s1"), title="renamed")
        store.ask(SaveSession(record=renamed))
        _record(store, "s1", "working", "idle")
        _record(store, "s2", "working")
    expected = _activities(original)
    assert isinstance(expected["s1"], dict)
    assert (expected["s1"]["state"], expected["s1"]["is_idle"]) == ("idle", True)
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)

    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    assert _activities(restored) == expected
    mirrored = tmp_path / "c" / "store.sqlite3"
    mirrored.parent.mkdir()
    run(mirrored, "mirror", "--nats", nats_server.url)
    assert _activities(mirrored) == expected

    # A later change, with no other change of the session since its last publish, is
    # in no record change the stream holds: only its event carries it.
    with EventStore.open(original) as store:
        _record(store, "s2", "idle")
    run(original, "publish", "--nats", nats_server.url, "--once")
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    run(mirrored, "mirror", "--nats", nats_server.url)
    later = _activities(original)
    assert later["s2"] != expected["s2"]
    assert _activities(restored) == later
    assert _activities(mirrored) == later
