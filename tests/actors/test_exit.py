"""A store nobody closed never keeps the process alive, and a clean exit closes it.

Each case runs a small script in a subprocess that opens a store, has one write
acknowledged and then returns or raises without ``close()``. The process must end by
itself (the subprocess timeout is a hang detector, not a timing target), with the
acknowledged write in the file, and the interpreter's exit must have closed the store
(its ``-wal`` checkpointed into the main file, as ``close()`` leaves it).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import pytest

from relaystore import EventStore, LoadApiEvents
from tests.actors.cli_support import ENV, TIMEOUT

BLOCKING = """
    import sys
    from relaystore import ApiActivityState, EventStore, RecordActivities, SaveSession
    from relaystore.testing import example_session

    store = EventStore.open(sys.argv[1])
    store.ask(SaveSession(record=example_session()))
    state = ApiActivityState(
        state="working-1", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    store.ask(RecordActivities(activities=[("session-1", state)], recorded_at_ms=5))
    assert store.wait_for(1, timeout=30)
    if sys.argv[2] == "raise":
        raise RuntimeError("the supervisor crashed")
"""

AWAITING = """
    import asyncio
    import sys
    from relaystore import ApiActivityState, RecordActivities, SaveSession
    from relaystore.aio import AsyncEventStore
    from relaystore.testing import example_session

    async def main() -> None:
        store = await AsyncEventStore.open(sys.argv[1])
        await store.ask(SaveSession(record=example_session()))
        state = ApiActivityState(
            state="working-1", is_idle=False, waiting_for_input=False, capacity_retry=False
        )
        await store.ask(RecordActivities(activities=[("session-1", state)], recorded_at_ms=5))
        follower = store.follow(after_seq=0)
        assert (await anext(follower)).kind == "activity_changed"
        if sys.argv[2] == "raise":
            raise RuntimeError("the supervisor crashed")

    asyncio.run(main())
"""


@pytest.mark.parametrize("script", [BLOCKING, AWAITING], ids=["blocking", "awaiting"])
@pytest.mark.parametrize("ending", ["return", "raise"])
def test_an_unclosed_store_lets_the_process_exit_with_its_writes(
    tmp_path: Path, script: str, ending: str
) -> None:
    path = tmp_path / "store.sqlite3"
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(path), ending],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == (1 if ending == "raise" else 0), result.stderr
    if ending == "raise":
        assert "the supervisor crashed" in result.stderr
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # closed at exit: checkpointed
    with EventStore.open(path, read_only=True) as store:
        kinds = [e.kind for e in store.ask(LoadApiEvents(after_seq=0)).events]
    assert kinds == ["activity_changed"]


def test_closing_forgets_the_exit_hook(tmp_path: Path) -> None:
    store = EventStore.open(tmp_path / "store.sqlite3")
    core = weakref.ref(store._core)
    store.close()
    del store
    gc.collect()
    assert core() is None  # nothing (the exit hook included) keeps a closed store
