"""Projecting in place (``project_in_place``) equals the pure path.

The projector folds events into its private working session in place, so an event
costs the same however long the transcript is. These tests hold the in-place path to
the pure one byte for byte, check that the pure path still leaves its input (and the
input's cached index) untouched, and that an event that fails leaves an in-place
session exactly as it was.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaystore.domain.errors import ProjectionError, RelayChainError
from relaystore.domain.materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    PlanBody,
    SystemBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.projection import _apply_in_place, project_and_apply, project_in_place
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    CommandCompleted,
    RelayEvent,
    RelayObservation,
    SteeredOutcome,
    TerminalOutput,
    decode_relay_event,
    encode_relay_event,
)
from relaystore.domain.transcript import (
    FALLBACK_TERMINAL_META_KEY,
    FALLBACK_TERMINAL_TOOL_ID_PREFIX,
    TranscriptIndex,
    index_for,
)
from relaystore.domain.wire import decode_json, encode
from tests.domain.test_projection_scenarios import (
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
    return TerminalOutput.of(terminal_id=f"t{n}", output=text, exit_code=n)


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
def test_in_place_projection_equals_the_pure_path_event_by_event(
    steps: list[tuple[str, int, str]], extra: list[tuple[int, str, int, str]], split: int
) -> None:
    events = _journal(steps, extra)
    cut = split % (len(events) + 1)
    pure = MaterializedSession.empty("session-1")
    # The in-place session starts as a store would hand it over: mid-journal, decoded.
    for event in events[:cut]:
        pure, _ = project_and_apply(pure, event)
    working = _loaded(pure)
    for event in events[cut:]:
        before = pure
        before_bytes = encode(before)
        before_index = index_for(before.transcript)
        expected_index = _index_snapshot(before_index)

        pure, expected = project_and_apply(before, event)
        mutation = project_in_place(working, event)

        assert encode(working) == encode(pure)
        assert mutation == expected
        assert [encode(e) for e in mutation.api_events] == [encode(e) for e in expected.api_events]
        # The pure path changed neither its input nor the index other readers may hold.
        assert encode(before) == before_bytes
        assert before_index == expected_index
        assert before_index == TranscriptIndex.build(before.transcript)
    assert index_for(working.transcript) == TranscriptIndex.build(working.transcript)
    assert index_for(pure.transcript) == TranscriptIndex.build(pure.transcript)
    working.validate()


def _branch(events: list[RelayEvent], cut: int) -> None:
    """Two pure sessions continued from one (their indexes fork and must not interfere)."""
    root = MaterializedSession.empty("session-1")
    for event in events[:cut]:
        root, _ = project_and_apply(root, event)
    left = right = root
    for event in events[cut:]:
        left, _ = project_and_apply(left, event)
    for event in events[cut:]:
        right, _ = project_and_apply(right, event)
        assert index_for(right.transcript) == TranscriptIndex.build(right.transcript)
    assert encode(left) == encode(right)
    assert index_for(left.transcript) == TranscriptIndex.build(left.transcript)
    assert index_for(root.transcript) == TranscriptIndex.build(root.transcript)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps_strategy, extra=terminal_steps, split=st.integers())
def test_sessions_continued_twice_from_one_pure_session_keep_correct_indexes(
    steps: list[tuple[str, int, str]], extra: list[tuple[int, str, int, str]], split: int
) -> None:
    events = _journal(steps, extra)
    _branch(events, split % (len(events) + 1))


# --- a failing event leaves the session as it was ------------------------------------------


def _session(observations: list[RelayObservation]) -> MaterializedSession:
    session = MaterializedSession.empty("session-1")
    for event in build_events(observations):
        project_in_place(session, event)
    return session


def _opening() -> list[RelayObservation]:
    return [
        prompt("p1", "hello", at_ms=1),
        start("p1", at_ms=2),
        says("hi", "m1"),
        acp("tool_call", toolCallId="c1", title="t", content=[]),
        TerminalOutput.of(terminal_id="t9", output="x", exit_code=0),  # parked: terminal:t9
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


def _assert_untouched(
    session: MaterializedSession,
    transcript: list[TranscriptItem],
    snapshot: bytes,
    items: list[TranscriptItem],
    index: TranscriptIndex,
) -> None:
    assert encode(session) == snapshot
    assert session.transcript is transcript
    assert all(a is b for a, b in zip(session.transcript, items, strict=True))
    assert index_for(session.transcript) == index
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


def test_a_transcript_change_that_breaks_a_rule_changes_nothing_in_place() -> None:
    session = _session(_opening())
    transcript = session.transcript
    assert {"terminal:t9", "tool:c1", "agent:m1"} <= {item.stable_id for item in transcript}
    snapshot, items = encode(session), list(transcript)
    index = index_for(transcript)
    expected_index = _index_snapshot(index)
    event = _next_event(session, says("more", "m1"))
    for changes in _failing_mutations(session):
        mutation = MaterializedSessionMutation(
            last_activity_at_ms=20_000,
            session_title="changed",
            configuration={"k": "v"},
            transcript=changes,  # type: ignore[arg-type]
        )
        with pytest.raises(ProjectionError, match="transcript item"):
            _apply_in_place(session, event, mutation, index_for(session.transcript))
        _assert_untouched(session, transcript, snapshot, items, expected_index)
    # The session goes on as if nothing had been tried.
    pure, expected = project_and_apply(_loaded(session), event)
    mutation = project_in_place(session, event)
    assert encode(session) == encode(pure)
    assert mutation == expected


def test_an_event_refused_by_the_chain_or_the_projection_changes_nothing_in_place() -> None:
    session = _session(_opening())
    transcript = session.transcript
    snapshot, items = encode(session), list(transcript)
    expected_index = _index_snapshot(index_for(transcript))
    good = _next_event(session, says("more", "m1"))
    refused: list[tuple[RelayEvent, type[Exception]]] = [
        # a gap, a re-delivery, a fork of a format 1 chain, a forged digest
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
            project_in_place(session, event)
        _assert_untouched(session, transcript, snapshot, items, expected_index)
    pure, _ = project_and_apply(_loaded(session), good)
    project_in_place(session, good)
    assert encode(session) == encode(pure)


def test_a_forked_index_and_its_original_change_independently() -> None:
    transcript = _session(_opening()).transcript
    original = TranscriptIndex.build(transcript)
    copy = list(transcript)
    fork = original.fork()
    assert fork == original
    ordinal = 100
    added = TranscriptItem(
        stable_id="system:added",
        position=ordinal,
        created_at_ms=1,
        last_changed_at_ms=1,
        body=SystemBody(text="a"),
    )
    # The fork's list loses its parked terminal output and gains an item ...
    offset = fork.positions["terminal:t9"]
    fork.remove(copy.pop(offset), offset, copy)
    copy.append(added)
    fork.append(added, len(copy) - 1)
    # ... and its first item (the prompt) turns into a plan: the plans stay in list order.
    first = copy[0]
    copy[0] = msgspec.structs.replace(first, body=PlanBody(plan=None))
    fork.replace(first, copy[0])
    assert list(fork.plans) == ["user:p1", f"plan:{len(_opening())}"]
    assert fork.turns == {}
    # ... while the original's list loses its tool and its plan stops being a plan.
    offset = original.positions["tool:c1"]
    original.remove(transcript.pop(offset), offset, transcript)
    offset = original.positions[f"plan:{len(_opening())}"]
    before = transcript[offset]
    transcript[offset] = msgspec.structs.replace(before, body=SystemBody(text="p"))
    original.replace(before, transcript[offset])
    assert original == TranscriptIndex.build(transcript)
    assert fork == TranscriptIndex.build(copy)
    assert "terminal:t9" in original.parked
    assert "terminal:t9" not in fork.parked
    assert original.plans == {}
    assert len(original.turns) == 1
