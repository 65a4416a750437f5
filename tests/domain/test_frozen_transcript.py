"""Frozen transcript items: a projection keeps old items as bytes and projects the same.

The window is patched down to a few items here so that generated journals freeze, thaw,
replace and remove items behind it on almost every event; the projection must yield
exactly the mutations, feed and session it yields with every item decoded.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from relaystore.domain.materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    TranscriptItem,
    UserBody,
)
from relaystore.domain.projection import SessionProjection, frozen
from relaystore.domain.projection.context import ProjectionContext
from relaystore.domain.projection.frozen import FrozenItem, Transcript
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.relay import RelayEvent
from relaystore.domain.wire import encode
from tests.domain.journal_stories import build_events, journal_observations, steps_strategy


def _item(n: int, text: str = "") -> TranscriptItem:
    return TranscriptItem(
        stable_id=f"system:{n}",
        position=n,
        latest_content_event_ordinal=None,
        created_at_ms=n,
        last_changed_at_ms=n,
        body=SystemBody(text=text or f"line {n} " + "é" * n),
    )


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frozen, "WINDOW", 3)
    monkeypatch.setattr(frozen, "SLACK", 2)
    return


def _frozen_offsets(transcript: Transcript) -> list[int]:
    entries = transcript._entries  # the representation is what these tests are about
    return [offset for offset, entry in enumerate(entries) if type(entry) in (FrozenItem, str)]


@pytest.mark.usefixtures("small_window")
def test_items_behind_the_window_are_frozen_and_read_back_equal() -> None:
    items = [_item(n) for n in range(10)]
    transcript = Transcript(items)
    assert _frozen_offsets(transcript) == list(range(7))  # all but the newest 3
    assert [transcript[n] for n in range(10)] == items
    assert list(transcript) == items == transcript.thawed()
    assert [transcript.stable_id(n) for n in range(10)] == [item.stable_id for item in items]
    assert transcript[-1] is items[-1]  # the window is not copied


@pytest.mark.usefixtures("small_window")
def test_appending_freezes_in_batches_of_the_slack() -> None:
    transcript = Transcript([_item(n) for n in range(3)])
    assert _frozen_offsets(transcript) == []
    transcript.append(_item(3))
    assert _frozen_offsets(transcript) == []  # one past the window: waits for the slack
    transcript.append(_item(4))
    assert _frozen_offsets(transcript) == [0, 1]
    assert list(transcript) == [_item(n) for n in range(5)]


@pytest.mark.usefixtures("small_window")
def test_an_item_replaced_behind_the_window_is_frozen_again_after_the_slack() -> None:
    transcript = Transcript([_item(n) for n in range(8)])
    changed = [_item(1, "changed one"), _item(2, "changed two")]
    transcript.replace(1, changed[0])
    assert transcript[1] == changed[0]
    assert 1 not in _frozen_offsets(transcript)
    transcript.replace(2, changed[1])
    assert _frozen_offsets(transcript) == list(range(5))
    assert transcript[1] == changed[0]
    assert transcript[2] == changed[1]


@pytest.mark.usefixtures("small_window")
def test_popping_moves_later_items_up_frozen_or_not() -> None:
    items = [_item(n) for n in range(8)]
    transcript = Transcript(items)
    transcript.replace(2, _item(2, "changed"))  # replaced behind the window, still decoded
    assert transcript.pop(1) == items[1]
    assert transcript.pop(6) == items[7]
    expected = [items[0], _item(2, "changed"), *items[3:7]]
    assert list(transcript) == expected
    assert len(transcript) == 6
    transcript.replace(4, _item(5, "again"))  # offset 4 is behind the window now
    assert transcript[4] == _item(5, "again")
    assert transcript[1] == _item(2, "changed")


def _project(
    events: list[RelayEvent],
) -> tuple[list[MaterializedSessionMutation | None], bytes, SessionProjection]:
    projection = SessionProjection(MaterializedSession.empty("session-1"))
    mutations = [projection.apply(event) for event in events]
    return mutations, encode(projection.session), projection


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.tuples(steps_strategy, st.integers(1, 5)).map(lambda pair: pair[0] * pair[1]))
def test_a_projection_with_frozen_items_projects_exactly_as_one_without(
    steps: list[tuple[str, int, str]],
) -> None:
    events = build_events(journal_observations(steps))
    whole = _project(events)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frozen, "WINDOW", 1)
        patch.setattr(frozen, "SLACK", 1)
        mutations, session, projection = _project(events)
        assert projection.index == TranscriptIndex.build(projection.session.transcript)
        # A projection loaded from that session (as a projector reloads) goes on the same.
        reloaded = SessionProjection(projection.snapshot())
        assert encode(reloaded.session) == session
    assert (mutations, session) == whole[:2]


def test_a_long_transcript_keeps_only_the_window_decoded() -> None:
    steps = [("prompt", 0, "go"), ("start", 0, ""), ("tool", 1, "run"), ("chunk", 0, "x")]
    steps += [("complete", 0, "")]
    events = build_events(journal_observations(steps * 200))
    _, _, projection = _project(events)
    transcript = projection.transcript
    assert len(transcript) > 2 * frozen.WINDOW
    decoded = len(transcript) - len(_frozen_offsets(transcript))
    assert frozen.WINDOW <= decoded < frozen.WINDOW + frozen.SLACK


def _fetching(store: dict[str, TranscriptItem]) -> tuple[frozen.FetchItem, list[str]]:
    """A fetch from ``store`` and the ids it was asked for, in order."""
    reads: list[str] = []

    def fetch(stable_id: str) -> TranscriptItem:
        reads.append(stable_id)
        return store[stable_id]

    return fetch, reads


def test_committed_items_go_cold_and_are_read_back_through_fetch(small_window: None) -> None:
    store = {f"system:{n}": _item(n) for n in range(16)}
    fetch, reads = _fetching(store)

    # Loaded from the store (all committed through ordinal 5): frozen items go cold at once.
    transcript = Transcript([_item(n) for n in range(6)], fetch=fetch, committed=5)
    assert transcript.cold == len(_frozen_offsets(transcript)) > 0
    assert transcript[0] == _item(0)
    assert reads == ["system:0"]
    # Items changed by events the store does not hold yet stay in memory when frozen...
    for n in range(6, 10):
        transcript.append(_item(n), ordinal=n + 1)
    changed = _item(1, "changed")
    transcript.replace(1, changed, ordinal=11)
    for n in range(10, 16):
        transcript.append(_item(n), ordinal=n + 2)
    reads.clear()
    assert transcript[1] == changed  # not the store's (older) version
    assert transcript[7] == _item(7)
    assert reads == []
    # ...until the store holds them.
    transcript.committed(11)
    assert transcript[7] == store["system:7"]
    assert "system:7" in reads
    store["system:1"] = changed  # what the commit through ordinal 11 wrote
    transcript.committed(17)
    assert [item.stable_id for item in transcript] == [f"system:{n}" for n in range(16)]
    assert transcript[1] == changed


def test_cooling_keeps_the_newest_items_decoded_and_lets_committed_ones_go_cold() -> None:
    """A parked projection's transcript: all but the newest ``keep`` items leave memory,
    except one changed since the last commit (frozen, kept), and every item reads back."""
    store = {f"system:{n}": _item(n) for n in range(40)}
    fetch, reads = _fetching(store)
    transcript = Transcript([_item(n) for n in range(40)], fetch=fetch, committed=40)
    changed = _item(20, "changed after the commit")
    transcript.replace(20, changed, ordinal=41)
    before = transcript.footprint()
    transcript.cool(keep=4)
    decoded = [n for n in range(40) if type(transcript._entries[n]) is TranscriptItem]
    assert decoded == [36, 37, 38, 39]
    assert transcript.cold == 39 - 4  # all but the newest four and the changed one
    assert transcript.footprint() < before
    assert transcript[20] == changed  # kept in memory: the store does not hold it yet
    assert reads == []
    assert transcript[3] == store["system:3"]
    assert reads == ["system:3"]
    assert list(transcript) == [changed if n == 20 else _item(n) for n in range(40)]


def test_the_footprint_follows_the_items_and_their_size() -> None:
    def fetch(stable_id: str) -> TranscriptItem:
        raise AssertionError(stable_id)

    small = Transcript([_item(n, "x") for n in range(10)], fetch=fetch, committed=0)
    large = Transcript([_item(n, "x" * 10_000) for n in range(10)], fetch=fetch, committed=0)
    longer = Transcript([_item(n, "x") for n in range(20)], fetch=fetch, committed=0)
    assert large.footprint() > 10 * frozen.DECODED_FACTOR * 10_000 > small.footprint()
    assert longer.footprint() > small.footprint() + 10 * frozen.ENTRY_BYTES


def test_without_fetch_nothing_goes_cold(small_window: None) -> None:
    transcript = Transcript([_item(n) for n in range(8)], committed=8)
    transcript.committed(20)
    assert transcript.cold == 0
    assert list(transcript) == [_item(n) for n in range(8)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.tuples(steps_strategy, st.integers(1, 4)).map(lambda pair: pair[0] * pair[1]))
def test_the_prompts_read_through_the_index_are_the_transcripts_user_items_in_order(
    steps: list[tuple[str, int, str]],
) -> None:
    events = build_events(journal_observations(steps))
    assume(events)  # a context names the event it projects
    _, _, projection = _project(events)
    ctx = ProjectionContext(
        current=projection.snapshot(),
        transcript=projection.transcript,
        index=projection.index,
        event=events[-1],
        mutation=MaterializedSessionMutation(),
        session_id="session-1",
    )
    expected = [item for item in projection.transcript if isinstance(item.body, UserBody)]
    assert list(ctx.prompts()) == expected
