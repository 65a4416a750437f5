"""Recording who answered a question, through both facades: the ask round trip, the
refusals that name the field, and the answers a read-only store sees."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from relaystore import (
    DeleteSession,
    ElicitationAnswer,
    EventStore,
    InvalidInput,
    LoadElicitationAnswers,
    ObserveRelayEvents,
    RecordElicitationAnswer,
    SaveSession,
    UnknownSession,
)
from relaystore.aio import AsyncEventStore
from relaystore.domain.elicitation.forms import ElicitationAccept, ElicitationCancel
from relaystore.testing import JournalBuilder, example_session
from tests.storage.answers_support import SCHEMA


def fill(store: EventStore) -> None:
    """Session s1: q1 (a name and a secret PIN) pending, q2 asked and cancelled."""
    store.ask(SaveSession(record=example_session("s1")))
    journal = JournalBuilder()
    events = journal.question("Who are you?", request_id="q1", schema=SCHEMA, action=None)
    events += journal.question("Go on?", request_id="q2", action="cancel")
    store.ask(ObserveRelayEvents(session_id="s1", events=events))


def record(**changes: object) -> RecordElicitationAnswer:
    fields: dict[str, object] = {
        "session_id": "s1",
        "elicitation_id": "q1",
        "answered_by": "ada@example.com",
        "response": ElicitationAccept(content={"name": "Ada", "pin": "2468"}),
        "answered_at_ms": 1_700_000_000_000,
        **changes,
    }
    return RecordElicitationAnswer(**fields)  # type: ignore[arg-type]


def test_an_answer_round_trips_with_who_gave_it_and_the_secret_masked(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    with EventStore.open(db, projection="thread") as store:
        fill(store)
        assert store.ask(record()) is None
        store.ask(record())  # a retried ask: accepted, nothing changes
        store.ask(
            record(
                elicitation_id="q2",
                answered_by="bob",
                response=ElicitationCancel(),
                answered_at_ms=1,
            )
        )
        answers = store.ask(LoadElicitationAnswers(session_id="s1"))
        assert answers is not None
        assert answers.answers == [
            ElicitationAnswer(
                elicitation_id="q2",
                action="cancel",
                answered_by="bob",
                answered_at_ms=1,
                answer="cancelled",
            ),
            ElicitationAnswer(
                elicitation_id="q1",
                action="accept",
                answered_by="ada@example.com",
                answered_at_ms=1_700_000_000_000,
                answer="accepted: name = Ada; pin = ***",
                content={"name": "Ada", "pin": "***"},
            ),
        ]
        assert store.ask(LoadElicitationAnswers(session_id="nobody")) is None
    with EventStore.open(db, read_only=True) as reader:
        again = reader.ask(LoadElicitationAnswers(session_id="s1"))
        assert again == answers


@pytest.mark.parametrize(
    ("changes", "error", "named"),
    [
        ({"answered_by": ""}, InvalidInput, "RecordElicitationAnswer.answered_by"),
        ({"answered_by": "ada\x1b[31m"}, InvalidInput, "RecordElicitationAnswer.answered_by"),
        ({"elicitation_id": "q9"}, InvalidInput, "RecordElicitationAnswer.elicitation_id"),
        (
            {"response": ElicitationAccept(content={"name": "Ada", "pin": "1", "x": 1})},
            InvalidInput,
            "RecordElicitationAnswer.response",
        ),
        ({"session_id": "nobody"}, UnknownSession, "session nobody"),
    ],
)
def test_a_refused_answer_names_the_field_and_writes_nothing(
    tmp_path: Path, changes: dict[str, object], error: type[Exception], named: str
) -> None:
    with EventStore.open(tmp_path / "s.sqlite3", projection="thread") as store:
        fill(store)
        with pytest.raises(error) as refused:
            store.ask(record(**changes))
        assert named in str(refused.value)
        assert "2468" not in str(refused.value)
        answers = store.ask(LoadElicitationAnswers(session_id="s1"))
        assert answers is not None
        assert answers.answers == []


def test_a_second_different_answer_is_refused_and_the_first_kept(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "s.sqlite3", projection="thread") as store:
        fill(store)
        store.ask(record())
        with pytest.raises(InvalidInput, match=r"answered already, by 'ada@example\.com'"):
            store.ask(record(answered_by="eve"))
        answers = store.ask(LoadElicitationAnswers(session_id="s1"))
        assert answers is not None
        assert [a.answered_by for a in answers.answers] == ["ada@example.com"]
        store.ask(DeleteSession(session_id="s1"))
        assert store.ask(LoadElicitationAnswers(session_id="s1")) is None


def test_the_async_facade_records_and_reads_answers(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    with EventStore.open(db, projection="thread") as store:
        fill(store)

    async def scenario() -> None:
        async with await AsyncEventStore.open(db, projection="thread") as store:
            await store.ask(record())
            answers = await store.ask(LoadElicitationAnswers(session_id="s1"))
            assert answers is not None
            assert [(a.answered_by, a.answer) for a in answers.answers] == [
                ("ada@example.com", "accepted: name = Ada; pin = ***")
            ]
            with pytest.raises(InvalidInput, match=r"RecordElicitationAnswer\.answered_by"):
                await store.ask(record(answered_by=" "))

    asyncio.run(scenario())
