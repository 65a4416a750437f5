"""Reading relay journals from disk: sources, segment choice, torn tails, bad lines, verify."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from relaystore.actors.journal import (
    JournalReader,
    ProblemKind,
    ReadMode,
    TornTail,
    read_journal,
    resolve_source,
    verify_sources,
)
from relaystore.domain.errors import ChainFault, InvalidInput, RelayChainError
from relaystore.domain.relay import (
    MAX_RELAY_LINE_BYTES,
    CommandStarted,
    RelayCursor,
    RelayEvent,
    SessionUpdate,
    encode_relay_event,
)
from relaystore.testing import JournalBuilder
from tests.paths import REAL_EXCERPT

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = REAL_EXCERPT


def chunk(text: str) -> SessionUpdate:
    return SessionUpdate.of(
        update={
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": text},
            "messageId": "m1",
        }
    )


def make_events(last: int, *, first: int = 1, v1_through: int = 0) -> list[RelayEvent]:
    """A valid chain ``first..last``: format 1 (chained) through ``v1_through``, then 2."""
    after = None if first == 1 else RelayCursor(ordinal=first - 1, digest="ab" * 32)
    journal = JournalBuilder(after=after, start_ms=1_000 + first, step_ms=1)
    for ordinal in range(first, last + 1):
        journal.format = 1 if ordinal <= v1_through else 2
        journal.add(chunk(f"word {ordinal} "))
    return journal.events


def lines(events: list[RelayEvent]) -> bytes:
    return b"".join(encode_relay_event(event) + b"\n" for event in events)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as out:
            out.write(data)
    else:
        path.write_bytes(data)
    return path


def segment(folder: Path, events: list[RelayEvent]) -> Path:
    first, last = events[0].ordinal, events[-1].ordinal
    return write(folder / f"segment-{first:020}-{last:020}.jsonl.gz", lines(events))


def worker_root(tmp_path: Path, session_id: str = "session-9") -> tuple[Path, list[RelayEvent]]:
    events = make_events(25, v1_through=8)
    root = tmp_path / "worker"
    journal = root / "relay-journal"
    segment(journal, events[0:10])
    segment(journal, events[10:20])
    write(journal / "active.jsonl", lines(events[20:]))
    state = {"format_version": 7, "session_id": session_id, "latest_ordinal": 25}
    (root / "relay-state.json").write_text(json.dumps(state, indent=2))
    return root, events


def read_all(path: Path, **options: object) -> list[tuple[int, str, int]]:
    reader = read_journal(path, **options)  # type: ignore[arg-type]
    return [(event.ordinal, where.path.name, where.line) for event, where in reader]


# -- sources --------------------------------------------------------------------------


def test_worker_root_reads_segments_then_active_with_session_from_relay_state(tmp_path):
    root, events = worker_root(tmp_path)

    source = resolve_source(root)
    reader = JournalReader(source, check_chain=True)
    read = list(reader)

    assert source.session_id == "session-9"
    assert [event for event, _ in read] == events
    assert [(where.path.name, where.line) for _, where in read[9:11]] == [
        ("segment-00000000000000000001-00000000000000000010.jsonl.gz", 10),
        ("segment-00000000000000000011-00000000000000000020.jsonl.gz", 1),
    ]
    assert str(read[-1][1]) == f"{root / 'relay-journal' / 'active.jsonl'}:5"
    assert reader.valid_digests == reader.records == 25
    assert reader.cursor == events[-1].cursor


def test_relay_journal_folder_takes_the_session_of_its_worker_root(tmp_path):
    root, events = worker_root(tmp_path, session_id="from-state")

    source = resolve_source(root / "relay-journal")

    assert source.session_id == "from-state"
    assert [event for event, _ in JournalReader(source)] == events


def test_session_falls_back_to_the_worker_root_name_without_relay_state(tmp_path):
    root, _ = worker_root(tmp_path)
    (root / "relay-state.json").unlink()

    assert resolve_source(root).session_id == "worker"
    assert resolve_source(root / "relay-journal").session_id == "worker"


def test_explicit_session_wins_over_relay_state_and_stem(tmp_path):
    root, _ = worker_root(tmp_path)
    single = write(tmp_path / "abc.jsonl", lines(make_events(3)))

    assert resolve_source(root, session_id="chosen").session_id == "chosen"
    assert resolve_source(single, session_id="chosen").session_id == "chosen"


def test_single_jsonl_and_jsonl_gz_files_take_their_stem_as_session(tmp_path):
    events = make_events(6)
    plain = write(tmp_path / "sess-a.jsonl", lines(events))
    packed = write(tmp_path / "sess-b.jsonl.gz", lines(events))

    for path, session in ((plain, "sess-a"), (packed, "sess-b")):
        source = resolve_source(path)
        assert source.session_id == session
        assert [event for event, _ in JournalReader(source, check_chain=True)] == events


def test_a_file_inside_a_worker_root_takes_the_session_of_relay_state(tmp_path):
    root, _ = worker_root(tmp_path, session_id="root-session")

    active = resolve_source(root / "relay-journal" / "active.jsonl")

    assert active.session_id == "root-session"


def test_unreadable_relay_state_is_an_invalid_input_naming_the_file(tmp_path):
    root, _ = worker_root(tmp_path)
    (root / "relay-state.json").write_text('{"format_version": 7}')

    with pytest.raises(InvalidInput, match=r"relay-state\.json") as caught:
        resolve_source(root)
    assert caught.value.path == str(root / "relay-state.json")


def test_missing_or_foreign_sources_are_invalid_input(tmp_path):
    with pytest.raises(InvalidInput, match="no such journal") as caught:
        resolve_source(tmp_path / "nope.jsonl")
    assert caught.value.path == str(tmp_path / "nope.jsonl")

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("hi")
    with pytest.raises(InvalidInput, match="not a relay journal"):
        resolve_source(tmp_path / "notes")


# -- segment choice -------------------------------------------------------------------


def test_overlapping_files_are_read_once_each_ordinal_from_the_file_reaching_furthest(tmp_path):
    events = make_events(30)
    journal = tmp_path / "relay-journal"
    segment(journal, events[0:10])  # 1-10
    segment(journal, events[4:20])  # 5-20: covers 1-10's tail and reaches further
    segment(journal, events[9:15])  # 10-15: never reaches furthest, never read
    write(journal / "active.jsonl", lines(events[14:30]))  # 15-30, a crash overlap

    read = read_all(journal, check_chain=True)

    assert [ordinal for ordinal, _, _ in read] == list(range(1, 31))
    assert read[10] == (11, "segment-00000000000000000005-00000000000000000020.jsonl.gz", 7)
    assert read[20] == (21, "active.jsonl", 7)
    assert {name for _, name, _ in read} == {
        "segment-00000000000000000001-00000000000000000010.jsonl.gz",
        "segment-00000000000000000005-00000000000000000020.jsonl.gz",
        "active.jsonl",
    }


def test_a_tie_on_the_last_ordinal_goes_to_active(tmp_path):
    events = make_events(20)
    journal = tmp_path / "relay-journal"
    segment(journal, events[0:10])
    segment(journal, events[10:20])
    write(journal / "active.jsonl", lines(events[10:20]))  # sealed, but not yet emptied

    read = read_all(journal)

    assert [ordinal for ordinal, _, _ in read] == list(range(1, 21))
    assert {name for ordinal, name, _ in read if ordinal > 10} == {"active.jsonl"}


def test_the_range_of_active_skips_blank_bad_oversized_and_torn_lines_at_either_end(tmp_path):
    events = make_events(6)
    journal = tmp_path / "relay-journal"
    oversized = b'{"ordinal":99' + b" " * MAX_RELAY_LINE_BYTES + b"}"
    body = b"\n{oops\n" + lines(events[1:5]) + b"  \n" + oversized + b"\n" + b'{"ordinal":77}'
    write(journal / "active.jsonl", body)

    (active,) = resolve_source(journal).files

    assert (active.active, active.first, active.last) == (True, 2, 5)


@pytest.mark.parametrize("block", [1, 3, 16, 1 << 16])
def test_the_backward_scan_of_active_finds_the_last_line_across_blocks(
    tmp_path, monkeypatch, block
):
    # Lines of up to 30 bytes, for the forward read and the backward scan alike.
    monkeypatch.setattr("relaystore.actors.journal.lines._READ_LIMIT", 31)
    monkeypatch.setattr("relaystore.actors.journal.ranges._SCAN_LINE_LIMIT", 30)
    monkeypatch.setattr("relaystore.actors.journal.ranges._SCAN_BLOCK", block)
    body = (
        b'\n  \n{"ordinal":3' + b" " * 20 + b"}\n"  # 35 bytes: over the limit
        b'{"ordinal":4' + b" " * 17 + b"}\n"  # 30 bytes: exactly the limit
        b'{"ordinal":5}\n{"ordinal":6' + b" " * 18 + b"}\n"  # 31 bytes: over
        b'{"ordinal":"7"}\n\t\n' + b'{"ordinal":8}'  # a wrong shape, a blank, a torn tail
    )
    journal = tmp_path / "relay-journal"
    write(journal / "active.jsonl", body)

    (active,) = resolve_source(journal).files

    assert (active.first, active.last) == (4, 5)


def test_a_read_error_after_the_first_record_keeps_active_in_the_plan(tmp_path, monkeypatch):
    def failing_read(*args: object, **kwargs: object) -> None:
        raise OSError("input/output error")

    monkeypatch.setattr("relaystore.actors.journal.ranges._last_ordinal", failing_read)
    events = make_events(5)
    journal = tmp_path / "relay-journal"
    write(journal / "active.jsonl", b"\n" + lines(events))

    (active,) = resolve_source(journal).files

    assert (active.first, active.last) == (1, 1)
    assert [ordinal for ordinal, _, _ in read_all(journal)] == [1, 2, 3, 4, 5]


def test_temporaries_and_stale_active_files_are_never_read(tmp_path):
    root, events = worker_root(tmp_path)
    journal = root / "relay-journal"
    (journal / "segment-00000000000000000021-00000000000000000040.jsonl.gz.new").write_bytes(
        b"\x1f\x8b partial"
    )
    (journal / "active.jsonl.new").write_text("garbage\n")
    (journal / f"stale-active-{21:020}-{25:020}.jsonl").write_text("{not json\n")

    source = resolve_source(root)
    reader = JournalReader(source, mode=ReadMode.VERIFY, check_chain=True)

    assert [event for event, _ in reader] == events
    assert reader.problems == []
    assert sorted(path.name for path in source.ignored) == [
        "active.jsonl.new",
        "segment-00000000000000000021-00000000000000000040.jsonl.gz.new",
        "stale-active-00000000000000000021-00000000000000000025.jsonl",
    ]


def test_an_overlapping_copy_with_another_digest_is_a_fork_at_its_line(tmp_path):
    events = make_events(15)
    other = RelayEvent.create(ordinal=10, recorded_at_ms=1, observation=chunk("other"))
    journal = tmp_path / "relay-journal"
    segment(journal, events[0:10])
    active = write(journal / "active.jsonl", lines([other, *events[10:]]))

    with pytest.raises(RelayChainError) as caught:
        read_all(journal)

    assert caught.value.fault is ChainFault.FORK
    assert (caught.value.path, caught.value.line, caught.value.ordinal) == (str(active), 1, 10)


def test_a_hole_between_segments_is_a_gap_at_the_first_event_after_it(tmp_path):
    events = make_events(30)
    journal = tmp_path / "relay-journal"
    segment(journal, events[0:10])
    later = segment(journal, events[15:30])

    reader = read_journal(journal, mode=ReadMode.VERIFY, check_chain=True)
    ordinals = [event.ordinal for event, _ in reader]

    assert ordinals == [*range(1, 11), *range(16, 31)]
    assert [(p.kind, p.path, p.line, p.ordinal) for p in reader.problems] == [
        (ProblemKind.GAP, later, 1, 16)
    ]


def test_after_cursor_skips_what_was_applied_and_checks_its_digest(tmp_path):
    root, events = worker_root(tmp_path)

    resumed = read_all(root, after=events[14].cursor, check_chain=True)
    assert [ordinal for ordinal, _, _ in resumed] == list(range(16, 26))

    forked = msgspec.structs.replace(events[14].cursor, digest="f" * 64)
    with pytest.raises(RelayChainError) as caught:
        read_all(root, after=forked)
    assert caught.value.fault is ChainFault.FORK
    assert caught.value.line == 5


# -- torn tails, empty and bad lines --------------------------------------------------


def test_a_torn_final_line_is_reported_and_never_yielded(tmp_path):
    events = make_events(6)
    torn = encode_relay_event(events[5])[:40]
    path = write(tmp_path / "s.jsonl", lines(events[:5]) + torn)
    seen: list[TornTail] = []

    reader = JournalReader(resolve_source(path), check_chain=True, on_torn_tail=seen.append)
    read = [event for event, _ in reader]

    assert read == events[:5]
    assert reader.torn_tails == seen == [TornTail(path=path, line=6, byte_count=40)]
    assert "s.jsonl:6" in str(seen[0])
    assert reader.cursor == events[4].cursor


def test_a_torn_tail_in_a_gzip_file_is_reported_too(tmp_path):
    events = make_events(4)
    path = write(tmp_path / "s.jsonl.gz", lines(events[:3]) + encode_relay_event(events[3]))

    reader = read_journal(path, check_chain=True)

    assert [event for event, _ in reader] == events[:3]
    assert reader.torn_tails == [TornTail(path=path, line=4, byte_count=len(lines(events[3:])) - 1)]


def test_empty_lines_are_skipped_and_line_numbers_still_count_them(tmp_path):
    events = make_events(3)
    body = b"\n" + lines(events[:1]) + b"\n  \n" + lines(events[1:])
    path = write(tmp_path / "s.jsonl", body)

    assert read_all(path, check_chain=True) == [
        (1, "s.jsonl", 2),
        (2, "s.jsonl", 5),
        (3, "s.jsonl", 6),
    ]


def test_a_line_that_is_not_json_raises_invalid_input_naming_file_and_line(tmp_path):
    events = make_events(4)
    path = write(tmp_path / "s.jsonl", lines(events[:2]) + b"{oops\n" + lines(events[2:]))

    with pytest.raises(InvalidInput, match="not valid JSON") as caught:
        read_all(path)

    assert (caught.value.path, caught.value.line) == (str(path), 3)
    assert f"{path}:3" in str(caught.value)


def test_a_line_with_a_wrong_shape_names_the_field_file_and_line(tmp_path):
    path = write(tmp_path / "s.jsonl.gz", b'{"ordinal":"one","digest":"x"}\n')

    with pytest.raises(InvalidInput, match=r"\$\.ordinal") as caught:
        read_all(path)

    assert f"{path}:1" in str(caught.value)


def test_a_line_over_2_mib_is_invalid_input_and_verify_reads_on(tmp_path):
    events = make_events(3)
    huge = RelayEvent.create(
        ordinal=2, recorded_at_ms=1, observation=chunk("x" * (MAX_RELAY_LINE_BYTES + 10))
    )
    path = write(tmp_path / "s.jsonl", lines([events[0], huge, events[2]]))

    with pytest.raises(InvalidInput, match="over the 2097152-byte limit") as caught:
        read_all(path)
    assert (caught.value.path, caught.value.line) == (str(path), 2)

    reader = read_journal(path, mode=ReadMode.VERIFY, check_chain=True)
    assert [event.ordinal for event, _ in reader] == [1, 3]
    assert [(p.kind, p.line) for p in reader.problems] == [
        (ProblemKind.BAD_LINE, 2),
        (ProblemKind.GAP, 3),
    ]


def test_a_line_of_exactly_2_mib_is_read(tmp_path):
    base = RelayEvent.create(ordinal=1, recorded_at_ms=1, observation=chunk(""))
    pad = MAX_RELAY_LINE_BYTES - len(encode_relay_event(base))
    event = RelayEvent.create(ordinal=1, recorded_at_ms=1, observation=chunk("y" * pad))
    assert len(encode_relay_event(event)) == MAX_RELAY_LINE_BYTES
    path = write(tmp_path / "s.jsonl", lines([event]))

    assert read_all(path, check_chain=True) == [(1, "s.jsonl", 1)]


def test_a_truncated_gzip_segment_is_unreadable_at_its_path(tmp_path):
    events = make_events(200)
    journal = tmp_path / "relay-journal"
    broken = segment(journal, events[:200])
    broken.write_bytes(broken.read_bytes()[:-30])

    with pytest.raises(InvalidInput, match="truncated or corrupt") as caught:
        read_all(journal)
    assert caught.value.path == str(broken)

    report = verify_sources([journal])
    assert [p.kind for p in report.problems] == [ProblemKind.UNREADABLE]
    assert report.problems[0].path == broken


# -- verify ---------------------------------------------------------------------------


def test_every_chain_fault_has_the_problem_kind_of_its_value():
    assert {fault.value for fault in ChainFault} <= {kind.value for kind in ProblemKind}


def test_verify_collects_every_problem_with_file_line_and_ordinal(tmp_path):
    events = make_events(8, v1_through=8)
    tampered = msgspec.structs.replace(events[2], recorded_at_ms=5)  # digest no longer matches
    stranger = RelayEvent.create(
        format=1, ordinal=6, previous_digest="a" * 64, recorded_at_ms=1, observation=chunk("x")
    )
    body = lines([events[0], events[1], tampered, events[3]]) + b"not json\n"
    body += lines([stranger, events[7]])
    path = write(tmp_path / "s.jsonl", body)

    report = verify_sources([path])

    assert report.records == 6
    assert report.valid_digests == 5
    found = [(p.kind, p.line, p.ordinal) for p in report.problems]
    assert found == [
        (ProblemKind.BAD_DIGEST, 3, 3),
        (ProblemKind.BAD_LINE, 5, None),
        (ProblemKind.GAP, 6, 6),
        (ProblemKind.GAP, 7, 8),
    ]
    assert not report.ok
    assert all(str(path) in str(problem) for problem in report.problems)


def test_verify_reports_a_format_1_link_to_another_digest_as_a_fork(tmp_path):
    events = make_events(4, v1_through=4)
    relinked = RelayEvent.create(
        format=1, ordinal=3, previous_digest="b" * 64, recorded_at_ms=3, observation=chunk("z")
    )
    path = write(tmp_path / "s.jsonl", lines([events[0], events[1], relinked]))

    report = verify_sources([path])

    assert [(p.kind, p.line) for p in report.problems] == [(ProblemKind.FORK, 3)]


def test_verify_accepts_format_1_history_followed_by_format_2(tmp_path):
    root, _ = worker_root(tmp_path)

    report = verify_sources([root])

    assert report.ok
    assert (report.records, report.valid_digests) == (25, 25)


def test_verify_continues_one_chain_across_sources_of_a_session(tmp_path):
    events = make_events(30)
    first = write(tmp_path / "a.jsonl", lines(events[:10]))
    missing_middle = write(tmp_path / "c.jsonl", lines(events[20:]))
    second = write(tmp_path / "b.jsonl", lines(events[10:20]))

    whole = verify_sources([first, second, missing_middle], session_id="s")
    assert whole.ok
    assert whole.records == 30
    assert whole.frontiers == {"s": events[-1].cursor}

    holed = verify_sources([first, missing_middle], session_id="s")
    assert [(p.kind, p.path, p.line) for p in holed.problems] == [
        (ProblemKind.GAP, missing_middle, 1)
    ]


def test_verify_of_the_real_kimi_excerpt_finds_only_its_gap_after_3344():
    # The excerpt starts at 3328: as replay does, verify needs --from-first to start there.
    report = verify_sources([FIXTURE], from_first=True)

    assert report.records == report.valid_digests == 18
    assert len(report.problems) == 1
    problem = report.problems[0]
    assert (problem.kind, problem.line, problem.ordinal) == (ProblemKind.GAP, 18, 3347)
    assert "expected ordinal 3345" in problem.message
    # The valid prefix ends before the gap: the frontier is never past a problem.
    assert report.frontiers["real-kimi-v2-excerpt"].ordinal == 3344
    assert report.starts["real-kimi-v2-excerpt"].after.ordinal == 3327


def test_without_from_first_verify_refuses_the_excerpt_where_replay_does():
    report = verify_sources([FIXTURE])
    first = report.problems[0]
    assert (first.kind, first.line, first.ordinal) == (ProblemKind.GAP, 1, 3328)
    assert "--from-first" in first.message


def test_the_first_17_real_lines_are_valid_and_contiguous(tmp_path):
    head = b"".join(FIXTURE.read_bytes().splitlines(keepends=True)[:17])
    path = write(tmp_path / "kimi.jsonl", head)

    report = verify_sources([path], from_first=True)
    read = read_all(path, check_chain=True)

    assert report.ok
    assert report.torn_tails == []
    assert report.records == report.valid_digests == 17
    assert [ordinal for ordinal, _, _ in read] == list(range(3328, 3345))


def test_strict_reading_of_the_real_excerpt_stops_at_its_gap():
    with pytest.raises(RelayChainError, match="expected ordinal 3345, found 3347") as caught:
        read_all(FIXTURE, check_chain=True)

    assert caught.value.fault is ChainFault.GAP
    assert (caught.value.path, caught.value.line) == (str(FIXTURE), 18)


def test_without_chain_checks_the_reader_still_refuses_the_gap_but_hashes_no_digest(tmp_path):
    with pytest.raises(RelayChainError) as caught:
        read_all(FIXTURE)
    assert caught.value.fault is ChainFault.GAP
    assert (caught.value.path, caught.value.line) == (str(FIXTURE), 18)

    events = make_events(3)
    forged = msgspec.structs.replace(events[2], digest="0123abcd" * 8)
    path = write(tmp_path / "s.jsonl", lines([*events[:2], forged]))
    reader = read_journal(path)  # the projector hashes what it applies
    assert [event for event, _ in reader] == [*events[:2], forged]
    assert reader.valid_digests == 0


# -- streaming ------------------------------------------------------------------------


def test_a_100k_line_journal_streams_in_bounded_memory(tmp_path):
    started = CommandStarted.of(command_id="prompt-1", started_at_ms=5)
    journal = tmp_path / "relay-journal"
    journal.mkdir()
    sealed = journal / f"segment-{1:020}-{50_000:020}.jsonl.gz"
    with (
        gzip.open(sealed, "wb", compresslevel=1) as packed,
        (journal / "active.jsonl").open("wb") as active,
    ):
        for ordinal in range(1, 100_001):
            observation = chunk(f"streamed text {ordinal} " * 6) if ordinal % 7 else started
            event = RelayEvent.create(
                ordinal=ordinal, recorded_at_ms=ordinal, observation=observation
            )
            (packed if ordinal <= 50_000 else active).write(encode_relay_event(event) + b"\n")
    half = (journal / "active.jsonl").stat().st_size  # the other half is the gzip segment

    tracemalloc.start()
    try:
        reader = read_journal(tmp_path, check_chain=True)
        count = sum(1 for _ in reader)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert count == reader.valid_digests == 100_000
    assert reader.problems == []
    assert peak < half // 50, f"peak {peak} bytes while streaming {2 * half} bytes of journal"


def test_a_huge_line_is_drained_without_holding_it(tmp_path):
    events = make_events(2)
    huge = b"[" + b"1," * (6 * 1024 * 1024) + b"1]"
    path = write(tmp_path / "s.jsonl", huge + b"\n" + lines(events))

    tracemalloc.start()
    try:
        reader = read_journal(path, mode=ReadMode.VERIFY, check_chain=True)
        read = [event for event, _ in reader]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert read == events
    assert [(p.kind, p.line) for p in reader.problems] == [(ProblemKind.BAD_LINE, 1)]
    assert f"{len(huge)} bytes" in reader.problems[0].message
    assert peak < 3 * MAX_RELAY_LINE_BYTES
