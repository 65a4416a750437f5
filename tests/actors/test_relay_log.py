"""The relay log through the store: what a replay keeps, what a refusal leaves, the option
that turns it off, and ``relaystore prune-log``."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from relaystore.actors.cli import main
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import minimal_record, replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.chain import check_own_digest
from relaystore.domain.errors import RelayChainError
from relaystore.domain.messages import LoadMaterializedSession, LoadRelayLog, SaveSession
from relaystore.domain.relay import decode_relay_event, encode_relay_event
from relaystore.domain.relay.log import StoredRelayLog, unpack_lines
from relaystore.domain.sessions.records import CheckpointMetadata
from tests.actors.journal_factory import conversation, write_journal

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "session-log"


def _replay(db: Path, journal: Path, **options: bool) -> None:
    with EventStore.open(db, synchronous="OFF", **options) as store:  # type: ignore[arg-type]
        replay_source(store, resolve_source(journal, session_id=SESSION))


def _log(db: Path) -> StoredRelayLog:
    with EventStore.open(db, read_only=True, readers=1) as store:
        stored = store.ask(LoadRelayLog(session_id=SESSION))
    assert stored is not None
    return stored


def test_a_replay_keeps_every_event_as_its_journal_line(tmp_path: Path) -> None:
    events = conversation(700)
    journal = write_journal(tmp_path / "j.jsonl", events)
    db = tmp_path / "store.sqlite3"

    _replay(db, journal)

    stored = _log(db)
    lines = [
        line
        for first, _, blob in stored.pages
        for line in unpack_lines(blob, session_id=SESSION, first_ordinal=first)
    ]
    assert lines == [encode_relay_event(event) for event in events]
    for line in lines:
        check_own_digest(decode_relay_event(line), session_id=SESSION)
    assert stored.coverage.complete
    assert stored.pages[-1][1] == stored.frontier.ordinal == 700


def test_a_replay_refused_midway_leaves_the_log_at_the_projections_frontier(
    tmp_path: Path,
) -> None:
    events = conversation(600)
    lines = [encode_relay_event(event) for event in events]
    lines[450] = lines[450].replace(events[450].digest.encode(), b"0123abcd" * 8)
    journal = write_journal(tmp_path / "j.jsonl", b"\n".join(lines) + b"\n")
    db = tmp_path / "store.sqlite3"

    with pytest.raises(RelayChainError):
        _replay(db, journal)

    stored = _log(db)
    assert 0 < stored.frontier.ordinal < 451
    assert stored.pages[-1][1] == stored.frontier.ordinal
    assert stored.coverage.complete


def test_the_option_turns_the_log_off(tmp_path: Path) -> None:
    journal = write_journal(tmp_path / "j.jsonl", conversation(300))
    db = tmp_path / "store.sqlite3"

    _replay(db, journal, relay_log=False)

    stored = _log(db)
    assert stored.pages == []
    assert stored.frontier.ordinal == 300
    assert not stored.coverage.complete


def test_prune_log_deletes_only_what_the_checkpoint_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = write_journal(tmp_path / "j.jsonl", conversation(400))
    db = tmp_path / "store.sqlite3"
    _replay(db, journal)
    with EventStore.open(db, synchronous="OFF") as store:
        record = minimal_record(SESSION)
        checkpoint = CheckpointMetadata(
            archive_path="a.tar",
            sha256="0" * 64,
            created_at="2026-01-01T00:00:00Z",
            event_frontier=256,
        )
        store.ask(SaveSession(record=msgspec.structs.replace(record, checkpoint=checkpoint)))

    assert main(["--db", str(db), "prune-log", SESSION, "--through", "300"]) == 1
    assert "covers events only through ordinal 256" in capsys.readouterr().err
    assert main(["--db", str(db), "prune-log", SESSION, "--through", "256"]) == 0
    assert "2 pages, 256 events; it now starts at ordinal 257" in capsys.readouterr().out

    stored = _log(db)
    assert stored.pages[0][0] == 257
    with EventStore.open(db, read_only=True, readers=1) as store:
        session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    assert session.applied_event_ordinal == 400
