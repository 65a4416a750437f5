"""The facade's boundary, tried as a careless or hostile embedder would.

Every outcome of a message is its reply or a :class:`StoreError` subclass naming the
message and the field; nothing malformed is stored, and the feed stays readable for
every follower afterwards. Close, timeouts and backpressure end waits cleanly.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import relaystore.actors.writer as writer_module
from relaystore import (
    ApiActivityState,
    AskTimeout,
    DeleteSession,
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadMaterializedSession,
    LoadRawApiEvents,
    LoadRuntimeReceipt,
    LoadState,
    ObserveRelayEvents,
    RecordActivities,
    RecordStartupFault,
    SaveSession,
    StoreClosed,
    StoreError,
    UnknownSession,
)
from relaystore.domain import messages as message_module
from relaystore.domain.api_events import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiEvent,
    ApiEventFilter,
)
from relaystore.testing import example_session
from tests.actors.seed import all_events, chain, turn


@pytest.fixture(params=["thread", "process"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EventStore]:
    """A store in each projection mode: every table here holds in both."""
    monkeypatch.chdir(tmp_path)  # garbage BackupStore destinations land here, not in the tree
    path = tmp_path / "store.sqlite3"
    with EventStore.open(path, queue_capacity=4, projection=request.param) as store:
        store.ask(SaveSession(record=example_session()))
        yield store


def _feed_is_readable(store: EventStore) -> list[ApiEvent]:
    events = all_events(store, limit=1000)
    for event in events:  # every stored body decodes as the typed event and re-encodes
        assert msgspec.json.decode(msgspec.json.encode(event), type=ApiEvent) == event
    return events


# -- the cases the hostile review found ------------------------------------------------

BAD_MESSAGES: list[tuple[str, Any]] = [
    ("activity None", RecordActivities(activities=[("session-1", None)], recorded_at_ms=1)),  # type: ignore[list-item]
    ("activities None", RecordActivities(activities=None, recorded_at_ms=1)),  # type: ignore[arg-type]
    (
        "activity not a state",
        RecordActivities(activities=[("session-1", "busy")], recorded_at_ms=1),
    ),  # type: ignore[list-item]
    ("recorded_at_ms str", RecordActivities(activities=[], recorded_at_ms="1")),  # type: ignore[arg-type]
    ("after_seq str", LoadApiEvents(after_seq="x")),  # type: ignore[arg-type]
    ("limit None", LoadApiEvents(limit=None)),  # type: ignore[arg-type]
    ("after_seq huge", LoadApiEvents(after_seq=2**70)),
    ("after_seq past INTEGER", LoadApiEvents(after_seq=2**63)),
    ("events None", ObserveRelayEvents(session_id="session-1", events=None)),  # type: ignore[arg-type]
    ("events [None]", ObserveRelayEvents(session_id="session-1", events=[None])),  # type: ignore[list-item]
    ("events str", ObserveRelayEvents(session_id="session-1", events="abc")),  # type: ignore[arg-type]
    ("record None", SaveSession(record=None)),  # type: ignore[arg-type]
    ("fault bytes", RecordStartupFault(session_id="session-1", message=b"boom")),  # type: ignore[arg-type]
    ("session id int", DeleteSession(session_id=123)),  # type: ignore[arg-type]
    ("session id invalid", DeleteSession(session_id="../etc")),
    ("session id empty", LoadMaterializedSession(session_id="")),
    ("receipt id None", LoadRuntimeReceipt(session_id=None)),  # type: ignore[arg-type]
    ("filter a dict", LoadApiEvents(filter={"session_id": "session-1"})),  # type: ignore[arg-type]
    ("filter session id invalid", LoadApiEvents(filter=ApiEventFilter(session_id=".."))),
    ("filter workspace id invalid", LoadApiEvents(filter=ApiEventFilter(workspace_id="a b"))),
    ("raw filter a dict", LoadRawApiEvents(filter={"workspace_id": "w"})),  # type: ignore[arg-type]
    ("activities a tuple", RecordActivities(activities=(), recorded_at_ms=1)),  # type: ignore[arg-type]
    (
        "activity detail past INTEGER",
        RecordActivities(
            activities=[
                (
                    "session-1",
                    ApiActivityState(
                        state="idle",
                        details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=2**70),
                        is_idle=False,
                        waiting_for_input=False,
                        capacity_retry=False,
                    ),
                )
            ],
            recorded_at_ms=1,
        ),
    ),
]


@pytest.mark.parametrize(("name", "message"), BAD_MESSAGES, ids=[n for n, _ in BAD_MESSAGES])
def test_a_malformed_message_is_refused_naming_message_and_field(
    store: EventStore, name: str, message: Any
) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.ask(message)
    assert str(caught.value).startswith(f"{type(message).__name__}.")
    with pytest.raises(InvalidInput):
        store.tell(message)
    assert _feed_is_readable(store) == []


def test_a_relay_event_out_of_sqlite_range_is_refused_before_the_writer(
    store: EventStore,
) -> None:
    events = chain(store, turn())
    bad = msgspec.structs.replace(events[0], recorded_at_ms=2**63)
    with pytest.raises(InvalidInput, match=r"events\[0\]\.recorded_at_ms"):
        store.ask(ObserveRelayEvents(session_id="session-1", events=[bad]))
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    assert report.applied == 3


def test_a_valid_message_still_passes(store: EventStore) -> None:
    state = ApiActivityState(
        state="busy", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    store.ask(RecordActivities(activities=[("session-1", state)], recorded_at_ms=5))
    assert [e.kind for e in _feed_is_readable(store)] == ["activity_changed"]


# -- a hypothesis strategy of garbage messages -----------------------------------------

MESSAGE_TYPES = list(message_module.PUBLIC_MESSAGES)

garbage = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**80), max_value=2**80),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.binary(max_size=8),
        st.just("session-1"),
        st.just(example_session()),
        st.just(
            ApiActivityState(
                state="x", is_idle=False, waiting_for_input=False, capacity_retry=False
            )
        ),
        st.just(object()),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=4), inner, max_size=2),
    ),
    max_leaves=6,
)


@st.composite
def hostile_messages(draw: st.DrawFn) -> Any:
    cls = draw(st.sampled_from(MESSAGE_TYPES))
    fields = {field.name: draw(garbage) for field in msgspec.structs.fields(cls)}
    return cls(**fields)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(message=hostile_messages())
def test_garbage_messages_get_a_reply_or_a_store_error(store: EventStore, message: Any) -> None:
    with contextlib.suppress(StoreError):
        store.ask(message, timeout=10)
    _feed_is_readable(store)
    assert isinstance(store.ask(LoadState()).sessions, dict)  # the store still answers


# -- timeouts, close and backpressure --------------------------------------------------


def _hold_writer(store: EventStore, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Block the writer inside its next message; returns the gate that releases it."""
    gate, entered = threading.Event(), threading.Event()
    real = writer_module.perform

    def perform(connection: Any, message: Any) -> Any:
        if not entered.is_set():
            entered.set()
            gate.wait()
        return real(connection, message)

    monkeypatch.setattr(writer_module, "perform", perform)
    store.tell(RecordActivities(activities=[], recorded_at_ms=0))
    assert entered.wait(5)
    return gate


def test_a_timed_out_ask_raises_ask_timeout_and_may_still_take_effect(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _hold_writer(store, monkeypatch)
    state = ApiActivityState(
        state="late", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    with pytest.raises(AskTimeout, match="may still take effect") as caught:
        store.ask(
            RecordActivities(activities=[("session-1", state)], recorded_at_ms=9), timeout=0.2
        )
    assert isinstance(caught.value, TimeoutError)
    assert isinstance(caught.value, StoreError)
    gate.set()
    assert store.wait_for(1, timeout=5)
    assert [e.recorded_at_ms for e in _feed_is_readable(store)] == [9]


@pytest.mark.parametrize("timeout", [-1, float("nan"), "1", float("inf")])
def test_a_bad_timeout_is_refused(store: EventStore, timeout: Any) -> None:
    with pytest.raises(InvalidInput, match="timeout"):
        store.ask(LoadState(), timeout=timeout)


def test_close_wakes_every_waiter_and_follower(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path / "store.sqlite3")
    outcomes: list[object] = []

    def wait() -> None:
        try:
            outcomes.append(store.wait_for(10, timeout=None))
        except StoreClosed as exc:
            outcomes.append(exc)

    def follow() -> None:
        outcomes.append(list(store.follow()))

    threads = [threading.Thread(target=wait), threading.Thread(target=follow)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while store._core.commits.waiting < 2:  # both really wait before the close
        assert time.monotonic() < deadline, "the waiter and the follower never waited"
        time.sleep(0.005)
    started = time.monotonic()
    store.close()
    for thread in threads:
        thread.join(timeout=5)
    assert not any(thread.is_alive() for thread in threads)
    assert time.monotonic() - started < 5
    assert any(isinstance(outcome, StoreClosed) for outcome in outcomes)
    assert [] in outcomes
    with pytest.raises(StoreClosed):
        store.wait_for(1)


def test_follow_yields_in_order_and_wakes_on_commits(store: EventStore) -> None:
    seen: list[int] = []

    def follow() -> None:
        for event in store.follow(after_seq=0, timeout=2):
            seen.append(event.seq)
            if len(seen) == 5:
                return

    follower = threading.Thread(target=follow)
    follower.start()
    for n in range(5):
        store.ask(
            RecordActivities(
                activities=[
                    (
                        "session-1",
                        ApiActivityState(
                            state=f"{n}",
                            is_idle=False,
                            waiting_for_input=False,
                            capacity_retry=False,
                        ),
                    )
                ],
                recorded_at_ms=n,
            )
        )
    follower.join(timeout=5)
    assert seen == [1, 2, 3, 4, 5]
    assert [e.seq for e in store.follow(after_seq=3, timeout=0)] == [4, 5]


def test_a_full_projector_inbox_blocks_the_sender(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = chain(store, turn())
    gate = _hold_writer(store, monkeypatch)
    message = ObserveRelayEvents(session_id="session-1", events=events)
    sender = threading.Thread(target=lambda: [store.tell(message) for _ in range(12)])
    sender.start()
    try:
        sender.join(timeout=1)
        assert sender.is_alive(), "a projector inbox must not grow past queue_capacity"
    finally:
        gate.set()
    sender.join(timeout=10)
    assert not sender.is_alive()
    report = store.ask(message)
    assert (report.applied, report.already_applied) == (0, 3)


# -- a deleted session's projector -----------------------------------------------------


def test_a_deleted_and_resaved_session_projects_from_scratch(store: EventStore) -> None:
    events = chain(store, turn())
    assert store.ask(ObserveRelayEvents(session_id="session-1", events=events)).applied == 3
    store.ask(DeleteSession(session_id="session-1"))
    with pytest.raises(UnknownSession):
        store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    store.ask(SaveSession(record=example_session()))
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    assert (report.applied, report.already_applied, report.frontier_ordinal) == (3, 0, 3)
    kinds = [e.kind for e in _feed_is_readable(store)]
    assert kinds.count("turn_started") == 1  # the delete removed the first run's events


@pytest.mark.parametrize("path", [None, 123, b"store.sqlite3", "a\x00b"])
def test_open_refuses_a_path_that_names_no_file(path: Any) -> None:
    with pytest.raises(InvalidInput, match="path"):
        EventStore.open(path)


@pytest.mark.parametrize(
    "options",
    [{"readers": 0}, {"readers": True}, {"readers": 65}, {"queue_capacity": "8"},
     {"synchronous": "SOMETIMES"}, {"max_batch": 0}, {"max_projectors": None},
     {"projector_idle_seconds": -1}, {"read_only": "yes"}, {"read_only": 1},
     {"relay_log": "no"}],
)  # fmt: skip
def test_open_refuses_bad_options_naming_them(tmp_path: Path, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match=next(iter(options))):
        EventStore.open(tmp_path / "store.sqlite3", **options)
    assert not (tmp_path / "store.sqlite3").exists()
