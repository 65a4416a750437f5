"""``CompactTranscript`` and ``relaystore compact``: a checkpoint lets the store forget
what an old tool call's line no longer shows, online; the item still pages in place."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import apsw
import msgspec
import pytest

from relaystore import (
    BeginCheckpoint,
    EventStore,
    LoadState,
    ObserveRelayEvents,
    Reproject,
    SaveSession,
    SessionState,
)
from relaystore.actors.audit import audit_session
from relaystore.domain.messages import CompactTranscript, LoadMaterializedSession
from relaystore.domain.reads import LoadTranscriptPage
from relaystore.domain.retention import RETENTION_BATCH_ITEMS
from relaystore.testing import JournalBuilder, example_session
from tests.actors.cli_support import cli, ok
from tests.actors.retention_support import SESSION, retention_store, tool_call
from tests.actors.supervisor_support import live_frontier, start_supervisor

pytestmark = pytest.mark.integration  # projection workers, and a writer process the commands ask


def _store(tmp_path: Path) -> tuple[Path, int, int]:
    db = tmp_path / "store.sqlite3"
    frontier, live = retention_store(db)
    return db, frontier, live


def _items(store: EventStore) -> dict[str, object]:
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    return {item.stable_id: item for item in session.transcript}


def test_a_pass_compacts_only_covered_large_tool_calls_and_they_still_page(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        before = _items(store)
        page_before = store.ask(LoadTranscriptPage(session_id=SESSION, after_seq=0))
        report = store.ask(CompactTranscript(session_id=SESSION))
        after = _items(store)
        page_after = store.ask(LoadTranscriptPage(session_id=SESSION, after_seq=0))
        again = store.ask(CompactTranscript(session_id=SESSION))
    assert (report.items, report.remaining) == (1, False)
    assert report.bytes > 20_000
    compacted = after["tool:call-1"]
    call = compacted.body.call  # type: ignore[attr-defined]
    assert "rawInput" not in call
    assert call["content"] == []
    assert call["title"] == "Edit files"
    # Position, times and seq stay: the item keeps its place in every page.
    original = before["tool:call-1"]
    assert (compacted.position, compacted.created_at_ms, compacted.last_changed_at_ms) == (  # type: ignore[attr-defined]
        original.position,  # type: ignore[attr-defined]
        original.created_at_ms,  # type: ignore[attr-defined]
        original.last_changed_at_ms,  # type: ignore[attr-defined]
    )
    assert page_after is not None
    assert page_before is not None
    assert [(i.stable_id, i.seq) for i in page_after.items] == [
        (i.stable_id, i.seq) for i in page_before.items
    ]
    assert after["tool:call-2"] == before["tool:call-2"]  # small: left alone
    assert after["tool:call-3"] == before["tool:call-3"]  # past the checkpoint: left alone
    assert (again.items, again.bytes) == (0, 0)


def test_a_session_without_a_checkpoint_keeps_everything(tmp_path: Path) -> None:
    journal = JournalBuilder()
    tool_call(journal, "call-1", 20_000)
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        record = msgspec.structs.replace(example_session(SESSION), checkpoint=None)
        store.ask(SaveSession(record=record))
        store.ask(ObserveRelayEvents(session_id=SESSION, events=journal.events))
        report = store.ask(CompactTranscript(session_id=SESSION))
    assert (report.items, report.bytes) == (0, 0)


def test_the_command_compacts_every_checkpointed_session(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    result = ok(db, "compact")
    assert f"session {SESSION}: 1 tool call compacted" in result.stdout
    assert "compacted 1 tool call in 1 session," in result.stdout
    assert "compacted 0 tool calls" in ok(db, "compact", SESSION).stdout


def test_the_batch_is_the_origins() -> None:
    assert RETENTION_BATCH_ITEMS == 4096


# -- retention the other commands respect (issue 34, item 3) ------------------------------


def test_an_audit_after_compact_matches_modulo_what_retention_removed(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        assert store.ask(CompactTranscript(session_id=SESSION)).items == 1
        audited = audit_session(store, SESSION)
    assert audited.matches, audited.divergence
    assert f"{SESSION}: matches log" in ok(db, "audit").stdout


def test_an_audit_still_names_a_change_retention_does_not_make(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        store.ask(CompactTranscript(session_id=SESSION))
    # A covered call's title, which retention keeps, changed behind the store's back.
    connection = apsw.Connection(str(db))
    with connection:
        connection.execute(
            "UPDATE materialized_transcript_items SET body_json = "
            "json_set(body_json, '$.call.title', 'Tampered') WHERE stable_id = 'tool:call-1'"
        )
    connection.close()
    with EventStore.open(db, read_only=True) as store:
        audited = audit_session(store, SESSION)
    assert audited.divergence is not None
    assert "title" in audited.divergence.where


def test_reproject_applies_retention_again_and_changes_nothing_else(tmp_path: Path) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        store.ask(CompactTranscript(session_id=SESSION))
        compacted = _items(store)
        report = store.ask(Reproject(session_id=SESSION))
        after = _items(store)
        audited = audit_session(store, SESSION)
        again = store.ask(CompactTranscript(session_id=SESSION))
    assert "rawInput" not in _call(after["tool:call-1"])
    assert after == compacted  # the compacted body stays compacted; nothing else moved
    assert report.first_changed_position is None
    assert report.appended_by_kind == {}
    assert (again.items, again.bytes) == (0, 0)
    assert audited.matches, audited.divergence


def test_reproject_applies_retention_to_a_checkpointed_session_never_compacted(
    tmp_path: Path,
) -> None:
    db, _, _ = _store(tmp_path)
    with EventStore.open(db) as store:
        store.ask(Reproject(session_id=SESSION))
        after = _items(store)
    assert "rawInput" not in _call(after["tool:call-1"])  # at or below the frontier
    assert "rawInput" in _call(after["tool:call-3"])  # past it: whole


def _call(item: object) -> dict[str, object]:
    call: dict[str, object] = item.body.call  # type: ignore[attr-defined]
    return call


def test_compact_audit_reproject_audit_beside_a_live_writer_all_pass_and_agree(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db, _, _ = _store(tmp_path)
    supervisor = start_supervisor(db, spawned)
    try:
        assert f"session {SESSION}: 1 tool call compacted" in ok(db, "compact", SESSION).stdout
        first = ok(db, "audit", SESSION).stdout
        reprojected = ok(db, "reproject", SESSION).stdout
        second = ok(db, "audit", SESSION).stdout
        again = ok(db, "compact", SESSION).stdout
        supervisor.wait_acked_past(supervisor.acked)  # it kept committing throughout
    finally:
        acked = supervisor.stop()
    assert first == second
    assert first.startswith(f"{SESSION}: matches log")
    assert "first changed transcript position: none" in reprojected
    assert f"session {SESSION}: 0 tool calls compacted" in again
    assert live_frontier(db) >= acked  # nothing the supervisor acknowledged is lost


# -- recording a checkpoint from the shell --------------------------------------------------


def _archive(tmp_path: Path) -> tuple[Path, str]:
    archive = tmp_path / "checkpoint.tar"
    archive.write_bytes(b"the session's archive")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_a_recorded_checkpoint_gives_compact_and_prune_log_something_to_act_on(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.sqlite3"
    frontier, _ = retention_store(db, checkpointed=False)
    archive, sha256 = _archive(tmp_path)
    assert "compacted 0 tool calls in 1 session" in ok(db, "compact", SESSION).stdout
    refused = cli(db, "prune-log", SESSION, "--through", str(frontier))
    assert refused.returncode == 1
    assert "no verified checkpoint" in refused.stderr

    recorded = ok(
        db, "checkpoint", SESSION, "--through", str(frontier), "--archive", str(archive)
    ).stdout
    assert f"through ordinal {frontier}" in recorded
    assert sha256 in recorded
    with EventStore.open(db, read_only=True) as store:
        checkpoint = store.ask(LoadState()).sessions[SESSION].checkpoint
    assert checkpoint is not None
    assert (checkpoint.event_frontier, checkpoint.sha256) == (frontier, sha256)
    assert checkpoint.archive_path == str(archive)
    assert "1 tool call compacted" in ok(db, "compact").stdout
    assert f"{SESSION}: matches log" in ok(db, "audit").stdout
    assert "pruned the relay log" in ok(db, "prune-log", SESSION, "--through", str(frontier)).stdout


@pytest.mark.parametrize(
    ("through", "extra", "words"),
    [
        ("LAST+1", (), "applied the session only through ordinal"),
        ("FRONTIER-1", (), "a checkpoint only moves forward"),
        ("FRONTIER", ("--sha256", "b" * 64), "not the archive meant"),
        ("FRONTIER", ("--archive-missing",), "No such file"),
    ],
)
def test_a_checkpoint_the_rules_refuse_is_one_line_and_records_nothing(
    tmp_path: Path, through: str, extra: tuple[str, ...], words: str
) -> None:
    db, frontier, last = _store(tmp_path)  # checkpointed at the frontier already
    archive, _ = _archive(tmp_path)
    ordinal = {"LAST+1": last + 1, "FRONTIER-1": frontier - 1, "FRONTIER": frontier}[through]
    if extra == ("--archive-missing",):
        archive, extra = tmp_path / "missing.tar", ()
    with EventStore.open(db, read_only=True) as store:
        before = store.ask(LoadState()).sessions[SESSION].checkpoint
    result = cli(
        db, "checkpoint", SESSION, "--through", str(ordinal), "--archive", str(archive), *extra
    )
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert words in result.stderr
    with EventStore.open(db, read_only=True) as store:
        assert store.ask(LoadState()).sessions[SESSION].checkpoint == before


def test_a_checkpoint_is_refused_while_the_supervisors_checkpoint_operation_is_open(
    tmp_path: Path,
) -> None:
    db, frontier, _ = _store(tmp_path)
    archive, _ = _archive(tmp_path)
    with EventStore.open(db) as store:
        record = store.ask(LoadState()).sessions[SESSION]
        store.ask(
            BeginCheckpoint(
                session=msgspec.structs.replace(record, state=SessionState.CHECKPOINTING),
                command_id="checkpoint-1",
            )
        )
    result = cli(db, "checkpoint", SESSION, "--through", str(frontier), "--archive", str(archive))
    assert result.returncode == 1
    assert "checkpoint operation checkpoint-1 open" in result.stderr
