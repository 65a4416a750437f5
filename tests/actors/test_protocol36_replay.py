"""A current worker's journal (relay protocol 36) end to end through the command line:
every structured mailbox body verifies, replays, re-encodes byte for byte and projects
into the one external-events item; a line whose shape this build cannot decode (an
unknown field inside a mailbox event, an unknown body type) is a newer worker's: kept,
holding its session behind, while the same line with one byte changed is ``bad_digest``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaystore.domain.materialized import MaterializedSession, SystemBody
from relaystore.domain.projection.mailbox import MAILBOX_EVENTS_ITEM_ID
from relaystore.domain.relay import RelayLine, encode_relay_event
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import cli, events, ok, replay, show
from tests.domain.journal_stories import replay as project

pytestmark = pytest.mark.integration  # its stores project in worker processes

SESSION = "protocol-36"


def _journal() -> JournalBuilder:
    journal = JournalBuilder()
    journal.prompt_turn("Hello")
    journal.protocol_36()
    return journal


def test_a_journal_of_every_structured_body_verifies_replays_and_shows(tmp_path: Path) -> None:
    journal = _journal()
    root = journal.write_worker_root(tmp_path / "root", SESSION)
    db = tmp_path / "store.sqlite3"
    # Each line re-encodes byte for byte from what was decoded (digests cover the bytes).
    assert b"".join(encode_relay_event(e) + b"\n" for e in journal.events) == journal.to_bytes()
    assert b'"body":{"type":"session_message","from":{"type":"session"' in journal.to_bytes()

    verified = json.loads(ok(db, "verify", str(root), "--json").stdout)
    assert (verified["problems"], verified["newer_kinds"]) == ([], [])
    assert verified["records"] == len(journal.events)
    read, applied, already, written = replay(db, root)
    assert (read, applied, already) == (len(journal.events), len(journal.events), 0)

    expected, feed = project(MaterializedSession.empty(SESSION), journal.events)
    session = show(db, SESSION)
    assert session.transcript == expected.transcript
    (item,) = [i for i in session.transcript if i.stable_id == MAILBOX_EVENTS_ITEM_ID]
    assert isinstance(item.body, SystemBody)
    lines = item.body.text.split("\n")
    assert lines[0] == "External events:"
    assert lines[1:] == [
        "  - New issue o/r#37 Setup",
        "  - Comment on your PR #12 by alice: Nice.",
        "  - Review on your PR #12 by bob (changes requested): Revise \u2039this\u203a.",
        "  - Review comment on your PR #12 by c: A test.",
        "  - Your PR #12 was merged by dana.",
        "  - Message from your parent agent: Please verify the edge case.",
        '  - Message from session "Fix cache race": Fixed.',
        "  - Message from the user: Check the result.",
        "  - External event: A plain event.",
        "  - External event: A protocol 33 event.",
    ]
    assert len(events(db, "--session", SESSION)) == written == len(feed)


def _mailbox_line(journal: JournalBuilder, body: bytes) -> RelayLine:
    """A newer worker's ``deliver_mailbox_event`` line with ``body`` as its event's body,
    digest and all."""
    observation = (
        b'{"type":"command_queued","data":{"command_id":"mailbox-9","command":'
        b'{"type":"deliver_mailbox_event","data":{"event":{"key":"k","source":"github",'
        b'"wake":false,"created_at_ms":1,"body":' + body + b'}}},"created_at_ms":1}}'
    )
    return journal.newer_line(observation, command_id="mailbox-9")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"type":"plain_text","text":"x","urgency":"high"}', "unknown field `urgency`"),
        (b'{"type":"carrier_pigeon","text":"x"}', "carrier_pigeon"),
    ],
    ids=["unknown-field", "unknown-body"],
)
def test_an_unreadable_shape_is_kept_and_holds_the_session_behind(
    tmp_path: Path, body: bytes, said: str
) -> None:
    journal = _journal()
    kept = len(journal.events)
    line = _mailbox_line(journal, body)
    assert line.position == "shape"
    newer = encode_relay_event(line) + b"\n"
    after = JournalBuilder(after=line.cursor, start_ms=journal.next_ms + 1_000)
    after.prompt_turn("After the newer line")
    path = tmp_path / "journal.jsonl"
    path.write_bytes(journal.to_bytes() + newer + after.to_bytes())
    db = tmp_path / "store.sqlite3"

    verified = cli(db, "verify", str(path), "--session", SESSION, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    document = json.loads(verified.stdout)
    assert document["problems"] == []
    (note,) = document["newer_kinds"]
    assert (note["line"], note["ordinal"], note["position"]) == (kept + 1, kept + 1, "shape")
    assert said in note["kind"]

    replayed = ok(db, "replay", str(path), "--session", SESSION)
    assert f"projection behind at ordinal {kept + 1}" in replayed.stderr
    session = show(db, SESSION)
    assert session.applied_event_ordinal == kept
    assert session.projection_behind is not None
    assert session.projection_behind.position == "shape"
    # The lines after it are kept in the relay log, not lost.
    assert session.projection_behind.kept_ordinal == after.frontier.ordinal

    # The same line with one byte changed is damage, not a newer worker's line.
    damaged = newer.replace(b'"wake":false', b'"wake":true ', 1)
    assert len(damaged) == len(newer)
    path.write_bytes(journal.to_bytes() + damaged)
    verified = cli(tmp_path / "other.sqlite3", "verify", str(path), "--json")
    document = json.loads(verified.stdout)
    assert verified.returncode != 0
    assert [p["fault"] for p in document["problems"]] == ["bad_digest"]
