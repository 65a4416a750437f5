"""The chain rule, as one table: frontier x incoming event -> step or fault.

The domain's own test (``tests/domain/test_chain.py``) and the tests of every caller of
:func:`relaystore.domain.chain.advance` (the projection, the stored page, the journal
reader: ``tests/test_chain_callers.py``) run this one table.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from relaystore.domain.chain import GENESIS, MAX_ORDINAL, Step
from relaystore.domain.errors import ChainFault
from relaystore.domain.relay import Closing, RelayCursor, RelayEvent

OTHER = "f" * 64


def event_at(ordinal: int, *, format: int = 2, previous: str = "", at: int = 1_000) -> RelayEvent:
    return RelayEvent.create(
        ordinal=ordinal,
        recorded_at_ms=at + ordinal,
        observation=Closing(),
        format=format,
        previous_digest=previous,
    )


FIRST = event_at(1)
SECOND = event_at(2)
FIRST_V1 = event_at(1, format=1, previous=GENESIS.digest)
SECOND_V1 = event_at(2, format=1, previous=FIRST_V1.digest)


@dataclass(frozen=True)
class Case:
    name: str
    frontier: RelayCursor
    event: RelayEvent
    expected: Step | ChainFault


def tampered(event: RelayEvent, **changes: object) -> RelayEvent:
    return msgspec.structs.replace(event, **changes)  # type: ignore[arg-type]


CASES = [
    Case("first event from genesis", GENESIS, FIRST, Step.NEXT),
    Case("next event", FIRST.cursor, SECOND, Step.NEXT),
    Case("format 1 next event links", FIRST_V1.cursor, SECOND_V1, Step.NEXT),
    Case("exact duplicate of the frontier", FIRST.cursor, FIRST, Step.ALREADY_APPLIED),
    Case("below the frontier", SECOND.cursor, FIRST, Step.ALREADY_APPLIED),
    Case(
        "frontier ordinal, other digest",
        FIRST.cursor,
        tampered(FIRST, digest=OTHER),
        ChainFault.FORK,
    ),
    Case("gap", GENESIS, SECOND, ChainFault.GAP),
    Case("gap after a frontier", FIRST.cursor, event_at(3), ChainFault.GAP),
    Case(
        "format 1 links elsewhere",
        FIRST_V1.cursor,
        event_at(2, format=1, previous=OTHER),
        ChainFault.FORK,
    ),
    Case(
        "digest not its content's",
        FIRST.cursor,
        tampered(SECOND, digest=OTHER),
        ChainFault.BAD_DIGEST,
    ),
    Case(
        "digest not hexadecimal", FIRST.cursor, tampered(SECOND, digest="x"), ChainFault.BAD_DIGEST
    ),
    Case("unknown format", FIRST.cursor, tampered(SECOND, format=3), ChainFault.UNKNOWN_FORMAT),
    Case("ordinal zero", GENESIS, tampered(FIRST, ordinal=0), ChainFault.ORDINAL_OUT_OF_RANGE),
    Case("ordinal negative", GENESIS, tampered(FIRST, ordinal=-1), ChainFault.ORDINAL_OUT_OF_RANGE),
    Case(
        "ordinal past SQLite's INTEGER",
        GENESIS,
        tampered(FIRST, ordinal=MAX_ORDINAL + 1),
        ChainFault.ORDINAL_OUT_OF_RANGE,
    ),
]
