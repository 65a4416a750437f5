"""Where a session's history starts when its journal does not start at ordinal 1.

Workers seal and prune journal segments, and a checkpoint restore leaves
``relay-seed.json`` in the worker root (the origin's ``RESTORED_RELAY_SEED_FILE``:
``{"event_frontier": N, "event_frontier_digest": D, "queued_prompts": [...]}``) for the
relay that opens next: it continues at N+1, with the queue the checkpoint held, and the
transcript before N lives in the checkpoint archive, not in the journal. relaystore
starts such a session at frontier (N, D) with that queue.

A journal whose earlier segments are simply gone has no seed; ``replay --from-first``
adopts its first event's position (:func:`start_before`).
"""

from __future__ import annotations

import hashlib

import msgspec

from .chain import checked_frontier
from .errors import ChainFault, InvalidInput, RelayChainError
from .hashing import RELAY_EVENT_FORMAT_V1
from .materialized import MaterializedQueuedPrompt
from .relay.events import RelayEvent, RelayLine
from .relay.payloads import RelayCursor

__all__ = ["RelaySeed", "decode_relay_seed", "start_before"]

_HISTORY_START_DOMAIN = b"relaystore-history-start\x00"


class RelaySeed(msgspec.Struct, kw_only=True):
    """The seed a checkpoint restore leaves for the next relay (unknown keys are ignored:
    later origin builds add fields relaystore has no use for)."""

    event_frontier: int
    event_frontier_digest: str
    queued_prompts: list[MaterializedQueuedPrompt] = msgspec.field(default_factory=list)

    @property
    def frontier(self) -> RelayCursor:
        return RelayCursor(ordinal=self.event_frontier, digest=self.event_frontier_digest)


_SEED_DECODER = msgspec.json.Decoder(RelaySeed)


def decode_relay_seed(data: bytes) -> RelaySeed:
    """Read ``relay-seed.json``; raises :class:`InvalidInput` naming what is wrong."""
    try:
        seed = _SEED_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"invalid relay seed: {exc}") from exc
    try:
        checked_frontier(seed.event_frontier, seed.event_frontier_digest)
    except RelayChainError as exc:
        raise InvalidInput(f"invalid relay seed: {exc.detail}") from exc
    return seed


def start_before(first: RelayEvent | RelayLine) -> RelayCursor:
    """The frontier a journal starting at ``first`` continues from.

    A format 1 event names its predecessor's digest. A format 2 event does not, so the
    frontier gets a digest derived from the first event that no real event has: a
    re-delivered earlier event then reads as a fork, never as already applied.
    """
    if first.ordinal <= 1:
        raise InvalidInput(f"a journal starting at ordinal {first.ordinal} needs no start")
    if first.format == RELAY_EVENT_FORMAT_V1:
        digest = first.previous_digest
    else:
        digest = hashlib.sha256(_HISTORY_START_DOMAIN + first.digest.encode()).hexdigest()
    return checked_frontier(first.ordinal - 1, digest)


def seed_needed(stored: RelayCursor, start: RelayCursor, *, session_id: str) -> bool:
    """Whether a projection at ``stored`` takes a seeded start at ``start``.

    ``start`` must be a well-formed frontier of ordinal 1 or more (:class:`InvalidInput`).
    A projection already at or past it is left as it is (False: a second replay of a
    seeded worker root); an empty one takes it (True); one that holds events before it
    cannot continue there (:class:`RelayChainError`, ``GAP``).
    """
    if start.ordinal < 1:
        raise InvalidInput(
            f"a seeded history starts after a frontier of ordinal 1 or more, got {start.ordinal}",
            session_id=session_id,
        )
    checked_frontier(start.ordinal, start.digest, session_id=session_id)
    if stored.ordinal >= start.ordinal:
        return False
    if stored.ordinal != 0:
        raise RelayChainError(
            ChainFault.GAP,
            f"the store holds this session up to ordinal {stored.ordinal}; its history "
            f"cannot start again at {start.ordinal + 1}",
            session_id=session_id,
            ordinal=start.ordinal + 1,
        )
    return True
