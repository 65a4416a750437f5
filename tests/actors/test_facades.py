"""Both facades, one core: the same misuse gets the same outcome from each.

Every case of :data:`MISUSE` runs through ``EventStore`` and through ``AsyncEventStore``
and must end the same way (the same error type and text, or the same value). The
actors' own messages are refused by type at both public ``ask`` s and ``tell`` s, and
every actor answers a message it does not take with an error.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Unpack, get_type_hints

import pytest

from relaystore import (
    ApiEventFilter,
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadState,
    Request,
    SaveSession,
    StoreClosed,
)
from relaystore.actors.envelope import Envelope, OneShotReply
from relaystore.actors.internal import (
    ClaimRequest,
    CommitPage,
    CommitReprojection,
    FinishRequest,
    LoadAuditView,
    LoadIndexEntries,
    LoadLoggedLine,
    LoadOpenRequests,
    LoadProjection,
    LoadReplicationRound,
    LoadTranscriptItem,
    RecordCheckpoint,
    RecoverRequests,
)
from relaystore.actors.routing import INTERNAL_MESSAGES
from relaystore.actors.settings import OpenOptions, Settings
from relaystore.aio import AsyncEventStore
from relaystore.domain.maintenance import MaintenanceAnswer
from relaystore.domain.projection import PageDelta
from relaystore.domain.relay import RELAY_EVENT_GENESIS_DIGEST, RelayCursor
from relaystore.testing import example_session
from tests.actors.activity_support import activity
from tests.actors.retention_support import checkpoint_at
from tests.paths import ROOT

GENESIS = RelayCursor(ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST)


class Blocking:
    """Drives an ``EventStore``."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def ask(self, message: Any, timeout: Any = None) -> Any:
        return self.store.ask(message, timeout)

    def tell(self, message: Any) -> Any:
        return self.store.tell(message)

    def wait_for(self, seq: Any, timeout: Any = None) -> Any:
        return self.store.wait_for(seq, timeout)

    def follow(self, after_seq: Any = 0, filter: Any = None, *, timeout: Any = None) -> Any:
        return [event.seq for event in self.store.follow(after_seq, filter, timeout=timeout)]

    def close(self) -> None:
        self.store.close()


class Awaiting:
    """Drives an ``AsyncEventStore`` on a loop of its own, one await at a time."""

    def __init__(self, path: Path, runner: asyncio.Runner, **options: Any) -> None:
        async def opened() -> AsyncEventStore:
            return await AsyncEventStore.open(path, **options)

        self.runner = runner
        self.store = runner.run(opened())

    def ask(self, message: Any, timeout: Any = None) -> Any:
        return self.runner.run(self.store.ask(message, timeout))

    def tell(self, message: Any) -> Any:
        return self.runner.run(self.store.tell(message))

    def wait_for(self, seq: Any, timeout: Any = None) -> Any:
        return self.runner.run(self.store.wait_for(seq, timeout))

    def follow(self, after_seq: Any = 0, filter: Any = None, *, timeout: Any = None) -> Any:
        events = self.store.follow(after_seq, filter, timeout=timeout)  # checks here

        async def drain() -> list[int]:
            return [event.seq async for event in events]

        return self.runner.run(drain())

    def close(self) -> None:
        self.runner.run(self.store.close())


Facade = Blocking | Awaiting


@dataclass(frozen=True)
class Opened:
    blocking: Blocking
    awaiting: Awaiting


@pytest.fixture(params=["thread", "process"])
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Opened]]:
    """Opens a store through each facade (two files, the same options), in each
    projection mode."""
    runners: list[asyncio.Runner] = []
    opened: list[Opened] = []

    def open_both(**options: Any) -> Opened:
        options.setdefault("projection", request.param)
        n = len(opened)
        runner = asyncio.Runner()
        runners.append(runner)
        pair = Opened(
            Blocking(EventStore.open(tmp_path / f"blocking-{n}.sqlite3", **options)),
            Awaiting(tmp_path / f"awaiting-{n}.sqlite3", runner, **options),
        )
        opened.append(pair)
        return pair

    yield open_both
    for pair in opened:
        pair.blocking.close()
        pair.awaiting.close()
    for runner in runners:
        runner.close()


def outcome(call: Callable[[], object]) -> tuple[str, str]:
    """How a call ended: ``("ok", repr(value))`` or the error's type and text."""
    try:
        value = call()
    except Exception as exc:  # noqa: BLE001 - the outcome is what the test compares
        return type(exc).__name__, str(exc)
    return "ok", repr(value)


class NotOurs(Request[None], frozen=True, kw_only=True):
    """A user's own Request subclass: not a relaystore message."""


MISUSE: dict[str, Callable[[Facade], object]] = {
    "timeout too long": lambda f: f.ask(LoadState(), timeout=1e13),
    "timeout negative": lambda f: f.ask(LoadState(), timeout=-1),
    "timeout nan": lambda f: f.ask(LoadState(), timeout=float("nan")),
    "timeout inf": lambda f: f.ask(LoadState(), timeout=float("inf")),
    "timeout text": lambda f: f.ask(LoadState(), timeout="x"),
    "timeout bool": lambda f: f.ask(LoadState(), timeout=True),
    "ask a non-message": lambda f: f.ask(object()),
    "ask a name": lambda f: f.ask("LoadState"),
    "ask None": lambda f: f.ask(None),
    "ask a foreign Request": lambda f: f.ask(NotOurs()),
    "tell a non-message": lambda f: f.tell(object()),
    "ask a malformed message": lambda f: f.ask(LoadApiEvents(after_seq="1")),  # type: ignore[arg-type]
    "a reader refusal": lambda f: f.ask(LoadApiEvents(after_seq=-1)),
    "wait_for text": lambda f: f.wait_for("x"),
    "wait_for negative": lambda f: f.wait_for(-1),
    "wait_for a float": lambda f: f.wait_for(1.0),
    "wait_for a bad timeout": lambda f: f.wait_for(1, timeout=-1),
    "wait_for the past": lambda f: f.wait_for(0),
    "wait_for nothing new": lambda f: f.wait_for(1, timeout=0),
    "follow a negative after_seq": lambda f: f.follow(after_seq=-1),
    "follow a text after_seq": lambda f: f.follow(after_seq="x"),
    "follow a huge after_seq": lambda f: f.follow(after_seq=2**70),
    "follow a text filter": lambda f: f.follow(filter="x"),
    "follow a bad filter id": lambda f: f.follow(filter=ApiEventFilter(session_id="a b")),
    "follow a bad timeout": lambda f: f.follow(timeout=-1),
    "follow an empty store": lambda f: f.follow(timeout=0),
    "ask LoadProjection": lambda f: f.ask(LoadProjection(session_id="session-1")),
    "tell CommitPage": lambda f: f.tell(
        CommitPage(session_id="session-1", page=PageDelta.starting_at("session-1", GENESIS))
    ),
}


@pytest.mark.parametrize("case", list(MISUSE))
def test_each_misuse_ends_the_same_through_both_facades(
    both: Callable[..., Opened], case: str
) -> None:
    pair = both()
    blocking = outcome(lambda: MISUSE[case](pair.blocking))
    awaiting = outcome(lambda: MISUSE[case](pair.awaiting))
    assert blocking == awaiting
    if case not in {"wait_for the past", "wait_for nothing new", "follow an empty store"}:
        assert blocking[0] == "InvalidInput", blocking


AFTER_CLOSE: dict[str, Callable[[Facade], object]] = {
    "ask": lambda f: f.ask(LoadState()),
    "ask with a bad timeout": lambda f: f.ask(LoadState(), timeout=-1),
    "ask a non-message": lambda f: f.ask(object()),
    "tell": lambda f: f.tell(activity(1, prefix="s")),
    "wait_for": lambda f: f.wait_for(1, timeout=5),
    "follow": lambda f: f.follow(timeout=5),
    "close again": lambda f: f.close(),
}


@pytest.mark.parametrize("case", list(AFTER_CLOSE))
def test_each_use_after_close_ends_the_same_through_both_facades(
    both: Callable[..., Opened], case: str
) -> None:
    pair = both()
    pair.blocking.close()
    pair.awaiting.close()
    blocking = outcome(lambda: AFTER_CLOSE[case](pair.blocking))
    assert blocking == outcome(lambda: AFTER_CLOSE[case](pair.awaiting))
    if case in {"ask", "ask with a bad timeout", "ask a non-message", "tell", "wait_for"}:
        assert blocking == ("StoreClosed", str(StoreClosed()))


def test_a_read_only_store_refuses_writes_the_same_through_both_facades(
    both: Callable[..., Opened],
) -> None:
    writable = both()
    writable.blocking.ask(activity(1, prefix="s"))
    writable.awaiting.ask(activity(1, prefix="s"))
    writable.blocking.close()
    writable.awaiting.close()
    runner = asyncio.Runner()
    try:
        blocking = Blocking(EventStore.open(writable.blocking.store.path, read_only=True))
        awaiting = Awaiting(writable.awaiting.store.sync.path, runner, read_only=True)
        for misuse in (
            lambda f: f.ask(SaveSession(record=example_session())),
            lambda f: f.tell(activity(2, prefix="s")),
            lambda f: f.follow(timeout=0),
            lambda f: f.wait_for(1, timeout=0),
        ):
            assert outcome(partial(misuse, blocking)) == outcome(partial(misuse, awaiting))
        assert outcome(lambda: blocking.ask(activity(2, prefix="s")))[0] == "InvalidInput"
        blocking.close()
        awaiting.close()
    finally:
        runner.close()


# -- the actors' own messages ------------------------------------------------------------

INTERNAL_EXAMPLES: dict[type[Any], Any] = {
    LoadProjection: LoadProjection(session_id="session-1"),
    CommitPage: CommitPage(
        session_id="session-1", page=PageDelta.starting_at("session-1", GENESIS)
    ),
    CommitReprojection: CommitReprojection(
        session_id="session-1", page=PageDelta.starting_at("session-1", GENESIS)
    ),
    LoadLoggedLine: LoadLoggedLine(session_id="session-1", ordinal=1),
    LoadTranscriptItem: LoadTranscriptItem(session_id="session-1", stable_id="user:1"),
    LoadIndexEntries: LoadIndexEntries(
        session_id="session-1", after_position=None, after_id=None, limit=10
    ),
    LoadAuditView: LoadAuditView(session_id="session-1"),
    LoadOpenRequests: LoadOpenRequests(limit=8),
    ClaimRequest: ClaimRequest(request_id="r-1", pid=1),
    FinishRequest: FinishRequest(request_id="r-1", answer=MaintenanceAnswer()),
    RecoverRequests: RecoverRequests(answer=MaintenanceAnswer()),
    RecordCheckpoint: RecordCheckpoint(session_id="session-1", checkpoint=checkpoint_at(1)),
    LoadReplicationRound: LoadReplicationRound(after_seq=0, after_change=0, limit=10),
}


def test_every_internal_message_has_an_example_here() -> None:
    assert set(INTERNAL_EXAMPLES) == set(INTERNAL_MESSAGES)


@pytest.mark.parametrize("kind", INTERNAL_MESSAGES, ids=lambda kind: kind.__name__)
def test_every_internal_message_is_refused_by_both_facades(
    both: Callable[..., Opened], kind: type[Any]
) -> None:
    pair = both()
    pair.blocking.ask(SaveSession(record=example_session()))
    pair.awaiting.ask(SaveSession(record=example_session()))
    message = INTERNAL_EXAMPLES[kind]
    for facade in (pair.blocking, pair.awaiting):
        for send in (facade.ask, facade.tell):
            with pytest.raises(InvalidInput, match=rf"^{kind.__name__} is internal"):
                send(message)
    assert outcome(lambda: pair.blocking.ask(message)) == outcome(
        lambda: pair.awaiting.ask(message)
    )


def test_the_contract_module_no_longer_holds_internal_messages() -> None:
    from relaystore.domain import messages

    for kind in INTERNAL_MESSAGES:
        assert not hasattr(messages, kind.__name__)
    assert not issubclass(LoadProjection, Request)


# -- unknown messages raise in every actor ---------------------------------------------


class Stranger:
    """A message no actor takes."""


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_every_actor_answers_a_message_it_does_not_take_with_an_error(
    tmp_path: Path, projection: Literal["thread", "process"]
) -> None:
    with EventStore.open(tmp_path / "s.sqlite3", projection=projection) as store:
        core = store._core
        assert core.writer is not None
        writer, reader = core.writer, core._reader()
        deliveries: dict[str, Callable[[Envelope], object]] = {
            "writer": lambda envelope: core.deliver(writer, envelope),
            "reader": lambda envelope: core.deliver(reader, envelope),
            "projector": lambda envelope: core._projectors.take("session-1", envelope, wait=True),
        }
        for name, deliver in deliveries.items():
            reply = OneShotReply()
            deliver(Envelope(Stranger(), reply))
            with pytest.raises(InvalidInput, match=f"the {name} does not take Stranger"):
                reply.get(timeout=10)
        assert store.ask(LoadState()).sessions == {}  # every actor still serves


# -- typed open --------------------------------------------------------------------------


def test_both_facades_open_with_the_one_list_of_options_and_every_option_is_checked() -> None:
    """The options are written once (``OpenOptions``): both ``open`` methods take exactly
    those keywords, and ``Settings.check`` checks every one of them, no other."""
    for facade in (EventStore, AsyncEventStore):
        parameters = inspect.signature(facade.open).parameters
        assert [p.kind for p in parameters.values()] == [
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.VAR_KEYWORD,
        ]
        assert get_type_hints(facade.open)["options"] == Unpack[OpenOptions]
    checked = inspect.signature(Settings.check).parameters
    assert sorted(name for name in checked if name != "path") == sorted(get_type_hints(OpenOptions))


@pytest.mark.integration
def test_a_users_mypy_catches_a_misspelt_open_option_in_both_facades(tmp_path: Path) -> None:
    user = tmp_path / "user.py"
    user.write_text(
        "from relaystore import EventStore\n"
        "from relaystore.aio import AsyncEventStore\n"
        "\n"
        'EventStore.open("s.sqlite3", readerz=3)\n'
        'AsyncEventStore.open("s.sqlite3", readerz=3)\n'
        'AsyncEventStore.open("s.sqlite3", readers="3")\n'
        'AsyncEventStore.open("s.sqlite3", readers=3, synchronous="FULL", read_only=True)\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), user],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert [line.split(":")[1] for line in errors] == ["4", "5", "6"], result.stdout
    assert '"readerz"' in errors[0]
    assert '"readerz"' in errors[1]


_ONLY_ASYNC = {"sync"}
"""The asyncio facade's handle on the blocking one (there is no way back without a loop)."""


def _surface(facade: type) -> dict[str, Any]:
    return {name: getattr(facade, name) for name in dir(facade) if not name.startswith("_")}


def test_both_facades_offer_the_same_public_surface() -> None:
    # The same names, each a property in both or a method in both with the same
    # parameters; a method that waits is a coroutine in the asyncio facade, a follow an
    # async iterator: so the two cannot drift apart again.
    blocking, awaiting = _surface(EventStore), _surface(AsyncEventStore)
    assert set(awaiting) - _ONLY_ASYNC == set(blocking)
    for name, member in blocking.items():
        other = awaiting[name]
        assert isinstance(member, property) == isinstance(other, property), name
        if isinstance(member, property) or name == "open":
            continue
        assert list(inspect.signature(member).parameters) == list(
            inspect.signature(other).parameters
        ), name
        blocking_returns = get_type_hints(member).get("return")
        if name in {"metrics", "follow", "follow_raw"}:  # never waits, or an iterator
            assert not inspect.iscoroutinefunction(other), name
        else:
            assert inspect.iscoroutinefunction(other), (name, blocking_returns)


def test_neither_facade_reaches_into_the_others_private_names() -> None:
    for module, other in [("store", "aio"), ("aio", "store")]:
        source = (ROOT / "actors" / f"{module}.py").read_text()
        tree = ast.parse(source)
        private = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
        }
        assert not private, (module, other, private)
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.name.startswith("_")
        }
        assert not imported, (module, other, imported)
