"""Finding and sharing a session: ``relaystore search``, ``GET /api/v1/search``,
``relaystore export``, and errors marked in ``-o text``.

What a person relies on: the command and the route find transcript text with the
matches marked and refuse a bad query in one line naming what was wrong (exit 1; a 400
naming the parameter); an export is one self-contained file holding the session's
facts, its errors, its questions and its transcript, where hostile text stays text;
``events -o text`` and ``transcript -o text`` start the lines of errors and faults with
``!`` and say what failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from relaystore import (
    EventStore,
    ObserveRelayEvents,
    RecordElicitationAnswer,
    RecordStartupFault,
    SaveSession,
)
from relaystore.domain.elicitation.forms import ElicitationAccept
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import command, run_command
from tests.actors.http_support import Server, start_server, stop_server
from tests.storage.answers_support import SCHEMA

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "s1"
HOSTILE = "<script>alert('x')</script> ``` & </pre>"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("finding") / "store.sqlite3"
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session(SESSION)))
        journal = JournalBuilder()
        events = journal.start_prompt(f"why does the linker fail {HOSTILE}", command_id="c1")
        events += journal.say("partial answer about the linker")
        events += journal.end_prompt("c1", stop_reason="quota_limit")  # failed: quota_limit
        events += journal.question(action="accept")
        events += journal.restart_mid_turn("third")  # interrupted: worker_restarted
        events += journal.shell_command("false", exit_code=1, stderr="boom")  # failed command
        events += journal.question("Who signs?", request_id="sign", schema=SCHEMA)
        store.ask(ObserveRelayEvents(session_id=SESSION, events=events))
        store.ask(
            RecordElicitationAnswer(
                session_id=SESSION,
                elicitation_id="sign",
                answered_by="ada <ada@example.com>",
                response=ElicitationAccept(content={"name": "<i>Ada</i>", "pin": "8642"}),
                answered_at_ms=1_700_000_000_000,
            )
        )
        store.ask(SaveSession(record=example_session("s2")))
        store.ask(RecordStartupFault(session_id="s2", message="could not start"))
    return path


def _run(db: Path, *args: str) -> tuple[int, str, str]:
    done = run_command(command(db, *args), db.parent)
    return done.returncode, done.stdout, done.stderr


def test_search_prints_each_hit_with_its_matches_marked(db: Path) -> None:
    code, out, err = _run(db, "search", "linker")
    assert code == 0, err
    lines = sorted(out.splitlines(), key=lambda line: int(line.split()[1]))
    assert len(lines) == 2
    assert lines[0].startswith(f"{SESSION}  2  ")
    assert "user: why does the [linker] fail" in lines[0]
    assert lines[1].startswith(f"{SESSION}  3  ")
    assert lines[1].endswith("agent: partial answer about the [linker]")
    code, out, _ = _run(db, "search", "linker", "--role", "user", "--json")
    (hit,) = [json.loads(line) for line in out.splitlines()]
    assert (hit["session_id"], hit["role"], hit["seq"]) == (SESSION, "user", 2)
    assert {"text": "linker", "match": True} in hit["parts"]
    code, out, err = _run(db, "search", "linker", "--limit", "1")
    assert len(out.splitlines()) == 1
    cursor = err.split("--cursor ")[1].strip()
    code, out, err = _run(db, "search", "linker", "--limit", "1", "--cursor", cursor)
    assert len(out.splitlines()) == 1
    assert "--cursor" not in err


@pytest.mark.parametrize("query", ['"open', "a AND", "nosuch: x", " "])
def test_search_refuses_a_bad_query_in_one_line(db: Path, query: str) -> None:
    code, out, err = _run(db, "search", query)
    assert (code, out) == (1, "")
    assert err.startswith("relaystore: SearchTranscripts.query: ")
    assert len(err.splitlines()) == 1
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def server(db: Path) -> Iterator[Server]:
    running = start_server(db)
    yield running
    assert "Traceback" not in stop_server(running)


def test_the_search_route_answers_the_page_and_names_a_bad_parameter(server: Server) -> None:
    response = server.get("/api/v1/search", q="linker", role="agent")
    assert response.status_code == 200, response.text
    page = response.json()
    assert [(h["session_id"], h["role"]) for h in page["hits"]] == [(SESSION, "agent")]
    assert page["query"] == "linker"
    assert httpx.get(server.url + "/api/v1/search?q=linker").status_code == 401
    typed = server.get("/api/v1/search", q="linker fail <script>", plain="true")
    assert typed.status_code == 200, typed.text
    assert [hit["role"] for hit in typed.json()["hits"]] == ["user"]
    for params, named in [
        ({"q": '"open'}, "q: "),
        ({}, "q: "),
        ({"q": "x", "limit": "-1"}, "limit "),
        ({"q": "x", "limit": "0"}, "limit: "),
        ({"q": "x", "role": "boss"}, "role: "),
        ({"q": "x", "session_id": "../x"}, "session_id"),
        ({"q": "x", "sesion_id": "s1"}, "unknown query parameter 'sesion_id'"),
        ({"q": "x", "plain": "yes"}, "plain must be true or false"),
    ]:
        refused = server.get("/api/v1/search", **params)
        assert refused.status_code == 400, (params, refused.text)
        assert refused.json()["error"].startswith(named), (params, refused.json())


def test_events_and_transcript_text_mark_errors_and_faults(db: Path) -> None:
    code, out, err = _run(db, "events", "-o", "text")
    assert code == 0, err
    marked = [line for line in out.splitlines() if line.startswith("! ")]
    assert [line.split()[5:7] for line in marked] == [
        ["turn_ended", "ERROR"],
        ["turn_ended", "ERROR"],
        ["command_ended", "ERROR"],
        ["session_fault", "FAULT"],
    ]
    assert "turn failed (quota_limit)" in marked[0]
    assert "turn interrupted (worker_restarted)" in marked[1]
    assert "run_user_shell failed (nonzero_exit)" in marked[2]
    assert "session fault (startup_failed): could not start" in marked[3]
    plain = [line for line in out.splitlines() if not line.startswith("! ")]
    assert plain
    assert all("ERROR" not in line for line in plain)

    code, out, err = _run(db, "transcript", SESSION, "-o", "text")
    assert code == 0, err
    lines = out.splitlines()
    marked = [line for line in lines if line.startswith("! ")]
    assert len(marked) == 4
    assert marked[0].startswith("! 4  ")  # where the turn ended: after its reply
    assert "turn: ERROR turn failed (quota_limit)" in marked[0]
    assert lines.index(marked[0]) == 2  # after the prompt (seq 2) and the reply (seq 3)
    assert "turn: ERROR turn interrupted (worker_restarted)" in marked[1]
    assert "system: ERROR shell command failed (exit 1) · Shell · failed" in marked[2]
    assert "command: ERROR run_user_shell failed (nonzero_exit)" in marked[3]
    code, out, err = _run(db, "transcript", SESSION, "-o", "text", "--limit", "2")
    assert [line.split()[0] for line in out.splitlines()] == ["2", "3"]  # nothing past it
    code, out, err = _run(db, "transcript", "s2", "-o", "text")
    assert "session: FAULT session fault (startup_failed): could not start" in out


class _Page(HTMLParser):
    """What a browser would make of the file: its elements and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_an_html_export_is_self_contained_and_keeps_hostile_text_text(
    db: Path, tmp_path: Path
) -> None:
    target = tmp_path / "s1.html"
    code, out, err = _run(db, "export", SESSION, "--format", "html", "-o", str(target))
    assert (code, out) == (0, ""), err
    document = target.read_text(encoding="utf-8")
    page = _Page()
    page.feed(document)
    assert "script" not in page.tags
    assert not {"link", "img", "iframe", "object"} & page.tags
    assert "<script>" not in document
    assert "&lt;script&gt;" in document
    text = "".join(page.text)
    assert f"why does the linker fail {HOSTILE}" in text  # shown as written
    assert "Errors and faults (4)" in text  # 2 turns, the shell command, its item
    assert "ERROR turn failed (quota_limit)" in text
    assert "Questions (2)" in text
    assert "answer: accept" in text
    # Who answered and what, as recorded: hostile text stays text, the secret is masked.
    assert (
        "answered by ada <ada@example.com> at 2023-11-14 22:13:20 UTC: "
        "accepted: name = <i>Ada</i>; pin = ***" in text
    )
    assert "<i>Ada" not in document
    assert "8642" not in document
    assert text.index("why does the linker") < text.index("partial answer") < text.index("third")


def test_a_markdown_export_fences_every_item_and_escapes_the_facts(db: Path) -> None:
    code, out, err = _run(db, "export", SESSION)
    assert code == 0, err
    assert out.startswith("# Session why does the linker fail &lt;script>")
    assert "<script>" not in out.split("## Transcript")[0]
    body = out.split("## Transcript")[1]
    assert f"````text\nwhy does the linker fail {HOSTILE}\n````" in body  # fence outgrows ```
    assert "**! ERROR turn failed (quota\\_limit): quota\\_limit**" in body
    questions = out.split("## Questions (2)")[1].split("## Transcript")[0]
    assert (
        "answered by ada &lt;ada@example.com> at 2023-11-14 22:13:20 UTC: "
        "accepted: name = &lt;i>Ada&lt;/i>; pin = \\*\\*\\*" in questions
    )
    assert "8642" not in out
    code, out, err = _run(db, "export", "nobody")
    assert code == 1
    assert "no session nobody in this store" in err
