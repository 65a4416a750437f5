"""Relay journals on disk: find them, stream their events, verify their chain.

A *source* is a worker root (``relay-journal/`` beside ``relay-state.json``), a
``relay-journal/`` folder (``active.jsonl`` plus sealed
``segment-{first:020}-{last:020}.jsonl.gz`` files), or one ``.jsonl`` / ``.jsonl.gz``
file. :func:`resolve_source` turns a path into a :class:`JournalSource`;
:class:`JournalReader` streams its events; :func:`verify_sources` checks digests and
continuity without a store.

Guarantees:

* Streaming: the reader holds at most one line (at most 2 MiB plus one byte) in memory,
  however long the journal; gzip segments are decompressed as they are read.
* Every yielded event comes with its file and 1-based line number (:class:`Location`).
* Files of a journal folder are read in the origin's order: from cursor ``c``, the file
  with ``first <= c + 1`` and ``last > c`` reaching furthest (a tie goes to
  ``active.jsonl``); within it, ordinals ``<= c`` are skipped (crash overlap), and the one
  at ``c`` must carry ``c``'s digest. ``*.new`` temporaries, ``stale-active-*`` leftovers
  and any other file are never read.
* A final line without its newline (a torn tail) is recorded as a :class:`TornTail` and
  never yielded; every complete line before it is. Empty lines are skipped.
* :attr:`ReadMode.STRICT` raises the first problem (``InvalidInput`` for a bad line,
  ``RelayChainError`` for a gap, fork or bad digest), located by file and line.
  :attr:`ReadMode.VERIFY` records every problem as a :class:`JournalProblem` and goes on.

This is the only file reading of relay journals; ``domain`` stays pure.
"""

from __future__ import annotations

import enum
import gzip
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from relaystore.domain.digests import validate_relay_event_self, validate_relay_link
from relaystore.domain.errors import ChainFault, InvalidInput, RelayChainError, StoreError
from relaystore.domain.relay import (
    MAX_RELAY_LINE_BYTES,
    RELAY_EVENT_GENESIS_DIGEST,
    RelayCursor,
    RelayEvent,
    decode_relay_event,
)
from relaystore.domain.wire import decode_json

__all__ = [
    "ACTIVE_JOURNAL_NAME",
    "JOURNAL_DIR_NAME",
    "RELAY_STATE_NAME",
    "JournalFile",
    "JournalProblem",
    "JournalReader",
    "JournalSource",
    "Location",
    "ProblemKind",
    "ReadMode",
    "TornTail",
    "VerifyReport",
    "read_journal",
    "resolve_source",
    "verify_sources",
]

JOURNAL_DIR_NAME = "relay-journal"
"""The journal folder inside a worker root."""
RELAY_STATE_NAME = "relay-state.json"
"""The worker's snapshot beside the journal folder; only its ``session_id`` is read."""
ACTIVE_JOURNAL_NAME = "active.jsonl"
"""The append-only journal file the worker writes to."""

_SEGMENT_NAME = re.compile(r"segment-(\d{20})-(\d{20})\.jsonl\.gz")
_READ_LIMIT = MAX_RELAY_LINE_BYTES + 1  # a line's bytes plus its newline
_DRAIN_CHUNK = 1 << 16
_SCAN_BLOCK = 1 << 16  # bytes read per step when scanning active.jsonl backward


class ReadMode(enum.Enum):
    """How a reader reacts to a problem."""

    STRICT = "strict"
    """Raise the first problem (for ``replay``)."""
    VERIFY = "verify"
    """Record every problem and keep going (for ``verify``)."""


class ProblemKind(enum.Enum):
    """What is wrong at one place of a journal.

    Every :class:`~domain.errors.ChainFault` has the kind of the same value.
    """

    GAP = "gap"
    FORK = "fork"
    BAD_DIGEST = "bad_digest"
    UNKNOWN_FORMAT = "unknown_format"
    BAD_LINE = "bad_line"
    """A line that is not a relay event: not JSON, a wrong shape, or over 2 MiB."""
    UNREADABLE = "unreadable"
    """A file that cannot be read on: a corrupt or truncated gzip stream, an I/O error."""


@dataclass(frozen=True, slots=True)
class Location:
    """Where a record was read: the file and its 1-based line number."""

    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class TornTail:
    """A final line without its newline: a write cut short. It is never applied."""

    path: Path
    line: int
    byte_count: int

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: torn final line of {self.byte_count} bytes "
            "(no trailing newline); it was not read"
        )


@dataclass(frozen=True, slots=True)
class JournalProblem:
    """One problem found while reading: where, which ordinal (when known), what kind.

    ``error`` is the located error strict mode would have raised.
    """

    path: Path
    line: int | None
    ordinal: int | None
    kind: ProblemKind
    message: str
    error: StoreError

    def __str__(self) -> str:
        return str(self.error)


@dataclass(frozen=True, slots=True)
class JournalFile:
    """One file of a source. ``first``/``last`` are its ordinal range when known.

    Sealed segments take the range from their name, ``active.jsonl`` from a scan; both
    are ``None`` for a file given on its own, or an active file with no record.
    """

    path: Path
    first: int | None = None
    last: int | None = None
    active: bool = False


@dataclass(frozen=True, slots=True)
class JournalSource:
    """A resolved source: its session id and the files to read.

    ``folder`` is true for a journal folder (files are chosen by range); otherwise the
    files are read in the order given. ``ignored`` lists files of the folder not read.
    """

    path: Path
    session_id: str
    files: tuple[JournalFile, ...]
    folder: bool
    ignored: tuple[Path, ...] = ()

    @property
    def size_bytes(self) -> int:
        """The files' size on disk (compressed for segments), for progress display."""
        return sum(_size(file.path) for file in self.files)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# -- resolving a source -----------------------------------------------------------------


class _RelayState(msgspec.Struct):
    session_id: str


_STATE_WHAT = f"{RELAY_STATE_NAME} (expected a JSON object with a string session_id)"


def _read_session_id(state_path: Path) -> str:
    try:
        data = state_path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {RELAY_STATE_NAME}: {exc}", path=str(state_path)) from exc
    try:
        state = decode_json(data, _RelayState, what=_STATE_WHAT)
    except InvalidInput as exc:
        raise InvalidInput(
            f"{exc.detail}; pass the session id explicitly to read the journal anyway",
            path=str(state_path),
        ) from exc.__cause__  # the decode error itself, as before
    if not state.session_id:
        raise InvalidInput(f"{RELAY_STATE_NAME} has an empty session_id", path=str(state_path))
    return state.session_id


def _file_stem(path: Path) -> str:
    name = path.name
    for suffix in (".jsonl.gz", ".jsonl", ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return path.stem or name


def _is_journal_folder(path: Path) -> bool:
    if path.name == JOURNAL_DIR_NAME:
        return True
    if (path / ACTIVE_JOURNAL_NAME).is_file():
        return True
    return any(_SEGMENT_NAME.fullmatch(entry.name) for entry in path.iterdir())


def resolve_source(path: str | os.PathLike[str], *, session_id: str | None = None) -> JournalSource:
    """Resolve ``path`` into the journal files to read and the session they belong to.

    The session id is ``session_id`` when given, else the ``session_id`` of the
    ``relay-state.json`` of the worker root, else the worker root's folder name (for a
    folder) or the file's stem (for a file). Raises :class:`InvalidInput` naming the path
    when it does not exist, holds no journal, or has a segment name with a reversed range.
    """
    source = Path(path)
    if source.is_dir():
        if (source / JOURNAL_DIR_NAME).is_dir():
            folder = source / JOURNAL_DIR_NAME
        elif _is_journal_folder(source):
            folder = source
        else:
            raise InvalidInput(
                f"not a relay journal: expected a worker root holding {JOURNAL_DIR_NAME}/, or a "
                f"folder holding {ACTIVE_JOURNAL_NAME} or segment-*.jsonl.gz",
                path=str(source),
            )
        files, ignored = _folder_files(folder)
        return JournalSource(
            path=source,
            session_id=session_id or _session_of_folder(folder.resolve()),
            files=files,
            folder=True,
            ignored=ignored,
        )
    if source.is_file():
        if session_id is None:
            parent = source.parent
            if parent.name == JOURNAL_DIR_NAME:
                session_id = _session_of_root(parent.parent, default=_file_stem(source))
            else:
                session_id = _file_stem(source)
        return JournalSource(
            path=source,
            session_id=session_id,
            files=(JournalFile(path=source),),
            folder=False,
        )
    raise InvalidInput(
        "no such journal file or folder; give a worker root, a relay-journal/ folder, or "
        ".jsonl / .jsonl.gz files",
        path=str(source),
    )


def _session_of_folder(folder: Path) -> str:
    if folder.name == JOURNAL_DIR_NAME:
        return _session_of_root(folder.parent, default=folder.parent.name)
    return folder.name


def _session_of_root(root: Path, *, default: str) -> str:
    state = root / RELAY_STATE_NAME
    if state.is_file():
        return _read_session_id(state)
    return default


def _folder_files(folder: Path) -> tuple[tuple[JournalFile, ...], tuple[Path, ...]]:
    files: list[JournalFile] = []
    ignored: list[Path] = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        match = _SEGMENT_NAME.fullmatch(entry.name)
        if match is not None and entry.is_file():
            first, last = int(match.group(1)), int(match.group(2))
            if first > last or first == 0:
                raise InvalidInput(
                    f"segment name has an impossible range {first}-{last}; rename or move the file",
                    path=str(entry),
                )
            files.append(JournalFile(path=entry, first=first, last=last))
        elif entry.name == ACTIVE_JOURNAL_NAME and entry.is_file():
            first_seen, last_seen = _scan_range(entry)
            files.append(JournalFile(path=entry, first=first_seen, last=last_seen, active=True))
        else:
            ignored.append(entry)
    return tuple(files), tuple(ignored)


class _Ordinal(msgspec.Struct):
    ordinal: int


_ORDINAL_DECODER = msgspec.json.Decoder(_Ordinal)


def _scan_range(path: Path) -> tuple[int | None, int | None]:
    """First and last ordinal of the complete, decodable lines of ``path``.

    Reads forward to the first usable line and backward from the end, in blocks, to the
    last one, skipping what the reading pass skips or reports: a torn tail, blank and
    undecodable lines, and lines over the limit. A read error after the first record
    gives ``(first, first)``, so the file is still read and the reading pass reports it.
    """
    try:
        with path.open("rb") as stream:
            first: int | None = None
            for raw, _, terminated in _lines(stream):
                if terminated and raw is not None:
                    first = _ordinal_of(raw)
                    if first is not None:
                        break
            if first is None:
                return None, None
            try:
                last = _last_ordinal(stream, start=stream.tell())
            except (OSError, EOFError, zlib.error):
                return first, first  # the reading pass reports it
    except (OSError, EOFError, zlib.error):
        return None, None  # the reading pass reports it
    return first, first if last is None else last


def _ordinal_of(raw: bytes) -> int | None:
    """The ordinal of one complete line, or None for a blank or undecodable one."""
    if not raw.strip():
        return None
    try:
        return _ORDINAL_DECODER.decode(raw).ordinal
    except msgspec.DecodeError:
        return None  # the reading pass reports it, with its line


def _last_ordinal(stream: BinaryIO, *, start: int) -> int | None:
    """The ordinal of the last usable line at or after ``start`` (a line start), read
    backward from the end in blocks; ``None`` when there is none.

    The bytes after the last newline are a torn tail and never count; a line over the
    limit is measured, not kept.
    """
    limit = _READ_LIMIT - 1
    block = _SCAN_BLOCK
    position = stream.seek(0, os.SEEK_END)
    pieces: list[bytes] = []  # the current line's bytes seen so far, rightmost first
    size = 0  # the current line's length so far
    terminated = False  # False while reading the torn tail after the last newline
    while position > start:
        low = max(start, position - block)
        stream.seek(low)
        data = stream.read(position - low)
        if len(data) != position - low:
            raise EOFError(f"the file shrank while it was scanned, at byte {low}")
        position = low
        end = len(data)
        while True:
            newline = data.rfind(b"\n", 0, end)
            piece = data[newline + 1 : end]
            size += len(piece)
            if size <= limit:
                pieces.append(piece)
            else:
                pieces.clear()
            if newline < 0:
                break
            if terminated and size <= limit:
                ordinal = _ordinal_of(b"".join(reversed(pieces)))
                if ordinal is not None:
                    return ordinal
            pieces.clear()
            size = 0
            terminated = True
            end = newline
    if terminated and size <= limit:
        return _ordinal_of(b"".join(reversed(pieces)))
    return None


# -- reading lines ----------------------------------------------------------------------


def _open(path: Path) -> BinaryIO:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def _lines(stream: BinaryIO) -> Iterator[tuple[bytes | None, int, bool]]:
    """Yield ``(line, size, terminated)`` per line, without the newline.

    ``line`` is ``None`` for a line over the limit (its bytes are drained, not kept);
    ``size`` is its length in bytes without the newline.
    """
    while True:
        chunk = stream.readline(_READ_LIMIT)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield chunk[:-1], len(chunk) - 1, True
            continue
        if len(chunk) < _READ_LIMIT:
            yield chunk, len(chunk), False
            return
        size = len(chunk)
        del chunk
        while True:
            more = stream.readline(_DRAIN_CHUNK)
            if not more:
                yield None, size, False
                return
            if more.endswith(b"\n"):
                yield None, size + len(more) - 1, True
                break
            size += len(more)


# -- the reader -------------------------------------------------------------------------


class JournalReader:
    """Stream a source's events as ``(event, location)`` pairs; iterate once.

    ``after`` starts reading after that cursor: ordinals up to it are skipped, and the
    event at it must carry its digest. With ``check_chain``, every event is checked for
    continuity and its own digest (:func:`domain.digests.validate_relay_event`); the first
    event is checked against genesis when it is ordinal 1, else only on its own. Without
    it, only line syntax and the overlap boundary are checked (the projector checks the
    chain against the store's frontier).

    After (or during) iteration: ``records`` counts events read, ``valid_digests`` those
    whose digest was verified, ``problems`` and ``torn_tails`` list what was found, and
    ``cursor`` is the last event read.
    """

    def __init__(
        self,
        source: JournalSource,
        *,
        mode: ReadMode = ReadMode.STRICT,
        check_chain: bool = False,
        after: RelayCursor | None = None,
        on_torn_tail: Callable[[TornTail], None] | None = None,
    ) -> None:
        self.source = source
        self.mode = mode
        self.check_chain = check_chain
        self.after = after
        self.on_torn_tail = on_torn_tail
        self.records = 0
        self.valid_digests = 0
        self.problems: list[JournalProblem] = []
        self.torn_tails: list[TornTail] = []
        self.cursor: RelayCursor | None = after
        self._started = False

    def __iter__(self) -> Iterator[tuple[RelayEvent, Location]]:
        if self._started:
            raise InvalidInput("a JournalReader can be iterated only once; make a new one")
        self._started = True
        return self._events()

    # -- planning -----------------------------------------------------------------------

    def _events(self) -> Iterator[tuple[RelayEvent, Location]]:
        if not self.source.folder:
            for file in self.source.files:
                skip = self.cursor.ordinal if self.cursor is not None else None
                yield from self._read_file(file.path, skip_through=skip)
            return
        remaining = [file for file in self.source.files if file.last is not None]
        if self.cursor is not None:
            position = self.cursor.ordinal
        else:
            firsts = [file.first for file in remaining if file.first is not None]
            position = min(firsts) - 1 if firsts else 0
        while True:
            live = [file for file in remaining if _last(file) > position]
            if not live:
                return
            candidates = [file for file in live if _first(file) <= position + 1]
            if candidates:
                chosen = max(candidates, key=lambda file: (_last(file), file.active))
            else:  # a hole between files: the chain check reports it at the next event
                chosen = min(live, key=lambda file: (_first(file), -_last(file), not file.active))
            remaining.remove(chosen)
            yield from self._read_file(chosen.path, skip_through=position)
            reached = self.cursor.ordinal if self.cursor is not None else position
            position = max(position, reached)

    # -- one file -----------------------------------------------------------------------

    def _read_file(
        self, path: Path, *, skip_through: int | None
    ) -> Iterator[tuple[RelayEvent, Location]]:
        number = 0
        try:
            with _open(path) as stream:
                for raw, size, terminated in _lines(stream):
                    number += 1
                    if not terminated:
                        if raw is not None and not raw.strip():
                            continue
                        self._torn(TornTail(path=path, line=number, byte_count=size))
                        return
                    if raw is None:
                        self._problem(
                            InvalidInput(
                                f"relay line is {size} bytes, over the {MAX_RELAY_LINE_BYTES}-byte limit"
                            ),
                            path,
                            number,
                        )
                        continue
                    if not raw.strip():
                        continue
                    try:
                        event = decode_relay_event(raw)
                    except InvalidInput as exc:
                        self._problem(exc, path, number)
                        continue
                    if skip_through is not None:
                        if event.ordinal <= skip_through:
                            self._check_boundary(event, skip_through, path, number)
                            continue
                        skip_through = None  # past the overlap: read everything after it
                    if self._accept(event, path, number):
                        yield event, Location(path=path, line=number)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            self._problem(
                InvalidInput(
                    f"cannot read on after line {number}: {exc}; the file is truncated or "
                    "corrupt, restore it from the worker or a backup"
                ),
                path,
                number + 1,
                kind=ProblemKind.UNREADABLE,
            )

    def _check_boundary(self, event: RelayEvent, boundary: int, path: Path, line: int) -> None:
        cursor = self.cursor
        if cursor is None or event.ordinal != boundary or cursor.ordinal != boundary:
            return
        if event.digest != cursor.digest:
            self._problem(
                RelayChainError(
                    ChainFault.FORK,
                    f"overlapping copy of ordinal {boundary} has digest {event.digest[:12]}…, "
                    f"but the journal already read {cursor.digest[:12]}…",
                    ordinal=event.ordinal,
                ),
                path,
                line,
            )

    def _accept(self, event: RelayEvent, path: Path, line: int) -> bool:
        """Check ``event`` (when asked), count it and move the cursor; False drops it."""
        self.records += 1
        previous = self.cursor
        forward = previous is None or event.ordinal > previous.ordinal
        if not self.check_chain:
            if forward:
                self.cursor = event.cursor
            return True
        session_id = self.source.session_id
        try:
            validate_relay_event_self(event, session_id=session_id)
        except RelayChainError as exc:
            self._problem(exc, path, line)
            if forward:  # keep counting from it, so its successor is not a second problem
                self.cursor = event.cursor
            return False
        self.valid_digests += 1
        if previous is None and event.ordinal == 1:
            previous = RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST)
        if previous is not None:
            try:
                if event.ordinal == previous.ordinal and event.digest != previous.digest:
                    raise RelayChainError(
                        ChainFault.FORK,
                        f"ordinal {event.ordinal} appears again with another digest: "
                        f"{previous.digest[:12]}… then {event.digest[:12]}…",
                        session_id=session_id,
                        ordinal=event.ordinal,
                    )
                validate_relay_link(previous, event, session_id=session_id)
            except RelayChainError as exc:
                self._problem(exc, path, line)
                if not forward:
                    return False
        self.cursor = event.cursor
        return True

    # -- reporting ----------------------------------------------------------------------

    def _torn(self, tail: TornTail) -> None:
        self.torn_tails.append(tail)
        if self.on_torn_tail is not None:
            self.on_torn_tail(tail)

    def _problem(
        self, error: StoreError, path: Path, line: int, *, kind: ProblemKind | None = None
    ) -> None:
        located = error.located(path=str(path), line=line, session_id=self.source.session_id)
        if self.mode is ReadMode.STRICT:
            raise located from error
        if kind is None:
            kind = (
                ProblemKind(error.fault.value)
                if isinstance(error, RelayChainError)
                else ProblemKind.BAD_LINE
            )
        self.problems.append(
            JournalProblem(
                path=path,
                line=line,
                ordinal=error.ordinal,
                kind=kind,
                message=error.detail,
                error=located,
            )
        )


def _first(file: JournalFile) -> int:
    assert file.first is not None
    return file.first


def _last(file: JournalFile) -> int:
    assert file.last is not None
    return file.last


def read_journal(
    path: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    mode: ReadMode = ReadMode.STRICT,
    check_chain: bool = False,
    after: RelayCursor | None = None,
) -> JournalReader:
    """Resolve ``path`` (see :func:`resolve_source`) and return a reader over it."""
    return JournalReader(
        resolve_source(path, session_id=session_id),
        mode=mode,
        check_chain=check_chain,
        after=after,
    )


# -- verify -----------------------------------------------------------------------------


@dataclass
class VerifyReport:
    """What ``verify`` found over all sources.

    ``records`` counts events read, ``valid_digests`` those whose digest verified;
    ``problems`` lists every gap, fork, bad digest and bad line, in reading order;
    ``torn_tails`` every torn final line (not a problem: a write cut short is never
    applied); ``frontiers`` the last event read per session.
    """

    records: int = 0
    valid_digests: int = 0
    problems: list[JournalProblem] = field(default_factory=list)
    torn_tails: list[TornTail] = field(default_factory=list)
    frontiers: dict[str, RelayCursor] = field(default_factory=dict)
    sources: list[JournalSource] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def verify_sources(
    sources: Iterable[str | os.PathLike[str]], *, session_id: str | None = None
) -> VerifyReport:
    """Check digests and continuity of every source, collecting every problem.

    Sources of one session (by the rules of :func:`resolve_source`) continue one chain,
    in the order given. Raises :class:`InvalidInput` only for a source that cannot be
    resolved; everything found inside journals lands in the report.
    """
    report = VerifyReport()
    for path in sources:
        source = resolve_source(path, session_id=session_id)
        report.sources.append(source)
        reader = JournalReader(
            source,
            mode=ReadMode.VERIFY,
            check_chain=True,
            after=report.frontiers.get(source.session_id),
        )
        for _ in reader:
            pass
        report.records += reader.records
        report.valid_digests += reader.valid_digests
        report.problems.extend(reader.problems)
        report.torn_tails.extend(reader.torn_tails)
        if reader.cursor is not None:
            report.frontiers[source.session_id] = reader.cursor
    return report
