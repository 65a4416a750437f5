"""Recorded answers travel with the store: publish and restore carry each session's
answers (part of its record change), a later answer too, and a deleted session's
answers go with it on the replica. Through a real nats-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from relaystore import (
    DeleteSession,
    EventStore,
    LoadElicitationAnswers,
    ObserveRelayEvents,
    RecordElicitationAnswer,
    SaveSession,
)
from relaystore.domain.elicitation.forms import ElicitationAccept, ElicitationDecline
from relaystore.domain.read_replies import ElicitationAnswerList
from relaystore.testing import JournalBuilder, example_session
from tests.actors.nats_support import NatsServer, run, running_server, store_id
from tests.storage.answers_support import SCHEMA

pytestmark = pytest.mark.integration  # nats-server, and relaystore publish and restore processes


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    (tmp_path / "nats").mkdir()
    with running_server(tmp_path / "nats") as server:
        yield server


def answers(db: Path, session_id: str) -> ElicitationAnswerList | None:
    with EventStore.open(db, read_only=True) as store:
        return store.ask(LoadElicitationAnswers(session_id=session_id))


def test_publish_and_restore_carry_the_answers(tmp_path: Path, nats_server: NatsServer) -> None:
    original = tmp_path / "a" / "store.sqlite3"
    original.parent.mkdir()
    with EventStore.open(original) as store:
        for session_id in ("s1", "s2"):
            store.ask(SaveSession(record=example_session(session_id)))
            journal = JournalBuilder()
            events = journal.question("Who?", request_id="q1", schema=SCHEMA, action=None)
            events += journal.question("Go?", request_id="q2", action=None)
            store.ask(ObserveRelayEvents(session_id=session_id, events=events))
            store.ask(
                RecordElicitationAnswer(
                    session_id=session_id,
                    elicitation_id="q1",
                    answered_by="ada",
                    response=ElicitationAccept(content={"name": "Ada", "pin": "2468"}),
                    answered_at_ms=10,
                )
            )
    run(original, "publish", "--nats", nats_server.url, "--once")
    sid = store_id(original)
    restored = tmp_path / "b" / "store.sqlite3"
    restored.parent.mkdir()
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    held = answers(restored, "s1")
    assert held == answers(original, "s1")
    assert held is not None
    assert [(a.answered_by, a.answer) for a in held.answers] == [
        ("ada", "accepted: name = Ada; pin = ***")
    ]

    # A later answer, and a deleted session, reach the replica.
    with EventStore.open(original) as store:
        store.ask(
            RecordElicitationAnswer(
                session_id="s1",
                elicitation_id="q2",
                answered_by="bob",
                response=ElicitationDecline(),
                answered_at_ms=20,
            )
        )
        store.ask(DeleteSession(session_id="s2"))
    run(original, "publish", "--nats", nats_server.url, "--once")
    run(restored, "restore", "--nats", nats_server.url, "--store", sid)
    later = answers(restored, "s1")
    assert later is not None
    assert [(a.elicitation_id, a.answered_by) for a in later.answers] == [
        ("q1", "ada"),
        ("q2", "bob"),
    ]
    assert answers(restored, "s2") is None
    assert b"2468" not in restored.read_bytes()
