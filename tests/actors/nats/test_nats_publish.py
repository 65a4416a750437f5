"""relaystore publish against a real nats-server: every committed event once, in order.

In every case the stream's content for a store equals its ``relaystore events`` output
(count, order, bytes) and no ``Nats-Msg-Id`` appears twice. Skipped, with the reason,
where ``nats-server`` is not installed (``.ci/run`` installs it).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystore.actors.aio import AsyncEventStore
from relaystore.actors.journal import resolve_source
from relaystore.actors.nats.common import (
    DUPLICATE_WINDOW_SECONDS,
    filter_subject,
    subject_token,
    validate_servers,
    validate_subject_prefix,
)
from relaystore.actors.replay import replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.errors import InvalidInput
from tests.actors.cli_support import ENV, TIMEOUT, command
from tests.actors.nats_support import (
    NatsServer,
    attempt,
    events_lines,
    journal_root,
    last_published,
    latest_seq,
    publisher,
    run,
    running_server,
    store_id,
    store_latest,
    stream_messages,
    wait_until_published,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

STREAM = "RELAYSTORE"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    with running_server(tmp_path) as server:
        yield server


def assert_stream_is_the_feed(url: str, db: Path, *, stream: str = STREAM) -> int:
    """The stream holds exactly ``relaystore events`` for the store, each once."""
    sid = store_id(db)
    messages = stream_messages(url, stream, f"relaystore.{sid}.*.*")
    expected = events_lines(db)
    assert [message.data for message in messages] == expected
    ids = [message.msg_id for message in messages]
    assert len(set(ids)) == len(ids)
    for message in messages:
        event = json.loads(message.data)
        assert message.msg_id == f"{sid}:{event['seq']}"
        assert (message.store, message.seq) == (sid, event["seq"])
        assert message.subject.startswith(f"relaystore.{sid}.")
        assert message.subject.endswith("." + subject_token("session", event["session_id"]))
    return len(messages)


def stop(process: subprocess.Popen[bytes]) -> str:
    """SIGTERM a publisher; it finishes its acks and exits 0. Returns its stderr."""
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=TIMEOUT)
    text = stderr.decode()
    assert process.returncode == 0, text
    return text


def wait_for_line(process: subprocess.Popen[bytes], needle: bytes) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if needle in line:
            return
        if not line and process.poll() is not None:
            raise AssertionError(f"the publisher exited ({process.returncode}) before {needle!r}")
    raise AssertionError(f"no {needle!r} from the publisher")


class Replays:
    """``relaystore replay`` of each root in turn, in a background thread."""

    def __init__(self, db: Path, roots: list[tuple[Path, str]]) -> None:
        self.db = db
        self.roots = roots
        self.failures: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        for root, workspace in self.roots:
            result = subprocess.run(
                command(self.db, "replay", "--workspace", workspace, str(root)),
                cwd=self.db.parent,
                env=ENV,
                capture_output=True,
                timeout=TIMEOUT,
            )
            if result.returncode != 0:
                self.failures.append(result.stderr.decode())

    def __enter__(self) -> Replays:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.thread.join(timeout=TIMEOUT * 2)
        assert not self.failures, self.failures


def new_store(tmp_path: Path, name: str, turns: int = 20) -> Path:
    """A store holding one small session, so that it exists before a publisher starts."""
    db = tmp_path / f"{name}.sqlite3"
    root = journal_root(tmp_path / f"{name}-roots", f"{name}-first", turns)
    run(db, "replay", str(root))
    return db


def roots(tmp_path: Path, name: str, count: int, turns: int) -> list[tuple[Path, str]]:
    """Worker roots for ``count`` sessions, alternating two workspaces (one with a '.')."""
    folder = tmp_path / f"{name}-roots"
    return [
        (
            journal_root(folder, f"{name}.s{index}" if index % 2 else f"{name}-s{index}", turns),
            "ws.one" if index % 2 else "default",
        )
        for index in range(count)
    ]


# -- without a server ------------------------------------------------------------------


def test_importing_relaystore_does_not_import_nats() -> None:
    code = (
        "import sys, relaystore, relaystore.aio, relaystore.actors.cli\n"
        "assert 'nats' not in sys.modules, 'nats imported'\n"
        "import relaystore.nats\n"
        "assert 'nats' not in sys.modules, 'nats imported before it is used'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True)
    assert result.returncode == 0, result.stderr.decode()


def test_ids_become_subject_tokens_and_filters_one_to_one() -> None:
    assert subject_token("session", "session-1") == "session-1"
    assert subject_token("session", "my.session") == "my~session"
    for bad in ("a*b", "a>b", "a b", "", "."):
        with pytest.raises(InvalidInput, match="invalid session id"):
            subject_token("session", bad)
    store = "0" * 32
    assert filter_subject("relaystore") == "relaystore.*.*.*"
    assert filter_subject("relaystore", store_id=store) == f"relaystore.{store}.*.*"
    assert filter_subject("p.q", workspace_id="ws.one") == "p.q.*.ws~one.*"
    assert filter_subject("p", session_id="s.1", store_id=store) == f"p.{store}.*.s~1"
    with pytest.raises(InvalidInput, match="store id"):
        filter_subject("p", store_id="*")


@pytest.mark.parametrize(
    "url", ["", "http://host:4222", "nats://", "nats://host:99999", "nats://h:1/path", "a,,b"]
)
def test_a_bad_server_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidInput, match="--nats"):
        validate_servers(url)


def test_server_lists_and_prefixes() -> None:
    assert validate_servers("nats://a:1, tls://b") == ["nats://a:1", "tls://b"]
    assert validate_subject_prefix("fleet.prod-1") == "fleet.prod-1"
    for bad in ("", "a..b", "a.*", "a.>", "a b", ".a", "$JS"):
        with pytest.raises(InvalidInput, match="subject prefix"):
            validate_subject_prefix(bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["publish", "--nats", "http://x"], "is not a NATS server URL"),
        (["publish", "--nats", "nats://x", "--stream", "a.b"], "invalid stream name"),
        (["publish", "--nats", "nats://x", "--subject-prefix", "a.*"], "invalid subject prefix"),
        (["fleet", "events", "--nats", "nats://x", "--store", "abc"], "invalid store id"),
        (["fleet", "events", "--nats", "nats://x", "--session", "s*"], "invalid session id"),
        (["fleet", "events", "--nats", "nats://x", "--durable", "a.b"], "invalid durable"),
    ],
)
def test_the_command_refuses_bad_nats_options_as_usage_errors(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = subprocess.run(
        command(tmp_path / "store.sqlite3", *args), env=ENV, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_fleet_events_names_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        command(tmp_path / "store.sqlite3", "fleet", "events", "--nats", "nats://127.0.0.1:1"),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("relaystore: cannot reach a NATS server at nats://127.0.0.1:1")
    assert len(result.stderr.splitlines()) == 1


def test_metrics_and_stats_show_the_same_store_id(tmp_path: Path) -> None:
    db = new_store(tmp_path, "a", turns=1)
    sid = store_id(db)
    with EventStore.open(db) as store:
        assert store.metrics().store_id == sid
    with EventStore.open(db, read_only=True) as store:
        assert store.metrics().store_id == sid
    copy = tmp_path / "copy.sqlite3"
    run(db, "backup", str(copy))
    run(db, "vacuum")
    assert store_id(copy) == store_id(db) == sid


# -- against the server ----------------------------------------------------------------


def test_two_stores_publish_concurrently_while_replays_write(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    first, second = new_store(tmp_path, "a"), new_store(tmp_path, "b")
    publishers = [publisher(db, nats_server.url) for db in (first, second)]
    try:
        with (
            Replays(first, roots(tmp_path, "a", 4, 150)),
            Replays(second, roots(tmp_path, "b", 4, 150)),
        ):
            pass
        for db in (first, second):
            wait_until_published(
                nats_server.url, STREAM, f"relaystore.{store_id(db)}.*.*", latest_seq(db)
            )
    finally:
        logs = [stop(process) for process in publishers]
    assert store_id(first) != store_id(second)
    counts = [assert_stream_is_the_feed(nats_server.url, db) for db in (first, second)]
    assert counts == [20 * 2 + 4 * 150 * 2] * 2
    assert all("0 duplicates" in log for log in logs)


def test_sigkill_of_the_publisher_at_random_points_loses_and_repeats_nothing(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    db = new_store(tmp_path, "k")
    for root, workspace in roots(tmp_path, "backlog", 4, 2500):  # 20k events to publish
        run(db, "replay", "--workspace", workspace, str(root))
    trials = 10
    chooser = random.Random(23)
    subject = f"relaystore.{store_id(db)}.*.*"
    behind = 0
    points: list[tuple[int, int]] = []  # (in the stream, committed) at each kill
    with Replays(db, roots(tmp_path, "k", 6, 150)):  # and more while the trials run
        for _ in range(trials):
            process = publisher(db, nats_server.url)
            wait_for_line(process, b"after seq")  # connected, resumed from the stream
            time.sleep(chooser.uniform(0.0, 0.03))  # it publishes ~30k events/s
            committed = store_latest(db)
            process.kill()
            process.wait(timeout=TIMEOUT)
            assert process.stderr is not None
            process.stderr.close()
            reached = last_published(nats_server.url, STREAM, subject)
            points.append((reached, committed))
            behind += reached < committed
    # Every kill lands while the publisher has committed events still to send or to
    # have acknowledged: it interrupts publishing, not an idle publisher.
    assert behind == trials, points
    final = publisher(db, nats_server.url)
    try:
        wait_until_published(nats_server.url, STREAM, subject, latest_seq(db))
    finally:
        stop(final)
    assert assert_stream_is_the_feed(nats_server.url, db) == 20 * 2 + 4 * 2500 * 2 + 6 * 150 * 2


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_the_server_stopped_and_restarted_mid_stream(
    tmp_path: Path, nats_server: NatsServer, how: int
) -> None:
    db = new_store(tmp_path, "r")
    process = publisher(db, nats_server.url)
    try:
        wait_for_line(process, b"after seq")
        with Replays(db, roots(tmp_path, "r", 4, 250)):
            time.sleep(0.8)
            nats_server.stop(how)
            time.sleep(1.0)
            nats_server.start()
        wait_until_published(
            nats_server.url, STREAM, f"relaystore.{store_id(db)}.*.*", latest_seq(db)
        )
    finally:
        log = stop(process)
    assert "reconnecting in" in log
    assert assert_stream_is_the_feed(nats_server.url, db) == 20 * 2 + 4 * 250 * 2


def test_a_publisher_started_before_the_server_and_its_stream(tmp_path: Path) -> None:
    db = new_store(tmp_path, "e", turns=30)
    with running_server(tmp_path, started=False) as server:
        process = publisher(db, server.url, "--stream", "FLEET", "--subject-prefix", "relaystore")
        try:
            # It retries with backoff while nothing listens: wait for it to say so (under
            # load its first attempt may come late; a pause might start the server first).
            wait_for_line(process, b"reconnecting in")
            assert process.poll() is None
            server.start()
            wait_until_published(server.url, "FLEET", f"relaystore.{store_id(db)}.*.*", 60)
        finally:
            log = stop(process)
        assert "created stream FLEET for relaystore.>" in log
        config = asyncio.run(_stream_config(server.url, "FLEET"))
        assert config == (["relaystore.>"], "file", DUPLICATE_WINDOW_SECONDS)
        assert assert_stream_is_the_feed(server.url, db, stream="FLEET") == 60


async def _stream_config(url: str, stream: str) -> tuple[list[str], str, float]:
    import nats

    nc = await nats.connect(url)
    try:
        info = await nc.jsm().stream_info(stream)
    finally:
        await nc.close()
    storage = info.config.storage
    return (
        list(info.config.subjects or []),
        str(getattr(storage, "value", storage)),
        float(info.config.duplicate_window or 0),
    )


def test_a_stream_that_does_not_hold_the_prefix_is_refused(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    db = new_store(tmp_path, "x", turns=1)
    asyncio.run(_make_stream(nats_server.url, "OTHER", ["other.>"]))
    result = subprocess.run(
        command(db, "publish", "--nats", nats_server.url, "--stream", "OTHER"),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert "stream OTHER does not hold the subjects relaystore." in result.stderr
    assert "Traceback" not in result.stderr


async def _make_stream(url: str, name: str, subjects: list[str]) -> None:
    import nats

    nc = await nats.connect(url)
    try:
        await nc.jsm().add_stream(name=name, subjects=subjects)
    finally:
        await nc.close()


def test_the_embedded_publisher_follows_a_store_it_writes(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    from relaystore.nats import Publisher

    db = tmp_path / "embedded.sqlite3"
    sources = roots(tmp_path, "m", 3, 100)

    async def scenario() -> None:
        async with AsyncEventStore.open(db) as store:
            # A small window: the publisher waits for acks (backpressure) all along.
            publish = Publisher(
                store, nats_server.url, subject_prefix="relaystore", max_outstanding=3
            )
            task = asyncio.create_task(publish.run())

            def replay_all() -> None:
                for root, workspace in sources:
                    replay_source(store.sync, resolve_source(root), workspace=workspace)

            await asyncio.to_thread(replay_all)
            deadline = time.monotonic() + TIMEOUT
            while publish.metrics().acked_seq < store.latest_seq:
                assert time.monotonic() < deadline, publish.metrics()
                await asyncio.sleep(0.05)
            publish.stop()
            await asyncio.wait_for(task, TIMEOUT)
            figures = publish.metrics()
            assert figures.store_id == store.metrics().store_id
            assert (figures.acked_seq, figures.lag, figures.outstanding_acks) == (600, 0, 0)
            assert (figures.published, figures.duplicates, figures.skipped) == (600, 0, 0)
            assert not figures.connected

    asyncio.run(scenario())
    assert assert_stream_is_the_feed(nats_server.url, db) == 600


def _publish_all(url: str, db: Path) -> None:
    """Run ``relaystore publish`` until the stream holds the store's latest seq."""
    process = publisher(db, url)
    try:
        wait_until_published(url, STREAM, f"relaystore.{store_id(db)}.*.*", latest_seq(db))
    finally:
        stop(process)


def _refused_publish(db: Path, url: str) -> str:
    """``relaystore publish`` that must refuse at once: its one line of stderr."""
    result = attempt(db, "publish", "--nats", url)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines  # the start-up line, then the refusal
    return lines[1]


def test_a_restored_backup_behind_the_stream_is_refused_until_it_takes_a_new_id(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    url = nats_server.url
    db = new_store(tmp_path, "f")  # 40 events
    early, late = tmp_path / "early.sqlite3", tmp_path / "late.sqlite3"
    run(db, "backup", str(early))
    for root, workspace in roots(tmp_path, "more", 1, 30):  # 60 more
        run(db, "replay", "--workspace", workspace, str(root))
    _publish_all(url, db)
    run(db, "backup", str(late))  # holds everything published
    sid = store_id(db)
    assert store_id(early) == store_id(late) == sid

    # The early backup, restored and given new events: seqs 41.. are another history.
    for root, workspace in roots(tmp_path, "after", 1, 10):  # 20 events: up to seq 60
        run(early, "replay", "--workspace", workspace, str(root))
    line = _refused_publish(early, url)
    assert line == (
        f"relaystore: store {sid} has forked from its published history: stream {STREAM} "
        "holds its events up to seq 100, but the store's latest seq is 60 (a backup restored "
        "after later events were published); publishing it under this id would give the id "
        "two histories, so give the store a new id with `relaystore new-store-id` and "
        "publish it again as a new store"
    )
    for root, workspace in roots(tmp_path, "later", 1, 30):  # past the stream's seq 100
        run(early, "replay", "--workspace", workspace, str(root))
    line = _refused_publish(early, url)
    assert f"its event seq 100 differs from the one stream {STREAM} holds" in line
    assert assert_stream_is_the_feed(url, db) == 100  # the id still has one history

    renewed = run(early, "new-store-id").stdout.decode()
    new_id = store_id(early)
    assert new_id != sid
    assert (
        renewed
        == f"store {early} was {sid}, is now {new_id}; it publishes as a new store from seq 1\n"
    )
    _publish_all(url, early)
    assert assert_stream_is_the_feed(url, early) == 40 + 20 + 60
    assert assert_stream_is_the_feed(url, db) == 100

    # The late backup holds what was published: it resumes as the same store.
    for root, workspace in roots(tmp_path, "resumed", 1, 5):
        run(late, "replay", "--workspace", workspace, str(root))
    _publish_all(url, late)
    assert assert_stream_is_the_feed(url, late) == 110
