"""A real ``nats-server -js`` for tests, and how tests read what reached its streams.

A support module, not a test module: ``test_nats_publish`` and ``test_nats_fleet``
import it. :class:`NatsServer` runs the server on a free loopback port with its store
directory under the test's temporary folder; :func:`stream_messages` reads a stream's
messages for one subject filter in stream order (an ephemeral consumer of its own, not
relaystore's feed), so the tests compare the stream itself with ``relaystore events``.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from relaystore.testing import JournalBuilder
from tests.actors.cli_support import ENV, TIMEOUT, command

__all__ = [
    "NatsCluster",
    "NatsServer",
    "StreamMessage",
    "attempt",
    "events_lines",
    "journal_root",
    "nats_server",
    "last_published",
    "latest_seq",
    "publisher",
    "run",
    "running_cluster",
    "running_server",
    "store_id",
    "store_latest",
    "stream_messages",
    "wait_until_published",
]

NATS_SERVER = shutil.which("nats-server")


def nats_server() -> str:
    """The real server the NATS tests run against: missing is a failure, not a skip
    (``.ci/run`` installs it; locally ``apt-get install nats-server``)."""
    if NATS_SERVER is None:
        pytest.fail("nats-server is not installed: apt-get install nats-server (.ci/run does)")
    return NATS_SERVER


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class NatsServer:
    """``nats-server -js`` on 127.0.0.1; :meth:`stop` and :meth:`start` keep port and data.

    With ``credentials`` (user, password) the server refuses clients without them, and
    :attr:`url` carries them. With ``cluster`` (its name, its own route port and the
    route URLs of its peers) it is one node of a JetStream cluster, named ``name``."""

    def __init__(
        self,
        binary: str,
        folder: Path,
        credentials: tuple[str, str] | None = None,
        *,
        name: str | None = None,
        cluster: tuple[str, int, list[str]] | None = None,
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.port = _free_port()
        self.credentials = credentials
        self.name = name
        self.cluster = cluster
        self.process: subprocess.Popen[bytes] | None = None

    def _clustering(self) -> list[str]:
        if self.cluster is None or self.name is None:
            return []
        cluster_name, route_port, routes = self.cluster
        return [
            "--server_name",
            self.name,
            "--cluster_name",
            cluster_name,
            "--cluster",
            f"nats://127.0.0.1:{route_port}",
            "--routes",
            ",".join(routes),
        ]

    @property
    def url(self) -> str:
        if self.credentials is None:
            return f"nats://127.0.0.1:{self.port}"
        user, password = self.credentials
        return f"nats://{user}:{password}@127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self.process is None
        log = (self.folder / "server.log").open("ab")
        self.process = subprocess.Popen(
            [
                self.binary,
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-sd",
                str(self.folder / "jetstream"),
                *self._clustering(),
                *(
                    ()
                    if self.credentials is None
                    else ("--user", self.credentials[0], "--pass", self.credentials[1])
                ),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.folder / "server.log").read_text()
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.02)
        raise AssertionError("nats-server did not start listening within 10 s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(sig)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def running_server(
    folder: Path, *, started: bool = True, credentials: tuple[str, str] | None = None
) -> Iterator[NatsServer]:
    """A JetStream server with its own store directory (fails without nats-server)."""
    server = NatsServer(nats_server(), folder, credentials)
    if started:
        server.start()
    try:
        yield server
    finally:
        server.stop()


class NatsCluster:
    """Three ``nats-server -js`` nodes clustered over loopback routes, each with its own
    store directory and server name (``n1``..``n3``); :attr:`url` lists all three."""

    def __init__(self, binary: str, folder: Path) -> None:
        route_ports = [_free_port() for _ in range(3)]
        routes = [f"nats://127.0.0.1:{port}" for port in route_ports]
        self.nodes = [
            NatsServer(
                binary,
                folder / f"n{index + 1}",
                name=f"n{index + 1}",
                cluster=(
                    "relaystore-test",
                    route_ports[index],
                    routes[:index] + routes[index + 1 :],
                ),
            )
            for index in range(3)
        ]
        for node in self.nodes:
            node.folder.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return ",".join(f"nats://127.0.0.1:{node.port}" for node in self.nodes)

    def node(self, url_or_name: str) -> NatsServer:
        """The node named ``n1``..``n3``, or listening on the port of a URL."""
        for node in self.nodes:
            if url_or_name in (node.name, f"nats://127.0.0.1:{node.port}"):
                return node
        raise AssertionError(f"no node {url_or_name}")

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


async def _make_replicated_stream(url: str, name: str, deadline: float) -> None:
    import nats
    from nats.js import api

    from relaystore.actors.nats.common import DUPLICATE_WINDOW_SECONDS

    while True:
        nc = await nats.connect(url.split(","), allow_reconnect=False)
        try:
            await nc.jsm(timeout=5).add_stream(
                api.StreamConfig(
                    name=name,
                    subjects=["relaystore.>"],
                    storage=api.StorageType.FILE,
                    num_replicas=3,
                    duplicate_window=DUPLICATE_WINDOW_SECONDS,
                )
            )
            return
        except Exception:
            # The cluster elects its JetStream meta leader a moment after the routes form.
            if time.monotonic() > deadline:
                raise
        finally:
            await nc.close()
        await asyncio.sleep(0.2)


async def _stream_leader(url: str, name: str) -> str:
    import nats

    nc = await nats.connect(url.split(","), allow_reconnect=False)
    try:
        info = await nc.jsm(timeout=5).stream_info(name)
    finally:
        await nc.close()
    assert info.cluster is not None
    assert info.cluster.leader is not None
    return str(info.cluster.leader)


def stream_leader(url: str, name: str) -> str:
    """The server name of ``name``'s current leader."""
    return asyncio.run(_stream_leader(url, name))


@contextlib.contextmanager
def running_cluster(folder: Path, stream: str) -> Iterator[NatsCluster]:
    """A three-node cluster with an R3 stream ``stream`` on ``relaystore.>``."""
    cluster = NatsCluster(nats_server(), folder)
    try:
        cluster.start()
        asyncio.run(_make_replicated_stream(cluster.url, stream, time.monotonic() + 30))
        yield cluster
    finally:
        cluster.stop()


# -- journals and stores ---------------------------------------------------------------


def journal_root(folder: Path, session_id: str, turns: int, *, seal_every: int = 400) -> Path:
    """A worker root of ``turns`` prompt turns (two API events each)."""
    builder = JournalBuilder()
    for turn in range(turns):
        builder.prompt_turn(f"prompt {turn}", chunks=(f"answer {turn} " * 8,))
    return builder.write_worker_root(folder / session_id, session_id, seal_every=seal_every)


def attempt(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``relaystore`` with ``args``, whatever its exit status; output as text."""
    return subprocess.run(
        command(db, *args), cwd=db.parent, env=ENV, capture_output=True, text=True, timeout=TIMEOUT
    )


def run(db: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        command(db, *args), cwd=db.parent, env=ENV, capture_output=True, timeout=TIMEOUT
    )
    assert result.returncode == 0, result.stderr.decode()
    return result


def events_lines(db: Path) -> list[bytes]:
    """What ``relaystore events`` prints, line by line."""
    return run(db, "events").stdout.splitlines()


def store_id(db: Path) -> str:
    import json

    document = json.loads(run(db, "stats", "--json").stdout)
    value = document["store_id"]
    assert isinstance(value, str)
    return value


def latest_seq(db: Path) -> int:
    import json

    return int(json.loads(run(db, "stats", "--json").stdout)["latest_seq"])


def publisher(db: Path, url: str, *extra: str) -> subprocess.Popen[bytes]:
    """``relaystore publish --nats URL`` running in the background."""
    return subprocess.Popen(
        command(db, "publish", "--nats", url, *extra),
        cwd=db.parent,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


# -- reading the stream ------------------------------------------------------------------


@dataclass(frozen=True)
class StreamMessage:
    """One message; ``seq`` its ``Relaystore-Seq`` and ``change`` its
    ``Relaystore-Change`` (0 when it has none)."""

    subject: str
    data: bytes
    msg_id: str
    store: str
    seq: int
    change: int = 0
    kind: str = "event"


async def _read(url: str, stream: str, subject: str) -> list[StreamMessage]:
    import nats
    from nats.js import api

    from relaystore.actors.nats.common import last_stream_seq

    nc = await nats.connect(url.split(","), allow_reconnect=False)
    try:
        # The end as the stream's leader has it: the consumer below is one replica,
        # which may still be catching up after a restart (its num_pending would end
        # the read early).
        end = await last_stream_seq(nc, stream, subject, 5)
        if end == 0:
            return []
        jsm = nc.jsm()
        info = await jsm.add_consumer(
            stream,
            api.ConsumerConfig(
                ack_policy=api.AckPolicy.ALL,
                filter_subject=subject,
                inactive_threshold=30,
            ),
        )
        subscription = await nc.jetstream().pull_subscribe_bind(info.name, stream)
        found: list[StreamMessage] = []
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                batch = await subscription.fetch(1000, timeout=5)
            except TimeoutError:
                continue  # the consumer's replica is still catching up
            for message in batch:
                headers = message.headers or {}
                found.append(
                    StreamMessage(
                        subject=message.subject,
                        data=message.data,
                        msg_id=headers["Nats-Msg-Id"],
                        store=headers["Relaystore-Store"],
                        seq=int(headers.get("Relaystore-Seq", 0)),
                        change=int(headers.get("Relaystore-Change", 0)),
                        kind=headers.get("Relaystore-Kind", "event"),
                    )
                )
            await batch[-1].ack()
            if batch[-1].metadata.sequence.stream >= end:
                return found
        raise AssertionError(f"read {len(found)} messages of {subject}, not up to seq {end}")
    finally:
        await nc.close()


def stream_messages(url: str, stream: str, subject: str) -> list[StreamMessage]:
    """Every message of ``stream`` on ``subject`` (a filter), in stream order."""
    return asyncio.run(_read(url, stream, subject))


async def _last_seq(url: str, stream: str, subject: str) -> int:
    import nats
    import nats.js.errors

    nc = await nats.connect(url.split(","), allow_reconnect=False)
    try:
        message = await nc.jsm().get_last_msg(stream, subject)
    except (nats.js.errors.NotFoundError, nats.errors.Error):
        return 0
    finally:
        await nc.close()
    return int((message.headers or {})["Relaystore-Seq"])


def last_published(url: str, stream: str, subject: str) -> int:
    """The ``Relaystore-Seq`` of the stream's last message on ``subject`` (0: none)."""
    return asyncio.run(_last_seq(url, stream, subject))


def store_latest(db: Path) -> int:
    """The store's latest seq, read in this process (quicker than ``stats``)."""
    from relaystore.storage.connection import open_reader
    from relaystore.storage.paging import load_latest_seq

    connection = open_reader(db)
    try:
        return load_latest_seq(connection)
    finally:
        connection.close()


def wait_until_published(
    url: str, stream: str, subject: str, seq: int, timeout: float = TIMEOUT
) -> None:
    """Wait until the stream's last message on ``subject`` carries ``seq``."""
    deadline = time.monotonic() + timeout
    last = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            last = asyncio.run(_last_seq(url, stream, subject))
        if last >= seq:
            return
        time.sleep(0.1)
    raise AssertionError(f"the stream reached seq {last} of {seq} on {subject}")
