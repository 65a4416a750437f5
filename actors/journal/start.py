"""Where reading a session's journal starts when the store holds nothing of it.

One rule, for ``replay`` and ``verify`` alike (:func:`history_start`):

* a worker root's ``relay-seed.json`` (left by a checkpoint restore) names the frontier
  the journal continues: reading starts after it, and the first event must chain to it
  (the reader's chain rule says so, naming the seed file when it does not); a seed past
  the journal's last event is refused;
* otherwise a journal that starts at ordinal 1 (or holds nothing) starts at genesis;
* a journal whose first event is past ordinal 1 lost its earlier segments: it is refused
  (a gap from genesis, naming ``--from-first``) unless ``from_first`` adopts the first
  event's position (:func:`relaystore.domain.seed.start_before`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...domain.chain import GENESIS
from ...domain.errors import ChainFault, RelayChainError
from ...domain.materialized import MaterializedQueuedPrompt
from ...domain.relay.payloads import RelayCursor
from ...domain.seed import start_before
from ...domain.worker_root import SEED_NAME
from .reader import JournalReader
from .sources import JournalSource

__all__ = ["JournalStart", "history_start"]


@dataclass(frozen=True, slots=True)
class JournalStart:
    """Where a session's history starts: read after ``after``.

    ``origin`` says why: ``genesis`` (ordinal 1), ``seed`` (``relay-seed.json``, whose
    ``queued_prompts`` the session starts with) or ``first_event`` (``--from-first``).
    ``note`` names where a start other than genesis came from, for refusals.
    ``refusal`` is set for a journal whose earlier segments are gone, read without
    ``from_first``: replay raises it, verify reports it.
    """

    after: RelayCursor
    origin: Literal["genesis", "seed", "first_event"]
    queued_prompts: list[MaterializedQueuedPrompt] = field(default_factory=list)
    note: str | None = None
    refusal: RelayChainError | None = None


def history_start(source: JournalSource, *, from_first: bool) -> JournalStart:
    """The start of ``source``'s history (see the module doc). The refusal of a journal
    whose earlier segments are gone is returned, located at its first line; a problem of
    that first line itself is raised, as reading it would raise it."""
    if source.seed is not None:
        seed_file = source.seed_path or source.path / SEED_NAME
        frontier = source.seed.frontier
        last = source.last_ordinal
        if last is not None and frontier.ordinal > last:
            refusal = RelayChainError(
                ChainFault.GAP,
                f"{seed_file} starts the history after ordinal {frontier.ordinal}, past the "
                f"journal's last event ({last}): the seed belongs to another journal, or the "
                "journal lost its newer events",
                session_id=source.session_id,
                ordinal=frontier.ordinal,
                path=str(seed_file),
            )
            return JournalStart(after=GENESIS, origin="genesis", refusal=refusal)
        return JournalStart(
            after=frontier,
            origin="seed",
            queued_prompts=list(source.seed.queued_prompts),
            note=f"the history starts after ordinal {frontier.ordinal}, as {seed_file} says",
        )
    first = next(iter(JournalReader(source, keep_unknown=True)), None)
    if first is None or first[0].ordinal <= 1:
        return JournalStart(after=GENESIS, origin="genesis")
    event, location = first
    if not from_first:
        refusal = RelayChainError(
            ChainFault.GAP,
            f"the journal starts at ordinal {event.ordinal}, not 1: its earlier segments "
            "are gone and the worker root has no relay-seed.json. Replay with --from-first "
            "to start the session's history at its first event",
            session_id=source.session_id,
            ordinal=event.ordinal,
            path=str(location.path),
            line=location.line,
        )
        return JournalStart(after=GENESIS, origin="genesis", refusal=refusal)
    return JournalStart(
        after=start_before(event),
        origin="first_event",
        note=f"the history starts at ordinal {event.ordinal}, the journal's first event",
    )
