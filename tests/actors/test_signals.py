"""A signal handler may use the store, whatever the main thread was doing in it.

Python runs signal handlers in the main thread, between any two of its bytecodes. Each
case runs a script in a subprocess that installs a ``SIGUSR1`` handler which asks the
store for a write (a commit the writer must publish), then delivers ``SIGUSR1`` (a real
one, ``signal.raise_signal``) at each line the main thread runs inside ``wait_for``,
``tell`` or ``ask`` in turn: from a trace function, so the handler runs right there, with
whatever the interrupted code held. Every handler's ask must be answered and the call
it interrupted must finish. The subprocess timeout is a hang detector (a deadlock
fails the test instead of hanging it), not a timing target.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.actors.cli_support import ENV

pytestmark = pytest.mark.integration  # a process sent signals

SCRIPT = """
    import signal
    import sys
    import threading
    import time
    from relaystore import ApiActivityState, EventStore, LoadApiEvents, RecordActivities
    from relaystore import SaveSession
    from relaystore.testing import example_session

    store = EventStore.open(sys.argv[1], projection="thread")
    store.ask(SaveSession(record=example_session()))
    answered = []

    def handler(signum, frame):
        session = example_session(f"session-h{len(answered)}")
        answered.append(store.ask(SaveSession(record=session)))

    signal.signal(signal.SIGUSR1, handler)
    states = iter(range(1, 10**9))

    def activity():
        n = next(states)
        state = ApiActivityState(
            state=f"working-{n}", is_idle=False, waiting_for_input=False, capacity_retry=False
        )
        return RecordActivities(activities=[("session-1", state)], recorded_at_ms=n)

    def wait_for():
        target = store.latest_seq + 1
        def commit():  # once the main thread waits (polling for that, not a pause)
            while store._core.commits.waiting < 1 and store.latest_seq < target:
                time.sleep(0.001)
            store.ask(activity())
        committer = threading.Thread(target=commit)
        committer.start()
        assert store.wait_for(target)
        committer.join()

    calls = {
        "wait_for": wait_for,
        "tell": lambda: store.tell(activity()),
        "ask": lambda: store.ask(LoadApiEvents(limit=1)),
    }
    call = calls[sys.argv[2]]

    def signalled_at(line):
        seen = 0
        def tracer(frame, event, arg):
            nonlocal seen
            seen += 1
            if seen == line:
                signal.raise_signal(signal.SIGUSR1)  # its handler runs here, in the call
            return tracer
        sys.settrace(tracer)
        try:
            call()
        finally:
            sys.settrace(None)
        return seen

    line = 1
    while True:
        before = len(answered)
        lines = signalled_at(line)
        assert len(answered) == before + 1, f"the handler at line {line} was not answered"
        if line >= lines:
            break
        line += 1
    store.close()
    print(f"{line} lines, {len(answered)} handlers answered")
"""


@pytest.mark.parametrize("call", ["wait_for", "tell", "ask"])
def test_a_signal_handler_that_asks_is_answered_wherever_the_main_thread_is(
    tmp_path: Path, call: str
) -> None:
    """The handler's ask is answered, and the interrupted call completes, for a signal
    arriving at every line the main thread runs inside ``wait_for`` (which once held
    the commit watch's lock that the writer needs to publish), ``tell`` and ``ask``
    (whose hand-over once held the inbox's mutex)."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path / "s.sqlite3"), call],
            capture_output=True,
            text=True,
            env=ENV,
            timeout=240,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"deadlocked: a handler's ask in {call} was never answered ({exc.stdout!r})")
    assert result.returncode == 0, result.stderr
    assert "handlers answered" in result.stdout
