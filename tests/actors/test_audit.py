"""``relaystore audit``: a clean store matches; each injected divergence is found and named.

The store is a replayed journal. Copies of it are damaged with plain apsw (a projection
field, an API event body), and a forged journal (one event's content changed, every
digest re-hashed, so its chain verifies) is audited with ``--journals``.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw
import pytest

from relaystore.actors.cli import main
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.domain.relay import RELAY_EVENT_FORMAT_V1, RelayEvent, SessionUpdate
from relaystore.testing import JournalBuilder, example_session
from tests.actors.journal_factory import START_MS, observations, write_journal

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-au"
EVENTS = 200
FORGED = 77


def _events(count: int, *, forge: bool = False) -> list[RelayEvent]:
    """The session's first ``count`` events (the same ones for every count)."""
    builder = JournalBuilder(format=RELAY_EVENT_FORMAT_V1, start_ms=START_MS + 37, step_ms=37)
    stream = observations()
    while builder.next_ordinal <= count:
        command_id, observation = next(stream)
        if forge and builder.next_ordinal == FORGED:
            assert isinstance(observation, SessionUpdate)
            observation = SessionUpdate.of(
                update={
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "a forged answer. "},
                    "messageId": "msg-forged",
                }
            )
        builder.add(observation, command_id=command_id)
    return builder.events


def _journal(path: Path, *, forge: bool = False) -> Path:
    return write_journal(path, _events(EVENTS, forge=forge))


@pytest.fixture
def replayed(tmp_path: Path) -> Path:
    db = tmp_path / "store.sqlite3"
    journal = _journal(tmp_path / f"{SESSION}.jsonl")
    with EventStore.open(db, synchronous="OFF") as store:
        replay_source(store, resolve_source(journal, session_id=SESSION))
    return db


def _copy(db: Path, name: str) -> Path:
    copy = db.with_name(name)
    shutil.copy(db, copy)
    return copy


def _audit(
    capsys: pytest.CaptureFixture[str], db: Path, *args: str
) -> tuple[int, dict[str, object]]:
    status = main(["--db", str(db), "audit", "--json", *args])
    document: dict[str, object] = json.loads(capsys.readouterr().out)
    return status, document


def _fail_a_turn(db: Path) -> int:
    """Damage the feed: the third turn_ended event says the turn failed. Its seq."""
    connection = apsw.Connection(str(db))
    seq, body = connection.execute(
        "SELECT seq, body FROM api_events WHERE session_id = ? "
        "AND json_extract(body, '$.type') = 'turn_ended' ORDER BY seq LIMIT 1 OFFSET 2",
        (SESSION,),
    ).fetchone()
    forged = body.replace('"completed"', '"failed"', 1)
    assert forged != body
    connection.execute("UPDATE api_events SET body = ? WHERE seq = ?", (forged, seq))
    connection.close()
    return int(seq)


def _divergence(document: dict[str, object]) -> dict[str, object]:
    sessions = document["sessions"]
    assert isinstance(sessions, list)
    found = sessions[0]["divergence"]
    assert isinstance(found, dict)
    return found


def test_a_clean_store_matches_its_log_and_its_journal_beside_a_running_writer(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = replayed.parent / f"{SESSION}.jsonl"
    with EventStore.open(replayed, synchronous="OFF") as writer:  # a supervisor holds it
        writer.ask(SaveSession(record=example_session("another")))
        status, document = _audit(capsys, replayed, SESSION)
        assert (status, document["matches"]) == (0, True)
        status, document = _audit(capsys, replayed, "--journals", str(journal))
        assert (status, document["matches"]) == (0, True)

    assert main(["--db", str(replayed), "audit", SESSION]) == 0
    assert capsys.readouterr().out.strip() == (
        f"{SESSION}: matches log ({EVENTS} events, "
        f"{document['sessions'][0]['api_events']} API events)"  # type: ignore[index]
    )


BUSY_EVENTS = 2400
"""How far the busy writer takes the session (from ordinal EVENTS), a few events a page."""


@contextmanager
def _busy_writer(db: Path) -> Iterator[threading.Event]:
    """A supervisor committing the session's next events, a few per page, until it has
    written them all or the block ends; the event is set once it has stopped."""
    events = _events(BUSY_EVENTS)[EVENTS:]
    stop, done = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    with EventStore.open(db, synchronous="OFF") as writer:

        def commit() -> None:
            try:
                for start in range(0, len(events), 3):
                    if stop.is_set():
                        return
                    batch: list[RelayEvent] = events[start : start + 3]
                    writer.ask(ObserveRelayEvents(session_id=SESSION, events=list(batch)))
            except BaseException as exc:  # noqa: BLE001 - reported by the test below
                failures.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=commit)
        thread.start()
        try:
            yield done
        finally:
            stop.set()
            thread.join()
    assert failures == []


def test_a_clean_store_passes_every_audit_beside_a_writer_committing_continuously(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each audit reads the projection, the log and the feed while pages keep committing:
    # read in separate snapshots, the log ran ahead of the projection it was compared to.
    audits = 0
    with _busy_writer(replayed) as done:
        while not done.is_set():
            status, document = _audit(capsys, replayed, SESSION)
            assert (status, document["matches"]) == (0, True), document
            audits += not done.is_set()  # it ran beside the writer from start to end
    assert audits >= 3


def test_a_tampered_feed_row_is_named_beside_a_writer_committing_continuously(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seq = _fail_a_turn(replayed)

    with _busy_writer(replayed) as done:
        for _ in range(3):
            status, document = _audit(capsys, replayed, SESSION)
            assert status == 1
            assert _divergence(document)["where"] == f"api event seq {seq}"
        assert not done.is_set(), "the writer finished before the audits ran beside it"


def test_a_corrupted_projection_field_is_named(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _copy(replayed, "damaged.sqlite3")
    _answer_55(db, "body_json")

    status, document = _audit(capsys, db, SESSION)

    assert status == 1
    found = _divergence(document)
    assert str(found["where"]).startswith("projection.transcript[")
    assert "answer 55." in str(found["stored"])
    assert "answer 5." in str(found["derived"])
    assert main(["--db", str(db), "audit", SESSION]) == 1
    assert f"{SESSION}: diverges from log at projection.transcript[" in capsys.readouterr().out


def _answer_55(db: Path, column: str) -> None:
    """Edit "answer 5." into "answer 55." in ``column`` of the first transcript item
    whose ``column`` holds it, as an operator's sqlite3 shell can."""
    connection = apsw.Connection(str(db))
    (stable_id,) = connection.execute(
        "SELECT stable_id FROM materialized_transcript_items WHERE session_id = ? "
        f"AND {column} LIKE '%answer 5.%' ORDER BY position LIMIT 1",
        (SESSION,),
    ).fetchone()
    connection.execute(
        f"UPDATE materialized_transcript_items SET {column} = replace({column}, "
        "'answer 5.', 'answer 55.') WHERE session_id = ? AND stable_id = ?",
        (SESSION, stable_id),
    )
    connection.close()


def test_a_damaged_stored_text_is_named_though_the_body_is_intact(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _copy(replayed, "damaged.sqlite3")
    _answer_55(db, "view_text")  # the text alone: the body, and so the trigger, untouched

    status, document = _audit(capsys, db, SESSION)

    assert status == 1
    found = _divergence(document)
    assert str(found["where"]).startswith("projection.transcript[")
    assert str(found["where"]).endswith("].text")
    assert "answer 55." in str(found["stored"])
    assert "answer 55." not in str(found["derived"])
    assert "answer 5." in str(found["derived"])


def test_a_corrupted_api_event_body_is_named_by_its_seq(
    replayed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _copy(replayed, "damaged.sqlite3")
    seq = _fail_a_turn(db)

    status, document = _audit(capsys, db)

    assert status == 1
    found = _divergence(document)
    assert found["seq"] == seq
    assert found["where"] == f"api event seq {seq}"
    assert '"failed"' in str(found["stored"])
    assert '"completed"' in str(found["derived"])


def test_a_forged_self_consistent_journal_is_named_at_the_forged_ordinal(
    replayed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forged = _journal(tmp_path / "forged" / f"{SESSION}.jsonl", forge=True)
    assert main(["verify", str(forged), "--session", SESSION]) == 0  # its chain verifies
    capsys.readouterr()

    status, document = _audit(capsys, replayed, "--journals", str(forged))

    assert status == 1
    found = _divergence(document)
    assert found["ordinal"] == FORGED
    assert found["where"] == f"ordinal {FORGED}"
