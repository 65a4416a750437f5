"""The origin's released command line, ``mj`` 2.20.0, reading ``relaystore serve``:
every reply it knows decodes (issue 44's done-when).

``mj`` is the npm package ``@brokkai/mjolnir-linux-x64-gnu`` 2.20.0 (the native bundle
that ``@brokkai/mjolnir`` installs; ``linux-arm64-gnu`` on arm64), a binary that runs
offline. Its reading commands first make sure that its own daemon is up (a private
protocol, at the address its ``daemon.json`` names, starting one when none answers),
then read the API at ``http://127.0.0.1:3765/api/v1`` with the bearer token in
``MJ_DATA_DIR/api-token``; no option or variable points them at another server. So the
test gives ``mj`` two network namespaces joined by a veth pair: in one its daemon runs
(with its own web server on port 3765); in the other, where the commands run,
127.0.0.1:3765 is ``relaystore serve`` and the daemon's port is forwarded to the daemon
(socat). Every reply the commands decode and print came from relaystore.

What it reads: the session list and each session (``ApiSession``, a sub-agent's too),
a transcript (as text and as JSON), the usage, the questions waiting and the event
stream from a seq. ``mj wait``, ``prompt``, ``new`` and ``respond`` go through routes
that act on a live session, which a read-only server does not serve.

Needs root (namespaces), ``ip`` (iproute2), ``socat`` and the binary: ``.ci/run``
installs them; ``RELAYSTORE_MJ`` names another copy of ``mj``. Missing is a failure, as
the browser tests' Chromium is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from relaystore import EventStore, ObserveRelayEvents, SaveSession
from relaystore.domain.messages import SaveSubagent
from relaystore.domain.sessions.records import SessionState
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import ENV, TIMEOUT, LineReader, command
from tests.actors.http.test_origin_consumer import relation

pytestmark = pytest.mark.integration  # the origin's mj binary against a served store

MJ = Path(os.environ.get("RELAYSTORE_MJ", "/opt/relaystore-ci/mj-2.20.0/bin/mj"))
"""The released ``mj`` (``.ci/run`` unpacks it there)."""
API_PORT = 3765
"""The port ``mj`` reads its API on (its default; free inside a namespace of our own)."""
QUESTION = "Run the migrations now?"


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"the mj tests need {tool}: apt-get install {tool} (.ci/run does)")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A parent session of two turns with a question waiting, and two sub-agents."""
    path = tmp_path_factory.mktemp("mj-store") / "store.sqlite3"
    journal = JournalBuilder()
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("parent")))
        running = msgspec.structs.replace(example_session("child-a"), state=SessionState.RUNNING)
        store.ask(SaveSession(record=running))
        store.ask(SaveSession(record=example_session("child-b")))
        store.ask(SaveSubagent(record=relation("child-a", "audit deps")))
        store.ask(SaveSubagent(record=relation("child-b", "write docs")))
        events = journal.prompt_turn("Which tests cover the store?", chunks=("The store tests.",))
        events += journal.prompt_turn("And the server?", chunks=("test_http.py",))
        events += journal.question(QUESTION, action=None)
        store.ask(ObserveRelayEvents(session_id="parent", events=events))
    return path


@dataclass
class Origin:
    """Where ``mj`` runs: its folders, the namespace its commands run in, and the
    ``relaystore serve`` they read (its URL from the test's side, for comparisons)."""

    env: dict[str, str]
    commands_ns: str
    token: str
    serve_ns: str

    @property
    def prefix(self) -> list[str]:
        """``mj`` run in the commands' namespace."""
        return ["ip", "netns", "exec", self.commands_ns, str(MJ)]

    def mj(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``mj ARGS`` in the commands' namespace, to its end."""
        return subprocess.run(
            [*self.prefix, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )

    def api(self, path: str) -> object:
        """relaystore's own reply to ``GET /api/v1/PATH`` (from inside its namespace)."""
        script = (
            "import sys, httpx; r = httpx.get(sys.argv[1], headers={'Authorization': "
            "'Bearer ' + sys.argv[2]}); r.raise_for_status(); sys.stdout.write(r.text)"
        )
        url = f"http://127.0.0.1:{API_PORT}/api/v1/{path}"
        done = subprocess.run(
            ["ip", "netns", "exec", self.serve_ns, str(ENV_PYTHON), "-c", script, url, self.token],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=True,
        )
        return json.loads(done.stdout)


ENV_PYTHON = Path(command(Path("x"))[0])
"""The interpreter the tests run on (``relaystore`` and httpx are importable there)."""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=TIMEOUT)


def _listening(process: subprocess.Popen[str]) -> LineReader:
    """Wait for socat (``-d -d``) to say it listens; the reader of its log."""
    assert process.stderr is not None
    reader = LineReader(process.stderr)
    deadline = time.monotonic() + TIMEOUT
    while True:
        lines = reader.take(1, deadline=deadline)
        assert lines, "socat never listened"
        if "listening on" in lines[0]:
            return reader


@pytest.fixture(scope="module")
def origin(store_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Origin]:
    if not MJ.is_file():
        pytest.fail(
            f"the mj tests need the released mj 2.20.0 at {MJ}: .ci/run unpacks it from "
            "npm (@brokkai/mjolnir-linux-x64-gnu@2.20.0); RELAYSTORE_MJ names another copy"
        )
    _need("ip")
    _need("socat")
    folder = tmp_path_factory.mktemp("mj")
    env = {
        **ENV,
        "MJ_CONFIG_DIR": str(folder / "config"),
        "MJ_DATA_DIR": str(folder / "data"),
        "NO_COLOR": "1",
    }
    tag = f"{os.getpid() % 100000}"
    daemon_ns, commands_ns = f"rsmj{tag}d", f"rsmj{tag}c"
    veth = (f"rsm{tag}d", f"rsm{tag}c")
    processes: list[subprocess.Popen[str]] = []
    readers: list[LineReader] = []
    _ip("netns", "add", daemon_ns)
    _ip("netns", "add", commands_ns)
    try:
        _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
        for ns, link, address in (
            (daemon_ns, veth[0], "10.77.0.1/30"),
            (commands_ns, veth[1], "10.77.0.2/30"),
        ):
            _ip("link", "set", link, "netns", ns)
            _ip("-n", ns, "addr", "add", address, "dev", link)
            _ip("-n", ns, "link", "set", link, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        # mj's daemon, in its namespace: any reading command starts it.
        started = subprocess.run(
            ["ip", "netns", "exec", daemon_ns, str(MJ), "sessions", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert started.returncode == 0, started.stderr
        daemon = json.loads((folder / "data" / "daemon.json").read_text())
        port = daemon["address"].rsplit(":", 1)[1]
        forwards = (
            (
                daemon_ns,
                f"TCP-LISTEN:{port},bind=10.77.0.1,fork,reuseaddr",
                f"TCP:127.0.0.1:{port}",
            ),
            (
                commands_ns,
                f"TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr",
                f"TCP:10.77.0.1:{port}",
            ),
        )
        for ns, listen, to in forwards:
            socat = subprocess.Popen(
                ["ip", "netns", "exec", ns, "socat", "-d", "-d", listen, to],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            processes.append(socat)
            readers.append(_listening(socat))
        token_file = folder / "data" / "api-token"
        serve = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                commands_ns,
                *command(
                    store_path, "serve", "--port", str(API_PORT), "--token-file", str(token_file)
                ),
            ],
            cwd=store_path.parent,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.append(serve)
        assert serve.stderr is not None
        readers.append(LineReader(serve.stderr))
        said = readers[-1].take(1, deadline=time.monotonic() + TIMEOUT)
        assert said, "serve said nothing"
        assert " serving " in said[0], said
        yield Origin(env, commands_ns, token_file.read_text().strip(), commands_ns)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=TIMEOUT)
        for reader in readers:
            reader.join()
        for process in processes:
            if process.stderr is not None:
                process.stderr.close()
        for ns in (daemon_ns, commands_ns):
            pids = subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True, check=False
            ).stdout.split()
            for pid in pids:  # mj's daemon and anything it started
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Error" not in done.stderr, done.stderr
    return done.stdout


def test_mj_lists_the_sessions_and_reads_each_one(origin: Origin) -> None:
    listed = _ok(origin.mj("sessions"))
    sessions = origin.api("sessions")
    assert isinstance(sessions, dict)
    for session in sessions["sessions"]:
        assert session["id"] in listed
        assert session["title"] in listed
    for session_id in ("parent", "child-a", "child-b"):
        one = _ok(origin.mj("sessions", "--session", session_id))
        reply = origin.api(f"sessions/{session_id}")
        assert isinstance(reply, dict)
        assert session_id in one
        assert reply["title"] in one
    assert "Running" in _ok(origin.mj("sessions", "--session", "child-a"))


def test_mj_pages_the_transcript_and_reads_the_usage(origin: Origin) -> None:
    transcript = origin.api("sessions/parent/transcript")
    assert isinstance(transcript, dict)
    items = transcript["items"]
    assert items
    text = _ok(origin.mj("transcript", "--session", "parent"))
    for item in items:
        assert f"[{item['seq']}] {item['role']}" in text
    decoded = json.loads(_ok(origin.mj("transcript", "--session", "parent", "--json")))
    assert [item["stable_id"] for item in decoded["items"]] == [item["stable_id"] for item in items]
    usage = json.loads(_ok(origin.mj("usage", "--session", "parent", "--json")))
    reply = origin.api("sessions/parent/usage")
    assert isinstance(reply, dict)
    assert len(usage["turns"]) == len(reply["turns"]) == 2
    assert usage["coverage"] == reply["coverage"]


def test_mj_shows_the_question_waiting(origin: Origin) -> None:
    shown = _ok(origin.mj("elicitations", "--session", "parent"))
    assert QUESTION in shown


def test_mj_follows_the_events_from_a_seq(origin: Origin, store_path: Path) -> None:
    listed = subprocess.run(
        command(store_path, "events", "--session", "parent"),
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    ).stdout.splitlines()
    seqs = [json.loads(line)["seq"] for line in listed]
    assert len(seqs) > 4
    follow = subprocess.Popen(
        [*origin.prefix, "events", "--session", "parent", "--after-seq", str(seqs[1])],
        env=origin.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        reader = LineReader(follow.stdout)
        lines = reader.take(len(seqs) - 2, deadline=time.monotonic() + TIMEOUT)
    finally:
        follow.terminate()
        follow.wait(timeout=TIMEOUT)
    reader.join()
    for pipe in (follow.stdout, follow.stderr):
        if pipe is not None:
            pipe.close()
    assert [json.loads(line)["seq"] for line in lines] == seqs[2:]
