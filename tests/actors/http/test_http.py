"""``relaystore serve`` through a real server process and a real HTTP client.

The server opens the store read-only; the test process writes it, as a supervisor
would, and checks that the origin's contract (``origin-http-events.md``) holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import apsw
import httpx
import pytest

from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
from relaystore.testing import example_session
from tests.actors.activity_support import activity
from tests.damage import overwrite_body

pytestmark = pytest.mark.integration  # relaystore serve processes


def _state(text: str) -> ApiActivityState:
    return ApiActivityState(
        state=text, is_idle=False, waiting_for_input=False, capacity_retry=False
    )


ANNOUNCED = re.compile(r"^relaystore: serving \S+ at (http://127\.0\.0\.1:(\d+))/api/v1/events ")


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    token: str
    token_file: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def _serve(db: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "relaystore.actors.cli", "--db", str(db), "serve", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _first_line(process: subprocess.Popen[bytes], timeout: float = 20) -> str:
    """The first line the server prints on stderr (its announcement or its refusal)."""
    assert process.stderr is not None
    ready, _, _ = select.select([process.stderr], [], [], timeout)
    assert ready, "the server printed nothing"
    return process.stderr.readline().decode()


def _start(db: Path, *extra: str) -> Server:
    """Start ``serve --port 0`` and wait for its announcement, which names the port."""
    process = _serve(db, "--port", "0", "--keepalive", "0.5", *extra)
    line = _first_line(process)
    match = ANNOUNCED.match(line)
    if match is None:
        process.kill()
        raise AssertionError(line + process.communicate()[1].decode())
    token_file = Path(f"{db}.api-token")
    return Server(process, match[1], token_file.read_text().strip(), token_file)


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


def _stop(server: Server, signal_number: int = signal.SIGINT) -> str:
    """Signal the server, wait for it, and return what it printed on stderr after starting."""
    server.process.send_signal(signal_number)
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
        assert response.json() == {"error": "missing or wrong bearer token", "code": "unauthorized"}
        assert response.headers["WWW-Authenticate"] == "Bearer"
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
        ("after_seq=" + "9" * 5000, {}),  # beyond Python's int digit limit
        ("after_seq=1" + "0" * 5000, {}),
        ("", {"Last-Event-ID": "9" * 5000}),
        ("after_seq=0&after_seq=300", {}),  # a repeated parameter is refused, not overridden
        ("after_seq=1&after_seq=1", {}),
        ("session_id=session-1&session_id=session-2", {}),
        ("workspace_id=a&workspace_id=b", {}),
    ],
)
def test_bad_cursors_and_filters_answer_400(
    store: EventStore, server: Server, query: str, headers: dict[str, str]
) -> None:
    store.ask(activity(1))
    store.ask(activity(2))
    response = httpx.get(
        f"{server.url}/api/v1/events?{query}", headers={**server.auth, **headers}, timeout=10
    )
    assert response.status_code == 400, response.text
    assert set(response.json()) == {"error", "code"}
    assert response.json()["code"] == "bad_request"
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


@pytest.mark.parametrize(
    ("signal_number", "status"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 0)],  # Ctrl-C as for every command; a service stop
)
def test_a_signal_stops_the_server_with_streams_open_quietly(
    store: EventStore, signal_number: int, status: int
) -> None:
    store.ask(activity(1))
    running = _start(store.path)
    with contextlib.ExitStack() as streams:
        for query in ("", "?after_seq=0", "?session_id=session-2"):
            response = streams.enter_context(
                httpx.stream(
                    "GET", running.url + "/api/v1/events" + query, headers=running.auth, timeout=10
                )
            )
            assert response.status_code == 200
        started = time.monotonic()
        err = _stop(running, signal_number)
        # Each stream ended with a complete response: the client sees the end, no error.
        assert list(response.iter_lines()) in ([], [": keepalive", ""])
    assert time.monotonic() - started < 3
    assert running.process.returncode == status
    assert err == ""  # nothing after the announcement: no ERROR per stream, no traceback


def test_the_announcement_comes_once_the_port_is_bound_and_names_it(store: EventStore) -> None:
    running = _start(store.path)  # --port 0: the line names the port the kernel chose
    try:
        assert running.port != 0
        # No retry: the port accepts as soon as the line is printed.
        assert httpx.get(running.url + "/api/v1/events", timeout=5).status_code == 401
    finally:
        _stop(running)


def _refusal(process: subprocess.Popen[bytes]) -> str:
    """The one line a server that cannot start prints; it exits 1 and announces nothing."""
    _, err = process.communicate(timeout=20)
    assert process.returncode == 1, err
    lines = err.decode().splitlines()
    assert len(lines) == 1, err
    assert "serving" not in lines[0]
    assert "Traceback" not in lines[0]
    return lines[0]


def test_a_port_in_use_is_one_line_and_exit_1(store: EventStore) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = _refusal(_serve(store.path, "--port", str(port)))
    assert line.startswith(f"relaystore: cannot listen on 127.0.0.1:{port}: "), line
    assert "in use" in line


@pytest.mark.parametrize(
    ("content", "mode", "refused"),
    [
        ("", 0o600, "empty"),
        ("\n  \n", 0o600, "empty"),
        ("a-token\n", 0o644, "mode 0644"),
        ("a-token\n", 0o640, "mode 0640"),
        ("a-token\n", 0o606, "mode 0606"),
    ],
)
def test_a_token_file_that_is_empty_or_not_private_is_refused_in_one_line(
    store: EventStore, content: str, mode: int, refused: str
) -> None:
    token_file = Path(f"{store.path}.api-token")
    token_file.write_text(content)
    token_file.chmod(mode)
    line = _refusal(_serve(store.path, "--port", "0"))
    assert line.startswith(f"relaystore: {token_file}: the bearer token file "), line
    assert refused in line
    assert "File exists" not in line
    assert token_file.read_text() == content  # left as it was
    assert stat.S_IMODE(token_file.stat().st_mode) == mode


def test_a_token_file_only_its_owner_can_read_is_used(store: EventStore) -> None:
    token_file = Path(f"{store.path}.api-token")
    token_file.write_text("my-own-token\n")
    token_file.chmod(0o400)
    running = _start(store.path)
    try:
        assert running.token == "my-own-token"
        with httpx.stream(
            "GET", running.url + "/api/v1/events", headers=running.auth, timeout=10
        ) as response:
            assert response.status_code == 200
    finally:
        _stop(running)


def test_405_names_the_allowed_methods(server: Server) -> None:
    for method in ("POST", "PUT", "DELETE"):
        response = httpx.request(method, server.url + "/api/v1/events", headers=server.auth)
        assert response.status_code == 405
        assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD"}
        assert response.json()["code"] == "method_not_allowed"
        assert response.headers["Mj-Api-Version"] == "1"


def test_a_repeated_last_event_id_header_answers_400(store: EventStore, server: Server) -> None:
    store.ask(activity(1))
    headers = [*server.auth.items(), ("Last-Event-ID", "0"), ("Last-Event-ID", "1")]
    response = httpx.get(server.url + "/api/v1/events", headers=headers)
    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["error"]


def test_clients_that_go_away_mid_page_leave_nothing_in_the_log(store: EventStore) -> None:
    padding = "x" * 2000
    for n in range(1500):  # more than a page (1000 events) of large frames
        store.ask(
            RecordActivities(
                activities=[("session-1", _state(f"{padding}{n}"))],
                recorded_at_ms=n,
            )
        )
    running = _start(store.path)
    try:
        for _ in range(3):
            with httpx.stream(
                "GET", running.url + "/api/v1/events?after_seq=0", headers=running.auth
            ) as response:
                for number, _line in enumerate(response.iter_lines()):
                    if number == 10:
                        break  # and hang up with most of the page unsent
        time.sleep(0.5)
    finally:
        err = _stop(running)
    assert err == ""  # was ~1,000 lines of "socket.send() raised exception." per client


def test_a_body_edited_into_invalid_json_ends_the_stream_with_stream_error(
    store: EventStore, server: Server
) -> None:
    for n in range(3):
        store.ask(activity(n))
    editor = apsw.Connection(str(store.path))
    try:
        overwrite_body(editor, 2, '{"type":"activity_changed","data":{"activity":{"state":"x",}}}')
    finally:
        editor.close()
    with httpx.stream(
        "GET", server.url + "/api/v1/events?after_seq=0", headers=server.auth, timeout=10
    ) as response:
        (frame,) = _frames(response, 1)
    assert frame["event"] == "stream_error"
    assert "id" not in frame
    assert "seq 2" in json.loads(frame["data"])["error"]


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


def test_the_read_routes_share_the_cursor_rule_and_the_401_header(server: Server) -> None:
    # One integer rule for every route: 5,000 digits are a 400, not Python's digit limit.
    route = server.url + "/api/v1/sessions/session-1/transcript"
    response = httpx.get(route, params={"after_seq": "9" * 5000}, headers=server.auth, timeout=10)
    assert response.status_code == 400
    assert "beyond the largest integer" in response.json()["error"]
    response = httpx.get(server.url + "/api/v1/workspaces", timeout=10)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_file_that_is_not_a_store_is_refused_before_any_token_is_made(tmp_path: Path) -> None:
    db = tmp_path / "notes.sqlite3"
    db.write_text("not a store\n")
    line = _refusal(_serve(db, "--port", "0"))
    assert "not a SQLite database" in line
    assert not Path(f"{db}.api-token").exists()
    assert db.read_text() == "not a store\n"


def test_unknown_parameters_are_ignored_as_the_origin_ignores_them(
    store: EventStore, server: Server
) -> None:
    store.ask(activity(1))
    with httpx.stream(
        "GET", f"{server.url}/api/v1/events?after_seq=0&colour=red", headers=server.auth, timeout=10
    ) as response:
        assert response.status_code == 200
        (frame,) = _frames(response, 1)
    assert frame["id"] == "1"


def test_an_unknown_session_answers_404(store: EventStore, server: Server) -> None:
    store.ask(activity(1))
    response = httpx.get(
        f"{server.url}/api/v1/events?session_id=nobody", headers=server.auth, timeout=10
    )
    assert response.status_code == 404
    # The one wording of an unknown session, as every route and command says it.
    assert response.json() == {"error": "no session nobody in this store", "code": "not_found"}
    assert response.headers["Mj-Api-Version"] == "1"
