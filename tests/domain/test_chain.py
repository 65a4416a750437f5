"""The chain rule, as one table: frontier x incoming event -> step or fault.

The journal reader, the projector and the stored projection all use
:func:`relaystore.domain.chain.advance`; their own tests import :data:`CASES` to show
they agree with this table.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import pytest

from relaystore.domain.chain import GENESIS, MAX_ORDINAL, Step, advance, check_own_digest
from relaystore.domain.errors import ChainFault, RelayChainError
from relaystore.domain.relay import Closing, RelayCursor, RelayEvent

OTHER = "f" * 64


def _event(ordinal: int, *, format: int = 2, previous: str = "", at: int = 1_000) -> RelayEvent:
    return RelayEvent.create(
        ordinal=ordinal,
        recorded_at_ms=at + ordinal,
        observation=Closing(),
        format=format,
        previous_digest=previous,
    )


FIRST = _event(1)
SECOND = _event(2)
FIRST_V1 = _event(1, format=1, previous=GENESIS.digest)
SECOND_V1 = _event(2, format=1, previous=FIRST_V1.digest)


@dataclass(frozen=True)
class Case:
    name: str
    frontier: RelayCursor
    event: RelayEvent
    expected: Step | ChainFault


def _tampered(event: RelayEvent, **changes: object) -> RelayEvent:
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
        _tampered(FIRST, digest=OTHER),
        ChainFault.FORK,
    ),
    Case("gap", GENESIS, SECOND, ChainFault.GAP),
    Case("gap after a frontier", FIRST.cursor, _event(3), ChainFault.GAP),
    Case(
        "format 1 links elsewhere",
        FIRST_V1.cursor,
        _event(2, format=1, previous=OTHER),
        ChainFault.FORK,
    ),
    Case(
        "digest not its content's",
        FIRST.cursor,
        _tampered(SECOND, digest=OTHER),
        ChainFault.BAD_DIGEST,
    ),
    Case(
        "digest not hexadecimal", FIRST.cursor, _tampered(SECOND, digest="x"), ChainFault.BAD_DIGEST
    ),
    Case("unknown format", FIRST.cursor, _tampered(SECOND, format=3), ChainFault.UNKNOWN_FORMAT),
    Case("ordinal zero", GENESIS, _tampered(FIRST, ordinal=0), ChainFault.ORDINAL_OUT_OF_RANGE),
    Case(
        "ordinal negative", GENESIS, _tampered(FIRST, ordinal=-1), ChainFault.ORDINAL_OUT_OF_RANGE
    ),
    Case(
        "ordinal past SQLite's INTEGER",
        GENESIS,
        _tampered(FIRST, ordinal=MAX_ORDINAL + 1),
        ChainFault.ORDINAL_OUT_OF_RANGE,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_advance_follows_the_table(case: Case) -> None:
    if isinstance(case.expected, Step):
        assert advance(case.frontier, case.event, session_id="s") is case.expected
        return
    with pytest.raises(RelayChainError) as caught:
        advance(case.frontier, case.event, session_id="s")
    assert caught.value.fault is case.expected
    assert caught.value.session_id == "s"
    assert caught.value.ordinal == case.event.ordinal


def test_a_checked_digest_is_not_hashed_again() -> None:
    forged = _tampered(SECOND, digest=OTHER)
    assert advance(FIRST.cursor, forged, digest_checked=True) is Step.NEXT


def test_check_own_digest_verifies_an_event_without_a_frontier() -> None:
    check_own_digest(_event(3328))
    with pytest.raises(RelayChainError) as caught:
        check_own_digest(_tampered(_event(3328), digest=OTHER))
    assert caught.value.fault is ChainFault.BAD_DIGEST
    with pytest.raises(RelayChainError) as caught:
        check_own_digest(_tampered(FIRST, ordinal=0))
    assert caught.value.fault is ChainFault.ORDINAL_OUT_OF_RANGE
