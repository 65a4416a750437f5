"""relaystore fleet events and FleetFeed against a real nats-server: the merged feed.

Two stores publish into one stream; the fleet feed prints each store's events in its
``seq`` order, byte for byte the wire lines ``relaystore events`` prints, filters map to
subjects, and a durable consumer killed with SIGKILL resumes where it acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relaystore.domain.errors import InvalidInput
from tests.actors.cli_support import ENV, TIMEOUT, command
from tests.actors.nats_support import (
    NatsServer,
    events_lines,
    journal_root,
    latest_seq,
    publisher,
    run,
    running_server,
    store_id,
    wait_until_published,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

STREAM = "RELAYSTORE"


@dataclass(frozen=True)
class Fleet:
    server: NatsServer
    stores: list[Path]
    folder: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """Two stores (sessions in 'default' and 'ws.one'), fully published to one stream."""
    folder = tmp_path_factory.mktemp("fleet")
    with running_server(folder) as server:
        stores = []
        for name in ("a", "b"):
            db = folder / f"{name}.sqlite3"
            for index, (session, workspace) in enumerate(
                [(f"{name}-s0", "default"), (f"{name}.s1", "ws.one"), (f"{name}-s2", "ws.one")]
            ):
                root = journal_root(folder / f"{name}-roots", session, 60 + 20 * index)
                run(db, "replay", "--workspace", workspace, str(root))
            stores.append(db)
        publishers = [publisher(db, server.url) for db in stores]
        try:
            for db in stores:
                wait_until_published(
                    server.url, STREAM, f"relaystore.{store_id(db)}.*.*", latest_seq(db)
                )
        finally:
            for process in publishers:
                process.send_signal(signal.SIGTERM)
                process.communicate(timeout=TIMEOUT)
        yield Fleet(server, stores, folder)


def fleet_events(fleet: Fleet, *args: str) -> list[bytes]:
    result = subprocess.run(
        command(fleet.folder / "unused.sqlite3", "fleet", "events", "--nats", fleet.url, *args),
        env=ENV,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.splitlines()


def by_store(lines: list[bytes]) -> dict[str, list[bytes]]:
    """Each store's event bytes, in the order printed; checks each line's shape."""
    found: dict[str, list[bytes]] = {}
    for line in lines:
        document = json.loads(line)
        assert list(document) == ["store", "seq", "event"]
        head = b'{"store":"' + document["store"].encode() + b'","seq":%d,"event":' % document["seq"]
        assert line.startswith(head)
        assert line.endswith(b"}")
        event = line[len(head) : -1]
        assert json.loads(event)["seq"] == document["seq"]
        found.setdefault(document["store"], []).append(event)
    return found


def test_fleet_events_prints_every_stores_feed_in_seq_order(fleet: Fleet) -> None:
    printed = by_store(fleet_events(fleet))
    assert printed == {store_id(db): events_lines(db) for db in fleet.stores}


@pytest.mark.parametrize(
    ("fleet_args", "events_args"),
    [
        (["--session", "a.s1"], ["--session", "a.s1"]),
        (["--workspace", "ws.one"], ["--workspace", "ws.one"]),
        (["--workspace", "default", "--session", "b-s0"], ["--session", "b-s0"]),
    ],
    ids=["session-with-a-dot", "workspace-with-a-dot", "workspace-and-session"],
)
def test_filters_select_what_relaystore_events_selects(
    fleet: Fleet, fleet_args: list[str], events_args: list[str]
) -> None:
    printed = by_store(fleet_events(fleet, *fleet_args))
    expected = {}
    for db in fleet.stores:
        result = subprocess.run(
            command(db, "events", *events_args), env=ENV, capture_output=True, timeout=TIMEOUT
        )
        if result.returncode == 1 and b"no session" in result.stderr:
            continue  # the filter names a session of the other store
        assert result.returncode == 0, result.stderr.decode()
        if result.stdout:
            expected[store_id(db)] = result.stdout.splitlines()
    assert printed == expected


def test_the_store_filter_selects_one_store(fleet: Fleet) -> None:
    first = fleet.stores[0]
    printed = by_store(fleet_events(fleet, "--store", store_id(first)))
    assert printed == {store_id(first): events_lines(first)}


def test_a_durable_consumer_killed_resumes_where_it_acknowledged(fleet: Fleet) -> None:
    expected = {store_id(db): events_lines(db) for db in fleet.stores}
    total = sum(len(lines) for lines in expected.values())
    process = subprocess.Popen(
        command(
            fleet.folder / "unused.sqlite3",
            "fleet",
            "events",
            "--nats",
            fleet.url,
            "--durable",
            "killed",
            "--follow",
            "--workspace",
            "ws.one",
        ),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    first: list[bytes] = []
    try:
        while len(first) < 300:  # then stop reading: it blocks on the full pipe
            line = process.stdout.readline()
            assert line, process.stderr.read().decode() if process.stderr else ""
            first.append(line.rstrip(b"\n"))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=TIMEOUT)
        # What it wrote before it died, still in the pipe, is printed too (a torn last
        # line is not: the line was never complete).
        rest = process.stdout.read()
        first += rest.split(b"\n")[:-1]
        process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    second = fleet_events(fleet, "--durable", "killed", "--workspace", "ws.one")
    assert second, "the resumed consumer printed nothing"
    wanted = {
        sid: [line for line in lines if b'"session_id":"' in line and _in_ws_one(line)]
        for sid, lines in expected.items()
    }
    seen = by_store(first)
    resumed = by_store(second)
    # At least once: the resumed run repeats at most the unacknowledged tail, and
    # the two runs together hold every event exactly in order.
    for sid, lines in wanted.items():
        before, after = seen.get(sid, []), resumed.get(sid, [])
        overlap = [line for line in after if line in before]
        assert overlap == before[len(before) - len(overlap) :]
        assert before + after[len(overlap) :] == lines
    assert sum(len(lines) for lines in wanted.values()) < total
    # A third run has nothing left: everything was acknowledged.
    assert fleet_events(fleet, "--durable", "killed", "--workspace", "ws.one") == []


def _in_ws_one(line: bytes) -> bool:
    session = json.loads(line)["session_id"]
    return bool(session.endswith(("s1", "s2")))


def test_fleet_feed_follows_new_events_as_they_are_published(fleet: Fleet) -> None:
    from relaystore.nats import FleetEvent, FleetFeed

    db = fleet.folder / "live.sqlite3"
    run(db, "replay", str(journal_root(fleet.folder / "live-roots", "live-0", 5)))
    sid = store_id(db)

    async def scenario() -> list[FleetEvent]:
        got: list[FleetEvent] = []
        async with FleetFeed(fleet.url, store_id=sid, follow=True, wait=0.2) as feed:
            process = publisher(db, fleet.url)
            try:
                async for event in feed:
                    got.append(event)
                    if len(got) == 10:
                        root = journal_root(fleet.folder / "live-roots", "live-1", 5)
                        await asyncio.to_thread(run, db, "replay", str(root))
                    if len(got) == 20:
                        break
            finally:
                process.send_signal(signal.SIGTERM)
                await asyncio.to_thread(process.communicate, timeout=TIMEOUT)
        return got

    got = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [bytes(event.event) for event in got] == events_lines(db)
    assert {event.store for event in got} == {sid}
    assert [event.seq for event in got] == list(range(1, 21))


def test_fleet_feed_checks_its_arguments() -> None:
    from relaystore.nats import FleetFeed

    with pytest.raises(InvalidInput, match="invalid durable"):
        FleetFeed("nats://127.0.0.1:4222", durable="a b")
    with pytest.raises(InvalidInput, match="invalid workspace id"):
        FleetFeed("nats://127.0.0.1:4222", workspace_id="ws*")
    with pytest.raises(InvalidInput, match="invalid stream name"):
        FleetFeed("nats://127.0.0.1:4222", stream="a>b")


def test_a_following_feed_cancelled_while_it_waits_always_ends(fleet: Fleet) -> None:
    """A cancellation that meets a fetch's timeout reaches nats-py's wait as a timeout
    (asyncio.wait_for swallows it): the feed must end anyway, never poll on for ever."""
    from relaystore.nats import FleetFeed

    db = fleet.stores[0]
    sid = store_id(db)
    expected = latest_seq(db)

    async def one(delay: float) -> None:
        async with FleetFeed(fleet.url, store_id=sid, follow=True, wait=0.001) as feed:
            events = aiter(feed)
            for _ in range(expected):
                await anext(events)
            waiting = asyncio.ensure_future(anext(events))
            await asyncio.sleep(delay)
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(waiting, 5)

    async def trials() -> None:
        for n in range(40):
            await one(0.001 * (n % 7))

    asyncio.run(asyncio.wait_for(trials(), TIMEOUT))


def test_a_swallowed_cancellation_is_raised_again() -> None:
    from relaystore.actors.nats.fleet import _reraise_a_swallowed_cancel

    async def cancelled() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # requested, and (as a wait that swallowed it) never delivered
        _reraise_a_swallowed_cancel()

    async def calm() -> bool:
        _reraise_a_swallowed_cancel()
        return True

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())
    assert asyncio.run(calm())


def test_a_following_feed_with_a_short_wait_keeps_waiting_when_nothing_is_new(
    fleet: Fleet,
) -> None:
    """nats-py ends a fetch whose wait runs out between its two pull requests with
    asyncio's TimeoutError, not its own: a following feed must take that as "none yet"."""
    from relaystore.nats import FleetEvent, FleetFeed

    db = fleet.stores[0]
    sid = store_id(db)
    expected = latest_seq(db)

    async def scenario() -> tuple[list[FleetEvent], bool]:
        async with FleetFeed(fleet.url, store_id=sid, follow=True, wait=0.001) as feed:
            events = aiter(feed)
            got = [await anext(events) for _ in range(expected)]
            waiting = asyncio.ensure_future(anext(events))
            await asyncio.sleep(1.5)  # some hundred empty fetches
            still_waiting = not waiting.done()
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
        return got, still_waiting

    got, still_waiting = asyncio.run(asyncio.wait_for(scenario(), TIMEOUT))
    assert [event.seq for event in got] == list(range(1, expected + 1))
    assert still_waiting
