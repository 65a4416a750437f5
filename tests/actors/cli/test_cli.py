"""The ``relaystore`` command, run for real in subprocesses.

What a user relies on: ``replay`` fills the store once and only once, survives being
killed, refuses bad journals with one clear line while leaving the store as the last good
page left it; ``events`` prints the feed in the ``ApiEvent`` wire shape (and follows
another process's commits); ``verify`` finds gaps without a store; usage errors exit 2.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from relaystore.actors.projector import PAGE_SIZE
from relaystore.domain.api_events import ApiEvent
from relaystore.domain.relay import RELAY_EVENT_FORMAT_V1, RelayEvent, encode_relay_event
from tests.actors.cli_support import (
    ENV,
    FIXTURE,
    TIMEOUT,
    WIRE_KEYS,
    WORKER_ROOTS,
    LineReader,
    cli,
    command,
    copy_store,
    events,
    failure,
    frontier,
    latest_seq,
    ok,
    replay,
    show,
    summary,
)
from tests.actors.journal_factory import START_MS, conversation, journal_bytes, write_journal

# -- 1. a worker root, replayed and read back ---------------------------------------------


def _relay_state(root: Path) -> dict[str, object]:
    state: dict[str, object] = json.loads((root / "relay-state.json").read_text())
    return state


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, ...]]:
    """A store holding the three example sessions, and the summary of its replay."""
    db = tmp_path_factory.mktemp("example") / "store.sqlite3"
    return db, replay(db, *WORKER_ROOTS)


def test_replay_of_a_worker_root_applies_every_event(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    _, (read, applied, already, written) = example_store
    total = sum(int(_relay_state(root)["latest_ordinal"]) for root in WORKER_ROOTS)  # type: ignore[call-overload]
    assert (read, applied, already) == (total, total, 0)
    assert written > 0


def test_events_print_the_api_event_wire_shape_oldest_first(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    db, (*_, written) = example_store
    lines = events(db)
    assert len(lines) == written
    sessions = [_relay_state(root)["session_id"] for root in WORKER_ROOTS]
    seqs: list[int] = []
    order: list[object] = []
    for line in lines:
        body = json.loads(line, object_pairs_hook=list)
        assert [key for key, _ in body] == WIRE_KEYS
        event = msgspec.json.decode(line, type=ApiEvent)
        assert msgspec.json.encode(event).decode() == line  # the wire shape, unchanged
        seqs.append(event.seq)
        if not order or order[-1] != event.session_id:
            order.append(event.session_id)
    assert seqs == sorted(set(seqs))  # strictly increasing
    assert seqs[0] >= 1
    # Sources replay in the order given, so each session's events form one run.
    assert order == sessions


def test_events_after_limit_and_session_select_from_the_feed(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    db, _ = example_store
    lines = events(db)
    seqs = [json.loads(line)["seq"] for line in lines]
    assert events(db, "--after", str(seqs[4]), "--limit", "3") == lines[5:8]
    assert events(db, "--after", str(seqs[-1])) == []
    session_id = str(_relay_state(WORKER_ROOTS[1])["session_id"])
    assert events(db, "--session", session_id) == [
        line for line in lines if json.loads(line)["session_id"] == session_id
    ]


def test_a_second_replay_adds_nothing(example_store: tuple[Path, tuple[int, ...]]) -> None:
    db, _ = example_store
    before = events(db)
    read, applied, _, written = replay(db, *WORKER_ROOTS)
    assert (applied, written) == (0, 0)
    assert read == 0  # resumed at the frontier: nothing left to read
    assert events(db) == before


def test_stats_show_revision_sessions_and_latest_seq(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    db, _ = example_store
    lines = events(db)
    out = ok(db, "stats").stdout.splitlines()
    assert re.fullmatch(r"schema revision [1-9]\d*", out[0])
    assert out[1] == f"sessions {len(WORKER_ROOTS)}"
    assert out[2] == f"latest seq {json.loads(lines[-1])['seq']}"
    kinds: dict[str, int] = {}
    for line in lines:
        kind = json.loads(line)["type"]
        kinds[kind] = kinds.get(kind, 0) + 1
    assert dict(line.rsplit(" ", 1) for line in out[3:]) == {k: str(n) for k, n in kinds.items()}


def test_show_prints_the_materialized_session(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    db, _ = example_store
    for root in WORKER_ROOTS:
        state = _relay_state(root)
        session = show(db, str(state["session_id"]))
        assert session.applied_event_ordinal == state["latest_ordinal"]
        assert session.applied_event_digest == state["latest_digest"]
    assert failure(cli(db, "show", "no-such-session")).startswith("relaystore: ")


@pytest.mark.integration
def test_the_console_script_reads_the_store_from_relaystore_db(
    example_store: tuple[Path, tuple[int, ...]],
) -> None:
    db, _ = example_store
    script = Path(sys.executable).parent / "relaystore"
    assert script.exists(), "install the project (pip install -e .) to get the relaystore script"
    result = subprocess.run(
        [str(script), "stats"],
        cwd=db.parent.parent,
        env={**ENV, "RELAYSTORE_DB": str(db)},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"sessions {len(WORKER_ROOTS)}" in result.stdout.splitlines()


def test_reading_a_store_that_does_not_exist_fails_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "missing.sqlite3"
    for args in (("events",), ("stats",), ("show", "s")):
        assert str(db) in failure(cli(db, *args))
    assert not db.exists()  # reading never creates a store


# -- 2. a replay killed part way resumes to the same store --------------------------------

LONG_EVENTS = 20_000


@pytest.mark.integration
def test_a_killed_replay_resumes_to_the_same_store(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    journal = write_journal(tmp_path / "long.jsonl", conversation(LONG_EVENTS))
    session = "long-session"

    # The uninterrupted replay runs beside the one to be killed (two cores, half the time).
    reference = tmp_path / "reference.sqlite3"
    clean = subprocess.Popen(
        command(reference, "replay", str(journal), "--session", session),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(clean)
    db = tmp_path / "killed.sqlite3"
    process = subprocess.Popen(
        command(db, "replay", str(journal), "--session", session),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    spawned.append(process)
    deadline = time.monotonic() + TIMEOUT
    while latest_seq(db) < 300 and process.poll() is None:
        assert time.monotonic() < deadline, "the replay committed nothing in time"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=TIMEOUT) == -signal.SIGKILL, "the replay ended before the kill"

    _, clean_err = clean.communicate(timeout=TIMEOUT)
    assert clean.returncode == 0, clean_err
    _, applied, _, total_seq = summary(clean_err)
    assert applied == LONG_EVENTS
    expected_events = events(reference)
    expected_session = ok(reference, "show", session).stdout
    assert len(expected_events) == total_seq

    committed, _ = frontier(db, session)
    assert 0 < committed < LONG_EVENTS
    partial = events(db)
    assert 0 < len(partial) < len(expected_events)
    assert partial == expected_events[: len(partial)]  # a prefix: nothing torn or reordered

    read, applied, already, _ = replay(db, journal, session=session)
    assert applied == LONG_EVENTS - committed
    assert read == applied + already
    # recorded_at_ms of API events comes from the relay events, not the wall clock, so the
    # resumed store matches the uninterrupted one exactly.
    assert events(db) == expected_events
    assert ok(db, "show", session).stdout == expected_session


# -- 3. bad input: refused with one line, the store left as the last good page left it ---

SESSION = "s1"
GOOD = 10  # ordinals 1..10 are in the store before each bad journal


def unknown_observation(line: bytes) -> bytes:
    """``line`` with its observation renamed to a type no build knows."""
    renamed, count = re.subn(
        rb'"observation":\{"type":"[a-z_]+"', b'"observation":{"type":"telepathy"', line
    )
    assert count == 1, line
    return renamed


def _bad_file(kind: str) -> tuple[bytes, int, int | None]:
    """A journal continuing the good prefix, broken as ``kind`` says.

    Returns its bytes, the line the error must name, and the ordinal (None when the line
    cannot tell it).
    """
    fmt = RELAY_EVENT_FORMAT_V1 if kind == "fork" else 2
    tail = conversation(20, first=GOOD + 1, fmt=fmt)
    lines = [encode_relay_event(event) for event in tail]
    broken = tail[3]  # line 4, ordinal 14
    if kind == "not_json":
        lines[3] = b"this is not a relay event"
        return b"\n".join(lines) + b"\n", 4, None
    if kind == "wrong_digest":
        lines[3] = lines[3].replace(broken.digest.encode(), b"0123abcd" * 8)
        return b"\n".join(lines) + b"\n", 4, 14
    if kind == "gap":
        del lines[3]
        return b"\n".join(lines) + b"\n", 4, 15
    if kind == "fork":
        forked = RelayEvent.create(
            format=RELAY_EVENT_FORMAT_V1,
            ordinal=broken.ordinal,
            previous_digest="ab" * 32,  # a valid event of another chain
            recorded_at_ms=broken.recorded_at_ms,
            command_id=broken.command_id,
            observation=broken.observation,
        )
        lines[3] = encode_relay_event(forked)
        return b"\n".join(lines) + b"\n", 4, 14
    if kind == "unknown_observation":
        lines[3] = unknown_observation(lines[3])
        return b"\n".join(lines) + b"\n", 4, 14
    if kind == "over_2_mib":
        lines[3] = b'{"format":2,"ordinal":14,"padding":"' + b"x" * (2 * 1024 * 1024) + b'"}'
        return b"\n".join(lines) + b"\n", 4, None
    if kind == "starts_past_the_frontier":
        return journal_bytes(conversation(30, first=20)), 1, 20
    raise AssertionError(kind)


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[int, Path], list[str]]:
    """Stores holding ordinals 1..10 (per format), and their feed."""
    folder = tmp_path_factory.mktemp("good")
    stores: dict[int, Path] = {}
    feeds: list[list[str]] = []
    for fmt in (RELAY_EVENT_FORMAT_V1, 2):
        db = folder / f"good-v{fmt}.sqlite3"
        journal = write_journal(folder / f"good-v{fmt}.jsonl", conversation(GOOD, fmt=fmt))
        assert replay(db, journal, session=SESSION)[1] == GOOD
        assert frontier(db, SESSION)[0] == GOOD
        stores[fmt] = db
        feeds.append(events(db))
    assert feeds[0] == feeds[1]  # the format changes no API event
    assert feeds[0], "the good prefix must already show in the feed"
    return stores, feeds[0]


@pytest.mark.parametrize(
    "kind",
    [
        "not_json",
        "wrong_digest",
        "gap",
        "fork",
        "unknown_observation",
        "over_2_mib",
        "starts_past_the_frontier",
    ],
)
def test_bad_input_is_refused_and_leaves_the_store_alone(
    kind: str, tmp_path: Path, good_store: tuple[dict[int, Path], list[str]]
) -> None:
    stores, feed = good_store
    fmt = RELAY_EVENT_FORMAT_V1 if kind == "fork" else 2
    db = copy_store(stores[fmt], tmp_path / "store.sqlite3")
    good = conversation(GOOD, fmt=fmt)[-1]
    data, line, ordinal = _bad_file(kind)
    journal = write_journal(tmp_path / f"{kind}.jsonl", data)

    message = failure(cli(db, "replay", str(journal), "--session", SESSION))

    assert message.startswith("relaystore: ")
    assert f"{journal}:{line}" in message
    if ordinal is not None:
        assert f"ordinal {ordinal}" in message
    if kind == "gap":
        # A gap is missing history, not damage: the good prefix before it is committed.
        assert frontier(db, SESSION)[0] == line - 1 + GOOD
        return
    assert events(db) == feed
    assert frontier(db, SESSION) == (GOOD, good.digest)


LONG_BAD = 300
BAD_LINE = 200  # in the second page; the first page is complete and good
assert PAGE_SIZE < BAD_LINE <= 2 * PAGE_SIZE


@pytest.fixture(scope="module")
def clean_feed(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The feed of a clean replay of ordinals 1..BAD_LINE-1."""
    folder = tmp_path_factory.mktemp("clean")
    journal = write_journal(folder / "clean.jsonl", conversation(BAD_LINE - 1))
    db = folder / "clean.sqlite3"
    replay(db, journal, session=SESSION)
    return events(db)


@pytest.mark.parametrize(
    "kind",
    [
        "wrong_digest",
        "gap",
        "not_json",
        "unknown_observation",
    ],
)
def test_bad_input_mid_journal_keeps_the_complete_pages_before_it(
    kind: str, tmp_path: Path, clean_feed: list[str]
) -> None:
    events_ = conversation(LONG_BAD)
    lines = [encode_relay_event(event) for event in events_]
    index = BAD_LINE - 1
    if kind == "wrong_digest":
        lines[index] = lines[index].replace(events_[index].digest.encode(), b"0123abcd" * 8)
    elif kind == "gap":
        del lines[index]
    elif kind == "not_json":
        lines[index] = b"this is not a relay event"
    else:
        lines[index] = unknown_observation(lines[index])
    journal = write_journal(tmp_path / "bad.jsonl", b"\n".join(lines) + b"\n")
    db = tmp_path / "store.sqlite3"

    message = failure(cli(db, "replay", str(journal), "--session", SESSION))

    assert f"{journal}:{BAD_LINE}" in message
    committed, _ = frontier(db, SESSION)
    if kind == "gap":
        # A gap is missing history, not damage: every event before it is kept.
        assert committed == BAD_LINE - 1
    else:
        # The complete page before the bad line is kept, nothing of the page holding it.
        assert committed == PAGE_SIZE
    feed = events(db)
    assert feed == clean_feed[: len(feed)]
    # Fixing the line and replaying again continues from there.
    write_journal(journal, conversation(LONG_BAD))
    _, applied, _, _ = replay(db, journal, session=SESSION)
    assert applied == LONG_BAD - committed


def test_a_torn_final_line_is_left_for_later_with_a_warning(tmp_path: Path) -> None:
    whole = journal_bytes(conversation(20))
    journal = write_journal(tmp_path / "torn.jsonl", whole[:-25])  # line 20 cut short
    db = tmp_path / "store.sqlite3"
    result = ok(db, "replay", str(journal), "--session", SESSION)
    warnings = [line for line in result.stderr.splitlines() if "torn" in line]
    assert len(warnings) == 1, result.stderr
    assert f"{journal}:20" in warnings[0]
    assert summary(result.stderr)[1] == 19
    assert frontier(db, SESSION)[0] == 19

    reference = tmp_path / "reference.sqlite3"
    replay(reference, write_journal(tmp_path / "first19.jsonl", conversation(19)), session=SESSION)
    assert events(db) == events(reference)

    # Once the worker finishes the line, the next replay applies just it.
    write_journal(journal, whole)
    assert replay(db, journal, session=SESSION)[1] == 1
    assert frontier(db, SESSION)[0] == 20


# -- 4. following the feed while another process replays -----------------------------------


@pytest.mark.integration
def test_events_follow_sees_commits_of_another_process(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    db = tmp_path / "store.sqlite3"
    replay(db, write_journal(tmp_path / "first.jsonl", conversation(GOOD)), session=SESSION)
    initial = events(db)

    follower = subprocess.Popen(
        command(db, "events", "--follow"),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    spawned.append(follower)
    assert follower.stdout is not None
    reader = LineReader(follower.stdout)
    deadline = time.monotonic() + 20
    assert reader.take(len(initial), deadline=deadline) == initial

    rest = write_journal(tmp_path / "rest.jsonl", conversation(200, first=GOOD + 1))
    replay(db, rest, session=SESSION)
    expected = events(db)
    assert len(expected) > len(initial)

    followed = reader.take(len(expected) - len(initial), deadline=deadline)
    assert initial + followed == expected
    assert follower.poll() is None  # still following

    follower.send_signal(signal.SIGINT)  # what Ctrl-C does
    follower.wait(timeout=TIMEOUT)
    reader.join()
    assert follower.stderr is not None
    assert "Traceback" not in follower.stderr.read()
    assert follower.returncode == 130


# -- 5. verify ------------------------------------------------------------------------------


def _counts(stdout: str) -> tuple[int, int, int]:
    match = re.search(r"(\d+) records?, (\d+) valid digests?, (\d+) problems?", stdout)
    assert match is not None, stdout
    return int(match[1]), int(match[2]), int(match[3])


@pytest.fixture
def fixture_journal() -> Path:
    return FIXTURE


def test_verify_reports_the_gap_of_the_real_excerpt(fixture_journal: Path, tmp_path: Path) -> None:
    result = cli(tmp_path / "unused.sqlite3", "verify", str(fixture_journal), "--from-first")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stdout.splitlines() if str(fixture_journal) in line]
    assert len(problems) == 1, result.stdout
    assert f"{fixture_journal}:18" in problems[0]
    assert "ordinal 3347" in problems[0]
    assert "gap" in problems[0]
    assert _counts(result.stdout) == (18, 18, 1)
    assert not (tmp_path / "unused.sqlite3").exists()  # verify needs no store


def test_verify_passes_the_contiguous_part_of_the_real_excerpt(
    fixture_journal: Path, tmp_path: Path
) -> None:
    head = b"".join(fixture_journal.read_bytes().splitlines(keepends=True)[:17])
    journal = write_journal(tmp_path / "head.jsonl", head)
    result = cli(tmp_path / "unused.sqlite3", "verify", str(journal), "--from-first")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _counts(result.stdout) == (17, 17, 0)


def test_verify_lists_every_problem_and_passes_the_examples(tmp_path: Path) -> None:
    result = ok(tmp_path / "unused.sqlite3", "verify", *map(str, WORKER_ROOTS))
    total = sum(int(_relay_state(root)["latest_ordinal"]) for root in WORKER_ROOTS)  # type: ignore[call-overload]
    assert _counts(result.stdout) == (total, total, 0)

    good = conversation(30)
    lines = [encode_relay_event(event) for event in good]
    lines[9] = lines[9].replace(good[9].digest.encode(), b"0123abcd" * 8)  # ordinal 10
    del lines[20]  # ordinal 21 is missing
    lines.insert(4, b"not json")  # line 5; ordinal n now sits on line n + 1
    journal = write_journal(tmp_path / "many.jsonl", b"\n".join(lines) + b"\n")
    result = cli(tmp_path / "unused.sqlite3", "verify", str(journal))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stdout.splitlines() if str(journal) in line]
    assert [re.search(r":(\d+)", line)[1] for line in problems] == ["5", "11", "22"]  # type: ignore[index]
    assert "ordinal 10" in problems[1]
    assert "ordinal 22" in problems[2]
    assert "gap" in problems[2]
    assert _counts(result.stdout) == (29, 28, 3)


# -- 6. usage errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [(), ("frobnicate",), ("events", "--after", "x"), ("replay",), ("show",)],
    ids=["no-command", "unknown-command", "after-not-a-number", "replay-no-source", "show-no-id"],
)
def test_usage_errors_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    result = cli(db, *args)
    assert result.returncode == 2, result.stderr
    assert "usage:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not db.exists()


def test_recorded_at_comes_from_the_journal_not_the_clock(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite3"
    journal = write_journal(tmp_path / "j.jsonl", conversation(20))
    replay(db, journal, session=SESSION)
    stamps = [json.loads(line)["recorded_at_ms"] for line in events(db)]
    assert stamps
    assert all(START_MS < stamp <= START_MS + 37 * 20 for stamp in stamps)
