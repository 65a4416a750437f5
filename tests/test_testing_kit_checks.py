"""The test kit refuses what would not replay (issue 20, case 18).

``JournalBuilder`` never builds a journal the store refuses: every bad argument is an
:class:`InvalidInput` naming it (never ``AttributeError`` or ``TypeError``), a worker
root is written whole, and the pytest plugin has an asyncio store too.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from relaystore import EventStore, InvalidInput, LoadMaterializedSession
from relaystore.actors.journal import resolve_source
from relaystore.actors.replay import replay_source
from relaystore.domain.digests import validate_relay_event_self
from relaystore.domain.relay import MessageData, Notice, RelayCursor
from relaystore.testing import JournalBuilder

pytest_plugins = ["pytester"]

NOTICE = Notice.of(message="hi")
PRUNED = RelayCursor(ordinal=30, digest="a" * 64)


def replays(root: Path, tmp_path: Path) -> int:
    """Replay the worker root into a fresh store; return the session's frontier ordinal."""
    with EventStore.open(tmp_path / f"check-{len(os.listdir(tmp_path))}.sqlite3") as store:
        source = resolve_source(root)
        replay_source(store, source)
        stored = store.ask(LoadMaterializedSession(session_id=source.session_id))
        assert stored is not None
        return stored.applied_event_ordinal


BAD_CALLS: list[tuple[str, Callable[[], object], str]] = [
    ("at_ms past INTEGER", lambda: JournalBuilder().add(NOTICE, at_ms=2**63), "at_ms"),
    ("at_ms negative", lambda: JournalBuilder().add(NOTICE, at_ms=-1), "at_ms"),
    ("at_ms a str", lambda: JournalBuilder().add(NOTICE, at_ms="5"), "at_ms"),  # type: ignore[arg-type]
    ("at_ms a bool", lambda: JournalBuilder().add(NOTICE, at_ms=True), "at_ms"),
    ("at_ms a float", lambda: JournalBuilder().add(NOTICE, at_ms=1.5), "at_ms"),  # type: ignore[arg-type]
    ("command_id an int", lambda: JournalBuilder().add(NOTICE, command_id=5), "command_id"),  # type: ignore[arg-type]
    ("start_ms past u64", lambda: JournalBuilder(start_ms=2**64), "start_ms"),
    ("start_ms negative", lambda: JournalBuilder(start_ms=-1), "start_ms"),
    ("start_ms a str", lambda: JournalBuilder(start_ms="now"), "start_ms"),  # type: ignore[arg-type]
    ("step_ms past INTEGER", lambda: JournalBuilder(step_ms=2**63), "step_ms"),
    ("step_ms a float", lambda: JournalBuilder(step_ms=0.5), "step_ms"),  # type: ignore[arg-type]
    ("format a str", lambda: JournalBuilder(format="2"), "format"),  # type: ignore[arg-type]
    ("format unknown", lambda: JournalBuilder(format=3), "format"),
    ("after a tuple", lambda: JournalBuilder(after=(3, "a" * 64)), "after"),  # type: ignore[arg-type]
    ("extend an int", lambda: JournalBuilder().extend(5), "observations"),  # type: ignore[arg-type]
    ("write to None", lambda: JournalBuilder().write(None), "path"),  # type: ignore[arg-type]
    (
        "root folder an int",
        lambda: JournalBuilder().write_worker_root(5, "s-1"),  # type: ignore[arg-type]
        "folder",
    ),
    (
        "session id an int",
        lambda: JournalBuilder().write_worker_root("unused", 5),  # type: ignore[arg-type]
        "session",
    ),
    (
        "seal_every a str",
        lambda: JournalBuilder().write_worker_root("unused", "s-1", seal_every="3"),  # type: ignore[arg-type]
        "seal_every",
    ),
    (
        "seed a str",
        lambda: JournalBuilder(after=PRUNED).write_worker_root("unused", "s-1", seed="yes"),  # type: ignore[arg-type]
        "seed",
    ),
    (
        "seed at genesis",
        lambda: JournalBuilder().write_worker_root("unused", "s-1", seed=True),
        "seed",
    ),
]


@pytest.mark.parametrize(("name", "call", "named"), BAD_CALLS, ids=[n for n, _, _ in BAD_CALLS])
def test_an_argument_that_would_not_replay_is_refused_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    call: Callable[[], object],
    named: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidInput, match=named):
        call()
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_clock_that_would_overflow_is_refused_at_the_event_that_overflows() -> None:
    journal = JournalBuilder(start_ms=2**63 - 2, step_ms=1)
    journal.add(NOTICE)  # at 2**63 - 2
    journal.add(NOTICE)  # at 2**63 - 1, the last representable time
    with pytest.raises(InvalidInput, match="step_ms"):
        journal.add(NOTICE)
    journal.add(NOTICE, at_ms=5)  # an explicit time still goes, and the clock carries on
    assert [event.recorded_at_ms for event in journal.events] == [2**63 - 2, 2**63 - 1, 5]
    assert journal.next_ms == 6


def test_a_typed_observation_holding_a_wrong_type_is_refused() -> None:
    bad: Any = Notice(data=MessageData(message=5))  # type: ignore[arg-type]  # unchecked
    journal = JournalBuilder()
    with pytest.raises(InvalidInput, match="message"):
        journal.add(bad)
    assert journal.events == []


@pytest.mark.integration
def test_every_event_the_checks_allow_replays(tmp_path: Path) -> None:
    journal = JournalBuilder(start_ms=0)
    journal.add(NOTICE, at_ms=0)
    journal.add(NOTICE, at_ms=2**63 - 1)
    journal.add(NOTICE, command_id="c-1", at_ms=10)  # the clock carries on from 10
    journal.prompt_turn("hi")
    root = journal.write_worker_root(tmp_path / "root", "s-1")
    assert replays(root, tmp_path) == journal.frontier.ordinal


@pytest.mark.integration
def test_a_seeded_root_replays_from_its_seed(tmp_path: Path) -> None:
    journal = JournalBuilder(after=PRUNED)
    journal.prompt_turn("hi")
    root = journal.write_worker_root(tmp_path / "root", "s-1", seed=True)
    assert replays(root, tmp_path) == 34


@pytest.mark.integration
def test_a_root_written_over_an_older_root_replaces_it_whole(tmp_path: Path) -> None:
    old = JournalBuilder(after=PRUNED)
    for _ in range(10):
        old.prompt_turn("old")
    root = old.write_worker_root(tmp_path / "root", "s-1", seal_every=7, seed=True)
    (
        root / "relay-journal" / "segment-00000000000000000099-00000000000000000100.jsonl.gz"
    ).write_bytes(gzip.compress(b""))
    new = JournalBuilder()
    new.prompt_turn("new")
    assert new.write_worker_root(root, "s-1") == root
    assert sorted(path.name for path in (root / "relay-journal").iterdir()) == ["active.jsonl"]
    assert sorted(path.name for path in root.iterdir()) == ["relay-journal", "relay-state.json"]
    assert (root / "relay-journal" / "active.jsonl").read_bytes() == new.to_bytes()
    assert replays(root, tmp_path) == 4


ASYNC_PLUGIN_TEST = """
import pytest
from relaystore import LoadApiEvents, ObserveRelayEvents, SaveSession, StoreClosed
from relaystore.aio import AsyncEventStore
from relaystore.testing import example_session

pytestmark = pytest.mark.anyio
opened = []


@pytest.fixture
def anyio_backend():
    return "asyncio"


async def test_uses_the_async_store(relaystore_async_store, relaystore_journal, tmp_path):
    store = relaystore_async_store
    assert isinstance(store, AsyncEventStore)
    assert store.sync.path.parent == tmp_path
    await store.ask(SaveSession(record=example_session("s1")))
    relaystore_journal.prompt_turn("hi")
    await store.ask(ObserveRelayEvents(session_id="s1", events=relaystore_journal.events))
    page = await store.ask(LoadApiEvents(after_seq=0))
    assert [event.kind for event in page.events] == ["turn_started", "turn_ended"]
    opened.append(store)


async def test_each_test_gets_a_fresh_async_store_and_the_last_was_closed(
    relaystore_async_store,
):
    assert (await relaystore_async_store.ask(LoadApiEvents(after_seq=0))).events == []
    with pytest.raises(StoreClosed):
        await opened[0].ask(LoadApiEvents(after_seq=0))
"""


@pytest.mark.integration
def test_the_pytest_plugin_offers_an_async_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(ASYNC_PLUGIN_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "relaystore.pytest_plugin"
    )
    result.assert_outcomes(passed=2)


OUT_OF_THE_BOX_TEST = """
from relaystore import LoadApiEvents, SaveSession
from relaystore.aio import AsyncEventStore
from relaystore.testing import example_session

pytest_plugins = ["relaystore.pytest_plugin"]


async def test_takes_the_async_store_with_nothing_else(relaystore_async_store):
    assert isinstance(relaystore_async_store, AsyncEventStore)
    await relaystore_async_store.ask(SaveSession(record=example_session("s1")))
    assert (await relaystore_async_store.ask(LoadApiEvents(after_seq=0))).events == []
"""


@pytest.mark.parametrize("autoload", [True, False])
@pytest.mark.integration
def test_the_async_fixture_works_out_of_the_box(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, autoload: bool
) -> None:
    """No marker, no anyio_backend fixture, no plugin but relaystore's: the test runs once,
    on asyncio, whether or not pytest loads installed plugins by itself."""
    if not autoload:
        monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makepyfile(OUT_OF_THE_BOX_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=1)


def test_newer_line_is_a_verifiable_line_of_a_kind_this_build_does_not_know() -> None:
    journal = JournalBuilder()
    journal.prompt_turn("Hello")
    line = journal.newer_line(b'{"type":"future_kind","data":{"n":1}}')
    assert (line.ordinal, line.kind, line.position) == (
        journal.next_ordinal,
        "future_kind",
        "observation",
    )
    validate_relay_event_self(line)  # its digest verifies from its bytes
    assert journal.events[-1].ordinal == line.ordinal - 1  # not added to the events
    with pytest.raises(InvalidInput, match="decodes"):
        journal.newer_line(b'{"type":"notice","data":{"message":"known"}}')
    with pytest.raises(InvalidInput, match="not valid JSON"):
        journal.newer_line(b"{not json")
    with pytest.raises(InvalidInput, match="must be bytes"):
        journal.newer_line('{"type":"future_kind"}')  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda j: j.question(schema=5), "schema"),
        (lambda j: j.question(message=None), "message"),
        (lambda j: j.question(action=3), "action"),
        (lambda j: j.question(request_id=7), "request_id"),
        (lambda j: j.mailbox_event(5), "text"),
        (lambda j: j.mailbox_event("a", wake=1), "wake"),
        (lambda j: j.mailbox_event("a", key=True), "key"),
        (lambda j: j.mailbox_event(body=5), "body"),
        (lambda j: j.mailbox_event(), "exactly one of text and body"),
    ],
)
def test_a_wrong_argument_to_the_kit_is_invalid_input_naming_it(
    call: Callable[[JournalBuilder], object], named: str
) -> None:
    journal = JournalBuilder()
    with pytest.raises(InvalidInput, match=named):
        call(journal)
    assert journal.events == []  # nothing half-written
