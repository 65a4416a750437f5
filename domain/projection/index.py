"""The transcript index: lookups over one transcript list, changed together with it.

A :class:`~relaystore.domain.projection.session.SessionProjection` owns one transcript list and its
one index; nothing else holds either, so there is no cache and no sharing to manage.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from ..materialized import (
    AgentBody,
    PlanBody,
    TerminalOutputBody,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
    UserBody,
)
from .calls import (
    RawResultKey,
    is_fallback_terminal_call,
    raw_result_candidate,
    raw_result_key,
    terminal_result_key,
    tool_call_terminal_ids,
)
from .markers import HARNESS_TURN_ITEM_PREFIX

__all__ = [
    "INDEX_SETS",
    "NO_FACTS",
    "ColdEntry",
    "ItemFacts",
    "TranscriptIndex",
    "decode_item_facts",
    "encode_item_facts",
    "item_facts",
]


class _IdsByOffset(Protocol):
    """A transcript that names the stable id at an offset without decoding the item."""

    def __len__(self) -> int: ...

    def stable_id(self, offset: int) -> str: ...


_StableIds = list[TranscriptItem] | _IdsByOffset


def _stable_id(transcript: _StableIds, offset: int) -> str:
    if isinstance(transcript, list):
        return transcript[offset].stable_id
    return transcript.stable_id(offset)


_OPEN_AGENTS = "open_agents"
_OPEN_THOUGHTS = "open_thoughts"
_RAW_TOOLS = "raw_tools"
_PARKED = "parked"
_PLANS = "plans"
_TURNS = "turns"
_ID_SETS = (_OPEN_AGENTS, _OPEN_THOUGHTS, _RAW_TOOLS, _PARKED)
_ORDERED = (_PLANS, _TURNS)


@dataclass(slots=True)
class TranscriptIndex:
    """Lookups over one transcript list, so projecting an event does not walk it.

    ``positions`` maps stable ids to list offsets; the id sets hold open agent and
    thought streams, provider tools whose raw result can claim a terminal
    (``raw_tools``) and terminal output not yet owned by a provider tool (``parked``);
    ``plans`` and ``turns`` (the items that start a turn: user prompts and harness
    turns) keep their ids in transcript order, so the newest is the last;
    ``referrers`` maps terminal ids to the tool items referring to them.
    ``raw_results`` and ``parked_results`` map a result key (exit code and output, see
    :func:`~relaystore.domain.projection.calls.raw_result_key`) to the ``raw_tools`` and ``parked``
    ids holding that result, so matching a terminal result to a raw result is one lookup.
    They follow from the other fields, so they take no part in comparing indexes.

    An index describes exactly one list and changes only together with it: applying an
    event changes the list and its index step by step (:meth:`append`, :meth:`replace`,
    :meth:`remove`), so the cost follows the change, not the length of the transcript.
    """

    positions: dict[str, int]
    open_agents: set[str]
    open_thoughts: set[str]
    raw_tools: set[str]
    parked: set[str]
    plans: dict[str, None]
    turns: dict[str, None]
    referrers: dict[str, frozenset[str]]
    raw_results: dict[RawResultKey, set[str]] = field(default_factory=dict, compare=False)
    parked_results: dict[RawResultKey, set[str]] = field(default_factory=dict, compare=False)

    @classmethod
    def build(cls, transcript: Iterable[TranscriptItem]) -> TranscriptIndex:
        """Index ``transcript`` from scratch (one pass over it, in order)."""
        return cls.from_facts((item.stable_id, item_facts(item)) for item in transcript)

    @classmethod
    def from_facts(cls, entries: Iterable[tuple[str, ItemFacts]]) -> TranscriptIndex:
        """Index a transcript given as each item's stable id and :func:`item_facts`, in
        order: the index :meth:`build` makes of the items themselves, without them (a
        projector reloading its session reads the facts the store kept)."""
        positions: dict[str, int] = {}
        sets: dict[str, set[str]] = {name: set() for name in _ID_SETS}
        ordered: dict[str, dict[str, None]] = {name: {} for name in _ORDERED}
        referrers: dict[str, set[str]] = {}
        raw_results: dict[RawResultKey, set[str]] = {}
        parked_results: dict[RawResultKey, set[str]] = {}
        for offset, (stable_id, facts) in enumerate(entries):
            positions[stable_id] = offset
            if facts is NO_FACTS:
                continue
            for name in facts.sets:
                if name in ordered:
                    ordered[name][stable_id] = None
                else:
                    sets[name].add(stable_id)
            for terminal_id in facts.terminal_ids:
                referrers.setdefault(terminal_id, set()).add(stable_id)
            if facts.raw_key is not None:
                raw_results.setdefault(facts.raw_key, set()).add(stable_id)
            if facts.parked_key is not None:
                parked_results.setdefault(facts.parked_key, set()).add(stable_id)
        return cls(
            positions=positions,
            open_agents=sets[_OPEN_AGENTS],
            open_thoughts=sets[_OPEN_THOUGHTS],
            raw_tools=sets[_RAW_TOOLS],
            parked=sets[_PARKED],
            plans=ordered[_PLANS],
            turns=ordered[_TURNS],
            referrers={key: frozenset(value) for key, value in referrers.items()},
            raw_results=raw_results,
            parked_results=parked_results,
        )

    def append(self, item: TranscriptItem, offset: int) -> None:
        """Index ``item``, just appended to the list at ``offset``."""
        self.positions[item.stable_id] = offset
        facts = item_facts(item)
        if facts is not NO_FACTS:
            self._enter(item.stable_id, facts.sets, facts.terminal_ids, at_end=True)
            self._enter_results(item.stable_id, (facts.raw_key, facts.parked_key))

    def replace(self, before: TranscriptItem, after: TranscriptItem) -> None:
        """Re-index the item whose offset now holds ``after`` instead of ``before``."""
        was, now = item_facts(before), item_facts(after)
        if was == now:
            return
        stable_id = after.stable_id
        if was.sets != now.sets:
            self._leave(stable_id, [name for name in was.sets if name not in now.sets], ())
            self._enter(
                stable_id, [name for name in now.sets if name not in was.sets], (), at_end=False
            )
        if was.terminal_ids != now.terminal_ids:
            self._leave(stable_id, (), was.terminal_ids)
            self._enter(stable_id, (), now.terminal_ids, at_end=False)
        old_keys, new_keys = (was.raw_key, was.parked_key), (now.raw_key, now.parked_key)
        if old_keys != new_keys:
            self._leave_results(stable_id, old_keys)
            self._enter_results(stable_id, new_keys)

    def remove(self, item: TranscriptItem, offset: int, transcript: _StableIds) -> None:
        """Un-index ``item``, just deleted from ``transcript`` at ``offset``.

        The items after it moved up one place; they are re-indexed, so a removal costs
        the number of items after it (the items removed are recent ones: parked
        terminal output and interim tools).
        """
        positions = self.positions
        del positions[item.stable_id]
        for later in range(offset, len(transcript)):
            positions[_stable_id(transcript, later)] = later
        facts = item_facts(item)
        self._leave(item.stable_id, facts.sets, facts.terminal_ids)
        self._leave_results(item.stable_id, (facts.raw_key, facts.parked_key))

    def _enter_results(self, stable_id: str, keys: _ResultKeys) -> None:
        raw_key, parked_key = keys
        if raw_key is not None:
            self.raw_results.setdefault(raw_key, set()).add(stable_id)
        if parked_key is not None:
            self.parked_results.setdefault(parked_key, set()).add(stable_id)

    def _leave_results(self, stable_id: str, keys: _ResultKeys) -> None:
        for results, key in zip((self.raw_results, self.parked_results), keys, strict=True):
            if key is None:
                continue
            ids = results.get(key)
            if ids is None:
                continue
            ids.discard(stable_id)
            if not ids:
                del results[key]

    def _enter(
        self, stable_id: str, sets: Iterable[str], terminal_ids: Iterable[str], *, at_end: bool
    ) -> None:
        for name in sets:
            ids = getattr(self, name)
            if isinstance(ids, set):
                ids.add(stable_id)
                continue
            ids[stable_id] = None
            if not at_end and len(ids) > 1:
                # Joined in the middle of the list (an item changed into a plan): re-sort.
                positions = self.positions
                setattr(self, name, dict.fromkeys(sorted(ids, key=positions.__getitem__)))
        referrers = self.referrers
        for terminal_id in terminal_ids:
            referrers[terminal_id] = referrers.get(terminal_id, frozenset()) | {stable_id}

    def _leave(self, stable_id: str, sets: Iterable[str], terminal_ids: Iterable[str]) -> None:
        for name in sets:
            ids = getattr(self, name)
            if isinstance(ids, set):
                ids.discard(stable_id)
            else:
                ids.pop(stable_id, None)
        referrers = self.referrers
        for terminal_id in terminal_ids:
            remaining = referrers.get(terminal_id, frozenset()) - {stable_id}
            if remaining:
                referrers[terminal_id] = remaining
            else:
                referrers.pop(terminal_id, None)


class ItemFacts(msgspec.Struct, frozen=True, array_like=True, forbid_unknown_fields=True):
    """What the index files about one item: the id sets it belongs to (``sets``, in
    :data:`INDEX_SETS`), the terminals it refers to, and its result keys.

    Everything :class:`TranscriptIndex` knows of an item besides its offset, so an index
    made from the facts of every item (:meth:`TranscriptIndex.from_facts`) is the index
    of the items. The store keeps each item's facts beside its body
    (:func:`encode_item_facts`), so a projector reloading a long session reads them
    instead of decoding every item.
    """

    sets: tuple[str, ...] = ()
    terminal_ids: tuple[str, ...] = ()
    raw_key: tuple[Any, bytes] | None = None
    parked_key: tuple[Any, bytes] | None = None


ColdEntry = tuple[str, ItemFacts]
"""A stored item as a reloading projector enters it without its body: its stable id and
its facts."""

NO_FACTS = ItemFacts()
"""The facts of an item the index files nowhere (most items)."""

INDEX_SETS = frozenset((*_ID_SETS, *_ORDERED))
"""The names :attr:`ItemFacts.sets` may hold."""

_FACTS_DECODER = msgspec.json.Decoder(ItemFacts)

_STREAMING_FACTS: dict[type, ItemFacts] = {
    AgentBody: ItemFacts(sets=(_OPEN_AGENTS,)),
    ThoughtBody: ItemFacts(sets=(_OPEN_THOUGHTS,)),
}
"""The facts of a streaming agent or thought item (not a harness turn's): what
:func:`_sets_of`, :func:`_item_terminal_ids` and :func:`_result_keys` say of one."""


def item_facts(item: TranscriptItem) -> ItemFacts:
    """What the index files about ``item`` (:data:`NO_FACTS` when nothing)."""
    body = item.body
    if (type(body) is AgentBody or type(body) is ThoughtBody) and not item.stable_id.startswith(
        HARNESS_TURN_ITEM_PREFIX
    ):  # most items (streamed chunks): an open set or nothing, no terminals, no results
        return _STREAMING_FACTS[type(body)] if body.streaming else NO_FACTS
    sets = _sets_of(item)
    terminal_ids = _item_terminal_ids(body)
    raw_key, parked_key = _result_keys(body)
    if not sets and not terminal_ids and raw_key is None and parked_key is None:
        return NO_FACTS
    return ItemFacts(
        sets=sets, terminal_ids=tuple(terminal_ids), raw_key=raw_key, parked_key=parked_key
    )


def encode_item_facts(facts: ItemFacts) -> bytes:
    """``facts`` as stored: empty for :data:`NO_FACTS`, else compact JSON."""
    return b"" if facts is NO_FACTS or facts == NO_FACTS else _FACTS_ENCODER.encode(facts)


def decode_item_facts(data: bytes | str) -> ItemFacts:
    """Stored facts read back (:func:`encode_item_facts`); raises ``ValueError`` (a
    ``msgspec.DecodeError`` among them) for anything it did not write."""
    if not data:
        return NO_FACTS
    facts = _FACTS_DECODER.decode(data)
    if not INDEX_SETS.issuperset(facts.sets):
        raise ValueError(f"unknown index sets {sorted(set(facts.sets) - INDEX_SETS)}")
    for key in (facts.raw_key, facts.parked_key):
        if key is not None:
            try:
                hash(key)
            except TypeError:
                raise ValueError(f"result key {key!r} cannot key an index") from None
    return facts


_FACTS_ENCODER = msgspec.json.Encoder()


def _sets_of(item: TranscriptItem) -> tuple[str, ...]:
    """The index id sets ``item`` belongs to."""
    if isinstance(item.body, UserBody) or item.stable_id.startswith(HARNESS_TURN_ITEM_PREFIX):
        return (*_body_sets(item.body), _TURNS)
    return _body_sets(item.body)


def _body_sets(body: Any) -> tuple[str, ...]:
    if isinstance(body, AgentBody):
        return (_OPEN_AGENTS,) if body.streaming else ()
    if isinstance(body, ThoughtBody):
        return (_OPEN_THOUGHTS,) if body.streaming else ()
    if isinstance(body, PlanBody):
        return (_PLANS,)
    if isinstance(body, TerminalOutputBody):
        return (_PARKED,)
    if isinstance(body, ToolBody):
        if is_fallback_terminal_call(body.call):
            return (_PARKED,) if body.terminal_outputs else ()
        return (_RAW_TOOLS,) if raw_result_candidate(body.call) else ()
    return ()


def _item_terminal_ids(body: Any) -> list[str]:
    if type(body) is not ToolBody:
        return []
    ids = tool_call_terminal_ids(body.call)
    ids.extend(body.terminal_refs)
    return ids


_ResultKeys = tuple[RawResultKey | None, RawResultKey | None]
_NO_RESULT: _ResultKeys = (None, None)


def _result_keys(body: Any) -> _ResultKeys:
    """The result keys of an item (``raw_tools``, ``parked``), as :func:`_body_sets` files it.

    A provider tool in ``raw_tools`` is keyed by its raw result; a parked item (a
    ``terminal:`` item, or a fallback tool holding output) by its first output.
    """
    if isinstance(body, TerminalOutputBody):
        return (None, terminal_result_key(body.record))
    if isinstance(body, ToolBody):
        if is_fallback_terminal_call(body.call):
            if body.terminal_outputs:
                return (None, terminal_result_key(body.terminal_outputs[0]))
            return _NO_RESULT
        return (raw_result_key(body.call), None)
    return _NO_RESULT
