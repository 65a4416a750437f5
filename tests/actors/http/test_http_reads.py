"""The origin's read routes through a real ``relaystore serve`` process and httpx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from relaystore import (
    EventStore,
    LoadElicitationAnswers,
    LoadElicitations,
    LoadUsagePage,
    ObserveRelayEvents,
    RecordElicitationAnswer,
    SaveSession,
)
from relaystore.domain.elicitation.forms import ElicitationAccept, ElicitationRequest
from relaystore.domain.wire import encode
from relaystore.testing import JournalBuilder, example_session
from tests.actors.http_support import Server, start_server, stop_server

pytestmark = pytest.mark.integration  # its stores project in worker processes


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reads") / "store.sqlite3"


@pytest.fixture(scope="module")
def server(store_path: Path) -> Iterator[Server]:
    path = store_path
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1")))
        other = msgspec.structs.replace(example_session("session-2"), workspace_id="w2")
        store.ask(SaveSession(record=other))
        journal = JournalBuilder()
        events = journal.prompt_turn("hello there", chunks=("one ", "two"))
        events += journal.prompt_turn("second prompt", chunks=("three",))
        events += journal.question(action=None)
        events += journal.question("Which branch?", request_id="question-2", action="accept")
        store.ask(ObserveRelayEvents(session_id="session-1", events=events))
        store.ask(
            RecordElicitationAnswer(
                session_id="session-1",
                elicitation_id="question-2",
                answered_by="ada",
                response=ElicitationAccept(content={"answer": "main"}),
                answered_at_ms=1_700_000_000_000,
            )
        )
    running = start_server(path)
    yield running
    assert "Traceback" not in stop_server(running)


def _ok(response: httpx.Response) -> dict[str, object]:
    assert response.status_code == 200, response.text
    assert response.headers["Mj-Api-Version"] == "1"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body, dict)
    return body


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["Mj-Api-Version"] == "1"
    body = response.json()
    assert set(body) == {"error", "code"}
    assert body["code"] == code
    return str(body["error"])


ROUTES = [
    "/api/v1/workspaces",
    "/api/v1/sessions",
    "/api/v1/sessions/session-1",
    "/api/v1/sessions/session-1/transcript",
    "/api/v1/sessions/session-1/history",
    "/api/v1/sessions/session-1/usage",
    "/api/v1/sessions/session-1/elicitations",
    "/api/v1/sessions/session-1/answers",
    "/metrics",
]


@pytest.mark.parametrize("path", ROUTES)
def test_every_read_route_needs_the_token(server: Server, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        _error(httpx.get(server.url + path, headers=headers), 401, "unauthorized")


def test_healthz_needs_no_token(server: Server) -> None:
    body = _ok(httpx.get(server.url + "/healthz"))
    assert body["status"] == "ok"
    assert isinstance(body["latest_seq"], int)


def test_workspaces_and_sessions(server: Server) -> None:
    workspaces = _ok(server.get("/api/v1/workspaces"))["workspaces"]
    assert {w["id"]: w["session_count"] for w in workspaces} == {"default": 1, "w2": 1}  # type: ignore[union-attr]
    assert set(workspaces[0]) == {"id", "name", "created_at", "last_opened_at", "session_count"}  # type: ignore[index]
    sessions = _ok(server.get("/api/v1/sessions"))["sessions"]
    assert [s["id"] for s in sessions] == ["session-1", "session-2"]  # type: ignore[union-attr]
    first = sessions[0]  # type: ignore[index]
    for field in (
        "workspace_id",
        "title",
        "harness_kind",
        "profile_id",
        "target_id",
        "bundle_id",
        "state",
        "lifecycle",
        "chat_phase",
        "is_idle",
        "has_error",
        "created_at",
        "updated_at",
        "config_options",
    ):
        assert field in first
    assert "last_turn_outcome" not in first
    only = _ok(server.get("/api/v1/sessions", workspace_id="w2"))["sessions"]
    assert [s["id"] for s in only] == ["session-2"]  # type: ignore[union-attr]
    # all=false (the origin's CLI default) lists top-level sessions: every session here.
    for every in ("true", "false"):
        listed = _ok(server.get("/api/v1/sessions", all=every))["sessions"]
        assert [s["id"] for s in listed] == ["session-1", "session-2"]  # type: ignore[union-attr]
    _error(server.get("/api/v1/sessions", all="maybe"), 400, "bad_request")
    assert first["background_tasks"] == []  # always written, as the origin writes it
    _error(server.get("/api/v1/sessions", colour="blue"), 400, "bad_request")
    _error(server.get("/api/v1/sessions", workspace_id=" "), 400, "bad_request")


def test_session_detail(server: Server) -> None:
    detail = _ok(server.get("/api/v1/sessions/session-1"))
    outcome = detail["last_turn_outcome"]
    assert outcome["command_id"] == "prompt-2"  # type: ignore[index]
    assert outcome["outcome"] == {"kind": "completed", "stop_reason": "end_turn"}  # type: ignore[index]
    assert "usage" not in outcome  # type: ignore[operator]
    assert [q["id"] for q in detail["pending_elicitations"]] == ["question-1"]  # type: ignore[union-attr]
    assert detail["background_tasks"] == []
    assert "session-9" in _error(server.get("/api/v1/sessions/session-9"), 404, "not_found")


def test_transcript_pages(server: Server) -> None:
    whole = _ok(server.get("/api/v1/sessions/session-1/transcript"))
    assert set(whole) == {"next_after_seq", "session_id", "latest_seq", "execution", "items"}
    items = whole["items"]
    assert [i["role"] for i in items] == ["user", "agent", "user", "agent"]  # type: ignore[union-attr]
    assert set(items[0]) == {  # type: ignore[index]
        "stable_id",
        "position",
        "seq",
        "role",
        "text",
        "created_at_ms",
        "last_changed_at_ms",
        "body",
    }
    assert whole["execution"] == {"state": "idle"}
    seen, after = [], 0
    while True:
        page = _ok(server.get("/api/v1/sessions/session-1/transcript", after_seq=after, limit=1))
        seen += page["items"]  # type: ignore[arg-type]
        if page["next_after_seq"] == page["latest_seq"]:
            break
        after = page["next_after_seq"]  # type: ignore[assignment]
    assert seen == items
    agents = _ok(
        httpx.get(
            server.url + "/api/v1/sessions/session-1/transcript?role=agent&role=user&limit=2",
            headers=server.auth,
        )
    )
    assert [i["role"] for i in agents["items"]] == ["user", "agent"]  # type: ignore[union-attr]
    finished = _ok(server.get("/api/v1/sessions/session-1/transcript", finished_only="true"))
    assert [i["role"] for i in finished["items"]] == ["agent", "agent"]  # type: ignore[union-attr]
    # Unknown parameters are ignored, as the origin's transcript query ignores them.
    _ok(server.get("/api/v1/sessions/session-1/transcript", colour="blue"))


@pytest.mark.parametrize(
    "params",
    [
        {"after_seq": "-1"},
        {"after_seq": "x"},
        {"limit": "1.5"},
        {"role": "boss"},
        {"finished_only": "yes"},
        {"finished_only": "true", "role": "user"},
        {"after_seq": str(2**63)},
    ],
)
def test_transcript_refuses_bad_parameters(server: Server, params: dict[str, str]) -> None:
    _error(server.get("/api/v1/sessions/session-1/transcript", **params), 400, "bad_request")


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/sessions/session-1/transcript", "after_seq"),
        ("/api/v1/sessions/session-1/transcript", "limit"),
        ("/api/v1/sessions/session-1/history", "before_position"),
        ("/api/v1/sessions/session-1/usage", "limit"),
        ("/api/v1/sessions", "workspace_id"),
    ],
)
def test_a_repeated_parameter_is_refused_not_overridden(
    server: Server, path: str, name: str
) -> None:
    response = httpx.get(f"{server.url}{path}?{name}=1&{name}=2", headers=server.auth, timeout=10)
    _error(response, 400, "bad_request")
    assert "given 2 times" in response.json()["error"]


def test_transcript_of_an_unknown_session_is_404(server: Server) -> None:
    _error(server.get("/api/v1/sessions/session-9/transcript"), 404, "not_found")
    _error(server.get("/api/v1/sessions/bad%20id/transcript"), 400, "bad_request")


def test_history_usage_and_elicitations(server: Server) -> None:
    newest = _ok(server.get("/api/v1/sessions/session-1/history", limit=2))
    assert [i["text"] for i in newest["items"]] == ["second prompt", "three"]  # type: ignore[union-attr]
    before = newest["before"]
    older = _ok(
        server.get(
            "/api/v1/sessions/session-1/history",
            before_position=before["position"],  # type: ignore[index]
            before_id=before["stable_id"],  # type: ignore[index]
        )
    )
    assert [i["text"] for i in older["items"]] == ["hello there", "one two"]  # type: ignore[union-attr]
    assert older["before"] is None
    _error(
        server.get("/api/v1/sessions/session-1/history", before_id="agent:none"), 400, "bad_request"
    )
    usage = _ok(server.get("/api/v1/sessions/session-1/usage", limit=1))
    assert set(usage) == {
        "session_id",
        "next_after_seq",
        "latest_seq",
        "turns",
        "totals",
        "coverage",
    }
    assert [t["command_id"] for t in usage["turns"]] == ["prompt-1"]  # type: ignore[union-attr]
    assert usage["coverage"]["recorded_turns"] == 2  # type: ignore[index]
    _error(server.get("/api/v1/sessions/session-9/usage"), 404, "not_found")
    # The origin's handler answers Json<Vec<ElicitationRequest>> and its CLI decodes a
    # sequence: the bare array, which decodes as the origin's type.
    served = server.get("/api/v1/sessions/session-1/elicitations")
    questions = msgspec.json.decode(served.content, type=list[ElicitationRequest])
    assert [q.id for q in questions] == ["question-1"]
    _error(server.get("/api/v1/sessions/session-9/elicitations"), 404, "not_found")


def test_answers_is_relaystores_own_route_with_who_answered_and_what(
    server: Server, store_path: Path
) -> None:
    body = _ok(server.get("/api/v1/sessions/session-1/answers"))
    assert body == {
        "session_id": "session-1",
        "answers": [
            {
                "elicitation_id": "question-2",
                "action": "accept",
                "answered_by": "ada",
                "answered_at_ms": 1_700_000_000_000,
                "answer": "accepted: answer = main",
                "content": {"answer": "main"},
            }
        ],
    }
    with EventStore.open(store_path, read_only=True) as store:
        typed = store.ask(LoadElicitationAnswers(session_id="session-1"))
    assert server.get("/api/v1/sessions/session-1/answers").content == encode(typed)
    _error(server.get("/api/v1/sessions/session-9/answers"), 404, "not_found")
    _error(server.get("/api/v1/sessions/bad%20id/answers"), 400, "bad_request")


@pytest.mark.parametrize("params", [{}, {"limit": "1"}, {"after_seq": "1"}, {"after_seq": "99"}])
def test_usage_and_elicitations_answer_the_bytes_of_the_typed_reads(
    server: Server, store_path: Path, params: dict[str, str]
) -> None:
    """The routes pass the stored turns and questions through (the raw reads): the body
    is byte for byte what encoding the typed reply gives."""
    with EventStore.open(store_path, read_only=True) as store:
        usage = store.ask(
            LoadUsagePage(
                session_id="session-1",
                after_seq=int(params.get("after_seq", 0)),
                limit=int(params.get("limit", 200)),
            )
        )
        questions = store.ask(LoadElicitations(session_id="session-1"))
    served = server.get("/api/v1/sessions/session-1/usage", **params)
    assert served.status_code == 200
    assert served.content == encode(usage)
    served = server.get("/api/v1/sessions/session-1/elicitations")
    assert served.status_code == 200
    assert questions is not None
    assert served.content == encode(questions.elicitations)


def test_metrics_are_prometheus_text(server: Server) -> None:
    response = server.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert "# TYPE relaystore_latest_seq gauge" in text
    assert "# TYPE relaystore_commits_total counter" in text
    assert any(line.startswith("relaystore_latest_seq ") for line in text.splitlines())


@pytest.mark.parametrize("token_ok", [True, False])
def test_a_server_without_its_store_answers_503_after_the_token_check(token_ok: bool) -> None:
    """While the server closes its store, every read route answers the origin's 503 body;
    a wrong token is still 401 first, except on /healthz, which takes none."""
    import asyncio

    from starlette.applications import Starlette

    from relaystore.actors.http.app import read_routes

    app = Starlette(routes=read_routes({}, lambda _request: token_ok))

    async def answers() -> dict[str, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            paths = ["/healthz", "/metrics", "/api/v1/workspaces", "/api/v1/sessions/s/history"]
            return {path: await client.get(path) for path in paths}

    for path, response in asyncio.run(answers()).items():
        if token_ok or path == "/healthz":
            assert response.status_code == 503, path
            assert response.json() == {
                "error": "the server is shutting down",
                "code": "unavailable",
            }
        else:
            assert response.status_code == 401, path
            assert response.json()["code"] == "unauthorized"
