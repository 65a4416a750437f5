"""relaystore.aio: asks, follows and closes that never block the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

import relaystore.actors.writer as writer_module
from relaystore import (
    AskTimeout,
    EventStore,
    InvalidInput,
    LoadApiEvents,
    LoadState,
    SaveSession,
    StoreClosed,
)
from relaystore.aio import AsyncEventStore
from relaystore.testing import example_session
from tests.actors.activity_support import activity


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def test_ask_follow_and_close(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            await store.ask(SaveSession(record=example_session()))
            assert list((await store.ask(LoadState())).sessions) == ["session-1"]
            seen: list[int] = []

            async def follow() -> None:
                async for event in store.follow(after_seq=0):
                    seen.append(event.recorded_at_ms)
                    if len(seen) == 5:
                        return

            follower = asyncio.create_task(follow())
            for n in range(5):
                await store.ask(activity(n))
            await asyncio.wait_for(follower, 5)
            assert seen == [0, 1, 2, 3, 4]
            assert [e.seq async for e in store.follow(after_seq=3, timeout=0)] == [4, 5]
        with pytest.raises(StoreClosed):
            await store.ask(LoadState())

    run(main)


def _slow_writer(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, Callable[[], None]]:
    """A gate the writer waits on before each message, and a switch that installs it."""
    gate = threading.Event()
    real = writer_module.perform

    def slow(connection: Any, message: Any) -> Any:
        gate.wait(60)  # a hang detector: each test opens the gate once it has seen enough
        return real(connection, message)

    return gate, lambda: monkeypatch.setattr(writer_module, "perform", slow)


def test_a_waiting_ask_leaves_the_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, slow_down = _slow_writer(monkeypatch)

    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            await store.ask(SaveSession(record=example_session()))
            slow_down()
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticking = asyncio.create_task(ticker())
            asking = asyncio.create_task(store.ask(activity(1)))
            while ticks < 10:  # the loop keeps running while the ask waits (at any speed)
                await asyncio.sleep(0.01)
            assert not asking.done()  # the writer is held: the ask still waits
            gate.set()
            await asyncio.wait_for(asking, 5)
            ticking.cancel()

    run(main)


def test_a_timed_out_ask_raises_ask_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, slow_down = _slow_writer(monkeypatch)

    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            await store.ask(SaveSession(record=example_session()))
            slow_down()
            try:
                with pytest.raises(AskTimeout, match="may still take effect"):
                    await store.ask(activity(1), timeout=0.1)
            finally:
                gate.set()
            assert await store.wait_for(1, timeout=5)

    run(main)


def test_idle_followers_cost_no_threads_and_cancel_cleanly(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            await store.ask(SaveSession(record=example_session()))
            before = threading.active_count()
            seen = [asyncio.Event() for _ in range(200)]

            async def follow(index: int) -> list[int]:
                got = []
                async for event in store.follow():
                    got.append(event.seq)
                    seen[index].set()
                return got

            followers = [asyncio.create_task(follow(index)) for index in range(200)]
            while store.metrics().followers < 200:  # every one follows (and soon waits)
                await asyncio.sleep(0.01)
            assert threading.active_count() == before
            await store.ask(activity(1))
            await asyncio.gather(*(event.wait() for event in seen))  # each got the event
            assert threading.active_count() == before
            for task in followers[:100]:
                task.cancel()
            await asyncio.gather(*followers[:100], return_exceptions=True)
            assert all(task.cancelled() for task in followers[:100])
        results = await asyncio.gather(*followers[100:])
        assert all(result == [1] for result in results)  # close ended the rest

    run(main)


def test_a_read_only_store_follows_another_writers_commits(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"

    async def main() -> None:
        with EventStore.open(path) as writer:
            writer.ask(SaveSession(record=example_session()))
            async with AsyncEventStore.open(path, read_only=True) as reader:
                got: list[int] = []

                async def follow() -> None:
                    async for event in reader.follow():
                        got.append(event.seq)
                        if len(got) == 3:
                            return

                follower = asyncio.create_task(follow())
                for n in range(3):
                    await asyncio.to_thread(writer.ask, activity(n))
                await asyncio.wait_for(follower, 10)
                assert got == [1, 2, 3]

    run(main)


def test_bad_input_is_refused_in_the_loop(tmp_path: Path) -> None:
    async def main() -> None:
        async with AsyncEventStore.open(tmp_path / "s.sqlite3") as store:
            with pytest.raises(InvalidInput, match=r"LoadApiEvents\.after_seq"):
                await store.ask(LoadApiEvents(after_seq="x"))  # type: ignore[arg-type]

    run(main)
