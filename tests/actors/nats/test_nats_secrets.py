"""A NATS password given in ``--nats`` never appears in what ``relaystore`` prints.

Every path that echoes a server URL, run as the ``relaystore`` command against a real
``nats-server`` that requires a user and password: ``publish``'s start-up and
connected lines, its reconnect warnings while the server is down, ``fleet events``'
cannot-reach and no-stream errors, and the usage errors of a bad or misplaced URL.
Each shows where it is about (the user, host and port) with the password masked.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from relaystore.domain.redaction import redact
from tests.actors.cli_support import TIMEOUT
from tests.actors.nats_support import (
    attempt,
    journal_root,
    publisher,
    run,
    running_server,
    store_id,
    wait_until_published,
)

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish/fleet processes

USER = "relay"
SECRET = "s3cret-Pa55"
CREDENTIALS = (USER, SECRET)


def _read_until(process: subprocess.Popen[bytes], needle: str, seen: list[str]) -> None:
    """Collect the process's stderr lines into ``seen`` up to one holding ``needle``."""
    assert process.stderr is not None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        line = process.stderr.readline().decode()
        seen.append(line)
        if needle in line:
            return
        if not line and process.poll() is not None:
            raise AssertionError(f"exited ({process.returncode}) before {needle!r}: {seen}")
    raise AssertionError(f"no {needle!r} in {seen}")


def _stop(process: subprocess.Popen[bytes]) -> str:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, stderr.decode()
    return stderr.decode()


def test_publish_shows_the_server_without_its_password_in_every_line(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    run(db, "replay", str(journal_root(tmp_path / "roots", "s-1", 10)))
    with running_server(tmp_path, credentials=CREDENTIALS) as server:
        shown = f"nats://{USER}:***@127.0.0.1:{server.port}"
        process = publisher(db, server.url)
        seen: list[str] = []
        try:
            _read_until(process, "after seq", seen)  # the start-up line, then connected
            wait_until_published(server.url, "RELAYSTORE", f"relaystore.{store_id(db)}.*.*", 20)
            server.stop()
            _read_until(process, "reconnecting in", seen)
            _read_until(process, "reconnecting in", seen)
            server.start()
        finally:
            seen.append(_stop(process))
    text = "".join(seen)
    assert SECRET not in text
    assert f"to stream RELAYSTORE on {shown} as relaystore." in text
    assert f"to stream RELAYSTORE on {shown} after seq 0" in text
    assert f"publish to {shown}: " in text
    assert "Traceback" not in text


@pytest.mark.parametrize(
    "url",
    [f"nats://{USER}:{SECRET}@127.0.0.1:1", f"nats://{SECRET}@127.0.0.1:1"],
    ids=["user-password", "token"],
)
def test_fleet_events_cannot_reach_a_server_without_showing_its_secret(
    tmp_path: Path, url: str
) -> None:
    result = attempt(tmp_path / "store.sqlite3", "fleet", "events", "--nats", url)
    assert result.returncode == 1
    assert result.stderr == f"relaystore: cannot reach a NATS server at {redact(url)} " + (
        "(NoServersError: nats: no servers available for connection)\n"
    )
    assert SECRET not in result.stderr


def test_fleet_events_names_a_missing_stream_without_the_password(tmp_path: Path) -> None:
    with running_server(tmp_path, credentials=CREDENTIALS) as server:
        result = attempt(tmp_path / "store.sqlite3", "fleet", "events", "--nats", server.url)
    assert result.returncode == 1
    assert f"no stream RELAYSTORE on nats://{USER}:***@127.0.0.1:{server.port}" in result.stderr
    assert SECRET not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["publish", "--nats", f"nats://{USER}:{SECRET}@host:99999"],
        ["publish", "--nats", f"nats://{USER}:{SECRET}@host:4222/path"],
        ["publish", "--nats", f"http://{USER}:{SECRET}@host:4222"],
        ["publish", "--nats", f"nats://{USER}:pa/{SECRET}@host:4222"],
        ["fleet", "events", "--nats", f"nats://h:1,nats://{SECRET}@host:0"],
        ["publish", "--nats", "nats://h:1", f"nats://{USER}:{SECRET}@host:4222"],
        ["fleet", "events", "--nats", "nats://h:1", f"--nast=nats://{USER}:{SECRET}@host:4222"],
    ],
    ids=["port", "path", "scheme", "slash-in-password", "token-in-list", "stray", "misspelt"],
)
def test_usage_errors_never_echo_a_password(tmp_path: Path, args: list[str]) -> None:
    result = attempt(tmp_path / "store.sqlite3", *args)
    assert result.returncode == 2
    assert SECRET not in result.stderr
    assert "***@host" in result.stderr  # it still says which URL
    assert "Traceback" not in result.stderr
