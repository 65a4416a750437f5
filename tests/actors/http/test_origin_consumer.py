"""What a real consumer of the origin's API does, against ``relaystore serve`` unchanged.

A supervisor's client (the origin's ``mj`` CLI and the programs written for its API) does
three things this store must answer as the origin does:

* it submits a command and polls ``GET /api/v1/events?session_id=S&after_seq=N`` for the
  ``command_ended`` of its own ``command_id``: a bounded read of the stream (it stops at
  the frame it wants), tracking the newest ``seq`` it saw so the next poll resumes there
  (the stream's contract: the origin's ``api-reference.md`` @63ed4b3, "Follow durable
  events"); relaystore's ``command_id`` filter spares it the scan;
* it lists a parent's sub-agents (``GET /api/v1/sessions/{id}/subagents``: ``SubagentView``
  and ``SubagentListResponse``, ``types.rs`` @04067804; 404 for an unknown parent as
  ``require_session_record`` answers, ``subagents.rs`` @04067804) and reads each
  child's ``state``, ``is_idle``, ``background_work`` (optional, absent without a live
  snapshot) and ``background_tasks`` (always written, ``types.rs`` @e1ec72d);
* it probes a route's methods with ``OPTIONS`` and gets 405 with ``Allow``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from relaystore import EventStore, ListSessions, ObserveRelayEvents, SaveSession
from relaystore.domain.messages import SaveSubagent
from relaystore.domain.sessions.records import SessionState
from relaystore.domain.subagents import SubagentRecord
from relaystore.testing import JournalBuilder, example_session
from tests.actors.http_support import Server, start_server, stop_server

pytestmark = pytest.mark.integration  # its stores project in worker processes


def relation(child: str, task: str) -> SubagentRecord:
    return SubagentRecord(
        child_session_id=child,
        parent_session_id="parent",
        task_name=task,
        profile_id="codex",
        initial_prompt="do it",
        request_key=f"key-{child}",
        created_at="2026-09-24T00:00:00Z",
    )


@pytest.fixture(scope="module")
def journal() -> JournalBuilder:
    return JournalBuilder()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, journal: JournalBuilder) -> Path:
    """The store every test reads through the server (each test stops every actor, so
    a test that writes opens the store itself)."""
    path = tmp_path_factory.mktemp("consumer") / "store.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("parent")))
        running = msgspec.structs.replace(
            example_session("child-a"),
            state=SessionState.RUNNING,
            last_error="ssh worker@host.example: connection reset",
        )
        store.ask(SaveSession(record=running))
        store.ask(SaveSession(record=example_session("child-b")))
        store.ask(SaveSubagent(record=relation("child-a", "audit deps")))
        store.ask(SaveSubagent(record=relation("child-b", "write docs")))
        events = journal.prompt_turn("hello", chunks=("hi",))
        events += journal.shell_command("ls", stdout="a\n", command_id="shell-mine")
        events += journal.shell_command("pwd", stdout="/\n", command_id="shell-other")
        store.ask(ObserveRelayEvents(session_id="parent", events=events))
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[EventStore]:
    with EventStore.open(store_path) as store:
        yield store


@pytest.fixture(scope="module")
def server(store_path: Path) -> Iterator[Server]:
    running = start_server(store_path, "--keepalive", "0.5")
    yield running
    assert "Traceback" not in stop_server(running)


def _frames(response: httpx.Response) -> Iterator[dict[str, str]]:
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            yield {"keepalive": ""}
            continue
        if not line:
            if current:
                yield current
                current = {}
            continue
        field, _, value = line.partition(": ")
        current[field] = value


def _await_command_ended(
    server: Server, session_id: str, command_id: str, after_seq: int, *, filtered: bool = False
) -> tuple[dict[str, object], int, int]:
    """The consumer's poll: read the stream from ``after_seq`` until the ``command_ended``
    of ``command_id``; return it, the newest seq seen and how many frames were read
    (``filtered``: ask the store for that command's events only)."""
    newest, read = after_seq, 0
    params = {"session_id": session_id, "after_seq": str(after_seq)}
    if filtered:
        params["command_id"] = command_id
    with httpx.stream(
        "GET", server.url + "/api/v1/events", params=params, headers=server.auth, timeout=10
    ) as response:
        assert response.status_code == 200
        assert response.headers["Mj-Api-Version"] == "1"
        for frame in _frames(response):
            if "keepalive" in frame:
                continue
            read += 1
            newest = max(newest, int(frame["id"]))
            event = msgspec.json.decode(frame["data"])
            if event["type"] == "command_ended" and event["data"]["command_id"] == command_id:
                return event, newest, read
    raise AssertionError("the stream ended before the command did")


def test_a_consumer_polls_for_its_own_command_ended(server: Server, store: EventStore) -> None:
    event, newest, scanned = _await_command_ended(server, "parent", "shell-mine", 0)
    assert event["data"]["outcome"] == "succeeded"  # type: ignore[index]
    assert event["seq"] == newest
    # With the filter the stream holds that command's events only: nothing to scan.
    filtered, newest_filtered, read = _await_command_ended(
        server, "parent", "shell-mine", 0, filtered=True
    )
    assert filtered == event
    assert newest_filtered == newest
    assert read == 1 < scanned

    # The next command commits after the poll started: the poll resumes from the newest
    # seq it saw and the live stream delivers it.
    journal = JournalBuilder()
    store.ask(SaveSession(record=example_session("live")))

    def submit() -> None:
        store.ask(
            ObserveRelayEvents(
                session_id="live", events=journal.shell_command("true", command_id="shell-late")
            )
        )

    latest = store.latest_seq
    with httpx.stream(
        "GET",
        server.url + "/api/v1/events",
        params={"session_id": "live", "after_seq": str(latest), "command_id": "shell-late"},
        headers=server.auth,
        timeout=10,
    ) as response:
        frames = _frames(response)
        assert next(frames) == {"keepalive": ""}  # caught up: nothing yet
        submit()
        frame = next(f for f in frames if "keepalive" not in f)
    late = msgspec.json.decode(frame["data"])
    assert (late["type"], late["data"]["command_id"]) == ("command_ended", "shell-late")
    assert int(frame["id"]) > latest


def test_the_events_command_filters_by_command_id(store_path: Path) -> None:
    import subprocess
    import sys

    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "relaystore.actors.cli",
            "--db",
            str(store_path),
            "events",
            "--session",
            "parent",
            "--command-id",
            "prompt-1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    kinds = [msgspec.json.decode(line)["type"] for line in printed]
    assert kinds == ["turn_started", "turn_ended"]  # a prompt's end is its turn_ended
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "relaystore.actors.cli",
            "--db",
            str(store_path),
            "events",
            "--command-id",
            " ",
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0
    assert "command_id" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_consumer_lists_a_parents_subagents_and_reads_each_child(server: Server) -> None:
    response = server.get("/api/v1/sessions/parent/subagents")
    assert response.status_code == 200, response.text
    listed = response.json()
    assert list(listed) == ["subagents"]
    assert [
        (v["parent_session_id"], v["task_name"], v["session"]["id"]) for v in listed["subagents"]
    ] == [
        ("parent", "audit deps", "child-a"),
        ("parent", "write docs", "child-b"),
    ]
    for view in listed["subagents"]:
        child = view["session"]
        assert child["background_tasks"] == []
        assert "background_work" not in child  # no live snapshot: absent, as the origin
        assert isinstance(child["is_idle"], bool)
        assert child["subagents"] == {"mode": "native"}
    states = {v["session"]["id"]: v["session"] for v in listed["subagents"]}
    assert states["child-a"]["state"] == "Running"
    # A live child's raw error chain stays private; it says it has one.
    assert states["child-a"]["has_error"] is True
    assert "error" not in states["child-a"]
    assert states["child-b"]["state"] == "Stopped"

    empty = server.get("/api/v1/sessions/child-a/subagents")
    assert empty.status_code == 200
    assert empty.json() == {"subagents": []}
    missing = server.get("/api/v1/sessions/nobody/subagents")
    assert missing.status_code == 404
    assert missing.json()["code"] == "not_found"

    top = {s["id"] for s in server.get("/api/v1/sessions", all="false").json()["sessions"]}
    assert "parent" in top
    assert not top & {"child-a", "child-b"}
    every = server.get("/api/v1/sessions").json()["sessions"]
    assert {"child-a", "child-b", "parent"} <= {s["id"] for s in every}


def test_top_level_listing_matches_the_facade(store: EventStore, server: Server) -> None:
    over_http = [s["id"] for s in server.get("/api/v1/sessions", all="false").json()["sessions"]]
    assert over_http == [s.id for s in store.ask(ListSessions(all=False)).sessions]
    assert "child-a" not in over_http


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/events",
        "/api/v1/sessions",
        "/api/v1/sessions/parent",
        "/api/v1/sessions/parent/subagents",
        "/api/v1/sessions/parent/transcript",
    ],
)
def test_options_probes_answer_405_with_allow(server: Server, path: str) -> None:
    response = httpx.options(server.url + path, headers=server.auth, timeout=10)
    assert response.status_code == 405, response.text
    assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD"}
    assert response.json()["code"] == "method_not_allowed"
    assert response.headers["Mj-Api-Version"] == "1"


def test_a_blank_command_id_filter_answers_400(server: Server) -> None:
    for bad in (" ", "x" * 1025):
        response = server.get("/api/v1/events", after_seq="0", command_id=bad)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "bad_request"
        assert "command_id" in response.json()["error"]
