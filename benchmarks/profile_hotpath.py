"""Profile a hot path with cProfile in every thread, and print the top functions.

    python benchmarks/profile_hotpath.py [replay|writer|stages] [--clock cpu|wall]
        [--events N] [--seconds S] [--top 15] [--save FILE] [--projection thread|process]

relaystore's work is spread over threads (the caller reads journal lines, a projector
actor projects, the writer actor commits), and cProfile sees only the thread it runs in.
So ``threading.Thread.run`` is wrapped to run each new thread under its own profiler,
and the profiles of every thread are merged at the end (``pstats.Stats.add``).

* ``replay`` (default): replays a generated journal (``--events``, default 50k) the way
  ``relaystore replay`` does, into a fresh store at ``synchronous=FULL``;
* ``writer``: 8 senders ask ``RecordActivities`` (one changed activity) for ``--seconds``;
* ``stages``: replays as ``replay`` does, without a profiler, and prints the CPU each
  thread of this process and each projection worker process spent, in µs an event (a
  600-event session is replayed first, so the worker's start is not counted): which
  stage is the bottleneck (read + decode + chain in ``MainThread``, the page commits in
  ``WriterActor``, the projection in ``ProjectorActor`` or, with ``--projection process``,
  in the worker, whose pipe and pages cost the ``ProjectorActor`` here). Linux only (it
  reads the worker's CPU from ``/proc``).

``--clock wall`` (default) times elapsed time, so time a thread spends blocked (waiting
for its inbox, for an ``ask`` to be answered, for fsync inside COMMIT) shows up in the
function that blocked; the tables then leave out the pure waiting and looping frames
(thread entry, actor loop, inbox and future waits, lock acquire) and name them.
``--clock cpu`` times each thread's CPU (``time.thread_time``): blocked time costs
nothing, but the timer is a system call, which slows the run ~10x and inflates functions
called millions of times. Per-thread totals are printed first. Prints the
top ``--top`` functions by cumulative and by self time with the module they live in;
``--save`` writes the merged profile for ``python -m pstats`` or snakeviz.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

_profiles: list[tuple[str, cProfile.Profile, list[float]]] = []
_original_run = threading.Thread.run


_clock: Any = None  # the profilers' timer: time.thread_time (cpu) or the default (wall)


def _profiler() -> cProfile.Profile:
    return cProfile.Profile(_clock) if _clock is not None else cProfile.Profile()


def _profiled_run(self: threading.Thread) -> None:
    profile = _profiler()
    cpu = [time.thread_time()]
    _profiles.append((self.name, profile, cpu))
    profile.enable()
    try:
        _original_run(self)
    finally:
        profile.disable()
        cpu.append(time.thread_time())


def _where(filename: str) -> str:
    """The module a function lives in: a repo-relative path, a library, or a builtin."""
    if filename == "~":
        return "(builtin)"
    path = Path(filename)
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        pass
    parts = path.parts
    if "site-packages" in parts:
        return "/".join(parts[parts.index("site-packages") + 1 :])
    if "python3.11" in parts:
        return "stdlib/" + "/".join(parts[parts.index("python3.11") + 1 :])
    return filename


# Frames that only block or loop (thread entry, actor loop, inbox and future waits, lock
# acquire): in a wall-clock profile their time is mostly waiting on another thread, so the
# tables leave them out and say so.
_WAITING = {
    ("stdlib/threading.py", "run"),
    ("stdlib/threading.py", "wait"),
    ("stdlib/queue.py", "get"),
    ("pykka/_actor.py", "_actor_loop"),
    ("pykka/_actor.py", "_actor_loop_running"),
    ("pykka/_threading.py", "get"),
    ("(builtin)", "<method 'acquire' of '_thread.lock' objects>"),
}


def _top(stats: pstats.Stats, key: str, count: int, total: float, hide: bool) -> None:
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    index = {"cumulative": 3, "tottime": 2}[key]
    ordered = sorted(raw.items(), key=lambda item: item[1][index], reverse=True)
    hidden = [row for row in ordered if hide and (_where(row[0][0]), row[0][2]) in _WAITING]
    rows = [row for row in ordered if row not in hidden][:count]
    print(f"\ntop {count} by {key} time (of {total:.2f} s summed over threads)")
    if hidden:
        names = ", ".join(sorted({f"{name} [{_where(f)}]" for (f, _l, name), _ in hidden}))
        print(f"(left out as waiting/looping frames: {names})")
    print(f"{'self s':>8} {'cum s':>8} {'calls':>10}  function  [module]")
    for (filename, line, name), (_cc, calls, tottime, cumtime, _callers) in rows:
        where = _where(filename)
        label = name if filename == "~" else f"{name}:{line}"
        print(f"{tottime:>8.3f} {cumtime:>8.3f} {calls:>10}  {label}  [{where}]")


def _replay(args: argparse.Namespace, scratch: Path) -> str:
    from suite.common import replay_journal
    from suite.journal import write_journal

    from relaystore.actors.store import EventStore

    stats = write_journal(scratch / "journal.jsonl", args.events)
    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    main = _profiler()
    cpu = [time.thread_time()]
    _profiles.append(("MainThread", main, cpu))
    started = time.perf_counter()
    main.enable()
    with EventStore.open(
        scratch / "store.sqlite3", synchronous="FULL", projection=args.projection
    ) as store:
        applied = replay_journal(store, stats.path)
    main.disable()
    cpu.append(time.thread_time())
    elapsed = time.perf_counter() - started
    return (
        f"replayed {applied:,} events ({stats.bytes / 1e6:.0f} MB) in {elapsed:.1f} s "
        f"under the profiler: {applied / elapsed:,.0f} events/s"
    )


def _children_cpu() -> dict[int, float]:
    """CPU seconds of each child process of this one (the projection workers), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for task in os.listdir("/proc/self/task"):
        try:
            children = Path(f"/proc/self/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            found[int(child)] = (int(fields[11]) + int(fields[12])) / tick
    return found


def _threads_cpu() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by name."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            found[thread.name] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:
            continue
    return found


def _stages(args: argparse.Namespace, scratch: Path) -> str:
    from suite.common import replay_journal
    from suite.journal import write_journal

    from relaystore.actors.store import EventStore

    stats = write_journal(scratch / "journal.jsonl", args.events)
    warm = write_journal(scratch / "warm.jsonl", 600, seed=8)
    with EventStore.open(
        scratch / "store.sqlite3", synchronous="FULL", projection=args.projection
    ) as store:
        replay_journal(store, warm.path, session_id="warm-up")  # starts the worker
        threads, children = _threads_cpu(), _children_cpu()
        started = time.perf_counter()
        applied = replay_journal(store, stats.path)
        elapsed = time.perf_counter() - started
        threads_after, children_after = _threads_cpu(), _children_cpu()
    per_event = 1e6 / applied
    rows = [
        (f"thread {name}", (cpu - threads.get(name, 0.0)) * per_event)
        for name, cpu in threads_after.items()
    ]
    rows += [
        (f"worker process {pid}", (cpu - children.get(pid, 0.0)) * per_event)
        for pid, cpu in children_after.items()
    ]
    lines = [
        f"replayed {applied:,} events ({args.projection}) in {elapsed:.2f} s: "
        f"{elapsed * per_event:.1f} µs an event of wall time, {applied / elapsed:,.0f} events/s",
        "CPU an event by thread and worker process (the busiest is the bottleneck):",
    ]
    lines += [f"  {name:<32} {us:6.1f} µs" for name, us in rows if us >= 0.05]
    return "\n".join(lines)


def _writer(args: argparse.Namespace, scratch: Path) -> str:
    from suite.common import drive

    from relaystore.actors.store import EventStore
    from relaystore.domain.api_events import ApiActivityState
    from relaystore.domain.messages import RecordActivities, SaveSession
    from relaystore.testing import example_session

    threading.Thread.run = _profiled_run  # type: ignore[method-assign]
    senders = 8
    with EventStore.open(scratch / "store.sqlite3", synchronous="FULL") as store:
        for n in range(senders):
            store.ask(SaveSession(record=example_session(f"session-{n}", "bench")))
        states = [
            ApiActivityState(
                state=f"running-{i}", is_idle=False, waiting_for_input=False, capacity_retry=False
            )
            for i in range(2)
        ]

        def send(sender: int, i: int) -> None:
            activity = (f"session-{sender}", states[i % 2])
            store.ask(RecordActivities(activities=[activity], recorded_at_ms=i))

        rate = drive(senders, args.seconds, send)
    return f"{senders} senders: {rate:,.0f} RecordActivities/s under the profiler"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", choices=["replay", "writer", "stages"], default="replay")
    parser.add_argument("--events", type=int, default=50_000, help="replay: journal events")
    parser.add_argument("--seconds", type=float, default=3.0, help="writer: how long to send")
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="wall",
        help="wall: elapsed time (waits and fsync show where they block); cpu: each "
        "thread's CPU time (time.thread_time: slower, inflates many-call functions)",
    )
    parser.add_argument(
        "--projection",
        choices=["thread", "process"],
        default="thread",
        help="replay: where sessions project (thread: the projector's work is profiled "
        "here; process: the worker's is not, only its pipe's)",
    )
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--save", type=Path, help="write the merged profile here")
    args = parser.parse_args(argv)
    global _clock
    _clock = time.thread_time if args.clock == "cpu" else None
    if args.path == "stages":
        with tempfile.TemporaryDirectory(prefix="relaystore-profile-") as scratch:
            print(_stages(args, Path(scratch)))
        return 0
    with tempfile.TemporaryDirectory(prefix="relaystore-profile-") as scratch:
        run = _replay if args.path == "replay" else _writer
        summary = run(args, Path(scratch))
    threading.Thread.run = _original_run  # type: ignore[method-assign]
    print(summary)
    print(
        f"\nthreads ({args.clock} clock; CPU seconds = time.thread_time, profiler overhead included)"
    )
    merged: pstats.Stats | None = None
    wall = 0.0
    for name, profile, cpu in _profiles:
        stats = pstats.Stats(profile)
        total = stats.total_tt  # type: ignore[attr-defined]
        if total == 0:
            continue
        wall += total
        used = cpu[1] - cpu[0] if len(cpu) == 2 else float("nan")
        print(f"  {name:<24} {total:>8.2f} s profiled, {used:>7.2f} s CPU")
        if merged is None:
            merged = stats
        else:
            merged.add(stats)
    if merged is None:
        return 1
    hide = args.clock == "wall"
    _top(merged, "cumulative", args.top, wall, hide)
    _top(merged, "tottime", args.top, wall, hide)
    if args.save:
        merged.dump_stats(args.save)
        print(f"\nsaved the merged profile to {args.save}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
