"""Splitting a journal file into lines, bounded: the reader's one way to read bytes.

:func:`lines` holds at most one line (at most 2 MiB plus one byte) in memory and drains a
longer one in bounded chunks, up to :data:`MAX_DRAIN_BYTES`; :class:`BlankBudget` stops a
file of blank lines early.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, NamedTuple

from ...domain.errors import InvalidInput
from ...domain.relay.events import MAX_RELAY_LINE_BYTES

__all__ = [
    "MAX_BLANK_BYTES",
    "MAX_BLANK_LINES",
    "MAX_DRAIN_BYTES",
    "BlankBudget",
    "Line",
    "lines",
    "open_journal_file",
]

MAX_BLANK_LINES = 1024
"""Blank lines one file may hold. The worker never writes one; a few are tolerated (a
hand edit, a stray newline), but a file of megabytes of newlines (a gzip segment of a few
KiB can hold millions) is refused at the first line past this, instead of spending
seconds to minutes skipping them."""
MAX_BLANK_BYTES = MAX_RELAY_LINE_BYTES
"""Bytes of blank lines (whitespace and newlines) one file may hold: one line's worth."""
MAX_DRAIN_BYTES = 16 * MAX_RELAY_LINE_BYTES
"""A line longer than this is not drained to its end: the file is refused from there on
(it is no journal the worker wrote), so one line cannot cost gigabytes of reading."""
_READ_LIMIT = MAX_RELAY_LINE_BYTES + 1  # a line's bytes plus its newline
_DRAIN_CHUNK = 1 << 16


class Line(NamedTuple):
    """One line of a journal file, without its newline.

    ``data`` is ``None`` for a line over the limit (its bytes are drained, not kept);
    ``size`` is its length in bytes; ``terminated`` is false for a final line without a
    newline (a torn tail) and for a line cut off at :data:`MAX_DRAIN_BYTES`
    (``overlong``).
    """

    data: bytes | None
    size: int
    terminated: bool
    overlong: bool = False

    @property
    def blank(self) -> bool:
        """True for an empty or whitespace-only line."""
        data = self.data
        return data is not None and (not data or data.isspace())


def open_journal_file(path: Path) -> BinaryIO:
    """Open a journal file for reading bytes, decompressing a ``.gz`` one as it is read."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def lines(stream: BinaryIO) -> Iterator[Line]:
    """Split ``stream`` into lines, holding at most one line of up to 2 MiB.

    A longer line is drained in chunks and yielded with ``data=None``; one that runs
    past :data:`MAX_DRAIN_BYTES` ends the file with ``overlong`` set.
    """
    while True:
        chunk = stream.readline(_READ_LIMIT)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield Line(chunk[:-1], len(chunk) - 1, True)
            continue
        if len(chunk) < _READ_LIMIT:
            yield Line(chunk, len(chunk), False)
            return
        size = len(chunk)
        del chunk
        while True:
            more = stream.readline(_DRAIN_CHUNK)
            if not more:
                yield Line(None, size, False)
                return
            if more.endswith(b"\n"):
                yield Line(None, size + len(more) - 1, True)
                break
            size += len(more)
            if size > MAX_DRAIN_BYTES:
                yield Line(None, size, False, overlong=True)
                return


class BlankBudget:
    """Counts the blank lines of one file; :meth:`spend` says when they pass the limits."""

    __slots__ = ("_bytes", "_lines")

    def __init__(self) -> None:
        self._lines = 0
        self._bytes = 0

    def spend(self, line: Line) -> InvalidInput | None:
        """Count one blank line; past a limit, return the (unlocated) refusal."""
        self._lines += 1
        self._bytes += line.size + 1
        if self._lines <= MAX_BLANK_LINES and self._bytes <= MAX_BLANK_BYTES:
            return None
        return InvalidInput(
            f"more than {MAX_BLANK_LINES} blank lines or {MAX_BLANK_BYTES} bytes of blank "
            "lines in one file: this is not a journal a worker wrote; refusing to read on"
        )
