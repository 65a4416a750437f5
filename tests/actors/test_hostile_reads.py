"""The read routes and messages, tried as a hostile reader would.

What a reader relies on: every read message, with cursors, ids, roles and limits at and
past their bounds, is answered with its reply type (or ``None``: no such session) or
refused with :class:`InvalidInput`, through the facade in both projection modes and
through ``relaystore serve`` (400 or 404 with the origin's one-line error body, never a
500); and a reader that pages a transcript while a writer streams into it sees every
item in seq order, never one at or below its cursor, and ends on the final transcript.
"""

from __future__ import annotations

import itertools
import threading
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore import EventStore, InvalidInput
from relaystore.domain.integers import INT64_MAX
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.read_replies import TranscriptItemView
from relaystore.domain.reads import LoadTranscriptPage, ReadMessage
from relaystore.testing import JournalBuilder, example_session
from tests.actors.http_support import Server, start_server, stop_server
from tests.actors.test_reads import _fill

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-1"
"""The session :func:`tests.actors.test_reads._fill` fills (an open question, a turn
still streaming)."""
STREAMED = "streamed"
READS: list[type[Any]] = list(get_args(ReadMessage))
EDGES = [-(2**64), -(2**63) - 1, -1, 0, 1, 2, 3, INT64_MAX, INT64_MAX + 1, 2**64]
IDS = [SESSION, "nobody", "", " ", "a/b", "../x", "x" * 300, "é", "a\x00b", "default"]


@pytest.fixture(params=["thread", "process"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "s.sqlite3", projection=request.param) as opened:
        _fill(opened)
        yield opened


def _value(field: msgspec.structs.FieldInfo) -> st.SearchStrategy[Any]:
    """Values at and past the bounds for a field of a read message."""
    name = field.name
    if name.endswith("_id"):
        return st.sampled_from(IDS)
    if name == "roles":
        return st.sampled_from(
            [(), ("agent",), ("boss",), ("agent", "user", "agent"), ["agent"], "agent"]
        )
    if name in ("all", "finished_only"):
        return st.sampled_from([True, False, 1, None])
    return st.one_of(st.sampled_from([*EDGES, None, "1", 1.0]))


@st.composite
def _reads(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(READS))
    fields = {
        field.name: draw(_value(field))
        for field in msgspec.structs.fields(kind)
        if field.required or draw(st.booleans())  # or its default
    }
    return kind(**fields)


def _reply_type(kind: type[Any]) -> Any:
    (reply,) = typing.get_args(kind.__orig_bases__[0])
    return reply


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(message=_reads())
def test_a_read_at_or_past_its_bounds_is_answered_or_refused(
    store: EventStore, message: Any
) -> None:
    try:
        reply = store.ask(message, timeout=30)
    except InvalidInput as exc:
        refusal = str(exc)
        reply = None
    else:
        refusal = ""
    assert "\n" not in refusal
    expected = _reply_type(type(message))
    assert reply is None or isinstance(reply, typing.get_args(expected) or expected)


def test_paging_while_a_writer_streams_sees_every_item_in_order(tmp_path: Path) -> None:
    """A reader pages the transcript (limit 1 and 3 alternately) while another thread
    streams 40 turns into it; each page's items are past the cursor, in seq order, and
    the last version of every item the reader saw holds the final transcript's content."""
    with EventStore.open(tmp_path / "s.sqlite3") as store:
        store.ask(SaveSession(record=example_session(STREAMED)))
        journal = JournalBuilder()
        done = threading.Event()

        def write() -> None:
            try:
                for turn in range(40):
                    events = journal.prompt_turn(f"turn {turn}", chunks=("a", "b", "c"))
                    store.ask(ObserveRelayEvents(session_id=STREAMED, events=events))
            finally:
                done.set()

        writer = threading.Thread(target=write)
        writer.start()
        seen: dict[str, TranscriptItemView] = {}
        cursor, limits = 0, itertools.cycle([1, 3])
        finished = False
        while not finished:
            finished = done.is_set()  # one more full pass after the writer ends
            while True:
                page = store.ask(
                    LoadTranscriptPage(session_id=STREAMED, after_seq=cursor, limit=next(limits))
                )
                assert page is not None
                seqs = [item.seq for item in page.items]
                assert all(seq > cursor for seq in seqs), (cursor, seqs)
                assert seqs == sorted(seqs)
                for item in page.items:
                    seen[item.stable_id] = item
                assert page.next_after_seq >= cursor
                if page.next_after_seq == cursor or not page.items:
                    break
                cursor = page.next_after_seq
        writer.join()
        final = store.ask(LoadTranscriptPage(session_id=STREAMED, limit=10**6))
        assert final is not None
        assert cursor == final.latest_seq

        # Every item's last content: an item that only stops streaming keeps its seq
        # (the origin's rule), so its flag is not compared, its text and seq are.
        def content(items: Any) -> list[tuple[str, int, str]]:
            return sorted((item.stable_id, item.seq, item.text) for item in items)

        assert content(seen.values()) == content(final.items)


# -- through relaystore serve ------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    path = tmp_path_factory.mktemp("hostile-reads") / "s.sqlite3"
    with EventStore.open(path) as store:
        _fill(store)
    running = start_server(path)
    yield running
    assert "Traceback" not in stop_server(running)


_S = "/api/v1/sessions/session-1"
HOSTILE_REQUESTS: list[tuple[str, dict[str, Any], int]] = [
    (f"{_S}/transcript", {"after_seq": str(INT64_MAX)}, 200),
    (f"{_S}/transcript", {"after_seq": str(INT64_MAX + 1)}, 400),
    (f"{_S}/transcript", {"after_seq": "9" * 5000}, 400),
    (f"{_S}/transcript", {"after_seq": "-1"}, 400),
    (f"{_S}/transcript", {"after_seq": "1e3"}, 400),
    (f"{_S}/transcript", {"after_seq": "\u0663"}, 400),  # an Arabic-Indic digit
    (f"{_S}/transcript", {"after_seq": ""}, 400),
    (f"{_S}/transcript", {"limit": "0"}, 200),
    (f"{_S}/transcript", {"limit": str(INT64_MAX)}, 200),
    (f"{_S}/transcript", {"limit": str(2**64)}, 400),
    (f"{_S}/transcript", {"role": "boss"}, 400),
    (f"{_S}/transcript", {"role": ["agent", "agent", "user"]}, 200),
    (f"{_S}/transcript", {"finished_only": "true", "role": "tool"}, 400),
    (f"{_S}/transcript", {"finished_only": "yes"}, 400),
    (f"{_S}/transcript", {"after_seq": ["1", "2"]}, 400),
    (f"{_S}/history", {"before_position": "0"}, 400),
    (f"{_S}/history", {"before_position": str(INT64_MAX)}, 200),
    (f"{_S}/history", {"before_position": str(INT64_MAX + 1)}, 400),
    (f"{_S}/history", {"before_id": " "}, 400),
    (f"{_S}/history", {"before_id": "x" * 10_000}, 400),
    (f"{_S}/history", {"before_id": "no-such-item"}, 400),
    (f"{_S}/usage", {"after_seq": str(INT64_MAX)}, 200),
    (f"{_S}/usage", {"limit": "-1"}, 400),
    ("/api/v1/sessions/nobody/transcript", {}, 404),
    ("/api/v1/sessions/nobody", {}, 404),
    ("/api/v1/sessions/a%20b/transcript", {}, 400),
    ("/api/v1/sessions/%2E%2E/transcript", {}, 400),
    ("/api/v1/sessions/%00/history", {}, 400),
    (f"/api/v1/sessions/{'x' * 5000}", {}, 400),
    ("/api/v1/sessions/%C3%A9/usage", {}, 400),
    ("/api/v1/sessions", {"workspace_id": "a b"}, 400),
    ("/api/v1/sessions", {"all": "maybe"}, 400),
    ("/api/v1/sessions", {"bogus": "1"}, 400),
]


@pytest.mark.parametrize(
    ("path", "params", "status"),
    HOSTILE_REQUESTS,
    ids=[f"{path.rsplit('/', 1)[-1][:20]}-{params}"[:60] for path, params, _ in HOSTILE_REQUESTS],
)
def test_a_hostile_request_is_answered_or_refused_in_one_line(
    server: Server, path: str, params: dict[str, Any], status: int
) -> None:
    response = httpx.get(server.url + path, headers=server.auth, params=params, timeout=10)
    assert response.status_code == status, response.text
    body = response.json()
    if status != 200:
        assert set(body) == {"error", "code"}
        assert body["code"] == {400: "bad_request", 404: "not_found"}[status]
        assert "\n" not in body["error"]
        assert len(body["error"]) < 300  # what the reader sent is shown shortened
