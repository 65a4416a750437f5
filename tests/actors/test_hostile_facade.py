"""Hostile relay events at the facade, in both projection modes.

What an embedder relies on: whichever mode projects (``projection="process"`` is the
default, ``"thread"`` the other), a relay event that is not well formed is refused the
same way, word for word, before any actor sees it: an ordinal outside the chain rule's
range with the chain rule's :class:`RelayChainError`, any other field (the envelope's or
the observation's, at any depth: a wrong type, an integer outside SQLite's INTEGER range,
a value of no relaystore type) with :class:`InvalidInput` naming the event and the field.
Nothing of a refused message is stored, and every row of the chain rule's table reaches
the same step or fault through the facade as through the domain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from relaystore import EventStore
from relaystore.domain.chain import MAX_ORDINAL, Step
from relaystore.domain.errors import ChainFault, RelayChainError
from relaystore.domain.messages import (
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    Reproject,
    SaveSession,
)
from relaystore.domain.relay import (
    MAX_RELAY_LINE_BYTES,
    CommandStarted,
    CommandStartedData,
    RelayCursor,
    RelayEvent,
    SessionUpdate,
    SessionUpdateData,
    encode_relay_event,
)
from relaystore.testing import example_session
from tests.chain_table import CASES, FIRST, FIRST_V1, SECOND, Case, tampered

SESSION = "hostile"
MODES = ["thread", "process"]


@pytest.fixture(params=MODES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EventStore]:
    with EventStore.open(tmp_path / "store.sqlite3", projection=request.param) as store:
        yield store


def _started(value: Any, *, command_id: Any = "c") -> RelayEvent:
    data = CommandStartedData(command_id=command_id, started_at_ms=value)
    return RelayEvent.create(ordinal=1, recorded_at_ms=1_001, observation=CommandStarted(data=data))


def _update(update: Any) -> RelayEvent:
    observation = SessionUpdate(data=SessionUpdateData(update=update))
    return RelayEvent.create(ordinal=1, recorded_at_ms=1_001, observation=observation)


def _nested(depth: int) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "x"}
    for _ in range(depth):
        update = {"a": update}
    return update


def _range(ordinal: int) -> tuple[str, str]:
    return (
        "RelayChainError",
        f"session {SESSION}, ordinal {ordinal}: relay event ordinal {ordinal} is outside "
        f"1..{MAX_ORDINAL}",
    )


def _field(where: str, text: str) -> tuple[str, str]:
    return "InvalidInput", f"ObserveRelayEvents.events[0]{where}: {text}"


OUT_OF_RANGE = "integer outside SQLite's INTEGER range"

HOSTILE: dict[str, tuple[Callable[[], RelayEvent], tuple[str, str]]] = {
    "ordinal 2**64": (lambda: tampered(FIRST, ordinal=2**64), _range(2**64)),
    "ordinal 2**63": (lambda: tampered(FIRST, ordinal=2**63), _range(2**63)),
    "ordinal -2**64": (lambda: tampered(FIRST, ordinal=-(2**64)), _range(-(2**64))),
    "ordinal 0": (lambda: tampered(FIRST, ordinal=0), _range(0)),
    "ordinal True": (
        lambda: tampered(FIRST, ordinal=True),
        _field(".ordinal", "expected an int, got bool"),
    ),
    "format 2**64": (
        lambda: tampered(FIRST, format=2**64),
        _field(".format", f"{2**64} is outside 0..{MAX_ORDINAL}"),
    ),
    "recorded_at_ms 2**64": (
        lambda: tampered(FIRST, recorded_at_ms=2**64),
        _field(".recorded_at_ms", f"{2**64} is outside 0..{MAX_ORDINAL}"),
    ),
    "digest an int": (lambda: tampered(FIRST, digest=5), _field(".digest", "expected a str")),
    "observation integer 2**63": (
        lambda: _started(2**63),
        _field(".observation.data.started_at_ms", OUT_OF_RANGE),
    ),
    "observation integer 2**64": (
        lambda: _started(2**64),
        _field(".observation.data.started_at_ms", OUT_OF_RANGE),
    ),
    "observation integer -2**64": (
        lambda: _started(-(2**64)),
        _field(".observation.data.started_at_ms", OUT_OF_RANGE),
    ),
    "observation integer a str": (
        lambda: _started("1"),
        _field(".observation.data.started_at_ms", "Expected `int`, got `str`"),
    ),
    "observation integer a float": (
        lambda: _started(1.5),
        _field(".observation.data.started_at_ms", "Expected `int`, got `float`"),
    ),
    "observation str an int": (
        lambda: _started(1, command_id=7),
        _field(".observation.data.command_id", "Expected `str`, got `int`"),
    ),
    "observation data None": (
        lambda: RelayEvent.create(
            ordinal=1, recorded_at_ms=1_001, observation=CommandStarted(data=None)
        ),
        _field(".observation.data", "Expected `object`, got `None`"),
    ),
    "observation nested 1000 deep": (
        lambda: msgspec.structs.replace(
            _update({"sessionUpdate": "x"}),
            observation=SessionUpdate(data=SessionUpdateData(update=_nested(1_000))),
        ),
        (
            "InvalidInput",
            "ObserveRelayEvents.events: an observation holds a value of no relaystore type "
            "(maximum recursion depth exceeded while serializing an object)",
        ),
    ),
    "JSON field integer 2**64": (
        lambda: _update({"sessionUpdate": "x", "n": [1, 2**64]}),
        _field(".observation.data.update.n[1]", OUT_OF_RANGE),
    ),
}


def _frontier(store: EventStore) -> RelayCursor:
    session = store.ask(LoadMaterializedSession(session_id=SESSION))
    assert session is not None
    return session.frontier


def _outcome(store: EventStore, events: list[Any], session: str = SESSION) -> tuple[str, str]:
    try:
        report = store.ask(ObserveRelayEvents(session_id=session, events=events), timeout=30)
    except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
        return type(exc).__name__, str(exc)
    return "ok", repr(report)


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_event_is_refused_alike_in_both_modes_and_nothing_is_stored(
    store: EventStore, case: str
) -> None:
    store.ask(SaveSession(record=example_session(session_id=SESSION)))
    start = _frontier(store)
    make, expected = HOSTILE[case]
    assert _outcome(store, [make()]) == expected
    # Behind a good event in the same message: the good one is not applied either.
    kind, text = expected
    behind = (kind, text.replace("events[0]", "events[1]"))
    assert _outcome(store, [FIRST, make()]) == behind
    assert _frontier(store) == start
    assert store.ask(LoadApiEvents()).events == []
    # The store still takes the session's first good event.
    assert _outcome(store, [FIRST])[0] == "ok"
    assert _frontier(store) == FIRST.cursor


_LEADING: dict[str, list[RelayEvent]] = {
    FIRST.digest: [FIRST],
    SECOND.digest: [FIRST, SECOND],
    FIRST_V1.digest: [FIRST_V1],
}
"""The events that bring a new session to each frontier the chain table starts from."""


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_facade_follows_the_chain_table_in_both_modes(store: EventStore, case: Case) -> None:
    store.ask(SaveSession(record=example_session(session_id=SESSION)))
    leading = _LEADING.get(case.frontier.digest, [])
    if leading:
        store.ask(ObserveRelayEvents(session_id=SESSION, events=leading))
    assert _frontier(store) == case.frontier
    message = ObserveRelayEvents(session_id=SESSION, events=[case.event])
    if isinstance(case.expected, Step):
        report = store.ask(message)
        assert (report.applied, report.already_applied) == (
            (1, 0) if case.expected is Step.NEXT else (0, 1)
        )
        return
    with pytest.raises(RelayChainError) as caught:
        store.ask(message)
    assert caught.value.fault is case.expected
    assert caught.value.session_id == SESSION
    assert _frontier(store) == case.frontier


def test_an_ordinal_fault_is_the_chain_rules_fault(store: EventStore) -> None:
    store.ask(SaveSession(record=example_session(session_id=SESSION)))
    with pytest.raises(RelayChainError) as caught:
        store.ask(ObserveRelayEvents(session_id=SESSION, events=[tampered(FIRST, ordinal=2**64)]))
    assert (caught.value.fault, caught.value.ordinal) == (ChainFault.ORDINAL_OUT_OF_RANGE, 2**64)


def test_the_hostile_table_is_stated_for_a_message_of_many_pages(store: EventStore) -> None:
    """An out-of-range ordinal deep in a long message refuses all of it (it never
    reaches a projector), in both modes."""
    store.ask(SaveSession(record=example_session(session_id=SESSION)))
    events = [FIRST]
    previous = FIRST
    for ordinal in range(2, 600):
        previous = RelayEvent.create(
            ordinal=ordinal, recorded_at_ms=1_000 + ordinal, observation=previous.observation
        )
        events.append(previous)
    events.append(tampered(previous, ordinal=2**64))
    assert _outcome(store, events) == _range(2**64)
    assert _frontier(store).ordinal == 0


def test_an_event_past_the_relay_line_limit_is_refused_and_a_long_message_is_taken(
    store: EventStore,
) -> None:
    """An event whose relay line would be over the 2 MiB limit is refused at the facade
    (its relay log row could not be read back by audit or reproject); one at the limit,
    and a message of 20,000 events, are taken alike in both modes."""
    store.ask(SaveSession(record=example_session(session_id=SESSION)))

    def chunk(size: int, ordinal: int = 1) -> RelayEvent:
        content = {"type": "text", "text": "x" * size}
        update = {"sessionUpdate": "agent_message_chunk", "content": content, "messageId": "m"}
        observation = SessionUpdate(data=SessionUpdateData(update=update))
        return RelayEvent.create(ordinal=ordinal, recorded_at_ms=1_001, observation=observation)

    over = chunk(MAX_RELAY_LINE_BYTES)
    size = len(encode_relay_event(over))
    assert _outcome(store, [over]) == (
        "InvalidInput",
        f"ObserveRelayEvents.events[0]: relay line is {size} bytes, over the "
        f"{MAX_RELAY_LINE_BYTES}-byte limit",
    )
    at_limit = chunk(MAX_RELAY_LINE_BYTES - (size - MAX_RELAY_LINE_BYTES))
    assert len(encode_relay_event(at_limit)) == MAX_RELAY_LINE_BYTES
    assert store.ask(ObserveRelayEvents(session_id=SESSION, events=[at_limit])).applied == 1
    assert store.ask(Reproject(session_id=SESSION), timeout=60).events_reprojected == 1
    many = [
        RelayEvent.create(ordinal=ordinal, recorded_at_ms=1_001, observation=FIRST.observation)
        for ordinal in range(2, 20_002)
    ]
    report = store.ask(ObserveRelayEvents(session_id=SESSION, events=many), timeout=120)
    assert (report.applied, report.frontier_ordinal) == (20_000, 20_001)
