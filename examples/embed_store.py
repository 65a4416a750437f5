"""How a supervisor embeds relaystore: save a session, feed it relay events, page the feed.

Run: ``python examples/embed_store.py [STORE]`` (default: a temporary store). It
replays one example worker's journal through the facade, prints the API events a
client would page through, and shows ``wait_for`` waking on a commit.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from pathlib import Path

from relaystore import (
    ApiActivityState,
    ApiEventFilter,
    EventStore,
    LoadApiEvents,
    LoadMaterializedSession,
    ObserveRelayEvents,
    RecordActivities,
    SaveSession,
)
from relaystore.actors.journal import read_journal
from relaystore.testing import example_session

WORKER = Path(__file__).parent / "worker-root" / "b4d2f0e8-1a6c-4e39-8f57-2c9d3b7e6a04"


def main(store_path: Path) -> None:
    journal = read_journal(WORKER)  # the session id comes from relay-state.json
    session_id = journal.source.session_id
    with EventStore.open(store_path) as store:
        store.ask(SaveSession(record=example_session(session_id, "example-project")))
        events = [event for event, _location in journal]
        report = store.ask(ObserveRelayEvents(session_id=session_id, events=events))
        print(f"applied {report.applied} relay events, frontier {report.frontier_ordinal}")

        cursor = 0
        while True:  # page through the feed as a client would
            page = store.ask(
                LoadApiEvents(filter=ApiEventFilter(session_id=session_id), after_seq=cursor)
            )
            for event in page.events:
                print(f"  {event.seq:>3} {event.kind}")
            if not page.events:
                break
            cursor = page.next_after_seq

        woke = threading.Event()
        waiter = threading.Thread(
            target=lambda: woke.set() if store.wait_for(cursor + 1, timeout=5) else None
        )
        waiter.start()
        store.ask(
            RecordActivities(
                activities=[
                    (
                        session_id,
                        ApiActivityState(
                            state="running",
                            is_idle=False,
                            waiting_for_input=False,
                            capacity_retry=False,
                        ),
                    )
                ],
                recorded_at_ms=1,
            )
        )
        waiter.join()
        print(f"wait_for woke on the activity commit: {woke.is_set()}")

        session = store.ask(LoadMaterializedSession(session_id=session_id))
        assert session is not None
        print(f"transcript items: {len(session.transcript)}, title: {session.session_title!r}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(Path(folder) / "relaystore.sqlite3")
