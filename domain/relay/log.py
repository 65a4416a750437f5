"""The relay log: the journal lines a store applied, kept so every view can be rebuilt.

Each page a projector commits is kept beside it as one *log page*: the page's events as
the worker wrote them (:func:`~relaystore.domain.relay.encode_relay_event` reproduces the
journal line, so the digest verifies from the kept bytes), joined by newlines and
compressed with zlib at :data:`LOG_COMPRESSION_LEVEL`. This module is pure: it packs and
unpacks pages and decides what a session's log pages cover (:func:`log_coverage`).
Writing and reading the rows is :mod:`relaystore.storage.relay_log`.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import msgspec

from ..chain import check_own_digest
from ..errors import InvalidInput, RelayLogUnavailable
from ..materialized import MaterializedQueuedPrompt
from .events import RelayEvent, RelayLine, decode_relay_line, encode_relay_event
from .payloads import RelayCursor

__all__ = [
    "LOG_COMPRESSION_LEVEL",
    "LogCoverage",
    "LogPageSpan",
    "PruneReport",
    "StoredRelayLog",
    "log_coverage",
    "pack_lines",
    "unpack_events",
    "unpack_lines",
]

LOG_COMPRESSION_LEVEL = 1
"""zlib's level for log pages, picked by measuring (``benchmarks/run.py --only relaylog``:
the 100k-event benchmark journal, 366 B a line, in pages of 128 lines): level 1 keeps
0.223 of the bytes at 1.7 µs an event, level 6 keeps 0.199 at 4.2 µs, level 9 keeps
0.195 at 7.2 µs. Every level meets the size aim (0.5); the replay-throughput aim (0.9)
is the tight one, so the cheapest level wins (about 9 bytes an event more than 6)."""


def pack_lines(events: Iterable[RelayEvent | RelayLine]) -> tuple[bytes, int]:
    """One log page: the events' journal lines, newline-joined and compressed; and the
    uncompressed size."""
    raw = b"\n".join(map(encode_relay_event, events))
    return zlib.compress(raw, LOG_COMPRESSION_LEVEL), len(raw)


def unpack_lines(blob: bytes, *, session_id: str, first_ordinal: int) -> list[bytes]:
    """The journal lines of one log page; :class:`InvalidInput` when it does not inflate."""
    try:
        raw = zlib.decompress(blob)
    except zlib.error as exc:
        raise InvalidInput(
            f"the relay log page starting at ordinal {first_ordinal} does not decompress "
            f"({exc}); the store is damaged",
            session_id=session_id,
            ordinal=first_ordinal,
        ) from None
    return raw.split(b"\n") if raw else []


def unpack_events(
    blob: bytes, *, session_id: str, first_ordinal: int
) -> list[RelayEvent | RelayLine]:
    """The events of one log page, each decoded and its own digest checked; a line of a
    kind this build does not know comes back as its :class:`RelayLine`."""
    events: list[RelayEvent | RelayLine] = []
    for line in unpack_lines(blob, session_id=session_id, first_ordinal=first_ordinal):
        event = decode_relay_line(line)
        check_own_digest(event, session_id=session_id)
        events.append(event)
    return events


@dataclass(frozen=True, slots=True)
class LogPageSpan:
    """Which ordinals one stored log page holds."""

    first_ordinal: int
    last_ordinal: int


@dataclass(frozen=True, slots=True)
class LogCoverage:
    """What a session's log holds against its projection.

    ``first_ordinal``/``last_ordinal`` span the log (None without pages); ``complete``
    says the log holds every event from the session's history start to its projection's
    frontier without a hole, so the projection can be rebuilt from it alone.
    """

    history_first: int
    frontier: int
    first_ordinal: int | None
    last_ordinal: int | None
    pages: int
    events: int
    hole_after: int | None
    """The last ordinal before the first hole between pages, when there is one."""

    @property
    def complete(self) -> bool:
        if self.frontier < self.history_first:
            return True  # nothing applied yet: nothing to hold
        return (
            self.first_ordinal == self.history_first
            and self.last_ordinal == self.frontier
            and self.hole_after is None
        )

    def refusal(self, session_id: str, action: str) -> RelayLogUnavailable:
        """Why ``action`` cannot rebuild the session from its log (call when incomplete)."""
        if self.first_ordinal is None:
            why = (
                f"its relay log is empty, but its projection holds ordinals "
                f"{self.history_first}..{self.frontier} (the log was off, or pruned)"
            )
        elif self.first_ordinal != self.history_first:
            why = (
                f"its relay log starts at ordinal {self.first_ordinal}, after its history "
                f"start {self.history_first} (the log was off for a while, or was pruned)"
            )
        elif self.hole_after is not None:
            why = (
                f"its relay log has a hole after ordinal {self.hole_after} (the log was off "
                "for a while)"
            )
        else:
            why = (
                f"its relay log ends at ordinal {self.last_ordinal}, but its projection is at "
                f"{self.frontier} (pages were committed without the log)"
            )
        return RelayLogUnavailable(
            f"cannot {action} session {session_id}: {why}; replay its journals into a new "
            "store to rebuild it",
            session_id=session_id,
        )


def log_coverage(spans: Sequence[LogPageSpan], *, history_first: int, frontier: int) -> LogCoverage:
    """What ``spans`` (a session's log pages, ordered by first ordinal) cover."""
    hole_after = None
    for before, after in itertools.pairwise(spans):
        if after.first_ordinal != before.last_ordinal + 1:
            hole_after = before.last_ordinal
            break
    return LogCoverage(
        history_first=history_first,
        frontier=frontier,
        first_ordinal=spans[0].first_ordinal if spans else None,
        last_ordinal=spans[-1].last_ordinal if spans else None,
        pages=len(spans),
        events=sum(span.last_ordinal - span.first_ordinal + 1 for span in spans),
        hole_after=hole_after,
    )


class PruneReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :class:`~relaystore.domain.messages.PruneRelayLog` removed."""

    session_id: str
    pages_pruned: int
    events_pruned: int
    log_starts_at: int | None
    """The first ordinal the log still holds (None: the log is now empty)."""


@dataclass(frozen=True, slots=True)
class StoredRelayLog:
    """A session's log as stored, read in one snapshot with its projection's frontier.

    ``pages`` are ``(first_ordinal, last_ordinal, compressed lines)``, oldest first;
    ``history_first`` is the first ordinal of the session's history and
    ``history_source`` why (``genesis``, ``seed`` or ``first_event``). A seeded
    history has its ``seed``: the cursor it continues from and the queued prompts the
    seed left (None for a session seeded by a build before schema revision 8, which did
    not keep them).
    """

    session_id: str
    frontier: RelayCursor
    history_first: int
    history_source: str
    pages: list[tuple[int, int, bytes]]
    seed: tuple[RelayCursor, list[MaterializedQueuedPrompt]] | None = None

    @property
    def coverage(self) -> LogCoverage:
        spans = [LogPageSpan(first, last) for first, last, _ in self.pages]
        return log_coverage(spans, history_first=self.history_first, frontier=self.frontier.ordinal)

    def events(self) -> Iterator[RelayEvent | RelayLine]:
        """Every logged event, oldest first, decoded and its digest checked (a line of a
        kind this build does not know as its :class:`RelayLine`)."""
        for first, _, blob in self.pages:
            yield from unpack_events(blob, session_id=self.session_id, first_ordinal=first)
