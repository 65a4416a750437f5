"""A projection behind its log: a line of a kind this build does not know is kept, not
projected, and so is every event after it; nothing is projected out of order."""

from __future__ import annotations

import msgspec
import pytest

from relaystore.domain.errors import ChainFault, RelayChainError, UnknownRelayKind
from relaystore.domain.materialized import MaterializedSession, ProjectionBehind, SystemBody
from relaystore.domain.projection import PageDelta, SessionProjection, observations
from relaystore.domain.projection.context import ProjectionContext, push_system
from relaystore.domain.projection.rebuild import caught_up_from
from relaystore.domain.projection.session import knows_line
from relaystore.domain.relay import RelayLine, decode_relay_line, encode_relay_event
from relaystore.testing import JournalBuilder

KIND = ("observation", "future_kind")


def _story() -> tuple[JournalBuilder, RelayLine, JournalBuilder]:
    before = JournalBuilder()
    before.prompt_turn("Hello")
    line = before.newer_line(b'{"type":"future_kind","data":{}}')
    after = JournalBuilder(after=line.cursor, start_ms=before.next_ms + 10)
    after.next_id("prompt")
    after.next_id("msg")
    after.prompt_turn("Later")
    return before, line, after


def _projected(before: JournalBuilder, *, hold: bool) -> SessionProjection:
    projection = SessionProjection(MaterializedSession.empty("s"), hold_unknown=hold)
    for event in before.events:
        projection.apply(event)
    return projection


def test_decode_relay_line_names_what_it_does_not_know() -> None:
    before, line, _ = _story()
    assert (line.kind, line.position, line.path) == (
        "future_kind",
        "observation",
        "$.observation.type",
    )
    assert decode_relay_line(encode_relay_event(before.events[0])) == before.events[0]


def test_without_hold_the_line_is_refused_and_changes_nothing() -> None:
    before, line, _ = _story()
    projection = _projected(before, hold=False)
    was = projection.snapshot()
    with pytest.raises(UnknownRelayKind) as caught:
        projection.apply(line)
    assert (caught.value.kind, caught.value.ordinal) == ("future_kind", line.ordinal)
    assert projection.snapshot() == was
    assert projection.behind is None


def test_with_hold_the_line_and_every_later_event_are_kept_not_projected() -> None:
    before, line, after = _story()
    projection = _projected(before, hold=True)
    was = projection.snapshot()
    page = PageDelta.starting_at("s", projection.frontier)

    mutation = projection.apply(line)
    assert mutation is not None
    assert mutation.behind == ProjectionBehind(
        ordinal=line.ordinal,
        kind="future_kind",
        position="observation",
        path="$.observation.type",
        kept_ordinal=line.ordinal,
        kept_digest=line.digest,
    )
    page.add(line, mutation, applied_at_end=True)
    for event in after.events:
        kept = projection.apply(event)
        assert kept is not None
        assert kept.behind is not None
        assert kept.api_events == []
        page.add(event, kept, applied_at_end=True)

    # The projection is what it was; only where the chain stands moved.
    assert projection.frontier == after.frontier
    session = projection.snapshot()
    assert session.frontier == was.frontier
    assert session.transcript == was.transcript
    assert session.projection_behind is not None
    assert session.projection_behind.kept == after.frontier
    assert session.projection_behind.ordinal == line.ordinal
    # The page keeps every line for the log and projects none of them.
    assert (page.applied, page.held, page.projected_end) == (
        1 + len(after.events),
        1 + len(after.events),
        None,
    )
    assert page.logged == [line, *after.events]
    assert page.api_events == []
    assert page.transcript == {}
    # Already kept lines are already applied; a different line at a kept ordinal forks.
    assert projection.apply(after.events[0]) is None
    forked = msgspec.structs.replace(after.events[-1], digest="0" * 64)
    with pytest.raises(RelayChainError) as fork:
        projection.apply(forked)
    assert fork.value.fault is ChainFault.FORK


def test_a_damaged_line_of_an_unknown_kind_is_a_bad_digest_even_when_held() -> None:
    before, line, _ = _story()
    projection = _projected(before, hold=True)
    damaged = msgspec.structs.replace(line, observation_json=line.observation_json + b" ")
    with pytest.raises(RelayChainError) as caught:
        projection.apply(damaged)
    assert caught.value.fault is ChainFault.BAD_DIGEST
    assert projection.behind is None


def test_a_kind_in_the_line_handler_table_is_projected_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def future(ctx: ProjectionContext, line: RelayLine) -> None:
        push_system(ctx, f"future kind at {line.ordinal}")

    monkeypatch.setitem(observations.LINE_HANDLERS, KIND, future)
    before, line, after = _story()
    projection = _projected(before, hold=True)
    mutation = projection.apply(line)
    assert mutation is not None
    assert mutation.behind is None
    for event in after.events:
        applied = projection.apply(event)
        assert applied is not None
        assert applied.behind is None
    session = projection.snapshot()
    assert session.projection_behind is None
    assert session.frontier == after.frontier
    texts = [item.body.text for item in session.transcript if isinstance(item.body, SystemBody)]
    assert f"future kind at {line.ordinal}" in texts


def _behind(ordinal: int) -> ProjectionBehind:
    return ProjectionBehind(
        ordinal=ordinal, kind="k", position="observation", path="$", kept_ordinal=9, kept_digest=""
    )


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, None, None),
        (None, 4, None),
        (4, None, 4),
        (4, 6, 4),
        (4, 4, None),
    ],
)
def test_caught_up_from_names_the_ordinal_a_rebuild_projected_past(
    before: int | None, after: int | None, expected: int | None
) -> None:
    assert (
        caught_up_from(
            None if before is None else _behind(before), None if after is None else _behind(after)
        )
        == expected
    )


def test_knows_line_is_whether_the_line_decodes_or_a_handler_takes_its_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before, line, _ = _story()
    assert knows_line(encode_relay_event(before.events[0]))
    assert not knows_line(encode_relay_event(line))
    assert not knows_line(b"{not a relay line")
    monkeypatch.setitem(observations.LINE_HANDLERS, KIND, lambda ctx, line: None)
    assert knows_line(encode_relay_event(line))
