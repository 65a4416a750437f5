"""The chain rule's own test: :func:`advance` follows the table in ``tests/chain_table.py``."""

from __future__ import annotations

import pytest

from relaystore.domain.chain import Step, advance, check_own_digest
from relaystore.domain.errors import ChainFault, RelayChainError
from tests.chain_table import CASES, FIRST, OTHER, SECOND, Case, event_at, tampered


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
    forged = tampered(SECOND, digest=OTHER)
    assert advance(FIRST.cursor, forged, digest_checked=True) is Step.NEXT


def test_check_own_digest_verifies_an_event_without_a_frontier() -> None:
    check_own_digest(event_at(3328))
    with pytest.raises(RelayChainError) as caught:
        check_own_digest(tampered(event_at(3328), digest=OTHER))
    assert caught.value.fault is ChainFault.BAD_DIGEST
    with pytest.raises(RelayChainError) as caught:
        check_own_digest(tampered(FIRST, ordinal=0))
    assert caught.value.fault is ChainFault.ORDINAL_OUT_OF_RANGE
