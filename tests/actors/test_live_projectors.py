"""The live set of projectors stays bounded, and a stopped one resumes from the store."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Literal

import pytest

from relaystore import (
    EventStore,
    LoadMaterializedSession,
    ObserveRelayEvents,
    ProjectionReport,
    SaveSession,
)
from relaystore.actors.live import GHOSTS, LiveProjectors
from relaystore.aio import AsyncEventStore
from relaystore.testing import JournalBuilder, example_session


def _journal(turns: int) -> JournalBuilder:
    journal = JournalBuilder()
    for turn in range(turns):
        journal.prompt_turn(f"question {turn}")
    return journal


@pytest.mark.integration
def test_projectors_past_the_limit_stop_and_resume_from_the_store(tmp_path: Path) -> None:
    sessions = [f"s-{n}" for n in range(12)]
    journals = {session_id: _journal(3) for session_id in sessions}
    with EventStore.open(tmp_path / "store.sqlite3", max_projectors=4) as store:
        for session_id in sessions:
            store.ask(SaveSession(record=example_session(session_id)))
        threads_before = threading.active_count()
        for round_ in range(3):  # round robin: every session's projector is evicted in turn
            for session_id in sessions:
                events = journals[session_id].events
                third = len(events) // 3
                chunk = events[round_ * third : (round_ + 1) * third if round_ < 2 else None]
                report = store.ask(ObserveRelayEvents(session_id=session_id, events=chunk))
                assert report.applied == len(chunk)
                assert store.metrics().live_projectors <= 4
        assert threading.active_count() <= threads_before + 4
        for session_id in sessions:
            stored = store.ask(LoadMaterializedSession(session_id=session_id))
            assert stored is not None
            assert stored.frontier == journals[session_id].frontier
            again = store.ask(
                ObserveRelayEvents(session_id=session_id, events=journals[session_id].events)
            )
            assert (again.applied, again.already_applied) == (0, len(journals[session_id].events))


@pytest.mark.integration
def test_an_idle_projector_is_stopped(tmp_path: Path) -> None:
    journal = _journal(1)
    with EventStore.open(tmp_path / "store.sqlite3", projector_idle_seconds=0.05) as store:
        for session_id in ("a", "b"):
            store.ask(SaveSession(record=example_session(session_id)))
        store.ask(ObserveRelayEvents(session_id="a", events=journal.events))
        threading.Event().wait(0.1)
        store.ask(ObserveRelayEvents(session_id="b", events=journal.events))  # sweeps "a"
        assert store.metrics().live_projectors == 1
        report = store.ask(ObserveRelayEvents(session_id="a", events=journal.events))
        assert report.already_applied == len(journal.events)


def _feed_from_threads(
    path: Path,
    projection: Literal["thread", "process"],
    *,
    sessions: int,
    threads: int,
    limit: int,
    turns: int,
    idle_seconds: float = 300.0,
) -> None:
    """Feed ``sessions`` sessions an event per ask, round robin, each thread its own
    sessions, with ``limit`` projectors (idle ones stopped after ``idle_seconds``): every
    ask answers as in an undisturbed run (each event applied once, none already), and
    the store ends at every journal's end."""
    names = [f"s-{n}" for n in range(sessions)]
    journals = {session_id: _journal(turns) for session_id in names}
    failures: Counter[str] = Counter()
    reports: dict[str, list[ProjectionReport]] = {session_id: [] for session_id in names}
    with EventStore.open(
        path, max_projectors=limit, projector_idle_seconds=idle_seconds, projection=projection
    ) as store:
        for session_id in names:
            store.ask(SaveSession(record=example_session(session_id)))

        def feed(mine: list[str]) -> None:
            for at in range(len(journals[mine[0]].events)):
                for session_id in mine:
                    event = journals[session_id].events[at]
                    message = ObserveRelayEvents(session_id=session_id, events=[event])
                    try:
                        reports[session_id].append(store.ask(message, timeout=60))
                    except Exception as exc:  # noqa: BLE001 - counted, the assertion names it
                        failures[f"{type(exc).__name__}: {exc}"] += 1
                        return

        feeders = [
            threading.Thread(target=feed, args=(names[first::threads],)) for first in range(threads)
        ]
        for feeder in feeders:
            feeder.start()
        for feeder in feeders:
            feeder.join()
        assert failures == Counter()
        assert store.metrics().projector_starts > sessions  # projectors were stopped for room
        for session_id, journal in journals.items():
            assert [(r.applied, r.already_applied) for r in reports[session_id]] == [(1, 0)] * len(
                journal.events
            )
            assert reports[session_id][-1].frontier_ordinal == journal.frontier.ordinal
            stored = store.ask(LoadMaterializedSession(session_id=session_id))
            assert stored is not None
            assert stored.frontier == journal.frontier


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_an_ask_racing_its_projectors_eviction_is_answered_by_the_next_one(
    tmp_path: Path, projection: Literal["thread", "process"]
) -> None:
    """Several threads feeding more sessions than ``max_projectors``: a projector is
    often stopped for room between its lookup and the hand-over of the message. The
    message goes to the session's next projector: never ``StoreClosed`` from an open
    store, never applied twice or lost."""
    _feed_from_threads(
        tmp_path / "store.sqlite3", projection, sessions=12, threads=4, limit=3, turns=8
    )


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_an_ask_racing_its_projector_idling_out_is_answered_by_the_next_one(
    tmp_path: Path, projection: Literal["thread", "process"]
) -> None:
    """As above, with projectors idling out as soon as another session is looked up."""
    _feed_from_threads(
        tmp_path / "store.sqlite3",
        projection,
        sessions=8,
        threads=4,
        limit=8,
        turns=8,
        idle_seconds=0.0001,
    )


@pytest.mark.slow
@pytest.mark.parametrize("projection", ["thread", "process"])
@pytest.mark.parametrize("idle_seconds", [300.0, 0.001])
def test_a_soak_of_many_sessions_over_few_projectors_answers_every_ask(
    tmp_path: Path, projection: Literal["thread", "process"], idle_seconds: float
) -> None:
    _feed_from_threads(
        tmp_path / "store.sqlite3",
        projection,
        sessions=64,
        threads=8,
        limit=4,
        turns=12,
        idle_seconds=idle_seconds,
    )


def test_an_idle_projector_is_never_stopped_while_a_message_is_handed_to_it() -> None:
    """A hand-over holds the session's projector: idling out (here at once) and
    displacement pass it by until the message is in its inbox."""
    live, started = _live(limit=1)
    live._idle = 0.0
    refs: dict[str, Any] = {}

    def put_after_others_looked_up(ref: Any) -> bool:
        refs["b"] = live.get("b")  # would stop "a" for room, and for idling
        refs["c"] = live.get("c")
        ref.actor_inbox.waiting += 1  # the message goes in
        return True

    handed = live.hand_over("a", put_after_others_looked_up)
    assert handed is not None
    assert handed.is_alive()
    assert started == ["a", "b", "c"]
    assert not refs["b"].is_alive()  # "b" was free to go; "a" held, then working


class _Inbox:
    def __init__(self) -> None:
        self.waiting = 0

    def empty(self) -> bool:
        return self.waiting == 0

    @property
    def unfinished_tasks(self) -> int:
        return self.waiting


class _Ref:
    """What :class:`LiveProjectors` uses of a projector's ref."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.actor_inbox = _Inbox()
        self.alive = True

    def is_alive(self) -> bool:
        return self.alive

    def stop(self, block: bool = True) -> None:
        assert self.actor_inbox.empty(), "a working projector was stopped"
        self.alive = False


def _live(limit: int) -> tuple[LiveProjectors, list[str]]:
    started: list[str] = []

    def start(session_id: str) -> Any:
        started.append(session_id)
        return _Ref(session_id)

    return LiveProjectors(start, limit=limit, idle_seconds=1e9), started


def _feed(live: LiveProjectors, order: list[str]) -> None:
    for session_id in order:
        assert live.get(session_id).session_id == session_id  # type: ignore[attr-defined]
        assert len(live) <= live._limit
        assert len(live._displaced) <= GHOSTS * live._limit  # the memory of displaced ids


@pytest.mark.parametrize(("limit", "sessions"), [(8, 10), (8, 12), (256, 300)])
def test_round_robin_over_more_sessions_than_the_limit_keeps_most_projectors(
    limit: int, sessions: int
) -> None:
    """Least-recently-used eviction would evict the next session fed every time (a
    start per lookup); the live set keeps ``limit - 1`` projectors across the loop and
    cycles the rest through one, and stays within its limit."""
    live, started = _live(limit=limit)
    loop = [f"s-{n}" for n in range(sessions)]
    _feed(live, loop * 3)  # the first rounds fill and settle the set
    before = len(started)
    _feed(live, loop * 20)
    assert len(started) - before == 20 * (sessions - limit + 1)


def test_a_hot_session_keeps_its_projector_through_a_loop_of_others() -> None:
    """Sessions asked for again and again are never displaced by a loop over many
    more sessions than the limit (nor by the sessions of the loop coming back)."""
    live, started = _live(limit=8)
    loop = [f"cold-{n}" for n in range(40)]
    hot = ["hot-a", "hot-b", "hot-c"]
    order = [name for n, cold in enumerate(loop * 10) for name in (cold, hot[n % 3])]
    _feed(live, order)
    assert [started.count(name) for name in hot] == [1, 1, 1]


def test_the_session_asked_for_and_working_projectors_are_never_stopped() -> None:
    live, started = _live(limit=3)
    refs = {sid: live.get(sid) for sid in ("a", "b", "c")}
    for ref in refs.values():
        ref.actor_inbox.waiting = 1  # type: ignore[attr-defined]
    refs["a"].actor_inbox.waiting = 0  # type: ignore[attr-defined]
    for _ in range(20):  # "d" and "e" in turn: only "a" (idle) or each other may stop
        live.get("d")
        live.get("e")
    assert all(ref.is_alive() for sid, ref in refs.items() if sid != "a")
    assert not refs["a"].is_alive()
    refs["b"].actor_inbox.waiting = 0  # type: ignore[attr-defined]
    refs["c"].actor_inbox.waiting = 0  # type: ignore[attr-defined]
    live.get("f")
    assert len(live) <= 3
    assert started[:3] == ["a", "b", "c"]


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_metrics_count_the_projectors_started_and_loaded(
    tmp_path: Path, projection: Literal["thread", "process"]
) -> None:
    """A projector stopped for room starts again with its session's next event; it loads
    the session from the store again, unless a projection worker kept it parked."""
    journal = _journal(2)
    with EventStore.open(
        tmp_path / "store.sqlite3", max_projectors=2, projection=projection
    ) as store:
        for session_id in ("a", "b", "c"):
            store.ask(SaveSession(record=example_session(session_id)))
        assert (store.metrics().projector_loads, store.metrics().projector_starts) == (0, 0)
        for session_id in ("a", "b", "c"):
            store.ask(ObserveRelayEvents(session_id=session_id, events=journal.events[:3]))
        assert (store.metrics().projector_loads, store.metrics().projector_starts) == (3, 3)
        store.ask(ObserveRelayEvents(session_id="c", events=journal.events[3:]))
        assert store.metrics().projector_starts == 3  # "c" kept its projector
        report = store.ask(ObserveRelayEvents(session_id="a", events=journal.events[3:]))
        assert report.applied == len(journal.events) - 3
        metrics = store.metrics()
        assert metrics.projector_starts == 4  # "a" had been stopped for room
        assert metrics.projector_loads == (4 if projection == "thread" else 3)


@pytest.mark.parametrize("projection", ["thread", "process"])
def test_told_and_asked_messages_through_full_queues_and_idling_apply_once_in_order(
    tmp_path: Path, projection: Literal["thread", "process"]
) -> None:
    """(Found by a hostile probe.) Asyncio tasks tell and ask many sessions through
    queues of one message, over three projectors that idle out at once: a projector was
    stopped for idling while it handled a message (its inbox looked empty), so its
    session's next projector ran beside it and events were refused or applied twice."""
    events = JournalBuilder()
    for turn in range(20):
        events.prompt_turn(f"question {turn}", chunks=("a ", "b"))
    journal = events.events
    sessions = [f"s-{n}" for n in range(12)]

    async def main() -> list[str]:
        problems: list[str] = []
        async with AsyncEventStore.open(
            tmp_path / "store.sqlite3",
            projection=projection,
            queue_capacity=1,
            max_projectors=3,
            projector_idle_seconds=0.001,
        ) as store:
            for session_id in sessions:
                await store.ask(SaveSession(record=example_session(session_id)))

            async def feed(session_id: str, tell: bool) -> None:
                for start in range(0, len(journal) - 1, 10):
                    message = ObserveRelayEvents(
                        session_id=session_id,
                        events=journal[start : min(start + 10, len(journal) - 1)],
                    )
                    if tell:
                        await store.tell(message)
                        continue
                    report = await store.ask(message)
                    if report.already_applied:
                        problems.append(f"{session_id}@{start}: {report}")

            await asyncio.gather(*(feed(sid, n % 2 == 0) for n, sid in enumerate(sessions)))
            for session_id in sessions:  # answered after every told message, in order
                report = await store.ask(
                    ObserveRelayEvents(session_id=session_id, events=journal[-1:])
                )
                if (report.applied, report.frontier_ordinal) != (1, len(journal)):
                    problems.append(f"{session_id}: {report}")
        return problems

    assert asyncio.run(main()) == []
