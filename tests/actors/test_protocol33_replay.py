"""A journal of every kind relay protocol 33 added, end to end through the command line:
``verify`` and ``replay`` agree on it, ``show`` prints the projection the origin's rules
give, ``events`` the feed; a line of a protocol newer than 33 is a newer worker's, never
a bad line: kept in the relay log, holding its session's projection behind it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaystore.domain.materialized import MaterializedSession, SystemBody
from relaystore.domain.relay import encode_relay_event
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import cli, events, ok, replay, show
from tests.domain.journal_stories import replay as project

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "protocol-33"


def _journal() -> JournalBuilder:
    journal = JournalBuilder()
    journal.prompt_turn("Hello")
    journal.protocol_33()
    return journal


def _projected(journal: JournalBuilder) -> tuple[MaterializedSession, list[bytes]]:
    return project(MaterializedSession.empty(SESSION), journal.events)


def test_a_journal_of_every_protocol_33_kind_verifies_replays_and_shows(tmp_path: Path) -> None:
    journal = _journal()
    root = journal.write_worker_root(tmp_path / "root", SESSION)
    db = tmp_path / "store.sqlite3"

    verified = json.loads(ok(db, "verify", str(root), "--json").stdout)
    assert verified["problems"] == []
    assert verified["records"] == len(journal.events)
    read, applied, already, written = replay(db, root)
    assert (read, applied, already) == (len(journal.events), len(journal.events), 0)

    expected, feed = _projected(journal)
    session = show(db, SESSION)
    assert session.transcript == expected.transcript
    assert session.last_turn_outcome == expected.last_turn_outcome
    texts = [item.body.text for item in session.transcript if isinstance(item.body, SystemBody)]
    # Protocol 33's text events, listed once each in the external-events item.
    assert (
        "External events:\n  - External event: A review comment arrived.\n"
        "  - External event: Please check this detail.\n  - External event: CI finished.\n"
        "  - External event: A new task is ready."
    ) in texts
    assert "Interrupted" in texts
    assert "auto mode refused" in texts
    assert any(item.stable_id.startswith("user:handback-reminder-") for item in session.transcript)

    printed = events(db, "--session", SESSION)
    assert written == len(printed) == len(feed)
    bodies = [json.loads(line) for line in printed]
    assert [(body["type"], body["data"]) for body in bodies] == [
        (body["type"], body["data"]) for body in map(json.loads, feed)
    ]
    kinds = {body["data"].get("command_kind") for body in bodies if body["type"] == "command_ended"}
    assert {"record_notice", "restore_execution_mode", "cancel_turn"} <= kinds


def test_a_line_newer_than_protocol_33_is_kept_and_holds_its_session_behind(
    tmp_path: Path,
) -> None:
    journal = _journal()
    kept = len(journal.events)
    future = (
        encode_relay_event(journal.newer_line(b'{"type":"mailbox_digest_sent","data":{"count":3}}'))
        + b"\n"
    )
    path = tmp_path / "journal.jsonl"
    path.write_bytes(journal.to_bytes() + future)
    db = tmp_path / "store.sqlite3"

    verified = cli(db, "verify", str(path), "--session", SESSION, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    document = json.loads(verified.stdout)
    assert document["problems"] == []
    (newer,) = document["newer_kinds"]
    assert (newer["line"], newer["ordinal"], newer["kind"]) == (
        kept + 1,
        kept + 1,
        "mailbox_digest_sent",
    )

    replayed = ok(db, "replay", str(path), "--session", SESSION)
    assert f"projection behind at ordinal {kept + 1}" in replayed.stderr
    assert "unknown observation 'mailbox_digest_sent'" in replayed.stderr
    # Everything before the newer line is projected; the line itself is kept, not projected.
    session = show(db, SESSION)
    assert session.applied_event_ordinal == kept
    assert session.projection_behind is not None
    assert session.projection_behind.kept_ordinal == kept + 1
    stats = json.loads(ok(db, "stats", "--json").stdout)
    assert stats["projection_behind"][SESSION]["kind"] == "mailbox_digest_sent"
    assert f"session {SESSION}: projection behind at ordinal {kept + 1}" in ok(db, "stats").stdout
    # A second replay of the same journal finds everything already held.
    again = ok(db, "replay", str(path), "--session", SESSION)
    assert "0 applied" in again.stderr
    # A reprojection by this build cannot catch it up (the kind is still unknown): it says so.
    reprojected = ok(db, "reproject", "--behind")
    assert f"reprojected {SESSION}: " in reprojected.stdout
    assert f"still projection behind at ordinal {kept + 1}" in reprojected.stdout
    assert show(db, SESSION).applied_event_ordinal == kept
