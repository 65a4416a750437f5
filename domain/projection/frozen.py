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

*Cold* items. Given a ``fetch`` (a projector's read of one committed item from the store),
a frozen item whose latest version the store has committed keeps only its stable id (the
list holds the id string itself; a frozen item that goes cold later drops its bytes), and
a read fetches it. A projector reloading its session enters its old items cold from the
start (:meth:`Transcript.append_cold`), reading only their ids and index facts. So a projector's memory follows its window and
its index, not its transcript. What the store holds is known by ordinals: every change is
recorded with the ordinal of the event that made it (:meth:`Transcript.append`,
:meth:`Transcript.replace`), and :meth:`Transcript.committed` says the store holds every
event through an ordinal; an item changed after that stays in memory (frozen, or
decoded) until a later :meth:`committed` covers it. The store's version of an item is
the one a projector reloading its session would read, so a fetched item is the item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain

import msgspec

from ..materialized import TranscriptItem
from ..wire import encode

__all__ = [
    "DECODED_FACTOR",
    "ENTRY_BYTES",
    "QUIET_WINDOW",
    "SLACK",
    "WINDOW",
    "FetchItem",
    "FrozenItem",
    "Transcript",
]

WINDOW = 256
"""How many of the newest items (by offset) stay decoded."""

QUIET_WINDOW = 32
"""How many of its newest items a projection out of active use keeps decoded: one
reloaded from the store (``actors.projector_wiring.RELOAD_ITEMS``) and one parked in a
projection worker (:meth:`Transcript.cool`). Events name the newest few items almost
always; the rest are fetched if one does."""

ENTRY_BYTES = 160
"""Estimated bytes an item costs however it is kept: its slot, its stable id and its
index entry (tracemalloc over the ``sessions`` benchmark's reloaded 400-item
projections: about 140 bytes an item beyond a 100-item one's)."""

DECODED_FACTOR = 4
"""A decoded item's estimated bytes per byte of its wire JSON (see the module doc)."""

SLACK = 64
"""How many items past the window (or replaced behind it) wait before being frozen."""


_ITEM_DECODER = msgspec.json.Decoder(TranscriptItem)


FetchItem = Callable[[str], TranscriptItem]
"""Reads the committed version of one item (by stable id) from the store."""


class FrozenItem:
    """A transcript item kept as its stable id and its wire JSON (``raw``); ``raw`` is
    ``None`` once the item went cold after it was frozen (an item cold when it is frozen
    is kept as its stable id alone, not as a ``FrozenItem``)."""

    __slots__ = ("raw", "stable_id")

    def __init__(self, item: TranscriptItem) -> None:
        self.stable_id = item.stable_id
        self.raw: bytes | None = encode(item)

    def thaw(self) -> TranscriptItem:
        """The item, decoded anew (a frozen item only: not a cold one)."""
        assert self.raw is not None
        return _ITEM_DECODER.decode(self.raw)


class Transcript:
    """A session's transcript list, its old items frozen (see the module doc).

    Offsets, length and stable ids behave as in the plain list; :meth:`__getitem__`
    always returns a decoded item.
    """

    __slots__ = (
        "_committed",
        "_dirty",
        "_entries",
        "_fetch",
        "_frozen_upto",
        "_replaced",
        "_warm",
    )

    def __init__(
        self,
        items: Iterable[TranscriptItem] = (),
        *,
        fetch: FetchItem | None = None,
        committed: int = 0,
    ) -> None:
        self._entries: list[TranscriptItem | FrozenItem | str] = list(items)
        self._frozen_upto = 0
        """Every entry before this offset is frozen, except those in ``_replaced``."""
        self._replaced: set[int] = set()
        """Offsets of decoded items replaced behind ``_frozen_upto``, to freeze again."""
        self._fetch = fetch
        """Reads a committed item from the store (None: no item ever goes cold)."""
        self._committed = committed
        """The store holds every change made by events through this ordinal."""
        self._dirty: dict[str, int] = {}
        """Stable ids changed by events after ``_committed``, with the latest such ordinal."""
        self._warm: list[FrozenItem] = []
        """Frozen items that could not go cold yet (changed after ``_committed``)."""
        self._freeze()

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, offset: int) -> TranscriptItem:
        return self._read(self._entries[offset])

    def __iter__(self) -> Iterator[TranscriptItem]:
        """Every item in order, each decoded (or fetched) as it is reached."""
        return map(self._read, self._entries)

    def _read(self, entry: TranscriptItem | FrozenItem | str) -> TranscriptItem:
        kind = type(entry)
        if kind is str:
            assert self._fetch is not None  # only a transcript with a fetch has cold items
            return self._fetch(entry)  # type: ignore[arg-type]
        if kind is not FrozenItem:
            return entry  # type: ignore[return-value]
        if entry.raw is not None:  # type: ignore[union-attr]
            return entry.thaw()  # type: ignore[union-attr]
        assert self._fetch is not None
        return self._fetch(entry.stable_id)  # type: ignore[union-attr]

    def stable_id(self, offset: int) -> str:
        """The stable id at ``offset`` (without decoding the item)."""
        entry = self._entries[offset]
        return entry if type(entry) is str else entry.stable_id  # type: ignore[union-attr]

    @property
    def frozen(self) -> int:
        """How many items are frozen now (cold ones included)."""
        return sum(1 for entry in self._entries if type(entry) in (FrozenItem, str))

    @property
    def cold(self) -> int:
        """How many items are cold now (only their stable id in memory)."""
        return sum(
            1
            for entry in self._entries
            if type(entry) is str or (type(entry) is FrozenItem and entry.raw is None)
        )

    def committed(self, ordinal: int) -> None:
        """The store now holds every event through ``ordinal``: frozen items changed no
        later than that go cold."""
        if ordinal <= self._committed:
            return
        self._committed = ordinal
        if self._dirty:
            self._dirty = {sid: at for sid, at in self._dirty.items() if at > ordinal}
        if self._warm:
            still = []
            for entry in self._warm:
                if entry.stable_id in self._dirty:
                    still.append(entry)
                else:
                    entry.raw = None
            self._warm = still

    def append_cold(self, stable_id: str) -> None:
        """Add a committed item at the end as its stable id alone (a reloading projector's
        old items: the store holds them, the window is entered after them)."""
        assert self._fetch is not None  # only a transcript with a fetch has cold items
        self._entries.append(stable_id)
        self._frozen_upto = len(self._entries)

    def append(self, item: TranscriptItem, *, ordinal: int = 0) -> None:
        """Add ``item`` at the end (made by the event at ``ordinal``)."""
        self._entries.append(item)
        self._changed(item.stable_id, ordinal)
        if len(self._entries) - WINDOW - self._frozen_upto >= SLACK:
            self._freeze()

    def replace(self, offset: int, item: TranscriptItem, *, ordinal: int = 0) -> None:
        """Put ``item`` (a changed version of the one there, made by the event at
        ``ordinal``) at ``offset``."""
        self._entries[offset] = item
        self._changed(item.stable_id, ordinal)
        if offset < self._frozen_upto:
            self._replaced.add(offset)
            if len(self._replaced) >= SLACK:
                self._freeze()

    def pop(self, offset: int, *, ordinal: int = 0) -> TranscriptItem:
        """Remove and return the item at ``offset`` (by the event at ``ordinal``); later
        items move up one place."""
        removed = self._read(self._entries[offset])
        del self._entries[offset]
        self._changed(removed.stable_id, ordinal)
        if offset < self._frozen_upto:
            self._frozen_upto -= 1
        if self._replaced:
            self._replaced = {
                later - 1 if later > offset else later
                for later in self._replaced
                if later != offset
            }
        return removed

    def cool(self, keep: int = QUIET_WINDOW) -> None:
        """Freeze every decoded item but the newest ``keep``, as :meth:`append` freezes
        those past the window: a committed one goes cold (its stable id alone), one
        changed since the last :meth:`committed` is kept frozen. What a projection parked
        out of active use keeps (a transcript without a ``fetch`` keeps every item)."""
        if self._fetch is not None:
            self._freeze(keep)

    def footprint(self) -> int:
        """The transcript's estimated bytes in memory: :data:`ENTRY_BYTES` an item, a
        frozen item's wire JSON, and :data:`DECODED_FACTOR` times a decoded item's. Costs
        the decoded items (encoded once each) and the frozen ones, not the cold ones,
        for a transcript with a ``fetch`` (without one every item is walked)."""
        entries = self._entries
        total = len(entries) * ENTRY_BYTES
        if self._fetch is not None:
            total += sum(len(entry.raw or b"") for entry in self._warm)
            behind: Iterable[int] = self._replaced
        else:
            behind = range(self._frozen_upto)
        for offset in chain(behind, range(self._frozen_upto, len(entries))):
            entry = entries[offset]
            if type(entry) is TranscriptItem:
                total += DECODED_FACTOR * len(encode(entry))
            elif self._fetch is None and type(entry) is FrozenItem:
                total += len(entry.raw or b"")
        return total

    def thawed(self) -> list[TranscriptItem]:
        """A plain list of every item, decoded (the transcript stays as it is)."""
        return list(self)

    def _changed(self, stable_id: str, ordinal: int) -> None:
        if self._fetch is not None and ordinal > self._committed:
            self._dirty[stable_id] = ordinal

    def _freeze(self, window: int | None = None) -> None:
        """Freeze every decoded item behind the newest ``window`` (:data:`WINDOW` by
        default; cold at once when committed)."""
        entries = self._entries
        end = len(entries) - (WINDOW if window is None else window)
        for offset in range(self._frozen_upto, end):
            entry = entries[offset]
            if type(entry) is TranscriptItem:
                entries[offset] = self._frozen(entry)
        self._frozen_upto = max(self._frozen_upto, end)
        for offset in self._replaced:
            entry = entries[offset]
            if type(entry) is TranscriptItem:
                entries[offset] = self._frozen(entry)
        self._replaced.clear()

    def _frozen(self, item: TranscriptItem) -> FrozenItem | str:
        if self._fetch is not None and item.stable_id not in self._dirty:
            return item.stable_id  # the store holds it: keep only its id
        frozen = FrozenItem(item)
        if self._fetch is not None:
            self._warm.append(frozen)
        return frozen
