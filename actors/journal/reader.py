"""Streaming a relay journal's events, judged by the one chain rule.

:class:`JournalReader` streams a :class:`~relaystore.actors.journal.sources.JournalSource`
as ``(event, location)`` pairs. Guarantees:

* Streaming: the reader holds at most one line (at most 2 MiB plus one byte) in memory,
  however long the journal; gzip segments are decompressed as they are read.
* Every yielded event comes with its file and 1-based line number (:class:`Location`).
* Files of a journal folder are read in the origin's order: from cursor ``c``, the file
  with ``first <= c + 1`` and ``last > c`` reaching furthest (a tie goes to
  ``active.jsonl``); within it, ordinals ``<= c`` are the crash overlap, skipped
  uncounted once :func:`~relaystore.domain.chain.advance` calls them already applied (so
  the one at ``c`` must carry ``c``'s digest). ``*.new`` temporaries, ``stale-active-*``
  leftovers and any other file are never read.
* Every event is judged by :func:`relaystore.domain.chain.advance` against the cursor
  (the last event read, or ``after``; genesis for an ordinal 1 read first), or by
  :func:`~relaystore.domain.chain.check_own_digest` when there is no cursor (a journal
  whose earlier events are gone). An event the rule calls already applied (an exact
  duplicate line, a re-delivery) is skipped and counted in ``already_applied``, never a
  problem. With ``check_chain`` every digest is hashed too; without it the digest is
  left to the consumer (the projector hashes every event it applies), and everything
  else of the rule is still checked here: range, format, forks, gaps, links.
* A final line without its newline (a torn tail) is recorded as a :class:`TornTail` and
  never yielded; every complete line before it is. Blank lines are skipped, up to
  :data:`~relaystore.actors.journal.sources.MAX_BLANK_LINES` per file.
* A line of a kind this build does not know, whose own digest verifies, is a newer
  worker's line: with ``keep_unknown`` it is judged by the chain rule like any event and
  yielded as its :class:`~relaystore.domain.relay.RelayLine` (a store with a relay log
  keeps it and holds its session behind); without, it is the problem ``unknown_kind``.
* :attr:`ReadMode.STRICT` raises the first problem (``InvalidInput`` for a bad line,
  ``RelayChainError`` for a chain fault), located by file and line.
  :attr:`ReadMode.VERIFY` records every problem as a :class:`JournalProblem` and goes on.

This is the only file reading of relay journals; ``domain`` stays pure.
"""

from __future__ import annotations

import enum
import gzip
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...domain.chain import GENESIS, Step, advance, check_own_digest
from ...domain.digests import validate_relay_event_self
from ...domain.errors import (
    ChainFault,
    InvalidInput,
    RelayChainError,
    StoreError,
    UnknownRelayKind,
)
from ...domain.relay.events import RelayEvent, RelayLine, decode_relay_event, line_too_long
from ...domain.relay.payloads import RelayCursor
from .lines import BlankBudget, lines, open_journal_file
from .sources import JournalFile, JournalSource, resolve_source

__all__ = [
    "NOT_A_JOURNAL_LINES",
    "JournalProblem",
    "JournalReader",
    "Location",
    "ProblemKind",
    "ReadMode",
    "TornTail",
    "read_journal",
]


NOT_A_JOURNAL_LINES = 8
"""Lines that are no relay event, before any that is, after which a file is reported as
not a relay journal (one problem) and not read on."""


class ReadMode(enum.Enum):
    """How a reader reacts to a problem."""

    STRICT = "strict"
    """Raise the first problem (for ``replay``)."""
    VERIFY = "verify"
    """Record every problem and keep going (for ``verify``)."""


class ProblemKind(enum.Enum):
    """What is wrong at one place of a journal.

    The first six mirror :class:`~relaystore.domain.errors.ChainFault`: every fault has
    the kind of the same value.
    """

    GAP = ChainFault.GAP.value
    FORK = ChainFault.FORK.value
    BAD_DIGEST = ChainFault.BAD_DIGEST.value
    UNKNOWN_FORMAT = ChainFault.UNKNOWN_FORMAT.value
    ORDINAL_OUT_OF_RANGE = ChainFault.ORDINAL_OUT_OF_RANGE.value
    UNKNOWN_KIND = ChainFault.UNKNOWN_KIND.value
    """A line of a kind this build does not know, whose digest verifies: a newer
    worker wrote it (not damage; upgrade relaystore)."""
    BAD_LINE = "bad_line"
    """A line that is not a relay event: not JSON, a wrong shape, or over 2 MiB."""
    UNREADABLE = "unreadable"
    """A file that cannot be read on: a corrupt or truncated gzip stream, an I/O error,
    too many blank lines, a line too long to drain."""

    @classmethod
    def of(cls, error: StoreError) -> ProblemKind:
        """The kind of a problem raised as ``error``."""
        if isinstance(error, RelayChainError):
            return cls(error.fault.value)
        return cls.BAD_LINE


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

    @property
    def fault(self) -> ChainFault | None:
        """The chain fault, for a problem the chain rule found."""
        return self.error.fault if isinstance(self.error, RelayChainError) else None

    def __str__(self) -> str:
        return str(self.error)


class JournalReader:
    """Stream a source's events as ``(event, location)`` pairs; iterate once.

    ``after`` starts reading after that cursor: ordinals up to it are skipped, and the
    event at it must carry its digest. ``check_chain`` hashes every event's digest too
    (see the module doc for what is checked without it).

    After (or during) iteration: ``records`` counts events read past the overlap,
    ``valid_digests`` those whose digest was verified, ``already_applied`` those skipped
    as re-deliveries, ``problems`` and ``torn_tails`` list what was found, and ``cursor``
    is the last event read.
    """

    def __init__(
        self,
        source: JournalSource,
        *,
        mode: ReadMode = ReadMode.STRICT,
        check_chain: bool = False,
        after: RelayCursor | None = None,
        on_torn_tail: Callable[[TornTail], None] | None = None,
        after_note: str | None = None,
        keep_unknown: bool = False,
    ) -> None:
        self.source = source
        self.keep_unknown = keep_unknown
        self.mode = mode
        self.check_chain = check_chain
        self.after = after
        self.after_note = after_note
        """Where ``after`` came from (a seed file, ``--from-first``): added to a fault of
        the first event, which must continue it."""
        self.on_torn_tail = on_torn_tail
        self.records = 0
        self.valid_digests = 0
        self.already_applied = 0
        self.problems: list[JournalProblem] = []
        self.torn_tails: list[TornTail] = []
        self.cursor: RelayCursor | None = after
        self.valid_until: RelayCursor | None = None
        """The cursor when the first problem was found: the end of the valid prefix."""
        self._started = False

    def __iter__(self) -> Iterator[tuple[RelayEvent | RelayLine, Location]]:
        if self._started:
            raise InvalidInput("a JournalReader can be iterated only once; make a new one")
        self._started = True
        return self._events()

    # -- planning -----------------------------------------------------------------------

    def _events(self) -> Iterator[tuple[RelayEvent | RelayLine, Location]]:
        if not self.source.folder:
            for file in self.source.files:
                yield from self._read_file(file.path, overlap=self.cursor is not None)
            return
        remaining = [file for file in self.source.files if file.last is not None]
        if self.cursor is not None:
            position = self.cursor.ordinal
        else:
            firsts = [file.first for file in remaining if file.first is not None]
            position = min(firsts) - 1 if firsts else 0
        # A cursor given from outside (a seed, the store's frontier) is checked against
        # the event at it too, even when that is the journal's last: it must carry the
        # cursor's digest, or it is a fork.
        check_start = self.cursor is not None and position > 0
        while True:
            live = [
                file
                for file in remaining
                if _last(file) > position or (check_start and _last(file) == position)
            ]
            check_start = False
            if not live:
                return
            candidates = [file for file in live if _first(file) <= position + 1]
            if candidates:
                chosen = max(candidates, key=lambda file: (_last(file), file.active))
            else:  # a hole between files: the chain rule reports it at the next event
                chosen = min(live, key=lambda file: (_first(file), -_last(file), not file.active))
            remaining.remove(chosen)
            yield from self._read_file(chosen.path, overlap=self.cursor is not None)
            reached = self.cursor.ordinal if self.cursor is not None else position
            position = max(position, reached)

    # -- one file -----------------------------------------------------------------------

    def _read_file(
        self, path: Path, *, overlap: bool
    ) -> Iterator[tuple[RelayEvent | RelayLine, Location]]:
        """Read one file; while ``overlap``, events the rule calls already applied are
        the crash overlap with what was read before, skipped uncounted."""
        number = 0
        blanks = BlankBudget()
        strangers = 0  # lines before the file's first relay event that are not one
        read_one = False
        try:
            with open_journal_file(path) as stream:
                for line in lines(stream):
                    number += 1
                    if line.blank:
                        refusal = blanks.spend(line)
                        if refusal is not None:
                            self._problem(refusal, path, number, kind=ProblemKind.UNREADABLE)
                            return
                        continue
                    if line.overlong:
                        refusal = InvalidInput(
                            f"a line runs past {line.size} bytes without a newline: this is "
                            "not a journal a worker wrote; refusing to read on"
                        )
                        self._problem(refusal, path, number, kind=ProblemKind.UNREADABLE)
                        return
                    if not line.terminated:
                        self._torn(TornTail(path=path, line=number, byte_count=line.size))
                        return
                    if line.data is None:
                        self._problem(line_too_long(line.size), path, number)
                        continue
                    event: RelayEvent | RelayLine
                    try:
                        event = decode_relay_event(line.data)
                    except InvalidInput as exc:
                        self._problem(exc, path, number)
                        if not read_one:
                            strangers += 1
                            if strangers == NOT_A_JOURNAL_LINES:
                                self._not_a_journal(path)
                                return
                        continue
                    except UnknownRelayKind as exc:
                        read_one = True  # a relay event, of a newer kind
                        kept = self._unknown_kind(exc, path, number)
                        if kept is None:
                            continue
                        event = kept
                    read_one = True
                    accepted, overlap = self._judge(event, path, number, overlap=overlap)
                    if accepted:
                        yield event, Location(path, number)  # by position: one a line
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            self._problem(
                InvalidInput(
                    f"cannot read on after line {number}: {exc}; the file is truncated or "
                    "corrupt, restore it from the worker or a backup"
                ),
                path,
                number + 1,
                kind=ProblemKind.UNREADABLE,
            )
        except OSError as exc:
            self._problem(
                InvalidInput(f"cannot read on after line {number}: {exc.strerror or exc}"),
                path,
                number + 1,
                kind=ProblemKind.UNREADABLE,
            )

    def _judge(
        self, event: RelayEvent | RelayLine, path: Path, line: int, *, overlap: bool
    ) -> tuple[bool, bool]:
        """Judge ``event`` by the chain rule; return (yield it, still in the overlap)."""
        session_id = self.source.session_id
        frontier = self.cursor
        try:
            if frontier is None and event.ordinal != 1:
                # No cursor: a journal whose earlier events are gone starts here.
                check_own_digest(event, session_id=session_id)
                step = Step.NEXT
                hashed = True
            else:
                step = advance(
                    GENESIS if frontier is None else frontier,
                    event,
                    session_id=session_id,
                    digest_checked=not self.check_chain,
                )
                hashed = self.check_chain
        except RelayChainError as exc:
            self.records += 1
            if self.after_note is not None and frontier == self.after:
                exc = RelayChainError(
                    exc.fault,
                    f"{exc.detail} ({self.after_note})",
                    session_id=exc.session_id,
                    ordinal=exc.ordinal,
                )
            self._problem(exc, path, line)  # raises in strict mode
            return self._resync(event, exc), False
        if step is Step.ALREADY_APPLIED:
            if overlap:
                return False, True  # the crash overlap: read before, not counted
            self.records += 1
            self.already_applied += 1
            return False, False
        self.records += 1
        if hashed:
            self.valid_digests += 1
        self.cursor = event.cursor
        return True, False

    def _resync(self, event: RelayEvent | RelayLine, error: RelayChainError) -> bool:
        """After a fault (verify mode): count on from ``event`` when it stands ahead of
        the cursor, so its successor is not a second problem; yield it when its own
        digest verifies."""
        if error.fault is ChainFault.ORDINAL_OUT_OF_RANGE:
            return False  # no position to count from
        if self.cursor is not None and event.ordinal <= self.cursor.ordinal:
            return False  # a fork with what was read: keep what was read
        self.cursor = event.cursor
        try:
            check_own_digest(event, session_id=self.source.session_id)
        except RelayChainError:
            return False
        self.valid_digests += 1
        return True

    def _unknown_kind(self, error: UnknownRelayKind, path: Path, line: int) -> RelayLine | None:
        """A line of a kind this build does not know: a newer worker's line when its
        digest verifies from the bytes read (fault ``unknown_kind``), a damaged one when
        it does not (``bad_digest``). With ``keep_unknown`` a newer worker's line is
        returned to be judged by the chain rule and yielded; otherwise verify mode counts
        on from it, as after a fault, and None is returned."""
        envelope = error.envelope
        assert isinstance(envelope, RelayLine)
        if self.keep_unknown:
            try:
                validate_relay_event_self(envelope, session_id=self.source.session_id)
            except RelayChainError as damaged:
                self.records += 1
                self._problem(damaged, path, line)  # raises in strict mode
                return None
            return envelope
        self.records += 1
        try:
            validate_relay_event_self(envelope, session_id=self.source.session_id)
        except RelayChainError as damaged:
            self._problem(damaged, path, line)  # raises in strict mode
            return None
        self.valid_digests += 1
        self._problem(error, path, line)  # raises in strict mode
        if self.cursor is None or envelope.ordinal > self.cursor.ordinal:
            self.cursor = envelope.cursor
        return None

    def _not_a_journal(self, path: Path) -> None:
        """Verify mode: the file's first lines are none of them relay events; their
        problems become one, and the file is not read on."""
        mine = [problem for problem in self.problems if problem.path == path]
        self.problems = [problem for problem in self.problems if problem.path != path]
        first = mine[0]
        refusal = InvalidInput(
            f"not a relay journal: none of its first {NOT_A_JOURNAL_LINES} lines is a relay "
            f"event (line {first.line}: {first.message}); not read on"
        )
        self._problem(refusal, path, 1, kind=ProblemKind.UNREADABLE)

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
        if not self.problems:
            self.valid_until = self.cursor
        self.problems.append(
            JournalProblem(
                path=path,
                line=line,
                ordinal=error.ordinal,
                kind=ProblemKind.of(error) if kind is None else kind,
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
