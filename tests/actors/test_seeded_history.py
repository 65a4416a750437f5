"""Sessions whose history does not start at ordinal 1: seeded by a checkpoint restore,
or a journal whose earlier segments are gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from relaystore import (
    DeleteSession,
    EventStore,
    InvalidInput,
    LoadMaterializedSession,
    ObserveRelayEvents,
    RelayChainError,
    SaveSession,
    decode_relay_event,
)
from relaystore.domain.chain import GENESIS
from relaystore.domain.errors import ChainFault
from relaystore.domain.materialized import HistoryStart, MaterializedQueuedPrompt
from relaystore.domain.messages import SeedProjection
from relaystore.domain.relay import RelayCursor
from relaystore.domain.seed import decode_relay_seed, start_before
from relaystore.testing import JournalBuilder, example_session
from tests.paths import LIVE_RECORDS, REAL_EXCERPT

REAL = [decode_relay_event(line) for line in REAL_EXCERPT.read_bytes().splitlines()]
"""The real kimi journal: ordinals 3328-3344, then 3347 after a gap."""

QUEUED = MaterializedQueuedPrompt(
    command_id="prompt-9", content=[{"type": "text", "text": "next"}], queued_at_ms=5
)


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    opened = EventStore.open(tmp_path / "store.sqlite3")
    opened.ask(SaveSession(record=example_session("kimi")))
    return opened


@pytest.mark.integration
def test_the_real_journal_replays_from_a_seed_and_keeps_the_prefix_at_its_gap(
    store: EventStore,
) -> None:
    with store:
        start = RelayCursor(ordinal=3327, digest="c" * 64)
        assert (
            store.ask(SeedProjection(session_id="kimi", start=start, queued_prompts=[QUEUED]))
            == start
        )
        report = store.ask(ObserveRelayEvents(session_id="kimi", events=REAL[:17]))
        assert (report.applied, report.frontier_ordinal) == (17, 3344)
        with pytest.raises(RelayChainError) as caught:
            store.ask(ObserveRelayEvents(session_id="kimi", events=REAL[17:]))
        assert caught.value.fault is ChainFault.GAP
        assert caught.value.ordinal == 3347
        stored = store.ask(LoadMaterializedSession(session_id="kimi"))
        assert stored is not None
        assert stored.applied_event_ordinal == 3344  # 3328-3344 applied
        assert stored.history_start == HistoryStart(ordinal=3328, source="seed")
        assert stored.queued_prompts == [QUEUED]
        assert b'"history_start":{"ordinal":3328,"source":"seed"}' in msgspec.json.encode(stored)


@pytest.mark.integration
def test_a_first_event_start_adopts_its_position(store: EventStore) -> None:
    with store:
        start = start_before(REAL[0])
        store.ask(SeedProjection(session_id="kimi", start=start, source="first_event"))
        report = store.ask(ObserveRelayEvents(session_id="kimi", events=REAL[:17]))
        assert (report.applied, report.frontier_ordinal) == (17, 3344)
        stored = store.ask(LoadMaterializedSession(session_id="kimi"))
        assert stored is not None
        assert stored.history_start == HistoryStart(ordinal=3328, source="first_event")


def test_a_format_1_start_links_to_the_real_predecessor() -> None:
    journal = JournalBuilder(format=1, after=RelayCursor(ordinal=41, digest="a" * 64))
    first = journal.prompt_turn("hello")[0]
    assert start_before(first) == RelayCursor(ordinal=41, digest="a" * 64)
    with pytest.raises(InvalidInput):
        start_before(JournalBuilder().prompt_turn("from one")[0])


@pytest.mark.integration
def test_seeding_is_idempotent_and_refuses_a_store_that_holds_earlier_history(
    store: EventStore,
) -> None:
    with store:
        early = JournalBuilder()
        early.prompt_turn("first")
        store.ask(ObserveRelayEvents(session_id="kimi", events=early.events))
        later = RelayCursor(ordinal=100, digest="d" * 64)
        with pytest.raises(RelayChainError) as caught:
            store.ask(SeedProjection(session_id="kimi", start=later))
        assert caught.value.fault is ChainFault.GAP
        behind = RelayCursor(ordinal=2, digest="e" * 64)
        assert store.ask(SeedProjection(session_id="kimi", start=behind)) == early.frontier
        stored = store.ask(LoadMaterializedSession(session_id="kimi"))
        assert stored is not None
        assert stored.history_start is None


def test_a_seed_at_genesis_is_refused(store: EventStore) -> None:
    with store, pytest.raises(InvalidInput):
        store.ask(SeedProjection(session_id="kimi", start=GENESIS))


def test_deleting_a_seeded_session_forgets_where_it_started(store: EventStore) -> None:
    with store:
        store.ask(SeedProjection(session_id="kimi", start=RelayCursor(ordinal=9, digest="b" * 64)))
        store.ask(DeleteSession(session_id="kimi"))
        store.ask(SaveSession(record=example_session("kimi")))
        stored = store.ask(LoadMaterializedSession(session_id="kimi"))
        assert stored is not None
        assert (stored.applied_event_ordinal, stored.history_start) == (0, None)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (b"{", "invalid relay seed"),
        (b'{"event_frontier": -1, "event_frontier_digest": "' + b"a" * 64 + b'"}', "outside"),
        (b'{"event_frontier": 5, "event_frontier_digest": "xyz"}', "digest"),
        (b'{"event_frontier": 0, "event_frontier_digest": "' + b"a" * 64 + b'"}', "genesis"),
        (b'{"event_frontier_digest": "' + b"a" * 64 + b'"}', "event_frontier"),
    ],
)
def test_a_bad_seed_file_is_refused_naming_what_is_wrong(text: bytes, words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        decode_relay_seed(text)


def test_a_seed_file_with_later_origin_fields_reads() -> None:
    seed = decode_relay_seed(
        b'{"event_frontier": 3327, "event_frontier_digest": "'
        + b"a" * 64
        + b'", "queued_prompts": [], "accepted_config": {"model": "x"}, "native_session_unused": true}'
    )
    assert seed.frontier == RelayCursor(ordinal=3327, digest="a" * 64)


# -- through the command line, as an operator runs it -------------------------------------


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "relaystore.actors.cli", "--db", str(db), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def _worker_root(folder: Path, *, seed: bytes | None) -> Path:
    journal = folder / "relay-journal"
    journal.mkdir(parents=True)
    (journal / "active.jsonl").write_bytes(REAL_EXCERPT.read_bytes())
    (folder / "relay-state.json").write_text(json.dumps({"session_id": "kimi"}))
    if seed is not None:
        (folder / "relay-seed.json").write_bytes(seed)
    return folder


SEED = (
    b'{"event_frontier":3327,"event_frontier_digest":"' + b"c" * 64 + b'",'
    b'"queued_prompts":[{"command_id":"prompt-9","content":[],"queued_at_ms":5}]}'
)


def _show(db: Path) -> dict[str, object]:
    shown = _cli(db, "show", "kimi")
    assert shown.returncode == 0, shown.stderr
    session: dict[str, object] = json.loads(shown.stdout)
    return session


@pytest.mark.integration
def test_replay_continues_a_seeded_worker_root_and_refuses_the_real_gap(tmp_path: Path) -> None:
    root = _worker_root(tmp_path / "root", seed=SEED)
    db = tmp_path / "store.sqlite3"
    done = _cli(db, "replay", str(root))
    assert done.returncode == 1
    assert "gap" in done.stderr
    assert "3347" in done.stderr
    assert "Traceback" not in done.stderr
    session = _show(db)
    assert session["applied_event_ordinal"] == 3344  # 3328-3344 kept
    assert session["history_start"] == {"ordinal": 3328, "source": "seed"}
    assert [p["command_id"] for p in session["queued_prompts"]] == ["prompt-9"]  # type: ignore[attr-defined]
    again = _cli(db, "replay", str(root))  # resumes: nothing new before the gap
    assert again.returncode == 1
    assert _show(db)["applied_event_ordinal"] == 3344


@pytest.mark.integration
def test_a_pruned_journal_is_refused_naming_from_first_and_creates_nothing(tmp_path: Path) -> None:
    root = _worker_root(tmp_path / "root", seed=None)
    db = tmp_path / "store.sqlite3"
    done = _cli(db, "replay", str(root))
    assert done.returncode == 1
    assert "--from-first" in done.stderr
    assert "3328" in done.stderr
    stats = _cli(db, "stats", "--json")
    assert json.loads(stats.stdout)["sessions"] == 0


@pytest.mark.integration
def test_from_first_adopts_the_first_events_position(tmp_path: Path) -> None:
    root = _worker_root(tmp_path / "root", seed=None)
    db = tmp_path / "store.sqlite3"
    done = _cli(db, "replay", "--from-first", str(root))
    assert done.returncode == 1
    assert "3347" in done.stderr
    session = _show(db)
    assert session["applied_event_ordinal"] == 3344
    assert session["history_start"] == {"ordinal": 3328, "source": "first_event"}


@pytest.mark.parametrize("record", LIVE_RECORDS, ids=lambda path: path.stem)
@pytest.mark.integration
def test_the_origins_live_journal_records_replay_from_first(tmp_path: Path, record: Path) -> None:
    db = tmp_path / "store.sqlite3"
    refused = _cli(db, "replay", str(record), "--session", "live")
    assert refused.returncode == 1
    assert "--from-first" in refused.stderr
    done = _cli(db, "replay", "--from-first", str(record), "--session", "live")
    assert done.returncode == 0, done.stderr
    shown = json.loads(_cli(db, "show", "live").stdout)
    ordinal = json.loads(record.read_text())["ordinal"]
    assert shown["applied_event_ordinal"] == ordinal
    assert shown["history_start"] == {"ordinal": ordinal, "source": "first_event"}


@pytest.mark.integration
def test_a_malformed_seed_file_is_refused_naming_it(tmp_path: Path) -> None:
    root = _worker_root(tmp_path / "root", seed=b'{"event_frontier": "x"}')
    done = _cli(tmp_path / "store.sqlite3", "replay", str(root))
    assert done.returncode == 1
    assert "relay-seed.json" in done.stderr
    assert "Traceback" not in done.stderr
