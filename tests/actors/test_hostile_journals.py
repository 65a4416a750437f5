"""Hostile journals through both ``relaystore verify`` and ``relaystore replay``.

Both commands judge every event by the one chain rule (``domain.chain.advance``), so on
every input they agree: verify reports a problem exactly when replay refuses, and the
first problem verify prints is, word for word, the one line replay refuses with (file,
line, session, ordinal and fault). A refused replay keeps the complete pages before the
bad line and nothing after; a replay refused before anything applied leaves no session.
Journals that would cost minutes (megabytes of blank lines in a small gzip segment) are
refused at once, and unreadable sources with one line, never a traceback.
"""

from __future__ import annotations

import gzip
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from relaystore.actors import cli
from relaystore.actors.journal import (
    MAX_BLANK_LINES,
    ProblemKind,
    ReadMode,
    read_journal,
    reader as reader_module,
    resolve_source,
    verify_sources,
)
from relaystore.actors.projector import PAGE_SIZE
from relaystore.actors.store import EventStore
from relaystore.domain.chain import MAX_ORDINAL
from relaystore.domain.digests import relay_event_digest
from relaystore.domain.errors import InvalidInput
from relaystore.domain.messages import LoadMaterializedSession
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RelayEvent,
    RelayLine,
    decode_relay_event,
    encode_relay_event,
)
from tests.actors.cli_support import ENV, TIMEOUT, command, failure
from tests.actors.journal_factory import conversation, write_journal

SESSION = "hostile"
TOTAL = 200
BAD = 150
"""The hostile line: in the second page, so the first (complete, good) page is kept."""
assert PAGE_SIZE < BAD <= 2 * PAGE_SIZE
KEPT = PAGE_SIZE


def _line(event: RelayEvent) -> bytes:
    return encode_relay_event(event)


def _recreated(event: RelayEvent, **changes: object) -> RelayEvent:
    """``event`` with ``changes`` and a digest computed for them (a valid event)."""
    fields = {
        "format": event.format,
        "ordinal": event.ordinal,
        "previous_digest": event.previous_digest,
        "recorded_at_ms": event.recorded_at_ms,
        "command_id": event.command_id,
        "observation": event.observation,
    }
    fields.update(changes)
    return RelayEvent.create(**fields)  # type: ignore[arg-type]


def _nested(depth: int) -> bytes:
    update = b'{"sessionUpdate":"x","v":' + b"[" * depth + b"]" * depth + b"}"
    return b'{"type":"session_update","data":{"update":' + update + b"}}"


@dataclass(frozen=True)
class Hostile:
    """A journal of ``TOTAL`` good events with line ``BAD`` (1-based) made hostile."""

    name: str
    mutate: Callable[[list[RelayEvent], list[bytes]], None]
    kind: ProblemKind | None
    """The problem verify finds (and replay refuses with); None: both accept it."""
    ordinal: int | None = None
    text: str = ""
    fmt: int = 2


def _duplicate(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines.insert(BAD - 1, lines[BAD - 2])  # line BAD repeats line BAD - 1 exactly


def _ordinal_zero(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = _line(_recreated(events[BAD - 1], ordinal=0))


def _gap(events: list[RelayEvent], lines: list[bytes]) -> None:
    del lines[BAD - 1]


def _fork(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = _line(_recreated(events[BAD - 1], previous_digest="ab" * 32))


def _bad_digest(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = lines[BAD - 1].replace(events[BAD - 1].digest.encode(), b"0123abcd" * 8)


def _unknown_format(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = lines[BAD - 1].replace(b'{"format":2,', b'{"format":3,', 1)


def _garbage(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = b"\x00\xff{]] not a relay event"


def _huge_ordinal(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = _line(_recreated(events[BAD - 1], ordinal=MAX_ORDINAL + 1))


def _recorded_at_past_sqlite(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = _line(_recreated(events[BAD - 1], recorded_at_ms=2**63))


def _newer_line(event: RelayEvent, observation: bytes) -> bytes:
    """``event``'s envelope around ``observation`` (a kind no build knows yet), with the
    digest a worker would write for it."""
    line = RelayLine(
        format=event.format,
        ordinal=event.ordinal,
        previous_digest=event.previous_digest,
        digest="",
        recorded_at_ms=event.recorded_at_ms,
        command_id=event.command_id,
        observation_json=observation,
    )
    return encode_relay_event(msgspec.structs.replace(line, digest=relay_event_digest(line)))


_FUTURE = b'{"type":"future_observation","data":{"n":1}}'


def _newer_kind(events: list[RelayEvent], lines: list[bytes]) -> None:
    lines[BAD - 1] = _newer_line(events[BAD - 1], _FUTURE)


def _newer_command(events: list[RelayEvent], lines: list[bytes]) -> None:
    observation = (
        b'{"type":"command_queued","data":{"command_id":"c9","command":'
        b'{"type":"future_command","data":{}},"created_at_ms":5}}'
    )
    lines[BAD - 1] = _newer_line(events[BAD - 1], observation)


def _damaged_kind(events: list[RelayEvent], lines: list[bytes]) -> None:
    # A kind tag damaged on disk: the digest no longer covers the bytes.
    good = _newer_line(events[BAD - 1], _FUTURE)
    lines[BAD - 1] = good.replace(b"future_observation", b"future_observatiom")


def _deeply_nested(events: list[RelayEvent], lines: list[bytes]) -> None:
    event = events[BAD - 1]
    head = f'{{"format":2,"ordinal":{event.ordinal},"digest":"{"a" * 64}",'
    head += f'"recorded_at_ms":{event.recorded_at_ms},"observation":'
    lines[BAD - 1] = head.encode() + _nested(1_000) + b"}"


CASES = [
    Hostile("duplicate line", _duplicate, None),
    Hostile(
        "ordinal 0",
        _ordinal_zero,
        ProblemKind.ORDINAL_OUT_OF_RANGE,
        0,
        "outside 1..9223372036854775807",
    ),
    Hostile("gap", _gap, ProblemKind.GAP, BAD + 1, "expected ordinal 150, found 151"),
    Hostile("fork", _fork, ProblemKind.FORK, BAD, "fork", fmt=RELAY_EVENT_FORMAT_V1),
    Hostile("bad digest", _bad_digest, ProblemKind.BAD_DIGEST, BAD, "does not match"),
    Hostile("unknown format", _unknown_format, ProblemKind.UNKNOWN_FORMAT, BAD, "format 3"),
    Hostile("garbage line", _garbage, ProblemKind.BAD_LINE, None, "not valid JSON"),
    Hostile(
        "huge ordinal", _huge_ordinal, ProblemKind.ORDINAL_OUT_OF_RANGE, MAX_ORDINAL + 1, "outside"
    ),
    Hostile(
        "recorded_at_ms 2**63",
        _recorded_at_past_sqlite,
        ProblemKind.BAD_LINE,
        None,
        "$.recorded_at_ms",
    ),
    Hostile("nested 1000 deep", _deeply_nested, ProblemKind.BAD_LINE, BAD, "nested too deeply"),
    Hostile(
        "observation of a newer worker",
        _newer_kind,
        ProblemKind.UNKNOWN_KIND,
        BAD,
        "unknown relay observation 'future_observation' at `$.observation.type`: this journal was written by a newer worker",
    ),
    Hostile(
        "command of a newer worker",
        _newer_command,
        ProblemKind.UNKNOWN_KIND,
        BAD,
        "unknown relay command 'future_command'",
    ),
    Hostile("unknown kind, damaged", _damaged_kind, ProblemKind.BAD_DIGEST, BAD, "does not match"),
]


def _run_both(
    db: Path, journal: Path, projection: str = "process"
) -> tuple[subprocess.CompletedProcess[str], ...]:
    """Run ``verify`` and ``replay`` of ``journal`` side by side (replay projecting in
    ``projection`` mode); return both results."""
    modes = {"verify": (), "replay": ("--projection", projection)}
    runs = [
        subprocess.Popen(
            command(db, name, str(journal), "--session", SESSION, *modes[name]),
            cwd=db.parent,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        for name in ("verify", "replay")
    ]
    results = []
    for run in runs:
        out, err = run.communicate(timeout=TIMEOUT)
        results.append(subprocess.CompletedProcess(run.args, run.returncode, out, err))
    return tuple(results)


def _frontier(db: Path) -> int | None:
    """The session's applied ordinal, or None when the store has no such session."""
    with EventStore.open(db, read_only=True, readers=1) as store:
        session = store.ask(LoadMaterializedSession(session_id=SESSION))
    return None if session is None else session.applied_event_ordinal


@pytest.mark.parametrize("projection", ["thread", "process"])
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
@pytest.mark.integration
def test_verify_and_replay_agree_and_replay_keeps_the_good_pages(
    case: Hostile, projection: str, tmp_path: Path
) -> None:
    events = conversation(TOTAL, fmt=case.fmt)
    lines = [_line(event) for event in events]
    case.mutate(events, lines)
    journal = write_journal(tmp_path / "journal.jsonl", b"\n".join(lines) + b"\n")
    db = tmp_path / "store.sqlite3"

    verified, replayed = _run_both(db, journal, projection)

    assert "Traceback" not in verified.stderr + replayed.stderr
    report = verify_sources([journal], session_id=SESSION)
    if case.kind is None:
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert replayed.returncode == 0, replayed.stderr
        assert report.ok
        assert report.already_applied == 1
        assert "1 already applied" in verified.stdout
        assert "1 already applied" in replayed.stderr
        assert _frontier(db) == TOTAL
        return
    if case.kind is ProblemKind.UNKNOWN_KIND:
        # A newer worker's line is not damage: both accept the journal. Verify notes the
        # line; replay keeps it and every line after it in the relay log, and the session's
        # projection waits before it for a build that knows the kind.
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert replayed.returncode == 0, replayed.stderr
        assert report.ok
        (newer,) = report.newer_kinds
        assert (newer.path, newer.line, newer.ordinal) == (journal, BAD, case.ordinal)
        assert f"note: {journal}:{BAD}: session {SESSION}: unknown relay" in verified.stdout
        assert f"projection behind at ordinal {BAD}" in replayed.stderr
        with EventStore.open(db, read_only=True, readers=1) as store:
            session = store.ask(LoadMaterializedSession(session_id=SESSION))
        assert session is not None
        assert session.applied_event_ordinal == BAD - 1
        assert session.kept_frontier.ordinal == TOTAL
        assert session.projection_behind is not None
        assert session.projection_behind.ordinal == BAD
        assert session.projection_behind.kind in case.text
        return

    assert verified.returncode == 1, verified.stdout + verified.stderr
    refusal = failure(replayed)
    problems = [line for line in verified.stdout.splitlines() if line.startswith(str(journal))]
    assert problems, verified.stdout
    # Word for word the same: file, line, session, ordinal and the fault's wording.
    assert refusal == f"relaystore: {problems[0]}"
    assert f"{journal}:{BAD}" in refusal
    assert case.text in refusal
    first = report.problems[0]
    assert (first.kind, first.line, first.ordinal) == (case.kind, BAD, case.ordinal)
    if case.ordinal is not None:
        assert f"ordinal {case.ordinal}" in refusal
    if case.kind is ProblemKind.GAP:
        # A gap is missing history, not damage: every event before it is kept.
        assert _frontier(db) == BAD - 1
    else:
        # The complete page before the bad line is committed, nothing of the page holding it.
        assert _frontier(db) == KEPT


def test_the_decoder_refuses_recorded_at_outside_sqlite_integer_naming_the_field() -> None:
    event = conversation(1)[0]
    for value in (2**63, -(2**63) - 1):
        line = _line(event).replace(
            b'"recorded_at_ms":%d' % event.recorded_at_ms, b'"recorded_at_ms":%d' % value
        )
        with pytest.raises(InvalidInput, match=r"\$\.recorded_at_ms"):
            decode_relay_event(line)
    edge = _line(event).replace(
        b'"recorded_at_ms":%d' % event.recorded_at_ms, b'"recorded_at_ms":%d' % (2**63 - 1)
    )
    assert decode_relay_event(edge).recorded_at_ms == 2**63 - 1
    # No worker's clock reads before 1970: a negative time is refused where it is read.
    early = _line(_recreated(event, recorded_at_ms=-1))
    with pytest.raises(InvalidInput, match=r"\$\.recorded_at_ms"):
        decode_relay_event(early)


def test_deep_nesting_is_invalid_input_with_its_ordinal_never_a_recursion_error() -> None:
    for depth in (1_000, 5_000, 200_000):
        line = b'{"format":2,"ordinal":7,"digest":"' + b"a" * 64 + b'","recorded_at_ms":1,'
        line += b'"observation":' + _nested(depth) + b"}"
        with pytest.raises(InvalidInput, match="nested too deeply") as caught:
            decode_relay_event(line)
        assert caught.value.ordinal == 7
    outer = b'{"ordinal":3,"x":' + b"[" * 5_000 + b"]" * 5_000 + b"}"
    with pytest.raises(InvalidInput, match="nested too deeply") as caught:
        decode_relay_event(outer)
    assert caught.value.ordinal == 3


# -- a refused replay leaves the store as it was ---------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("content", [b"not a relay journal\n", b"\x1f\x8b\x08 binary junk\n"])
def test_a_replay_of_something_that_is_no_journal_creates_no_session(
    content: bytes, tmp_path: Path
) -> None:
    journal = write_journal(tmp_path / "notes.jsonl", content)
    db = tmp_path / "store.sqlite3"
    result = subprocess.run(
        command(db, "replay", str(journal), "--session", SESSION),
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert f"{journal}:1" in failure(result)
    assert _frontier(db) is None


def test_a_replay_refused_in_its_first_page_creates_no_session(tmp_path: Path) -> None:
    events = conversation(20)
    lines = [_line(event) for event in events]
    lines[4] = lines[4].replace(events[4].digest.encode(), b"0123abcd" * 8)
    journal = write_journal(tmp_path / "j.jsonl", b"\n".join(lines) + b"\n")
    db = tmp_path / "store.sqlite3"
    with EventStore.open(db) as store:
        from relaystore.actors.replay import replay_source

        with pytest.raises(Exception, match="does not match") as caught:
            replay_source(store, resolve_source(journal, session_id=SESSION))
        assert caught.value.line == 5  # type: ignore[attr-defined]
        assert store.ask(LoadMaterializedSession(session_id=SESSION)) is None


# -- work bounded by what a journal can hold --------------------------------------------


def _blank_bomb(path: Path, megabytes: int) -> Path:
    good = b"".join(_line(event) + b"\n" for event in conversation(10))
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(good)
        newlines = b"\n" * (1 << 20)
        for _ in range(megabytes):
            out.write(newlines)
        out.write(b"".join(_line(event) + b"\n" for event in conversation(20, first=11)))
    return path


def test_a_gzip_segment_of_megabytes_of_blank_lines_is_refused_at_once(tmp_path: Path) -> None:
    journal = tmp_path / "relay-journal"
    journal.mkdir()
    segment = _blank_bomb(journal / f"segment-{1:020}-{20:020}.jsonl.gz", 64)
    assert segment.stat().st_size < 256 * 1024
    line = 10 + MAX_BLANK_LINES + 1

    started = time.monotonic()
    with pytest.raises(InvalidInput, match="blank lines") as caught:
        list(read_journal(journal, session_id=SESSION))
    report = verify_sources([journal], session_id=SESSION)
    elapsed = time.monotonic() - started

    assert (caught.value.path, caught.value.line) == (str(segment), line)
    assert [(p.kind, p.path, p.line) for p in report.problems] == [
        (ProblemKind.UNREADABLE, segment, line)
    ]
    assert report.records == 10
    assert elapsed < 5.0, f"took {elapsed:.1f}s"


@pytest.mark.integration
def test_replay_of_a_blank_line_bomb_keeps_nothing_past_it_and_says_where(
    tmp_path: Path,
) -> None:
    bomb = _blank_bomb(tmp_path / "bomb.jsonl.gz", 16)
    db = tmp_path / "store.sqlite3"
    started = time.monotonic()
    result = subprocess.run(
        command(db, "replay", str(bomb), "--session", SESSION),
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert time.monotonic() - started < 20.0
    message = failure(result)
    assert f"{bomb}:{10 + MAX_BLANK_LINES + 1}" in message
    assert "blank lines" in message
    assert _frontier(db) is None  # fewer than a page before it: nothing applied


def test_a_few_blank_lines_are_still_skipped(tmp_path: Path) -> None:
    events = conversation(5)
    body = b"\n  \n" + b"".join(_line(event) + b"\n\n" for event in events)
    path = write_journal(tmp_path / "s.jsonl.gz", body)
    reader = read_journal(path, check_chain=True)
    assert [event.ordinal for event, _ in reader] == [1, 2, 3, 4, 5]


def test_the_range_scan_of_active_steps_over_a_run_of_blank_lines_at_once(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "relay-journal"
    journal.mkdir()
    events = conversation(30)
    active = journal / "active.jsonl"
    with active.open("wb") as out:
        out.write(b"".join(_line(event) + b"\n" for event in events[:10]))
        out.write(b"\n \t\r\n" * (4 << 20))  # 20 MiB of blank lines at its end
    started = time.monotonic()
    (file,) = resolve_source(journal).files
    assert time.monotonic() - started < 2.0
    assert (file.first, file.last) == (1, 10)


def test_blank_lines_before_the_first_record_of_active_are_refused_when_resolving(
    tmp_path: Path,
) -> None:
    journal = tmp_path / "relay-journal"
    journal.mkdir()
    active = journal / "active.jsonl"
    active.write_bytes(b"\n" * (8 << 20) + _line(conversation(1)[0]) + b"\n")
    with pytest.raises(InvalidInput, match="blank lines") as caught:
        resolve_source(journal)
    assert (caught.value.path, caught.value.line) == (str(active), MAX_BLANK_LINES + 1)


def test_a_line_without_end_is_not_drained_for_ever(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(_line(conversation(1)[0]) + b"\n")
        block = b"x" * (1 << 20)
        for _ in range(64):
            out.write(block)
        out.write(b"\n")
    reader = read_journal(path, mode=ReadMode.VERIFY, check_chain=True)
    assert [event.ordinal for event, _ in reader] == [1]
    assert [(p.kind, p.line) for p in reader.problems] == [(ProblemKind.UNREADABLE, 2)]
    assert "not a journal a worker wrote" in reader.problems[0].message


# -- unreadable sources: one line, exit 1 -----------------------------------------------


def _verify_in_process(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    status = cli.main(["verify", str(path)])
    err = capsys.readouterr().err
    assert status == 1
    assert "Traceback" not in err
    (line,) = err.splitlines()
    return line


def test_a_broken_link_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "worker"
    link.symlink_to(tmp_path / "gone")
    line = _verify_in_process(link, capsys)
    assert str(link) in line
    assert "broken link" in line


def test_a_file_where_the_journal_folder_belongs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "worker"
    root.mkdir()
    (root / "relay-journal").write_text("not a folder\n")
    line = _verify_in_process(root, capsys)
    assert str(root) in line
    with pytest.raises(InvalidInput):
        resolve_source(root / "relay-journal" / "active.jsonl")


@pytest.mark.parametrize("where", ["iterdir", "scandir", "open"])
def test_permission_denied_while_resolving_is_one_line_naming_the_path(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "worker"
    journal = root / "relay-journal"
    write_journal(journal / "active.jsonl", conversation(3))
    denied = journal if where != "open" else journal / "active.jsonl"

    def refuse(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied", str(denied))

    if where == "iterdir":
        monkeypatch.setattr(Path, "iterdir", refuse)
    elif where == "scandir":
        monkeypatch.setattr("os.scandir", refuse)
        monkeypatch.setattr(Path, "iterdir", lambda self: iter(list(refuse(self))))  # type: ignore[call-overload]
    else:
        monkeypatch.setattr(Path, "open", refuse)

    with pytest.raises(InvalidInput, match="Permission denied") as caught:
        resolve_source(root)
    assert caught.value.path == str(denied)
    line = _verify_in_process(root, capsys)
    assert str(denied) in line
    assert "Permission denied" in line


def test_every_chain_fault_is_a_problem_kind_of_the_same_name() -> None:
    from relaystore.domain.errors import ChainFault

    for fault in ChainFault:
        assert ProblemKind[fault.name].value == fault.value


def test_verify_counts_a_duplicate_as_already_applied_not_as_a_problem(tmp_path: Path) -> None:
    events = conversation(5)
    lines = [_line(event) for event in events]
    lines.insert(3, lines[2])
    path = write_journal(tmp_path / "d.jsonl", b"\n".join(lines) + b"\n")
    report = verify_sources([path])
    assert report.ok
    assert (report.records, report.valid_digests, report.already_applied) == (6, 5, 1)
    replaced = msgspec.structs.replace(events[2], digest="f" * 64)
    lines[3] = _line(replaced)
    path = write_journal(tmp_path / "f.jsonl", b"\n".join(lines) + b"\n")
    report = verify_sources([path])
    assert [(p.kind, p.line, p.ordinal) for p in report.problems] == [(ProblemKind.FORK, 4, 3)]
    assert re.search("fork at ordinal 3", report.problems[0].message)


def test_a_segment_that_cannot_be_opened_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = tmp_path / "relay-journal"
    events = conversation(20)
    write_journal(journal / f"segment-{1:020}-{10:020}.jsonl.gz", events[:10])
    denied = write_journal(journal / f"segment-{11:020}-{20:020}.jsonl.gz", events[10:])
    real_open = reader_module.open_journal_file

    def refuse(path: Path) -> object:
        if path == denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path)

    monkeypatch.setattr(reader_module, "open_journal_file", refuse)

    with pytest.raises(InvalidInput, match="Permission denied") as caught:
        list(read_journal(journal, session_id=SESSION))
    assert (caught.value.path, caught.value.line) == (str(denied), 1)
    report = verify_sources([journal], session_id=SESSION)
    assert [(p.kind, p.path) for p in report.problems] == [(ProblemKind.UNREADABLE, denied)]
    status = cli.main(["verify", str(journal)])
    out = capsys.readouterr().out
    assert status == 1
    assert f"{denied}:1" in out


@pytest.mark.integration
def test_with_two_faults_replay_refuses_with_the_first_as_verify_reports_it(
    tmp_path: Path,
) -> None:
    from relaystore.actors.replay import replay_source
    from relaystore.domain.errors import RelayChainError

    events = conversation(TOTAL)
    lines = [_line(event) for event in events]
    _bad_digest(events, lines)  # line BAD: read, not hashed, by the reader
    del lines[BAD + 4]  # a gap the reader refuses a few lines later
    journal = write_journal(tmp_path / "two.jsonl", b"\n".join(lines) + b"\n")

    report = verify_sources([journal], session_id=SESSION)
    with EventStore.open(tmp_path / "store.sqlite3") as store:
        with pytest.raises(RelayChainError) as caught:
            replay_source(store, resolve_source(journal, session_id=SESSION))
        stored = store.ask(LoadMaterializedSession(session_id=SESSION))

    assert [(p.kind, p.line) for p in report.problems] == [
        (ProblemKind.BAD_DIGEST, BAD),
        (ProblemKind.GAP, BAD + 5),
    ]
    assert str(caught.value) == str(report.problems[0])
    assert stored is not None
    assert stored.applied_event_ordinal == KEPT
