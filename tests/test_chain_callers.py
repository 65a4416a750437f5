"""Every caller of the chain rule agrees with its one table (``tests/chain_table.py``).

The projection (:class:`SessionProjection`), the stored page (:class:`PageDelta`) and
the journal reader (``verify``) each place an incoming event against a frontier; none of
them states the rule itself, so for every row of the table each gives the table's step
or fault.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from relaystore.actors.journal import JournalReader, ReadMode, resolve_source
from relaystore.domain.chain import Step
from relaystore.domain.errors import ChainFault, RelayChainError
from relaystore.domain.materialized import MaterializedSession, MaterializedSessionMutation
from relaystore.domain.projection.page import PageDelta
from relaystore.domain.projection.session import SessionProjection
from relaystore.domain.relay import encode_relay_event
from tests.chain_table import CASES, Case

IDS = [case.name for case in CASES]


def _session_at(case: Case) -> MaterializedSession:
    return MaterializedSession(
        session_id="s",
        applied_event_ordinal=case.frontier.ordinal,
        applied_event_digest=case.frontier.digest,
    )


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_projection_follows_the_table(case: Case) -> None:
    projection = SessionProjection(_session_at(case))
    if isinstance(case.expected, Step):
        mutation = projection.apply(case.event)
        assert (mutation is None) == (case.expected is Step.ALREADY_APPLIED)
        return
    with pytest.raises(RelayChainError) as caught:
        projection.apply(case.event)
    assert caught.value.fault is case.expected
    assert projection.session.frontier == case.frontier  # a refused event changed nothing


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_stored_page_follows_the_table(case: Case) -> None:
    page = PageDelta.starting_at("s", case.frontier)
    mutation = MaterializedSessionMutation(last_activity_at_ms=case.event.recorded_at_ms)
    if isinstance(case.expected, Step):
        assert page.add(case.event, mutation) is case.expected
        return
    with pytest.raises(RelayChainError) as caught:
        page.add(case.event, mutation)
    assert caught.value.fault is case.expected
    assert (page.end, page.applied) == (case.frontier, 0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_projectors_page_follows_the_table(case: Case) -> None:
    """The projector folds what its projection applied with ``applied_at_end``: the page
    trusts the projection's placement, so the pair together must still follow the table."""
    projection = SessionProjection(_session_at(case))
    page = PageDelta.starting_at("s", case.frontier)
    if not isinstance(case.expected, Step):
        with pytest.raises(RelayChainError) as caught:
            projection.apply(case.event)
        assert caught.value.fault is case.expected
        return
    mutation = projection.apply(case.event)
    if mutation is None:
        assert case.expected is Step.ALREADY_APPLIED
        return
    assert page.add(case.event, mutation, applied_at_end=True) is Step.NEXT
    assert (page.end, page.applied) == (projection.frontier, 1)


NOT_FOLLOWING = [case for case in CASES if case.event.ordinal != case.frontier.ordinal + 1]


@pytest.mark.parametrize("case", NOT_FOLLOWING, ids=[case.name for case in NOT_FOLLOWING])
def test_applied_at_end_still_checks_an_event_that_does_not_follow_the_page(case: Case) -> None:
    page = PageDelta.starting_at("s", case.frontier)
    mutation = MaterializedSessionMutation(last_activity_at_ms=case.event.recorded_at_ms)
    if isinstance(case.expected, Step):
        assert page.add(case.event, mutation, applied_at_end=True) is case.expected
        return
    with pytest.raises(RelayChainError) as caught:
        page.add(case.event, mutation, applied_at_end=True)
    assert caught.value.fault is case.expected


# The wire cannot carry a negative ordinal (the decoder refuses the line itself).
WIRE_CASES = [case for case in CASES if case.event.ordinal >= 0]


@pytest.mark.parametrize("case", WIRE_CASES, ids=[case.name for case in WIRE_CASES])
def test_the_journal_reader_follows_the_table(case: Case, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(encode_relay_event(case.event) + b"\n")
    reader = JournalReader(
        resolve_source(journal, session_id="s"),
        mode=ReadMode.VERIFY,
        check_chain=True,
        after=case.frontier,  # as replay reads: from the store's frontier (genesis included)
    )
    read = list(reader)
    if isinstance(case.expected, Step):
        assert reader.problems == []
        assert len(read) == (1 if case.expected is Step.NEXT else 0)
        return
    assert [problem.kind.value for problem in reader.problems] == [case.expected.value]
    assert isinstance(case.expected, ChainFault)
