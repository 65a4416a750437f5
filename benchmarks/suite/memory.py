"""memory: peak RSS replaying 200k and 1M events (20k and 100k with ``--quick``).

Each replay runs in a fresh interpreter (``python -m suite.memory replay JOURNAL DB``)
that replays the journal into a new store as ``relaystore replay`` does and reports its
own peak resident set, ``VmHWM`` from ``/proc/self/status``, plus its projection worker
processes' (``/proc/PID/status``, read before the store closes; the figure is the sum, an
upper bound of what the two held at once), plus ``VmRSS`` sampled every 50k events to
show the trend. (``ru_maxrss`` is recorded too but not used: Linux carries
it over ``exec`` from the forked parent, so a child of a large runner reports at least
the runner's size.) The journals are
written beforehand by the parent, so generating them costs the child nothing.

Baselines: for the smaller replay, a fresh interpreter that imports the same modules and
opens and closes an empty store (``idle``): the ratio is what replaying adds. For the
larger replay, the smaller one: the ratio is how peak memory grows with the journal.
Aim: both under 250 MiB, and the larger within 20% of the smaller (ratio <= 1.2).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from relaystore.actors.store import EventStore
from suite.common import Context, Figure, log, replay_journal

NAME = "memory"
LIMIT_MIB = 250.0
GROWTH = 1.2
SAMPLE_EVERY = 50_000


def _status_kib(field: str, pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _workers_peak_mib(store: EventStore) -> float:
    """The peak RSS of the store's projection worker processes, summed (0 for none)."""
    pool = store._core._workers  # the benchmark needs the processes to read
    return 0.0 if pool is None else sum(_status_kib("VmHWM", pid) for pid in pool.pids) / 1024


def child(argv: list[str]) -> int:
    """Entry point of the measured interpreter; prints one JSON object."""
    mode, *paths = argv
    report: dict[str, Any] = {"baseline_rss_mib": _status_kib("VmRSS") / 1024}
    if mode == "idle":
        with EventStore.open(Path(paths[0])):
            pass
    elif mode == "replay":
        journal, db = Path(paths[0]), Path(paths[1])
        trend: list[tuple[int, float]] = []
        mark = [SAMPLE_EVERY]

        def sample(applied: int) -> None:
            if applied >= mark[0]:
                trend.append((applied, _status_kib("VmRSS") / 1024))
                mark[0] += SAMPLE_EVERY

        started = time.perf_counter()
        with EventStore.open(db, synchronous="FULL") as store:
            report["events"] = replay_journal(store, journal, on_batch=sample)
            report["workers_peak_mib"] = _workers_peak_mib(store)
        report["events_per_s"] = report["events"] / (time.perf_counter() - started)
        report["rss_trend_mib"] = trend
    else:
        raise SystemExit(f"unknown mode {mode}")
    report["own_peak_mib"] = _status_kib("VmHWM") / 1024
    # With the default projection the projections live in the workers: count them in.
    report["peak_mib"] = report["own_peak_mib"] + report.get("workers_peak_mib", 0.0)
    report["ru_maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report))
    return 0


def measure(*args: str, module: str = "suite.memory") -> dict[str, Any]:
    """Run ``module``'s child (this one's by default) in a fresh interpreter and return
    its report (the JSON object its last line prints)."""
    here = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(here), str(here.parent), *filter(None, [env.get("PYTHONPATH")])]
    )
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} child {args[0]} failed:\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def run(ctx: Context) -> list[Figure]:
    from suite.replay import journal  # the replay benchmark's journal, shared

    small_n, large_n = ctx.scale(200_000, 20_000), ctx.scale(1_000_000, 100_000)
    small_journal, large_journal = journal(ctx, small_n), journal(ctx, large_n)
    idle = measure("idle", str(ctx.scratch / "memory-idle.sqlite3"))
    log(f"memory idle: {idle['peak_mib']:.0f} MiB")
    small = measure("replay", str(small_journal.path), str(ctx.scratch / "memory-small.sqlite3"))
    log(f"memory {small_n:,}: {small['peak_mib']:.0f} MiB ({small['events_per_s']:,.0f} events/s)")
    large = measure("replay", str(large_journal.path), str(ctx.scratch / "memory-large.sqlite3"))
    log(f"memory {large_n:,}: {large['peak_mib']:.0f} MiB ({large['events_per_s']:,.0f} events/s)")
    for report, events in ((small, small_n), (large, large_n)):
        if report["events"] != events:
            raise RuntimeError(f"memory replay applied {report['events']} of {events}")
    return [
        Figure(
            benchmark=NAME,
            name=f"peak RSS replaying {small_n // 1000}k events (with its workers)",
            value=small["peak_mib"],
            unit="MiB",
            baseline="idle interpreter: imports + open/close empty store",
            baseline_value=idle["peak_mib"],
            aim=f"value < {LIMIT_MIB:.0f} MiB",
            ok=small["peak_mib"] < LIMIT_MIB,
            details={"child": small, "baseline_child": idle},
        ),
        Figure(
            benchmark=NAME,
            name=f"peak RSS replaying {large_n // 1000}k events (with its workers)",
            value=large["peak_mib"],
            unit="MiB",
            baseline=f"peak RSS replaying {small_n // 1000}k events (with its workers)",
            baseline_value=small["peak_mib"],
            aim=f"value < {LIMIT_MIB:.0f} MiB and ratio <= {GROWTH}",
            ok=large["peak_mib"] < LIMIT_MIB and large["peak_mib"] <= GROWTH * small["peak_mib"],
            details={"child": large},
        ),
    ]


if __name__ == "__main__":
    raise SystemExit(child(sys.argv[1:]))
