"""Worker processes, tried as a careless embedder would: many stores in one process.

What an embedder relies on: each store starts at most its pool's workers (one per core,
at most ``POOL_LIMIT``), however many sessions it projects; closing a store ends its
workers, reaps them (no zombies) and closes every descriptor it opened, so a process
that opens and closes stores all day holds no more processes or files than before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from relaystore import EventStore
from relaystore.actors.workers.pool import POOL_LIMIT
from relaystore.domain.messages import ObserveRelayEvents, SaveSession
from relaystore.testing import JournalBuilder, example_session

pytestmark = pytest.mark.integration  # its stores project in worker processes


def _children() -> set[int]:
    """This process's child processes (running or zombie), from /proc."""
    found: set[int] = set()
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        try:
            with open(f"/proc/{os.getpid()}/task/{task}/children") as listed:
                found.update(int(pid) for pid in listed.read().split())
        except FileNotFoundError:  # a thread that ended since the listing has no children
            continue
    return found


def _descriptors() -> set[str]:
    """What this process's open descriptors point at (sockets and pipes by kind)."""
    pointed = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            pointed.add(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
        except FileNotFoundError:  # the descriptor listing the folder itself
            continue
    return pointed


def _project(store: EventStore, sessions: int) -> None:
    for index in range(sessions):
        session_id = f"s{index}"
        store.ask(SaveSession(record=example_session(session_id=session_id)))
        journal = JournalBuilder()
        events = journal.prompt_turn(f"hello {index}", chunks=("a", "b"))
        store.ask(ObserveRelayEvents(session_id=session_id, events=events))


def _pids(store: EventStore) -> list[int]:
    pool = store._core._workers  # the test needs the processes it counts
    return [] if pool is None else pool.pids


def test_stores_opened_and_closed_in_turn_leave_no_process_or_descriptor(tmp_path: Path) -> None:
    with EventStore.open(tmp_path / "warm.sqlite3") as warm:  # imports, logging, caches
        _project(warm, 1)
    before_children, before_fds = _children(), _descriptors()
    for turn in range(12):
        with EventStore.open(tmp_path / f"store-{turn}.sqlite3") as store:
            _project(store, 3)
            assert 1 <= len(_pids(store)) <= POOL_LIMIT
    assert _children() == before_children  # every worker ended and was reaped
    leaked = sorted(_descriptors() - before_fds)
    assert leaked == [], leaked


def test_many_stores_open_at_once_each_keep_their_bound_and_end_together(
    tmp_path: Path,
) -> None:
    before = _children()
    stores = [EventStore.open(tmp_path / f"store-{n}.sqlite3") for n in range(6)]
    try:
        for store in stores:
            _project(store, 2 * POOL_LIMIT)
        pools = [_pids(store) for store in stores]
        bound = min(POOL_LIMIT, os.cpu_count() or 1)
        assert all(1 <= len(pids) <= bound for pids in pools), pools
        everyone = [pid for pids in pools for pid in pids]
        assert len(set(everyone)) == len(everyone)  # no worker shared between stores
        assert set(everyone) <= _children() - before
    finally:
        for store in stores:
            store.close()
    assert _children() == before
