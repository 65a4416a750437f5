"""Frozen transcript items: old items kept as bytes, so a long transcript stays small.

A decoded :class:`TranscriptItem` holds its body's JSON as Python dicts and strings,
about four times the size of the same item encoded. Projecting the next event reads the
newest items almost always (the open stream, the tool being updated, the newest plan or
turn); an older item is read only when an event names it again. So a
:class:`~relaystore.domain.projection.session.SessionProjection` keeps its newest
:data:`WINDOW` items decoded and the rest frozen: a :class:`FrozenItem` is the item's
stable id and its wire JSON, decoded anew on each read. That is the round trip every
item already makes through the store (a projector reloads its session from there), so a
thawed item equals the item frozen.

:class:`Transcript` is that list of items: it indexes like the list it replaces
(offsets, append, replace, pop), answers reads with thawed items, and freezes what fell
out of the window in batches of :data:`SLACK`, so the cost of freezing follows the items
added, not the length of the transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import msgspec

from relaystore.domain.materialized import TranscriptItem
from relaystore.domain.wire import encode

__all__ = ["SLACK", "WINDOW", "FrozenItem", "Transcript"]

WINDOW = 256
"""How many of the newest items (by offset) stay decoded."""

SLACK = 64
"""How many items past the window (or replaced behind it) wait before being frozen."""


_DECODER = msgspec.json.Decoder(TranscriptItem)


class FrozenItem:
    """A transcript item kept as its stable id and its wire JSON."""

    __slots__ = ("raw", "stable_id")

    def __init__(self, item: TranscriptItem) -> None:
        self.stable_id = item.stable_id
        self.raw = encode(item)

    def thaw(self) -> TranscriptItem:
        """The item, decoded anew."""
        return _DECODER.decode(self.raw)


def _thawed(entry: TranscriptItem | FrozenItem) -> TranscriptItem:
    return entry.thaw() if type(entry) is FrozenItem else entry  # type: ignore[return-value]


class Transcript:
    """A session's transcript list, its old items frozen (see the module doc).

    Offsets, length and stable ids behave as in the plain list; :meth:`__getitem__`
    always returns a decoded item.
    """

    __slots__ = ("_entries", "_frozen_upto", "_replaced")

    def __init__(self, items: Iterable[TranscriptItem] = ()) -> None:
        self._entries: list[TranscriptItem | FrozenItem] = list(items)
        self._frozen_upto = 0
        """Every entry before this offset is frozen, except those in ``_replaced``."""
        self._replaced: set[int] = set()
        """Offsets of decoded items replaced behind ``_frozen_upto``, to freeze again."""
        self._freeze()

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, offset: int) -> TranscriptItem:
        return _thawed(self._entries[offset])

    def __iter__(self) -> Iterator[TranscriptItem]:
        """Every item in order, each decoded as it is reached."""
        return map(_thawed, self._entries)

    def stable_id(self, offset: int) -> str:
        """The stable id at ``offset`` (without decoding the item)."""
        return self._entries[offset].stable_id

    @property
    def frozen(self) -> int:
        """How many items are frozen now."""
        return sum(1 for entry in self._entries if type(entry) is FrozenItem)

    def append(self, item: TranscriptItem) -> None:
        """Add ``item`` at the end."""
        self._entries.append(item)
        if len(self._entries) - WINDOW - self._frozen_upto >= SLACK:
            self._freeze()

    def replace(self, offset: int, item: TranscriptItem) -> None:
        """Put ``item`` (a changed version of the one there) at ``offset``."""
        self._entries[offset] = item
        if offset < self._frozen_upto:
            self._replaced.add(offset)
            if len(self._replaced) >= SLACK:
                self._freeze()

    def pop(self, offset: int) -> TranscriptItem:
        """Remove and return the item at ``offset``; later items move up one place."""
        removed = _thawed(self._entries.pop(offset))
        if offset < self._frozen_upto:
            self._frozen_upto -= 1
        if self._replaced:
            self._replaced = {
                later - 1 if later > offset else later
                for later in self._replaced
                if later != offset
            }
        return removed

    def thawed(self) -> list[TranscriptItem]:
        """A plain list of every item, decoded (the transcript stays as it is)."""
        return list(self)

    def _freeze(self) -> None:
        """Freeze every decoded item behind the window."""
        entries = self._entries
        end = len(entries) - WINDOW
        for offset in range(self._frozen_upto, end):
            entry = entries[offset]
            if type(entry) is not FrozenItem:
                entries[offset] = FrozenItem(entry)  # type: ignore[arg-type]
        self._frozen_upto = max(self._frozen_upto, end)
        for offset in self._replaced:
            entry = entries[offset]
            if type(entry) is not FrozenItem:
                entries[offset] = FrozenItem(entry)  # type: ignore[arg-type]
        self._replaced.clear()
