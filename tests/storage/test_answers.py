"""Recorded answers in the store: the write and its refusals, the read (masked, in the
order recorded), deletion with the session, and the rows a ``record`` change carries to
a replica (:mod:`relaystore.storage.answers`, :mod:`relaystore.storage.reads.elicitations`)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from relaystore.domain.elicitation.forms import (
    ElicitationAccept,
    ElicitationDecline,
    ElicitationResponse,
)
from relaystore.domain.errors import InvalidInput, UnknownSession
from relaystore.domain.messages import RecordElicitationAnswer
from relaystore.storage.answers import apply_answer_rows, record_answer
from relaystore.storage.changes import latest_change, load_changes, load_record_state
from relaystore.storage.connection import open_writer
from relaystore.storage.reads.elicitations import load_elicitation_answers
from relaystore.storage.sessions import delete_session, save_session
from relaystore.testing import example_session
from tests.storage.answers_support import ask_in_feed, pend, question


def answer(
    connection: apsw.Connection,
    elicitation_id: str = "q1",
    *,
    by: str = "ada",
    at: int = 100,
    response: ElicitationResponse | None = None,
    session_id: str = "s1",
) -> None:
    record_answer(
        connection,
        RecordElicitationAnswer(
            session_id=session_id,
            elicitation_id=elicitation_id,
            answered_by=by,
            response=response or ElicitationAccept(content={"name": "Ada", "pin": "2468"}),
            answered_at_ms=at,
        ),
    )


@pytest.fixture
def asked(db: apsw.Connection) -> apsw.Connection:
    """Session s1 with question q1 pending and q2 asked (and resolved) in its feed."""
    save_session(db, example_session("s1"))
    pend(db, "s1", question("q1"))
    ask_in_feed(db, "s1", question("q2"))
    return db


def shown(connection: apsw.Connection) -> list[tuple[str, str, str, int, str]]:
    answers = load_elicitation_answers(connection, "s1")
    assert answers is not None
    return [
        (a.elicitation_id, a.action, a.answered_by, a.answered_at_ms, a.answer)
        for a in answers.answers
    ]


def test_answers_read_back_in_order_with_who_answered_and_secrets_masked(
    asked: apsw.Connection,
) -> None:
    assert shown(asked) == []
    answer(asked, "q2", by="bob", at=50, response=ElicitationDecline())  # asked in the feed
    answer(asked, "q1", by="ada", at=100)  # pending
    assert shown(asked) == [
        ("q2", "decline", "bob", 50, "declined"),
        ("q1", "accept", "ada", 100, "accepted: name = Ada; pin = ***"),
    ]
    answers = load_elicitation_answers(asked, "s1")
    assert answers is not None
    assert answers.answers[1].content == {"name": "Ada", "pin": "***"}
    # The secret is never kept: not in the table, so no read, export or replica has it.
    stored = asked.execute("SELECT group_concat(response_json) FROM elicitation_answers").get
    assert "2468" not in str(stored)


def test_a_retry_changes_nothing_and_a_second_answer_is_refused(asked: apsw.Connection) -> None:
    answer(asked, "q1")
    numbered = latest_change(asked)
    answer(asked, "q1")  # the same record again: nothing written, nothing numbered
    assert latest_change(asked) == numbered
    with pytest.raises(InvalidInput, match="answered already, by 'ada'"):
        answer(asked, "q1", by="eve")
    assert shown(asked) == [("q1", "accept", "ada", 100, "accepted: name = Ada; pin = ***")]


def test_refusals_name_what_is_wrong_and_write_nothing(asked: apsw.Connection) -> None:
    with pytest.raises(UnknownSession):
        answer(asked, session_id="nobody")
    with pytest.raises(InvalidInput, match=r"elicitation_id: the session asked no question 'q9'"):
        answer(asked, "q9")
    with pytest.raises(InvalidInput, match=r"response: 'Name' \(field 'name'\) is too short"):
        answer(asked, response=ElicitationAccept(content={"name": "A", "pin": "1"}))
    assert shown(asked) == []


def test_deleting_the_session_deletes_its_answers(asked: apsw.Connection) -> None:
    save_session(asked, example_session("s2"))
    pend(asked, "s2", question("q1"))
    answer(asked, "q1")
    answer(asked, "q1", session_id="s2", by="bob")
    delete_session(asked, "s1")
    assert asked.execute("SELECT session_id FROM elicitation_answers").fetchall() == [("s2",)]
    assert load_elicitation_answers(asked, "s1") is None


def test_a_record_change_carries_the_answers_to_a_replica(
    asked: apsw.Connection, tmp_path: Path
) -> None:
    before = latest_change(asked)
    answer(asked, "q1")
    assert [(c.kind, c.session_id) for c in load_changes(asked, before, 10)] == [("record", "s1")]
    state = load_record_state(asked, "s1")
    assert [(row.elicitation_id, row.answered_by) for row in state.answers] == [("q1", "ada")]
    with open_writer(tmp_path / "replica.sqlite3", synchronous="OFF") as replica:
        save_session(replica.connection, example_session("s1"))
        apply_answer_rows(replica.connection, "s1", state.answers)
        assert shown(replica.connection) == shown(asked)
        apply_answer_rows(replica.connection, "s1", [])  # the source deleted them
        assert shown(replica.connection) == []
