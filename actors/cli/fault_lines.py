"""The errors and faults ``transcript -o text`` shows among a session's items.

A turn that failed or was interrupted, a session fault: the transcript holds no item
for them (the feed does), so ``-o text`` would show a session whose last turn hit a
quota limit as if nothing happened. :class:`FaultLines` reads the session's feed beside
the transcript pages and hands back, for each page, its item lines with the fault
lines merged in: a turn's end at its completed ordinal (the seq of the transcript line
it follows), a fault without an ordinal (a session fault, a failed command) once the
whole transcript read so far is printed (``--after SEQ`` leaves out a turn that ended at
or before SEQ, as it leaves out its items). Each line is
:func:`~relaystore.actors.cli.output.fault_text`'s: ``! SEQ  TIME  turn: ERROR ...``.

Must not: decide what is a fault (:mod:`relaystore.domain.faults` does) or print.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...domain.paging import MAX_PAGE_LIMIT
from .output import fault_text

if TYPE_CHECKING:
    from ..store import EventStore

__all__ = ["FaultLines"]


class FaultLines:
    """The session's fault lines not printed yet, read from its feed as pages go by."""

    def __init__(self, store: EventStore, session_id: str, after_seq: int = 0) -> None:
        self._store = store
        self._floor = after_seq
        """A turn that ended at or before this seq belongs to items not printed."""
        self._session_id = session_id
        self._after = 0
        self._waiting: list[tuple[int | None, str]] = []
        """(ordinal or None, line) read but not printed yet."""

    def _read(self) -> None:
        from ...domain.api_events import ApiEventFilter
        from ...domain.messages import LoadRawApiEvents

        wanted = ApiEventFilter(session_id=self._session_id)
        while True:
            page = self._store.ask(
                LoadRawApiEvents(filter=wanted, after_seq=self._after, limit=MAX_PAGE_LIMIT)
            )
            for event in page.events:
                found = fault_text(json.loads(event.json))
                if found is not None and (found[0] is None or found[0] > self._floor):
                    self._waiting.append(found)
            self._after = page.next_after_seq
            if not page.events:
                return

    def merge(self, items: list[tuple[int, str]], *, through: int | None) -> list[str]:
        """The lines of ``items`` (``(seq, line)`` in seq order) with the fault lines
        due among them: a turn's end at or before ``through``; None (the transcript
        printed so far is the whole of it): every one, and the faults without an
        ordinal after the items."""
        self._read()
        due = [
            (ordinal, line)
            for ordinal, line in self._waiting
            if through is None or (ordinal is not None and ordinal <= through)
        ]
        self._waiting = [entry for entry in self._waiting if entry not in due]
        last = items[-1][0] if items else 0
        merged: list[tuple[int, int, str]] = [(seq, 0, line) for seq, line in items]
        merged += [(last if ordinal is None else ordinal, 1, line) for ordinal, line in due]
        merged.sort(key=lambda entry: entry[:2])
        return [line for _, _, line in merged]
