"""The index of raw results: matching terminal output to a tool is one lookup.

A provider tool whose raw result (exit code and output) equals a terminal's output
claims it; the transcript index files tools and parked output by that result, so the
projection never scans the session. These tests check the lookups against a
brute-force scan with the rule itself (``_matches_raw_result``), and that a long
session does per-event work that does not grow with its length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from relaystore.domain.materialized import (
    MaterializedSession,
    MaterializedSessionMutation,
    TerminalOutputBody,
    TerminalOutputRecord,
    ToolBody,
    TranscriptItem,
)
from relaystore.domain.projection import SessionProjection, tools
from relaystore.domain.projection.calls import (
    is_fallback_terminal_call,
    output_digest,
    raw_result_candidate,
    raw_result_key,
    terminal_result_key,
)
from relaystore.domain.projection.context import ProjectionContext
from relaystore.domain.projection.index import (
    TranscriptIndex,
    decode_item_facts,
    encode_item_facts,
    item_facts,
)
from relaystore.domain.relay import RelayEvent, SessionUpdate, TerminalOutput
from relaystore.domain.wire import JSON, encode
from relaystore.testing import JournalBuilder

# --- brute force: the rule applied to every item, as the projection once did ----------------


def _brute_raw_tool(
    transcript: list[TranscriptItem], record: TerminalOutputRecord
) -> TranscriptItem | None:
    matches = [
        item
        for item in transcript
        if isinstance(item.body, ToolBody)
        and not is_fallback_terminal_call(item.body.call)
        and tools._matches_raw_result(record, item.body.call)
    ]
    return matches[0] if len(matches) == 1 else None


def _parked_records(transcript: list[TranscriptItem]) -> Iterator[TerminalOutputRecord]:
    for item in transcript:
        body = item.body
        if isinstance(body, TerminalOutputBody):
            yield body.record
        elif (
            isinstance(body, ToolBody)
            and is_fallback_terminal_call(body.call)
            and body.terminal_outputs
        ):
            yield body.terminal_outputs[0]


def _brute_raw_terminal(transcript: list[TranscriptItem], call: JSON) -> str | None:
    if not raw_result_candidate(call):
        return None
    matches = [
        record.terminal_id
        for record in _parked_records(transcript)
        if tools._matches_raw_result(record, call)
    ]
    return matches[0] if len(matches) == 1 else None


def _brute_unique_raw_tool(
    ctx: ProjectionContext, record: TerminalOutputRecord
) -> TranscriptItem | None:
    return _brute_raw_tool(list(ctx.transcript), record)


def _brute_unique_raw_terminal(ctx: ProjectionContext, call: JSON) -> str | None:
    return _brute_raw_terminal(list(ctx.transcript), call)


@contextmanager
def _brute_force_projection() -> Iterator[None]:
    """Project with the brute-force scans in place of the indexed lookups."""
    saved = tools._unique_raw_tool, tools._unique_raw_terminal
    tools._unique_raw_tool = _brute_unique_raw_tool
    tools._unique_raw_terminal = _brute_unique_raw_terminal
    try:
        yield
    finally:
        tools._unique_raw_tool, tools._unique_raw_terminal = saved


# --- generated sessions -----------------------------------------------------------------------

_TEXTS = ("", "ok", "ok\n", "é ✓", "same")
_EXIT_CODES: tuple[Any, ...] = (0, 1, True, -1, 0x1_0000_0000, "0", [0], None, 1.0)


def _raw_outputs() -> st.SearchStrategy[JSON]:
    """Mostly raw results that can claim output, sometimes malformed or odd ones."""
    text = st.sampled_from(_TEXTS)
    valid = st.builds(
        lambda code, value, as_bytes: {
            "exit_code": code,
            "output": list(value.encode()) if as_bytes else value,
        },
        st.sampled_from((0, 1)),
        text,
        st.booleans(),
    )
    odd_output = st.one_of(
        text,
        text.map(lambda value: list(value.encode())),
        text.map(lambda value: [True if byte == 1 else byte for byte in value.encode()] + [1]),
        st.just([0xFF]),
        st.just([256]),
        st.just([111, 107.0]),
        st.just({"text": "ok"}),
        st.none(),
    )
    odd = st.builds(
        lambda code, value, has_output: (
            {"exit_code": code, "output": value} if has_output else {"exit_code": code}
        ),
        st.sampled_from(_EXIT_CODES),
        odd_output,
        st.booleans(),
    )
    return st.one_of(valid, valid, valid, odd)


_CALL_IDS = st.sampled_from(("k1", "k2", "k3", "k4"))
_TERMINAL_IDS = st.sampled_from(("t1", "t2", "t3"))
_STATUSES = st.sampled_from(("completed", "completed", "failed", "in_progress", None))


def _tool_call(kind: str, call_id: str, status: str | None, raw: JSON) -> SessionUpdate:
    fields: dict[str, Any] = {"sessionUpdate": kind, "toolCallId": call_id, "title": "Shell"}
    if status is not None:
        fields["status"] = status
    fields["rawOutput"] = raw
    return SessionUpdate.of(update=fields)


def _fallback(terminal_id: str) -> SessionUpdate:
    return SessionUpdate.of(
        update={
            "sessionUpdate": "tool_call",
            "toolCallId": f"hel-terminal:{terminal_id}",
            "title": "sh",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": terminal_id}],
            "_meta": {"hel.dev/fallback-terminal": True},
        }
    )


def _terminal(terminal_id: str, output: str, exit_code: int | None, signal: bool) -> TerminalOutput:
    return TerminalOutput.of(
        terminal_id=terminal_id,
        output=output,
        exit_code=exit_code,
        signal="SIGKILL" if signal else None,
        truncated=False,
    )


_OBSERVATIONS = st.one_of(
    st.builds(
        _tool_call,
        st.sampled_from(("tool_call", "tool_call_update")),
        _CALL_IDS,
        _STATUSES,
        _raw_outputs(),
    ),
    st.builds(_fallback, _TERMINAL_IDS),
    st.builds(
        _terminal,
        _TERMINAL_IDS,
        st.sampled_from(_TEXTS),
        st.sampled_from((0, 1, None)),
        st.sampled_from((False, False, False, True)),
    ),
)

_RECORDS = st.builds(
    TerminalOutputRecord,
    terminal_id=_TERMINAL_IDS,
    output=st.sampled_from(_TEXTS),
    exit_code=st.sampled_from((0, 1, *_EXIT_CODES)),
    signal=st.sampled_from((None, None, None, "SIGTERM")),
)
_CALLS = st.builds(
    lambda status, raw: {"toolCallId": "probe", "title": "", "status": status, "rawOutput": raw},
    _STATUSES,
    _raw_outputs(),
)


def _events(observations: list[Any]) -> list[RelayEvent]:
    journal = JournalBuilder()
    for observation in observations:
        journal.add(observation)
    return journal.events


def _context(projection: SessionProjection, event: RelayEvent) -> ProjectionContext:
    return ProjectionContext(
        current=projection.session,
        transcript=projection.transcript,
        index=projection.index,
        event=event,
        mutation=MaterializedSessionMutation(),
        session_id="session-1",
    )


def _assert_result_maps(index: TranscriptIndex, transcript: list[TranscriptItem]) -> None:
    built = TranscriptIndex.build(transcript)
    assert index.raw_results == built.raw_results
    assert index.parked_results == built.parked_results
    assert set().union(*index.raw_results.values()) <= index.raw_tools
    assert set().union(*index.parked_results.values()) <= index.parked
    # The facts the store keeps of each item index the same (a reloading projector).
    stored = TranscriptIndex.from_facts(
        (item.stable_id, decode_item_facts(encode_item_facts(item_facts(item))))
        for item in transcript
    )
    assert stored == index
    assert stored.raw_results == index.raw_results
    assert stored.parked_results == index.parked_results


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    observations=st.lists(_OBSERVATIONS, max_size=24),
    records=st.lists(_RECORDS, min_size=1, max_size=4),
    calls=st.lists(_CALLS, min_size=1, max_size=4),
)
def test_indexed_lookups_equal_a_brute_force_scan(
    observations: list[Any], records: list[TerminalOutputRecord], calls: list[JSON]
) -> None:
    events = _events(observations)
    projection = SessionProjection(MaterializedSession.empty("session-1"))
    for event in events:
        ctx = _context(projection, event)
        transcript = projection.session.transcript
        for record in [*records, *_parked_records(transcript)]:
            assert tools._unique_raw_tool(ctx, record) == _brute_raw_tool(transcript, record)
        tool_calls = [item.body.call for item in transcript if isinstance(item.body, ToolBody)]
        for call in [*calls, *tool_calls]:
            assert tools._unique_raw_terminal(ctx, call) == _brute_raw_terminal(transcript, call)
        projection.apply(event)
        _assert_result_maps(projection.index, projection.session.transcript)

    # The whole session projects byte for byte as it does with brute-force scans.
    brute = SessionProjection(MaterializedSession.empty("session-1"))
    with _brute_force_projection():
        brute_mutations = [brute.apply(event) for event in events]
    indexed = SessionProjection(MaterializedSession.empty("session-1"))
    assert [indexed.apply(event) for event in events] == brute_mutations
    assert encode(indexed.session) == encode(brute.session)


@given(record=_RECORDS, call=_CALLS)
def test_equal_keys_are_exactly_the_raw_result_rule(
    record: TerminalOutputRecord, call: JSON
) -> None:
    raw_key, record_key = raw_result_key(call), terminal_result_key(record)
    matches = raw_key is not None and record_key is not None and raw_key == record_key
    assert matches == tools._matches_raw_result(record, call)


def test_bytes_that_are_not_utf8_and_bools_claim_nothing() -> None:
    record = TerminalOutputRecord(terminal_id="t1", output="\x01", exit_code=0)
    assert terminal_result_key(record) == (0, output_digest("\x01"))
    for output in ([True], [0xFF], [256], [1.0]):
        call = {"status": "completed", "rawOutput": {"exit_code": 0, "output": output}}
        assert raw_result_key(call) is None
        assert not tools._matches_raw_result(record, call)
    unhashable = TerminalOutputRecord(terminal_id="t1", output="x", exit_code=[0])  # type: ignore[arg-type]
    assert terminal_result_key(unhashable) is None


# --- a long session -----------------------------------------------------------------------------


def _long_session(calls: int) -> list[RelayEvent]:
    observations: list[Any] = []
    for n in range(calls):
        output = f"step {n}\n"
        raw = {"exit_code": n % 3, "output": list(output.encode()) if n % 2 else output}
        observations.append(_tool_call("tool_call", f"call-{n}", "completed", raw))
        observations.append(_terminal(f"t-{n}", output, n % 3, signal=False))
    # Two identical results at the end: neither claims, the output stays parked.
    same = {"exit_code": 0, "output": "same"}
    observations.append(_tool_call("tool_call", "twin-1", "completed", same))
    observations.append(_tool_call("tool_call", "twin-2", "completed", same))
    observations.append(_terminal("t-twin", "same", 0, signal=False))
    return _events(observations)


def _counting(target: Any, name: str, counter: list[int]) -> Callable[..., Any]:
    original = getattr(target, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counter[0] += 1
        return original(*args, **kwargs)

    return counted


def test_a_long_session_does_flat_work_per_terminal_output(monkeypatch: Any) -> None:
    calls = 10_000
    events = _long_session(calls)
    matched, looked_up = [0], [0]
    monkeypatch.setattr(
        tools, "_matches_raw_result", _counting(tools, "_matches_raw_result", matched)
    )
    monkeypatch.setattr(ProjectionContext, "get", _counting(ProjectionContext, "get", looked_up))
    projection = SessionProjection(MaterializedSession.empty("session-1"))
    for event in events:
        projection.apply(event, digest_checked=True)

    transcript = projection.session.transcript
    outputs = calls + 1
    # Scanning the session would match (and look up) every earlier tool: ~calls²/2.
    assert matched[0] <= 2 * outputs
    assert looked_up[0] <= 20 * len(events)
    assert len(transcript) == calls + 3
    claimed = [item for item in transcript if isinstance(item.body, ToolBody)]
    assert all(item.body.terminal_refs for item in claimed[:calls])  # type: ignore[union-attr]
    assert {item.stable_id for item in transcript[calls:]} == {
        "tool:twin-1",
        "tool:twin-2",
        "terminal:t-twin",
    }
