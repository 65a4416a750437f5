"""The ordinal range a journal file holds, found without reading it all.

A sealed segment's range is in its name (:func:`segment_range`, which refuses an
impossible one); ``active.jsonl`` is scanned at both ends (:func:`scan_range`: forward to
the first usable line, backward in blocks to the last); a gzip file of another name is
read forward for its first ordinal only (:func:`first_ordinal`).

It only sizes and orders files: it must not judge the chain or report a damaged line
(the reading pass, :mod:`.reader`, does), so an undecodable line is skipped here.
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path
from typing import BinaryIO

import msgspec

from ...domain.errors import InvalidInput
from ...domain.relay.events import MAX_RELAY_LINE_BYTES
from ...domain.worker_root import SEGMENT_NAME
from .lines import BlankBudget, lines, open_journal_file

__all__ = ["first_ordinal", "scan_range", "segment_range"]

_SCAN_LINE_LIMIT = MAX_RELAY_LINE_BYTES  # the longest line the scan reads whole
_BLANK_STEP = 1 << 16  # bytes stepped over at once in a run of blank lines
_SCAN_BLOCK = 1 << 16  # bytes read per step when scanning active.jsonl backward
_BLANK_BYTES = b" \t\n\r\x0b\x0c"  # what bytes.strip() strips: a line of only these is blank


def segment_range(path: Path) -> tuple[int, int] | None:
    """The ordinal range in ``path``'s name when it is a sealed segment's, else None.

    Raises :class:`InvalidInput` naming the file when the range is impossible (reversed,
    or starting at 0).
    """
    match = SEGMENT_NAME.fullmatch(path.name)
    if match is None:
        return None
    first, last = int(match.group(1)), int(match.group(2))
    if first > last or first == 0:
        raise InvalidInput(
            f"segment name has an impossible range {first}-{last}; rename or move the file",
            path=str(path),
        )
    return first, last


class _Ordinal(msgspec.Struct):
    ordinal: int


_ORDINAL_DECODER = msgspec.json.Decoder(_Ordinal)


def scan_range(path: Path) -> tuple[int | None, int | None]:
    """First and last ordinal of the complete, decodable lines of ``path``.

    Reads forward to the first usable line and backward from the end, in blocks, to the
    last one, skipping what the reading pass skips or reports: a torn tail, blank and
    undecodable lines, and lines over the limit. A read error after the first record
    gives ``(first, first)``, so the file is still read and the reading pass reports it;
    one before raises (:func:`resolve_source` names the file), as do blank lines past
    :data:`MAX_BLANK_LINES` before the first record (naming the file and line).
    """
    with path.open("rb") as stream:  # an OSError here: resolve_source names the file
        first: int | None = None
        blanks = BlankBudget()
        number = 0
        for line in lines(stream):
            number += 1
            if line.blank:
                refusal = blanks.spend(line)
                if refusal is not None:
                    raise refusal.located(path=str(path), line=number)
                continue
            if line.terminated and line.data is not None:
                first = _ordinal_of(line.data)
                if first is not None:
                    break
        if first is None:
            return None, None
        try:
            last = _last_ordinal(stream, start=stream.tell())
        except (OSError, EOFError):
            return first, first  # the reading pass reports it
    return first, first if last is None else last


def _ordinal_of(raw: bytes) -> int | None:
    """The ordinal of one complete line, or None for a blank or undecodable one."""
    if not raw.strip():
        return None
    try:
        return _ORDINAL_DECODER.decode(raw).ordinal
    except msgspec.DecodeError:
        return None  # the reading pass reports it, with its line


def _blank_run_start(data: bytes, end: int) -> int:
    """Where the run of whitespace that ends at ``end`` in ``data`` starts (C-speed)."""
    low = end
    while low > 0:
        window = max(0, low - _BLANK_STEP)
        kept = len(data[window:low].rstrip(_BLANK_BYTES))
        low = window + kept
        if kept:
            break
    return low


def _last_ordinal(stream: BinaryIO, *, start: int) -> int | None:
    """The ordinal of the last usable line at or after ``start`` (a line start), read
    backward from the end in blocks; ``None`` when there is none.

    The bytes after the last newline are a torn tail and never count; a line over the
    limit is measured, not kept; a run of blank lines is stepped over at once.
    """
    limit = _SCAN_LINE_LIMIT
    block = _SCAN_BLOCK
    position = stream.seek(0, os.SEEK_END)
    pieces: list[bytes] = []  # the current line's bytes seen so far, rightmost first
    size = 0  # the current line's length so far
    blank = True  # the current line's bytes seen so far are all whitespace
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
            if blank:
                # Lines of whitespace alone never count: step over all of them at once.
                run = _blank_run_start(data, end)
                crossing = data.find(b"\n", run, end)
                if crossing >= 0:
                    pieces.clear()
                    size = 0
                    terminated = True
                    end = crossing
            newline = data.rfind(b"\n", 0, end)
            piece = data[newline + 1 : end]
            size += len(piece)
            blank = blank and not piece.strip()
            if size <= limit:
                pieces.append(piece)
            else:
                pieces.clear()
            if newline < 0:
                break
            if terminated and size <= limit and not blank:
                ordinal = _ordinal_of(b"".join(reversed(pieces)))
                if ordinal is not None:
                    return ordinal
            pieces.clear()
            size = 0
            blank = True
            terminated = True
            end = newline
    if terminated and size <= limit and not blank:
        return _ordinal_of(b"".join(reversed(pieces)))
    return None


_FIRST_SCAN_LINES = 64
"""Lines a gzip file is read for its first ordinal (the reader reports what is wrong)."""


def first_ordinal(path: Path) -> int | None:
    """The first ordinal of a gzip file, read forward; None when the first lines hold none."""
    try:
        with open_journal_file(path) as stream:
            for count, line in enumerate(lines(stream)):
                if count >= _FIRST_SCAN_LINES or not line.terminated:
                    return None
                if line.data is not None:
                    ordinal = _ordinal_of(line.data)
                    if ordinal is not None:
                        return ordinal
    except (OSError, EOFError, zlib.error):
        return None  # the reading pass reports it
    return None
