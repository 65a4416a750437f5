"""The server's cut-offs, with short timeouts: an in-process server on a loopback port.

A client the server cannot write to is disconnected after ``Timeouts.stall`` with one
log line and a reset (its queued megabytes dropped, not delivered for minutes); a
connection that does not finish its request head within ``Timeouts.header`` is closed,
on a new connection and between requests on a kept-alive one.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
from relaystore.actors.http.server import Server, Timeouts
from relaystore.testing import example_session

TOKEN = "test-token"
TIMEOUTS = Timeouts(keepalive=0.2, header=0.5, stall=1.0, shutdown=0.3)
REQUEST = (
    b"GET /api/v1/events?after_seq=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
    + TOKEN.encode()
    + b"\r\n\r\n"
)


def _state(text: str) -> ApiActivityState:
    return ApiActivityState(
        state=text, is_idle=False, waiting_for_input=False, capacity_retry=False
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        store.ask(SaveSession(record=example_session()))
        yield store


@pytest.fixture
def server(store: EventStore) -> Iterator[Server]:
    running = Server(store.path, TOKEN, timeouts=TIMEOUTS)
    ready = threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(running.run(announce=lambda _: ready.set())), daemon=True
    )
    thread.start()
    assert ready.wait(20), "the server did not start"
    yield running
    running.stop()
    thread.join(20)
    assert not thread.is_alive(), "the server did not stop"


def _address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _closed_within(connection: socket.socket, seconds: float) -> tuple[bool, int]:
    """Read until the server closes (EOF or reset); whether it did, and the bytes read."""
    connection.settimeout(0.2)
    deadline, received = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        try:
            data = connection.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, received
        if not data:
            return True, received
        received += len(data)
    return False, received


def test_a_client_that_accepts_nothing_is_reset_with_one_log_line(
    store: EventStore, server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    padding = "x" * 20_000
    for n in range(500):  # 10 MB: more than the kernel's buffers on both sides hold
        store.ask(
            RecordActivities(
                activities=[("session-1", _state(f"{padding}{n}"))],
                recorded_at_ms=n,
            )
        )
    with socket.socket() as stalled:
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(_address(server))
        stalled.sendall(REQUEST)  # and read nothing
        time.sleep(TIMEOUTS.stall + 1.5)
        closed, received = _closed_within(stalled, 5)
    assert closed
    # A reset: what the server had queued is dropped, not delivered (10 MB were due).
    assert received < 1_000_000
    records = [(record.name, record.levelno, record.getMessage()) for record in caplog.records]
    assert len(records) == 1, records
    name, level, message = records[0]
    assert (name, level) == ("relaystore.actors.http.server", logging.WARNING)
    assert "accepted nothing for 1 s" in message
    assert not any(record.exc_info for record in caplog.records)
    # The server serves the next client as before.
    with httpx.stream(
        "GET", server.url + "/api/v1/events", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as response:
        assert response.status_code == 200


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"GET /api/v1/ev",  # stops in the request line
        b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n",  # never ends its headers
    ],
)
def test_a_connection_that_never_finishes_its_head_is_closed(server: Server, sent: bytes) -> None:
    with socket.create_connection(_address(server)) as slow:
        slow.sendall(sent)
        started = time.monotonic()
        closed, received = _closed_within(slow, TIMEOUTS.header + 5)
    assert closed
    assert received == 0
    assert time.monotonic() - started >= TIMEOUTS.header - 0.1


def test_a_kept_alive_connection_must_send_its_next_head_in_time(server: Server) -> None:
    with socket.create_connection(_address(server)) as client:
        # A complete exchange (a 401: no token), the connection kept alive...
        client.sendall(b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\n\r\n")
        client.settimeout(5)
        assert client.recv(65536).startswith(b"HTTP/1.1 401 ")
        # ...then the start of another request, never finished.
        client.sendall(b"GET /api/v1/events HTTP/1.1\r\n")
        closed, _ = _closed_within(client, TIMEOUTS.header + 5)
    assert closed


def test_stop_ends_every_stream_with_a_complete_response(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    running = Server(store.path, TOKEN, timeouts=TIMEOUTS)
    ready = threading.Event()
    thread = threading.Thread(
        target=lambda: asyncio.run(running.run(announce=lambda _: ready.set())), daemon=True
    )
    thread.start()
    assert ready.wait(20)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.stream("GET", running.url + "/api/v1/events", headers=auth, timeout=10) as response:
        assert response.status_code == 200
        running.stop()
        lines = list(response.iter_lines())  # ends: the response was completed
    thread.join(10)
    assert not thread.is_alive()
    assert set(lines) <= {": keepalive", ""}
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
