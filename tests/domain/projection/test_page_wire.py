"""A page crosses the projection worker's pipe as msgpack and arrives equal.

The worker folds a session's events into pages and the embedding process commits what
arrives, so a page that decodes to anything but the page sent would commit other state
than the projection holds. These tests fold generated journals into pages (some with
their relay log row, some without) and hold every decoded page equal to the page sent;
keep "unchanged" apart from "set to None"; and refuse a page whose events were not
sealed.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.materialized import (
    UNCHANGED,
    MaterializedSession,
    MaterializedSessionMutation,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.projection import PageDelta, SessionProjection
from relaystore.domain.projection.page_wire import decode_page, encode_page
from relaystore.domain.relay import RelayEvent
from tests.domain.journal_stories import build_events, journal_observations, steps_strategy


def _pages(events: list[RelayEvent], size: int, *, log: bool) -> list[PageDelta]:
    projection = SessionProjection(MaterializedSession.empty("s"))
    pages: list[PageDelta] = []
    page = PageDelta.starting_at("s", projection.frontier)
    for event in events:
        mutation = projection.apply(event)
        assert mutation is not None
        page.add(event, mutation, applied_at_end=True)
        if page.applied == size:
            pages.append(page)
            page = PageDelta.starting_at("s", projection.frontier)
    pages.append(page)
    for each in pages:
        each.seal(log=log)
    return pages


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps_strategy, st.integers(1, 9), st.booleans())
def test_every_page_of_a_journal_arrives_equal(
    steps: list[tuple[str, int, str]], size: int, log: bool
) -> None:
    for page in _pages(build_events(journal_observations(steps)), size, log=log):
        assert decode_page(encode_page(page)) == page


def test_unchanged_stays_apart_from_none_and_a_removal_before_an_upsert_is_kept() -> None:
    steps = [("prompt", 0, "go"), ("start", 0, ""), ("chunk", 1, "hi")]
    events = build_events(journal_observations(steps))
    projection = SessionProjection(MaterializedSession.empty("s"))
    page = PageDelta.starting_at("s", projection.frontier)
    upserts: list[TranscriptUpsert] = []
    for event in events[:-1]:
        mutation = projection.apply(event)
        assert mutation is not None
        page.add(event, mutation, applied_at_end=True)
        upserts += [c for c in mutation.transcript if isinstance(c, TranscriptUpsert)]
    stable_id = upserts[0].item.stable_id
    cleared = MaterializedSessionMutation(
        session_title=None, transcript=[TranscriptRemove(stable_id), upserts[0]]
    )
    page.add(events[-1], cleared, digest_checked=True)
    page.seal(log=True)
    arrived = decode_page(encode_page(page))
    assert arrived == page
    assert arrived.session_title is None
    assert arrived.transcript[stable_id].remove_first
    empty = decode_page(encode_page(PageDelta.starting_at("s", projection.frontier)))
    assert empty.session_title is UNCHANGED
    assert empty.active_turn is UNCHANGED


def test_a_page_not_sealed_is_refused() -> None:
    events = build_events(journal_observations([("prompt", 0, "go")]))
    projection = SessionProjection(MaterializedSession.empty("s"))
    page = PageDelta.starting_at("s", projection.frontier)
    mutation = projection.apply(events[0])
    assert mutation is not None
    page.add(events[0], mutation, applied_at_end=True)
    with pytest.raises(ValueError, match="sealed"):
        encode_page(page)
