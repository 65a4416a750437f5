"""Checking journals without a store, as ``relaystore verify`` does.

:func:`verify_sources` reads every source with a
:class:`~relaystore.actors.journal.reader.JournalReader` in
:attr:`~relaystore.actors.journal.reader.ReadMode.VERIFY` mode, hashing every digest,
and collects every problem. It judges each event by the same rule ``replay`` does
(:func:`relaystore.domain.chain.advance`), so verify reports a problem exactly where a
replay from genesis would refuse, with the same fault: an exact duplicate line is
already applied in both, ordinal 0 is refused by both. A line of a kind this build does
not know whose digest and chain verify is no problem: a store with its relay log keeps
it (its session's projection waits there for a build that knows the kind), so verify
notes the first such line of each session (:class:`NewerKind`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ...domain.errors import StoreError
from ...domain.relay.events import RelayLine
from ...domain.relay.payloads import RelayCursor
from .reader import (
    JournalProblem,
    JournalReader,
    ProblemKind,
    ReadMode,
    TornTail,
)
from .sources import JournalSource, gather_sources
from .start import JournalStart, history_start

__all__ = ["NewerKind", "VerifyReport", "verify_sources"]


@dataclass(frozen=True, slots=True)
class NewerKind:
    """The first line of a session of a kind this build does not know (a newer worker's)."""

    path: Path
    line: int
    session_id: str
    ordinal: int
    position: str
    kind: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: session {self.session_id}: unknown relay "
            f"{self.position} {self.kind!r} at ordinal {self.ordinal}, written by a newer "
            "worker; its digest and chain verify. A store with its relay log keeps it and "
            f"every line after it, projecting the session up to ordinal {self.ordinal - 1} "
            "until relaystore is upgraded"
        )


@dataclass
class VerifyReport:
    """What ``verify`` found over all sources.

    ``records`` counts events read, ``valid_digests`` those whose digest verified,
    ``already_applied`` the re-deliveries skipped (exact duplicates: not a problem);
    ``problems`` lists every chain fault and bad line, in reading order; ``torn_tails``
    every torn final line (not a problem: a write cut short is never applied);
    ``frontiers`` the last event of each session's valid prefix.
    """

    records: int = 0
    valid_digests: int = 0
    already_applied: int = 0
    problems: list[JournalProblem] = field(default_factory=list)
    torn_tails: list[TornTail] = field(default_factory=list)
    frontiers: dict[str, RelayCursor] = field(default_factory=dict)
    starts: dict[str, JournalStart] = field(default_factory=dict)
    """Where each session's history starts, as replay would start it."""
    sources: list[JournalSource] = field(default_factory=list)
    newer_kinds: list[NewerKind] = field(default_factory=list)
    """The first line of each session whose kind this build does not know (not a problem)."""

    @property
    def ok(self) -> bool:
        """True when no problem was found."""
        return not self.problems


def verify_sources(
    sources: Iterable[str | os.PathLike[str]],
    *,
    session_id: str | None = None,
    from_first: bool = False,
) -> VerifyReport:
    """Check digests and continuity of every source, collecting every problem.

    Sources of one session (by the rules of
    :func:`~relaystore.actors.journal.sources.resolve_source`) continue one chain, in
    the order given; the files of one session given one by one are one source, read in
    ordinal order (:func:`~relaystore.actors.journal.sources.gather_sources`). The first source of a session starts where ``replay`` into an empty
    store would start it (:func:`~relaystore.actors.journal.start.history_start`: a
    seed, genesis, or with ``from_first`` the first event), and is refused where replay
    would refuse it. A session's frontier is the end of its valid prefix: never past
    its first problem. Raises :class:`~relaystore.domain.errors.InvalidInput` only for a
    source that cannot be resolved; everything found inside journals lands in the report.
    """
    report = VerifyReport()
    positions: dict[str, RelayCursor] = {}  # where each session's next source continues
    broken: set[str] = set()
    for source in gather_sources(sources, session_id=session_id):
        report.sources.append(source)
        sid = source.session_id
        after, note = positions.get(sid), None
        if sid not in report.starts and sid not in positions:
            try:
                start = history_start(source, from_first=from_first)
            except StoreError:
                pass  # a problem at the first line: the reader below reports it
            else:
                if start.refusal is not None:
                    report.problems.append(_problem_of(start.refusal))
                else:
                    after, note = start.after, start.note
                    report.starts[sid] = start
        reader = JournalReader(
            source,
            mode=ReadMode.VERIFY,
            check_chain=True,
            after=after,
            after_note=note,
            keep_unknown=True,
        )
        noted = any(newer.session_id == sid for newer in report.newer_kinds)
        for event, location in reader:
            if isinstance(event, RelayLine) and not noted:
                noted = True
                report.newer_kinds.append(
                    NewerKind(
                        path=location.path,
                        line=location.line,
                        session_id=sid,
                        ordinal=event.ordinal,
                        position=event.position,
                        kind=event.kind,
                    )
                )
        report.records += reader.records
        report.valid_digests += reader.valid_digests
        report.already_applied += reader.already_applied
        report.problems.extend(reader.problems)
        report.torn_tails.extend(reader.torn_tails)
        if reader.cursor is not None:
            positions[sid] = reader.cursor
        if sid in broken:
            continue  # the valid prefix ended in an earlier source
        frontier = reader.valid_until if reader.problems else reader.cursor
        if reader.problems:
            broken.add(sid)
        if frontier is not None and frontier.ordinal > 0 and frontier != after:
            report.frontiers[sid] = frontier  # never the start itself: no event was read
    return report


def _problem_of(error: StoreError) -> JournalProblem:
    return JournalProblem(
        path=Path(error.path or ""),
        line=error.line,
        ordinal=error.ordinal,
        kind=ProblemKind.of(error),
        message=error.detail,
        error=error,
    )
