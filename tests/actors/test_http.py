"""``relaystore serve`` through a real server process and a real HTTP client.

The server opens the store read-only; the test process writes it, as a supervisor
would, and checks that the origin's contract (``origin-http-events.md``) holds.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
from relaystore.testing import example_session


def activity(n: int, session_id: str = "session-1") -> RecordActivities:
    return RecordActivities(
        activities=[
            (
                session_id,
                ApiActivityState(
                    state=f"state-{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
                ),
            )
        ],
        recorded_at_ms=n,
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    token: str
    token_file: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _start(db: Path, *extra: str) -> Server:
    port = _free_port()
    token_file = Path(f"{db}.api-token")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "relaystore.actors.cli",
            "--db",
            str(db),
            "serve",
            "--port",
            str(port),
            "--keepalive",
            "0.5",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(process.communicate()[1].decode())
        try:
            httpx.get(url + "/api/v1/events", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    return Server(process, url, token_file.read_text().strip(), token_file)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        store.ask(SaveSession(record=example_session()))
        store.ask(SaveSession(record=example_session("session-2")))
        yield store


@pytest.fixture
def server(store: EventStore) -> Iterator[Server]:
    running = _start(store.path)
    yield running
    _stop(running)


def _stop(server: Server) -> str:
    """SIGINT the server, wait for it, and return what it printed on stderr."""
    server.process.send_signal(signal.SIGINT)
    try:
        _, err = server.process.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.communicate()
        raise
    return err.decode()


def _frames(response: httpx.Response, count: int) -> list[dict[str, str]]:
    """Read ``count`` event frames (keepalive comments skipped)."""
    frames: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if current:
                frames.append(current)
                current = {}
                if len(frames) == count:
                    return frames
            continue
        field, _, value = line.partition(": ")
        current[field] = value
    raise AssertionError(f"stream ended after {len(frames)} frames")


def test_the_token_file_is_private_and_required(server: Server) -> None:
    assert stat.S_IMODE(os.stat(server.token_file).st_mode) == 0o600
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": server.token}):
        response = httpx.get(server.url + "/api/v1/events", headers=headers)
        assert response.status_code == 401
        assert response.json() == {"error": "missing or wrong bearer token"}
        assert response.headers["Mj-Api-Version"] == "1"
        assert response.headers["Cache-Control"] == "no-store"


def test_unknown_routes_answer_404_with_the_contract_headers(server: Server) -> None:
    response = httpx.get(server.url + "/api/v1/nothing", headers=server.auth)
    assert response.status_code == 404
    assert "error" in response.json()
    assert response.headers["Mj-Api-Version"] == "1"


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("after_seq=-1", {}),
        ("after_seq=abc", {}),
        ("after_seq=1.5", {}),
        (f"after_seq={2**63}", {}),
        ("after_seq=99", {}),  # ahead of the database
        ("after_seq=1", {"Last-Event-ID": "2"}),
        ("", {"Last-Event-ID": "x"}),
        ("session_id=../x", {}),
        ("colour=red", {}),
    ],
)
def test_bad_cursors_and_filters_answer_400(
    store: EventStore, server: Server, query: str, headers: dict[str, str]
) -> None:
    store.ask(activity(1))
    store.ask(activity(2))
    response = httpx.get(f"{server.url}/api/v1/events?{query}", headers={**server.auth, **headers})
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error"}
    assert response.headers["Cache-Control"] == "no-store"


def test_frames_match_the_events_command_byte_for_byte(store: EventStore, server: Server) -> None:
    for n in range(5):
        store.ask(activity(n, "session-1" if n % 2 else "session-2"))
    printed = subprocess.run(
        [sys.executable, "-m", "relaystore.actors.cli", "--db", str(store.path), "events"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    with httpx.stream(
        "GET", server.url + "/api/v1/events?after_seq=0", headers=server.auth, timeout=10
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["Mj-Api-Version"] == "1"
        frames = _frames(response, 5)
    assert [frame["data"] for frame in frames] == printed
    assert [frame["id"] for frame in frames] == ["1", "2", "3", "4", "5"]
    assert {frame["event"] for frame in frames} == {"activity_changed"}
    with httpx.stream(
        "GET",
        server.url + "/api/v1/events?after_seq=0&session_id=session-1",
        headers=server.auth,
        timeout=10,
    ) as response:
        assert [frame["id"] for frame in _frames(response, 2)] == ["2", "4"]


def test_live_commits_stream_and_a_reconnect_loses_nothing(
    store: EventStore, server: Server
) -> None:
    store.ask(activity(0))
    seen: list[str] = []
    with httpx.stream(
        "GET", server.url + "/api/v1/events", headers=server.auth, timeout=10
    ) as response:
        # No cursor: the stream starts at the frontier and delivers only new events.
        for n in range(1, 4):
            store.ask(activity(n))
        seen += [frame["id"] for frame in _frames(response, 3)]
    for n in range(4, 7):  # committed while no client is connected
        store.ask(activity(n))
    with httpx.stream(
        "GET",
        server.url + "/api/v1/events",
        headers={**server.auth, "Last-Event-ID": seen[-1]},
        timeout=10,
    ) as response:
        store.ask(activity(7))
        seen += [frame["id"] for frame in _frames(response, 4)]
    assert seen == ["2", "3", "4", "5", "6", "7", "8"]


def test_keepalives_flow_while_nothing_happens(server: Server) -> None:
    with httpx.stream(
        "GET", server.url + "/api/v1/events", headers=server.auth, timeout=10
    ) as response:
        for line in response.iter_lines():
            if line.startswith(":"):
                assert line == ": keepalive"
                break


def test_hundreds_of_idle_streams_and_a_new_one_gets_its_frame_at_once(
    store: EventStore, server: Server
) -> None:
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    with httpx.Client(limits=limits, timeout=20, headers=server.auth) as client:
        idle = []
        try:
            for _ in range(200):
                stream = client.stream("GET", server.url + "/api/v1/events")
                response = stream.__enter__()
                assert response.status_code == 200
                idle.append(stream)
            store.ask(activity(1))
            started = time.monotonic()
            with client.stream("GET", server.url + "/api/v1/events?after_seq=0") as response:
                assert [frame["id"] for frame in _frames(response, 1)] == ["1"]
            assert time.monotonic() - started < 2
        finally:
            for stream in idle:
                stream.__exit__(None, None, None)


def test_sigint_stops_the_server_with_streams_open(store: EventStore) -> None:
    running = _start(store.path)
    with httpx.stream(
        "GET", running.url + "/api/v1/events", headers=running.auth, timeout=10
    ) as response:
        assert response.status_code == 200
        started = time.monotonic()
        err = _stop(running)
    assert time.monotonic() - started < 3
    assert running.process.returncode == 0
    assert "Traceback" not in err


def test_a_second_start_keeps_the_token(store: EventStore) -> None:
    first = _start(store.path)
    _stop(first)
    second = _start(store.path)
    try:
        assert second.token == first.token
    finally:
        _stop(second)


def test_a_client_that_stops_reading_blocks_neither_the_writer_nor_other_streams(
    store: EventStore, server: Server
) -> None:
    padding = "x" * 2000  # large events fill the stalled client's socket buffers quickly
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as stalled:
        stalled.sendall(
            b"GET /api/v1/events?after_seq=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + server.token.encode()
            + b"\r\n\r\n"
        )  # and never read a byte
        started = time.monotonic()
        for n in range(600):
            store.ask(
                RecordActivities(
                    activities=[
                        (
                            "session-1",
                            ApiActivityState(
                                state=f"{padding}{n}",
                                is_idle=False,
                                waiting_for_input=False,
                                capacity_retry=False,
                            ),
                        )
                    ],
                    recorded_at_ms=n,
                )
            )
        assert time.monotonic() - started < 30  # the writer never waited on the stalled client
        with httpx.stream(
            "GET", server.url + "/api/v1/events?after_seq=0", headers=server.auth, timeout=20
        ) as response:
            frames = _frames(response, 600)
        assert [frame["id"] for frame in frames] == [str(n) for n in range(1, 601)]
