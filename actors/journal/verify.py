"""Checking journals without a store, as ``relaystore verify`` does.

:func:`verify_sources` reads every source with a
:class:`~relaystore.actors.journal.reader.JournalReader` in
:attr:`~relaystore.actors.journal.reader.ReadMode.VERIFY` mode, hashing every digest,
and collects every problem. It judges each event by the same rule ``replay`` does
(:func:`relaystore.domain.chain.advance`), so verify reports a problem exactly where a
replay from genesis would refuse, with the same fault: an exact duplicate line is
already applied in both, ordinal 0 is refused by both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from relaystore.actors.journal.reader import JournalProblem, JournalReader, ReadMode, TornTail
from relaystore.actors.journal.sources import JournalSource, resolve_source
from relaystore.domain.relay import RelayCursor

__all__ = ["VerifyReport", "verify_sources"]


@dataclass
class VerifyReport:
    """What ``verify`` found over all sources.

    ``records`` counts events read, ``valid_digests`` those whose digest verified,
    ``already_applied`` the re-deliveries skipped (exact duplicates: not a problem);
    ``problems`` lists every chain fault and bad line, in reading order; ``torn_tails``
    every torn final line (not a problem: a write cut short is never applied);
    ``frontiers`` the last event read per session.
    """

    records: int = 0
    valid_digests: int = 0
    already_applied: int = 0
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

    Sources of one session (by the rules of
    :func:`~relaystore.actors.journal.sources.resolve_source`) continue one chain, in
    the order given. Raises :class:`~relaystore.domain.errors.InvalidInput` only for a
    source that cannot be resolved; everything found inside journals lands in the report.
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
        report.already_applied += reader.already_applied
        report.problems.extend(reader.problems)
        report.torn_tails.extend(reader.torn_tails)
        if reader.cursor is not None:
            report.frontiers[source.session_id] = reader.cursor
    return report
