"""Restore rate against replay rate of the same journals, in one run.

Generates prompt-turn journals (``--sessions`` worker roots of ``--turns`` turns: four
relay events and two API events a turn), replays them into a fresh store (``relaystore
replay``), publishes it to a local ``nats-server -js`` (``relaystore publish --once``),
and restores it into a second, empty store (``relaystore restore``). Prints relay
events/s of each step (the journal's events, divided by the command's wall time) and
checks that the restored store prints the same ``events``. Needs nats-server on PATH.

    python benchmarks/bench_restore.py [--sessions 10] [--turns 2500]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from relaystore.testing import JournalBuilder


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cli(db: Path, *args: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "relaystore.actors.cli", "--db", str(db), *args],
        capture_output=True,
        check=True,
    )
    return time.perf_counter() - started, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=2500)
    args = parser.parse_args()
    binary = shutil.which("nats-server")
    if binary is None:
        print("nats-server is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        roots = []
        for index in range(args.sessions):
            builder = JournalBuilder()
            for turn in range(args.turns):
                builder.prompt_turn(f"prompt {turn}", chunks=(f"answer {turn} " * 8,))
            roots.append(builder.write_worker_root(root / "roots" / f"s{index}", f"s{index}"))
        port = _port()
        server = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(root / "js")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"nats://127.0.0.1:{port}"
            time.sleep(0.5)
            original, restored = root / "a.sqlite3", root / "b.sqlite3"
            replay_s, _ = _cli(original, "replay", *map(str, roots))
            publish_s, _ = _cli(original, "publish", "--nats", url, "--once")
            stats = json.loads(_cli(original, "stats", "--json")[1])
            restore_s, _ = _cli(restored, "restore", "--nats", url, "--store", stats["store_id"])
            same = _cli(original, "events")[1] == _cli(restored, "events")[1]
        finally:
            server.terminate()
            server.wait()
    events = args.sessions * args.turns * 4
    print(
        f"{events} relay events ({stats['latest_seq']} API events) in {args.sessions} sessions:\n"
        f"  replay   {replay_s:7.2f} s  {events / replay_s:9.0f} events/s\n"
        f"  publish  {publish_s:7.2f} s  {events / publish_s:9.0f} events/s\n"
        f"  restore  {restore_s:7.2f} s  {events / restore_s:9.0f} events/s "
        f"({restore_s and replay_s / restore_s:.2f}x replay)\n"
        f"  restored feed identical: {same}"
    )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
