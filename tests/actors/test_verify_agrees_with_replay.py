"""``verify`` and ``replay`` agree on every input: where a journal starts (a seed, a
journal whose earlier segments are gone, ``--from-first``), what an acceptable line is,
and a file that is no journal at all. Each case runs both commands on the same input and
requires the same verdict, word for word where both refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from relaystore.domain.relay import RELAY_EVENT_FORMAT_V1, RelayCursor, encode_relay_event
from relaystore.testing import JournalBuilder
from tests.actors.cli_support import cli, failure, ok, replay, show

SESSION = "agree"


def _pruned(fmt: int = 2) -> JournalBuilder:
    """A journal whose events 1..30 are gone: it starts at ordinal 31."""
    journal = JournalBuilder(format=fmt, after=RelayCursor(ordinal=30, digest="ab" * 32))
    for n in range(4):
        journal.prompt_turn(f"turn {n}")
    return journal


def _both(db: Path, source: Path, *extra: str) -> tuple[dict[str, object], str | None]:
    """``verify --json`` and ``replay`` of ``source``: the report, and replay's refusal
    (None when it succeeded)."""
    verified = cli(db, "verify", str(source), "--session", SESSION, "--json", *extra)
    assert "Traceback" not in verified.stderr
    report = json.loads(verified.stdout)
    replayed = cli(db, "replay", str(source), "--session", SESSION, *extra)
    if replayed.returncode == 0:
        assert verified.returncode == 0, report
        return report, None
    assert verified.returncode == 1, replayed.stderr
    return report, failure(replayed)


def _first(report: dict[str, object]) -> dict[str, object]:
    problems = report["problems"]
    assert isinstance(problems, list)
    assert problems
    first = problems[0]
    assert isinstance(first, dict)
    return first


def test_a_journal_whose_earlier_segments_are_gone_is_refused_by_both(tmp_path: Path) -> None:
    path = _pruned().write(tmp_path / "pruned.jsonl")
    report, refusal = _both(tmp_path / "store.sqlite3", path)
    assert refusal is not None
    first = _first(report)
    assert (first["fault"], first["ordinal"], first["line"]) == ("gap", 31, 1)
    assert "--from-first" in str(first["message"])
    assert refusal.endswith(str(first["message"]))
    plain = cli(tmp_path / "x.sqlite3", "verify", str(path), "--session", SESSION)
    assert f"relaystore: {plain.stdout.splitlines()[0]}" == refusal


@pytest.mark.integration
def test_with_from_first_both_accept_it_and_verify_says_where_it_starts(tmp_path: Path) -> None:
    journal = _pruned()
    path = journal.write(tmp_path / "pruned.jsonl")
    db = tmp_path / "store.sqlite3"
    report, refusal = _both(db, path, "--from-first")
    assert refusal is None
    assert report["starts"] == {SESSION: {"ordinal": 31, "from": "first_event"}}
    assert report["frontiers"] == {
        SESSION: {"ordinal": journal.frontier.ordinal, "digest": journal.frontier.digest}
    }
    plain = ok(tmp_path / "y.sqlite3", "verify", str(path), "--session", SESSION, "--from-first")
    assert f"session {SESSION}: the history starts at ordinal 31" in plain.stdout
    assert show(db, SESSION).applied_event_ordinal == journal.frontier.ordinal


def test_after_a_bad_digest_the_frontier_is_never_past_it(tmp_path: Path) -> None:
    journal = JournalBuilder()
    for n in range(5):
        journal.prompt_turn(f"turn {n}")
    lines = journal.lines()
    bad = 7
    lines[bad - 1] = lines[bad - 1].replace(journal.events[bad - 1].digest.encode(), b"0" * 64)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(lines))
    report, refusal = _both(tmp_path / "store.sqlite3", path)
    assert refusal is not None
    assert _first(report)["fault"] == "bad_digest"
    frontier = report["frontiers"]
    assert isinstance(frontier, dict)
    assert frontier[SESSION]["ordinal"] == bad - 1


def _seeded_root(tmp_path: Path, journal: JournalBuilder, **seed: object) -> Path:
    root = journal.write_worker_root(tmp_path / "root", SESSION, seed=True)
    seed_file = root / "relay-seed.json"
    document = json.loads(seed_file.read_text())
    document.update(seed)
    seed_file.write_text(json.dumps(document))
    return root


@pytest.mark.parametrize(
    ("fmt", "seed", "fault"),
    [
        # Format 1: the first remaining event links to another predecessor than the seed.
        (RELAY_EVENT_FORMAT_V1, {"event_frontier_digest": "cd" * 32}, "fork"),
        # Format 2: the seed names ordinal 31 with another digest than the event there.
        (2, {"event_frontier": 31, "event_frontier_digest": "cd" * 32}, "fork"),
        # A seed at genesis in front of a journal that starts at 31.
        (2, {"event_frontier": 0, "event_frontier_digest": "0" * 64}, "gap"),
    ],
    ids=["format 1 links elsewhere", "format 2 other digest", "seed at genesis"],
)
def test_a_seed_that_does_not_chain_to_the_journal_is_refused_by_both_naming_it(
    tmp_path: Path, fmt: int, seed: dict[str, object], fault: str
) -> None:
    root = _seeded_root(tmp_path, _pruned(fmt), **seed)
    report, refusal = _both(tmp_path / "store.sqlite3", root)
    assert refusal is not None
    first = _first(report)
    assert first["fault"] == fault
    assert "relay-seed.json" in refusal
    assert refusal.endswith(str(first["message"]))


@pytest.mark.integration
def test_a_seed_that_chains_is_accepted_by_both(tmp_path: Path) -> None:
    journal = _pruned()
    root = journal.write_worker_root(tmp_path / "root", SESSION, seed=True)
    report, refusal = _both(tmp_path / "store.sqlite3", root)
    assert refusal is None
    assert report["starts"] == {SESSION: {"ordinal": 31, "from": "seed"}}


def test_a_clock_before_1970_is_refused_by_both_at_its_line(tmp_path: Path) -> None:
    journal = JournalBuilder()
    journal.prompt_turn("early")
    lines = journal.lines()
    at = journal.events[1].recorded_at_ms
    lines[1] = lines[1].replace(b'"recorded_at_ms":%d' % at, b'"recorded_at_ms":-5000')
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b"".join(lines))
    report, refusal = _both(tmp_path / "store.sqlite3", path)
    assert refusal is not None
    first = _first(report)
    assert (first["fault"], first["line"]) == ("bad_line", 2)
    assert "$.recorded_at_ms" in str(first["message"])
    assert refusal.endswith(str(first["message"]))


def test_a_file_that_is_no_journal_is_one_problem_not_one_per_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("".join(f"line {n} of a document about relaystore\n" for n in range(250)))
    verified = cli(tmp_path / "store.sqlite3", "verify", str(readme), "--json")
    report = json.loads(verified.stdout)
    assert verified.returncode == 1
    (problem,) = report["problems"]
    assert problem["fault"] == "unreadable"
    assert str(problem["message"]).startswith("not a relay journal")
    plain = cli(tmp_path / "store.sqlite3", "verify", str(readme))
    assert sum("not a relay journal" in line for line in plain.stdout.splitlines()) == 1
    assert len(plain.stdout.splitlines()) == 2  # the problem, then the counts
    refusal = failure(cli(tmp_path / "store.sqlite3", "replay", str(readme)))
    assert f"{readme}:1" in refusal


def test_a_journal_with_a_few_bad_lines_still_lists_each(tmp_path: Path) -> None:
    journal = JournalBuilder()
    journal.prompt_turn("one")
    path = tmp_path / "journal.jsonl"
    path.write_bytes(journal.to_bytes() + b"not json\n" * 3)
    report = json.loads(cli(tmp_path / "s.sqlite3", "verify", str(path), "--json").stdout)
    assert [problem["fault"] for problem in report["problems"]] == ["bad_line"] * 3


@pytest.mark.integration
def test_replay_summary_counts_match_verify(tmp_path: Path) -> None:
    journal = JournalBuilder()
    journal.protocol_33()
    root = journal.write_worker_root(tmp_path / "root", SESSION)
    report = json.loads(ok(tmp_path / "s.sqlite3", "verify", str(root), "--json").stdout)
    read, applied, _, _ = replay(tmp_path / "s.sqlite3", root)
    assert report["records"] == read == applied


def test_a_seed_on_the_last_event_with_another_digest_is_a_fork_in_both(tmp_path: Path) -> None:
    journal = _pruned()
    last = journal.frontier.ordinal
    root = _seeded_root(tmp_path, journal, event_frontier=last, event_frontier_digest="cd" * 32)
    report, refusal = _both(tmp_path / "store.sqlite3", root)
    assert refusal is not None
    first = _first(report)
    assert (first["fault"], first["ordinal"]) == ("fork", last)
    assert "relay-seed.json" in refusal
    frontiers = report["frontiers"]
    assert isinstance(frontiers, dict)
    assert SESSION not in frontiers  # never a frontier digest no event has


def test_a_seed_past_the_journal_is_refused_by_both_naming_it(tmp_path: Path) -> None:
    root = _seeded_root(
        tmp_path, _pruned(), event_frontier=1_000_000, event_frontier_digest="a" * 64
    )
    report, refusal = _both(tmp_path / "store.sqlite3", root)
    assert refusal is not None
    first = _first(report)
    assert first["fault"] == "gap"
    assert "past the journal's last event" in str(first["message"])
    assert "relay-seed.json" in refusal


@pytest.mark.integration
def test_an_integer_sqlite_cannot_store_is_held_by_both_and_damage_refused(
    tmp_path: Path,
) -> None:
    # A line a worker signed with an integer past what this build reads is a newer
    # worker's shape: both keep it (verify notes it, replay holds the session behind).
    journal = JournalBuilder()
    journal.prompt_turn("big")
    big = b'{"type":"command_started","data":{"command_id":"x","started_at_ms":%d}}' % 2**64
    newer = journal.newer_line(big)
    path = tmp_path / "journal.jsonl"
    path.write_bytes(journal.to_bytes() + encode_relay_event(newer) + b"\n")
    report, refusal = _both(tmp_path / "store.sqlite3", path)
    assert refusal is None
    assert report["problems"] == []
    (note,) = report["newer_kinds"]  # type: ignore[misc]
    assert (note["position"], note["ordinal"]) == ("shape", newer.ordinal)
    # The same integer written over a signed line breaks its digest: damage, refused by
    # both at its line, never an OverflowError.
    lines = journal.lines()
    started = journal.events[1]
    at = started.observation.data.started_at_ms  # type: ignore[union-attr]
    lines[1] = lines[1].replace(b'"started_at_ms":%d' % at, b'"started_at_ms":%d' % 2**64)
    path.write_bytes(b"".join(lines))
    report, refusal = _both(tmp_path / "other.sqlite3", path)
    assert refusal is not None
    first = _first(report)
    assert (first["fault"], first["line"]) == ("bad_digest", 2)
    assert "Overflow" not in refusal
