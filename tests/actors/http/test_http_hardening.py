"""What ``relaystore serve`` guarantees around every route, through a real server process:
sign-out ends the event streams its cookie opened, and an answer the server gives before
any route (a malformed request) carries the same security headers as every other."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from httpx_sse import connect_sse

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.actors.http.viewer import COOKIE
from relaystore.testing import JournalBuilder, example_session
from tests.actors.http_support import Server, start_server, stop_server

pytestmark = pytest.mark.integration  # its stores project in worker processes


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hardening") / "store.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        journal = JournalBuilder()
        store.ask(ObserveRelayEvents(session_id="session-1", events=journal.prompt_turn("hi")))
    return path


@pytest.fixture(scope="module")
def server(store_path: Path) -> Iterator[Server]:
    running = start_server(store_path)
    yield running
    assert "Traceback" not in stop_server(running)


def _sign_in(server: Server) -> str:
    response = httpx.post(
        server.url + "/session",
        data={"token": server.token},
        headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
        timeout=10,
    )
    assert response.status_code == 303, response.text
    match = re.match(rf"{COOKIE}=([^;]+);", response.headers["set-cookie"])
    assert match is not None
    return match[1]


# -- sign-out ends the streams its cookie opened -------------------------------------------


def test_sign_out_ends_the_event_streams_opened_with_its_cookie(
    server: Server, store_path: Path
) -> None:
    signed_out, kept = _sign_in(server), _sign_in(server)
    # No keepalive comes within the read timeout (15 s apart): a stream the server does
    # not end fails the test with ReadTimeout instead of hanging it.
    timeout = httpx.Timeout(10, read=8)
    with (
        httpx.Client(cookies={COOKIE: signed_out}, timeout=timeout) as by_cookie,
        httpx.Client(cookies={COOKIE: kept}, timeout=timeout) as by_other_cookie,
        httpx.Client(headers=server.auth, timeout=timeout) as by_token,
        connect_sse(by_cookie, "GET", server.url + "/api/v1/events?after_seq=0") as ending,
        connect_sse(by_other_cookie, "GET", server.url + "/api/v1/events") as other,
        connect_sse(by_token, "GET", server.url + "/api/v1/events") as bearer,
    ):
        for source in (ending, other, bearer):
            source.response.raise_for_status()
        events = ending.iter_sse()
        assert next(events).event == "turn_started"  # the stream is live
        response = httpx.post(
            server.url + "/session/end",
            cookies={COOKIE: signed_out},
            headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"},
            timeout=10,
        )
        assert response.status_code == 303
        # The rest of what was committed may still arrive; then the server ends it.
        rest = [event.event for event in events]
        assert "turn_started" not in rest
        assert ending.response.is_closed or ending.response.is_stream_consumed
        # Streams opened with another sign-in or with the token go on: a new commit
        # reaches both.
        with EventStore.open(store_path) as store:
            store.ask(SaveSession(record=example_session("session-2")))
            journal = JournalBuilder()
            store.ask(
                ObserveRelayEvents(session_id="session-2", events=journal.prompt_turn("again"))
            )
        assert next(other.iter_sse()).event == "turn_started"
        assert next(bearer.iter_sse()).event == "turn_started"
    # And the cookie no longer opens one.
    again = httpx.get(server.url + "/api/v1/events", cookies={COOKIE: signed_out}, timeout=10)
    assert again.status_code == 401


# -- answers given before any route --------------------------------------------------------


def _raw(server: Server, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Send ``request`` on a plain socket; the status line, headers and body answered."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NOT A REQUEST LINE AT ALL\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad\x01Name: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",  # no Host
    ],
)
def test_a_malformed_request_is_answered_with_the_security_headers(
    server: Server, request_bytes: bytes
) -> None:
    status, headers, body = _raw(server, request_bytes)
    assert status.startswith("HTTP/1.1 400 "), status
    assert "default-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-frame-options"] == "DENY"
    assert headers["cross-origin-opener-policy"] == "same-origin"
    assert headers["mj-api-version"] == "1"
    assert headers["cache-control"] == "no-store"
    assert headers["content-type"] == "application/json"
    assert b'"code":"bad_request"' in body


def test_an_upgrade_request_is_answered_by_the_routes_with_the_headers(server: Server) -> None:
    status, headers, _ = _raw(
        server,
        b"GET /api/v1/events HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, close\r\n"
        b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    # No WebSocket here: the request is an ordinary one, refused without the token.
    assert status.startswith("HTTP/1.1 401 "), status
    assert headers["x-frame-options"] == "DENY"
    assert headers["mj-api-version"] == "1"
