"""Writer throughput: RecordActivities messages/s for 1, 4 and 8 senders, group commit on/off.

Each sender owns one session and sends ``--messages`` asks, each with one changed
activity, at ``synchronous=FULL``. Prints a table and the ratio of 8 senders to 1 sender
(aim: at least 5x with group commit). Run: ``python benchmarks/bench_writer.py``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path

from actors.store import EventStore
from domain.api_events import ApiActivityState
from domain.messages import RecordActivities, SaveSession
from domain.sessions import example_session


def run(senders: int, messages: int, group_commit: bool, folder: Path) -> float:
    path = folder / f"writer-{senders}-{group_commit}.sqlite3"
    with EventStore.open(path, group_commit=group_commit, synchronous="FULL") as store:
        for n in range(senders):
            store.ask(SaveSession(record=example_session(f"session-{n}", "project-1")))
        start = threading.Barrier(senders + 1)

        def send(n: int) -> None:
            session_id = f"session-{n}"
            start.wait()
            for i in range(messages):
                state = ApiActivityState(state=f"running-{i}")
                store.ask(RecordActivities(activities=[(session_id, state)], recorded_at_ms=i))

        threads = [threading.Thread(target=send, args=(n,)) for n in range(senders)]
        for thread in threads:
            thread.start()
        start.wait()
        began = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - began
    return senders * messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=400, help="asks per sender")
    parser.add_argument("--json", type=Path, help="append the figures as JSON lines here")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for group_commit in (False, True):
            for senders in (1, 4, 8):
                rate = run(senders, args.messages, group_commit, Path(folder))
                rows.append(
                    {"senders": senders, "group_commit": group_commit, "messages_per_s": rate}
                )
    print(f"{'senders':>7} {'group commit':>12} {'messages/s':>11} {'vs 1 sender':>11}")
    for row in rows:
        base = next(
            r for r in rows if r["senders"] == 1 and r["group_commit"] == row["group_commit"]
        )
        ratio = row["messages_per_s"] / base["messages_per_s"]
        row["ratio_to_one_sender"] = ratio
        print(
            f"{row['senders']:>7} {row['group_commit']!s:>12} {row['messages_per_s']:>11,.0f} {ratio:>10.2f}x"
        )
    if args.json:
        with args.json.open("a") as out:
            for row in rows:
                out.write(json.dumps({"benchmark": "writer", **row}) + "\n")


if __name__ == "__main__":
    main()
