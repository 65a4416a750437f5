"""A :class:`SessionProjection` changes its session in place, and a refused event nothing.

The projector folds events into the session its projection owns, so an event costs the
same however long the transcript is. These tests hold a projection resumed from a stored
copy to one that ran the whole journal, byte for byte; keep the incremental index equal
to one built from scratch; and check that an event refused by the chain, the projection
or an integrity rule leaves the projection exactly as it was.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.errors import ProjectionError, RelayChainError
from relaystore.domain.materialized import (
    MaterializedSession,
    PlanBody,
    SystemBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.projection import SessionProjection
from relaystore.domain.projection.context import ProjectionContext
from relaystore.domain.projection.frozen import Transcript
from relaystore.domain.projection.index import TranscriptIndex
from relaystore.domain.projection.integrity import check_session
from relaystore.domain.projection.markers import (
    FALLBACK_TERMINAL_META_KEY,
    FALLBACK_TERMINAL_TOOL_ID_PREFIX,
)
from relaystore.domain.projection.observations import HANDLERS
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    CommandCompleted,
    RelayEvent,
    RelayObservation,
    SteeredOutcome,
    TerminalOutput,
    WarningObservation,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.journal_stories import (
    acp,
    build_events,
    journal_observations,
    prompt,
    says,
    start,
    steps_strategy,
)


def _loaded(session: MaterializedSession) -> MaterializedSession:
    """A private copy of ``session``, as the projector loads it from the store."""
    return decode_json(encode(session), MaterializedSession)


def _events(observations: list[RelayObservation]) -> list[RelayEvent]:
    # Through the journal's wire form, as storage hands events over.
    return [decode_relay_event(encode_relay_event(event)) for event in build_events(observations)]


def _repeated(drawn: tuple[list[tuple[str, int, str]], int]) -> list[tuple[str, int, str]]:
    steps, times = drawn
    return steps * times


# Terminal output, interim (fallback) tools and provider tools with raw results: the
# observations whose projection removes transcript items. Valid in any session state,
# they are inserted anywhere into a generated journal.
_TERMINAL_KINDS = ("fallback", "tool", "raw_tool", "terminal", "raw_update")


def _terminal_observation(kind: str, n: int, text: str) -> RelayObservation:
    terminal = [{"type": "terminal", "terminalId": f"t{n}"}]
    if kind == "fallback":
        return acp(
            "tool_call",
            toolCallId=f"{FALLBACK_TERMINAL_TOOL_ID_PREFIX}t{n}",
            title="run",
            status="in_progress",
            content=terminal,
            _meta={FALLBACK_TERMINAL_META_KEY: True},
        )
    if kind == "tool":
        return acp("tool_call", toolCallId=f"c{n}", title=text or "tool", content=terminal)
    if kind == "raw_tool":
        raw = {"exit_code": n, "output": text}
        return acp("tool_call", toolCallId=f"r{n}", title="raw", status="completed", rawOutput=raw)
    if kind == "raw_update":
        raw = {"exit_code": n, "output": text}
        return acp("tool_call_update", toolCallId=f"r{n}", status="failed", rawOutput=raw)
    return TerminalOutput.of(terminal_id=f"t{n}", output=text, exit_code=n, truncated=False)


terminal_steps = st.lists(
    st.tuples(
        st.integers(0, 10_000),
        st.sampled_from(_TERMINAL_KINDS),
        st.integers(0, 2),
        st.sampled_from(["", "ok", "x\n"]),
    ),
    max_size=30,
)


def _journal(
    steps: list[tuple[str, int, str]], extra: list[tuple[int, str, int, str]]
) -> list[RelayEvent]:
    observations = journal_observations(steps)
    for where, kind, n, text in extra:
        observations.insert(where % (len(observations) + 1), _terminal_observation(kind, n, text))
    return _events(observations)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.tuples(steps_strategy, st.integers(1, 4)).map(_repeated),
    extra=terminal_steps,
    split=st.integers(),
)
def test_a_projection_resumed_from_the_store_equals_one_that_ran_the_whole_journal(
    steps: list[tuple[str, int, str]], extra: list[tuple[int, str, int, str]], split: int
) -> None:
    events = _journal(steps, extra)
    cut = split % (len(events) + 1)
    whole = SessionProjection(MaterializedSession.empty("session-1"))
    for event in events[:cut]:
        whole.apply(event)
    # The resumed projection starts as a store would hand it over: mid-journal, decoded.
    resumed = SessionProjection(_loaded(whole.session))
    for event in events[cut:]:
        expected = whole.apply(event)
        mutation = resumed.apply(event)

        assert encode(resumed.session) == encode(whole.session)
        assert mutation == expected
        assert mutation is not None
        assert expected is not None
        assert [encode(e) for e in mutation.api_events] == [encode(e) for e in expected.api_events]
        assert resumed.index == TranscriptIndex.build(resumed.session.transcript)
    assert whole.index == TranscriptIndex.build(whole.session.transcript)
    check_session(resumed.session)


def _branch(events: list[RelayEvent], cut: int) -> None:
    """Two projections continued from one snapshot: neither sees the other's changes."""
    root = SessionProjection(MaterializedSession.empty("session-1"))
    for event in events[:cut]:
        root.apply(event)
    snapshot = root.snapshot()
    snapshot_bytes = encode(snapshot)
    left, right = SessionProjection(root.snapshot()), SessionProjection(root.snapshot())
    for event in events[cut:]:
        left.apply(event)
    assert encode(right.session) == snapshot_bytes
    for event in events[cut:]:
        right.apply(event)
        assert right.index == TranscriptIndex.build(right.session.transcript)
    assert encode(left.session) == encode(right.session)
    assert left.index == TranscriptIndex.build(left.session.transcript)
    assert encode(snapshot) == snapshot_bytes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, extra=terminal_steps, split=st.integers())
def test_projections_continued_from_one_snapshot_keep_their_own_state_and_index(
    steps: list[tuple[str, int, str]], extra: list[tuple[int, str, int, str]], split: int
) -> None:
    events = _journal(steps, extra)
    _branch(events, split % (len(events) + 1))


# --- a failing event leaves the session as it was ------------------------------------------


def _projection(observations: list[RelayObservation]) -> SessionProjection:
    projection = SessionProjection(MaterializedSession.empty("session-1"))
    for event in build_events(observations):
        projection.apply(event)
    return projection


def _opening() -> list[RelayObservation]:
    return [
        prompt("p1", "hello", at_ms=1),
        start("p1", at_ms=2),
        says("hi", "m1"),
        acp("tool_call", toolCallId="c1", title="t", content=[]),
        TerminalOutput.of(
            terminal_id="t9", output="x", exit_code=0, truncated=False
        ),  # parked: terminal:t9
        acp("plan", entries=[]),
    ]


def _next_event(
    session: MaterializedSession, observation: RelayObservation, **fields: Any
) -> RelayEvent:
    """The event after ``session``'s frontier (``fields`` override ordinal, format...)."""
    arguments: dict[str, Any] = {
        "ordinal": session.applied_event_ordinal + 1,
        "recorded_at_ms": 20_000,
        "observation": observation,
        **fields,
    }
    return RelayEvent.create(**arguments)


def _index_snapshot(index: TranscriptIndex) -> TranscriptIndex:
    """A deep copy of ``index`` (to see later whether it changed)."""
    return TranscriptIndex(
        positions=dict(index.positions),
        open_agents=set(index.open_agents),
        open_thoughts=set(index.open_thoughts),
        plans=dict(index.plans),
        turns=dict(index.turns),
        raw_tools=set(index.raw_tools),
        parked=set(index.parked),
        referrers=dict(index.referrers),
    )


def _assert_untouched(
    projection: SessionProjection,
    transcript: Transcript,
    snapshot: bytes,
    items: list[TranscriptItem],
    index: TranscriptIndex,
) -> None:
    session = projection.session
    assert encode(session) == snapshot
    assert projection.transcript is transcript
    assert all(a is b for a, b in zip(transcript, items, strict=True))
    assert projection.index == index
    assert index == TranscriptIndex.build(session.transcript)


def _failing_mutations(session: MaterializedSession) -> list[list[object]]:
    """Changes that each end in a broken rule, after changes that would apply cleanly."""
    by_id = {item.stable_id: item for item in session.transcript}
    ordinal = session.applied_event_ordinal + 1
    fresh = TranscriptItem(
        stable_id="system:new",
        position=ordinal,
        created_at_ms=20_000,
        last_changed_at_ms=20_000,
        body=SystemBody(text="new"),
    )
    plan = by_id[f"plan:{ordinal - 1}"]
    agent = by_id["agent:m1"]
    clean: list[object] = [
        TranscriptUpsert(fresh),
        TranscriptRemove("terminal:t9"),
        TranscriptUpsert(msgspec.structs.replace(plan, last_changed_at_ms=30_000)),
        TranscriptRemove("tool:c1"),
    ]
    return [
        # an item placed after the event that creates it
        [*clean, TranscriptUpsert(msgspec.structs.replace(fresh, stable_id="x", position=99))],
        # identity fields change
        [*clean, TranscriptUpsert(msgspec.structs.replace(plan, position=1))],
        [*clean, TranscriptUpsert(msgspec.structs.replace(agent, created_at_ms=0))],
        # the change time moves back (against the change earlier in the same event)
        [*clean, TranscriptUpsert(msgspec.structs.replace(plan, last_changed_at_ms=25_000))],
        # the latest content ordinal moves back
        [
            *clean,
            TranscriptUpsert(msgspec.structs.replace(agent, latest_content_event_ordinal=None)),
        ],
    ]


def test_a_transcript_change_that_breaks_a_rule_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    projection = _projection(_opening())
    session = projection.session
    transcript = projection.transcript
    assert {"terminal:t9", "tool:c1", "agent:m1"} <= {item.stable_id for item in transcript}
    snapshot, items = encode(session), list(transcript)
    expected_index = _index_snapshot(projection.index)
    event = _next_event(session, WarningObservation.of(message="changes"))
    changes: list[object] = []

    def broken(ctx: ProjectionContext, _: WarningObservation) -> None:
        # A projection bug that writes changes breaking an integrity rule.
        ctx.mutation.session_title = "changed"
        ctx.mutation.configuration = {"k": "v"}
        ctx.mutation.transcript.extend(changes)  # type: ignore[arg-type]

    monkeypatch.setitem(HANDLERS, WarningObservation, broken)
    for failing in _failing_mutations(session):
        changes[:] = failing
        with pytest.raises(ProjectionError, match="transcript item"):
            projection.apply(event)
        _assert_untouched(projection, transcript, snapshot, items, expected_index)
    monkeypatch.undo()
    # The projection goes on as if nothing had been tried.
    fresh = SessionProjection(_loaded(session))
    expected = fresh.apply(event)
    mutation = projection.apply(event)
    assert encode(projection.session) == encode(fresh.session)
    assert mutation == expected


def test_an_event_refused_by_the_chain_or_the_projection_changes_nothing() -> None:
    projection = _projection(_opening())
    session = projection.session
    transcript = projection.transcript
    snapshot, items = encode(session), list(transcript)
    expected_index = _index_snapshot(projection.index)
    good = _next_event(session, says("more", "m1"))
    refused: list[tuple[RelayEvent, type[Exception]]] = [
        # a gap, another digest at the frontier, a fork of a format 1 chain, a forged digest
        (_next_event(session, says("more", "m1"), ordinal=good.ordinal + 1), RelayChainError),
        (_next_event(session, says("more", "m1"), ordinal=good.ordinal - 1), RelayChainError),
        (
            _next_event(
                session, says("more", "m1"), format=RELAY_EVENT_FORMAT_V1, previous_digest="0" * 64
            ),
            RelayChainError,
        ),
        (msgspec.structs.replace(good, digest="1" * 64), RelayChainError),
        # the projection itself refuses: a steer into a prompt that is not queued
        (
            _next_event(
                session,
                CommandCompleted.of(
                    command_id="s1", outcome=SteeredOutcome.of(queued_command_id="nope")
                ),
            ),
            ProjectionError,
        ),
    ]
    for event, error in refused:
        with pytest.raises(error):
            projection.apply(event)
        _assert_untouched(projection, transcript, snapshot, items, expected_index)
    # A re-delivery of an applied event is no error: it is already applied.
    earlier = build_events(_opening())[-1]
    assert projection.apply(earlier) is None
    _assert_untouched(projection, transcript, snapshot, items, expected_index)
    fresh = SessionProjection(_loaded(session))
    fresh.apply(good)
    projection.apply(good)
    assert encode(projection.session) == encode(fresh.session)


def test_index_changes_follow_their_list_and_keep_plans_in_list_order() -> None:
    transcript = list(_projection(_opening()).session.transcript)
    index = TranscriptIndex.build(transcript)
    added = TranscriptItem(
        stable_id="system:added",
        position=100,
        created_at_ms=1,
        last_changed_at_ms=1,
        body=SystemBody(text="a"),
    )
    # The list loses its parked terminal output and gains an item ...
    offset = index.positions["terminal:t9"]
    index.remove(transcript.pop(offset), offset, transcript)
    transcript.append(added)
    index.append(added, len(transcript) - 1)
    # ... and its first item (the prompt) turns into a plan: the plans stay in list order.
    first = transcript[0]
    transcript[0] = msgspec.structs.replace(first, body=PlanBody(plan=None))
    index.replace(first, transcript[0])
    assert list(index.plans) == ["user:p1", f"plan:{len(_opening())}"]
    assert index.turns == {}
    assert "terminal:t9" not in index.parked
    assert index == TranscriptIndex.build(transcript)
    # ... then loses its tool, and its newest plan stops being a plan.
    offset = index.positions["tool:c1"]
    index.remove(transcript.pop(offset), offset, transcript)
    offset = index.positions[f"plan:{len(_opening())}"]
    before = transcript[offset]
    transcript[offset] = msgspec.structs.replace(before, body=SystemBody(text="p"))
    index.replace(before, transcript[offset])
    assert index == TranscriptIndex.build(transcript)
    assert list(index.plans) == ["user:p1"]
