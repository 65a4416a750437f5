"""Run relaystore's benchmarks against their baselines, in one run, and record the figures.

    python benchmarks/run.py [--quick] [--only NAME ...] [--json PATH]
    python benchmarks/run.py --compare BEFORE.jsonl AFTER.jsonl

Every figure is measured next to its baseline in the same run and reported as a ratio
to it. Prints a table (stdout; progress goes to stderr) and appends one JSON line per
figure to ``--json`` (default ``benchmarks/results/results.jsonl``). Benchmarks:
``suite.BENCHMARKS`` (replay, writer, peer, reads, memory, open, ..., wal; see
``benchmarks/README.md``). ``--quick``
scales everything down (~25 s); the full run takes ~11 minutes on 2 cores.
Exit status 1 when a benchmark failed to run (a missed aim is reported, not an error).
``--compare`` runs nothing: it prints the ratios of the newest run in each of two result
files side by side, with how each moved (after / before).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # suite/, and the checkout's packages

import apsw  # noqa: E402
from suite import BENCHMARKS, load  # noqa: E402
from suite.common import Context, Figure  # noqa: E402

DEFAULT_JSON = HERE / "results" / "results.jsonl"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=HERE.parent, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return done.stdout.strip()


def environment() -> dict[str, object]:
    return {
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "python": platform.python_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "pykka": version("pykka"),
        "msgspec": version("msgspec"),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }


def _number(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(figures: list[Figure]) -> str:
    rows = [("benchmark", "figure", "value", "baseline", "ratio", "aim", "met")]
    for f in figures:
        met = "-" if f.ok is None else ("yes" if f.ok else "NO")
        rows.append(
            (
                f.benchmark,
                f.name,
                f"{_number(f.value)} {f.unit}",
                f"{_number(f.baseline_value)} ({f.baseline})",
                f"{f.ratio:.3g}",
                f.aim or "-",
                met,
            )
        )
    return _render(rows)


def _render(rows: list[tuple[str, ...]]) -> str:
    """``rows`` (the first is the header) as a Markdown table with padded columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
        for row in rows
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def newest_run(path: Path) -> dict[tuple[str, str], dict[str, object]]:
    """The figures of the newest run in a result file, by (benchmark, figure)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        raise SystemExit(f"{path}: no figures")
    newest = max(str(row["run_id"]) for row in rows)
    return {
        (str(row["benchmark"]), str(row["name"])): row
        for row in rows
        if str(row["run_id"]) == newest
    }


def compare(before_path: Path, after_path: Path) -> str:
    """A table of both runs' ratios for every figure either has, and after / before."""
    before, after = newest_run(before_path), newest_run(after_path)
    rows = [("benchmark", "figure", "before", "after", "after/before", "aim", "met")]
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        old_ratio = float(old["ratio"]) if old is not None else float("nan")  # type: ignore[arg-type]
        new_ratio = float(new["ratio"]) if new is not None else float("nan")  # type: ignore[arg-type]
        moved = new_ratio / old_ratio if old_ratio == old_ratio and old_ratio else float("nan")
        latest = new or old
        assert latest is not None
        met = latest.get("ok")
        rows.append(
            (
                key[0],
                key[1],
                _number(old_ratio),
                _number(new_ratio),
                _number(moved),
                str(latest.get("aim") or "-"),
                "-" if met is None else ("yes" if met else "NO"),
            )
        )
    return _render(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Benchmark relaystore against baselines measured in the same run."
    )
    parser.add_argument("--quick", action="store_true", help="scaled down: ~25 s")
    parser.add_argument(
        "--only", nargs="+", choices=list(BENCHMARKS), metavar="NAME", help="run only these"
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        help=f"append figures here (default {DEFAULT_JSON})",
    )
    parser.add_argument(
        "--scratch", type=Path, help="folder for stores and journals (default: a temp dir)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("BEFORE", "AFTER"),
        help="print the newest run of two result files side by side (runs nothing)",
    )
    args = parser.parse_args(argv)
    if args.compare is not None:
        print(compare(*args.compare))
        return 0

    names = [name for name in BENCHMARKS if not args.only or name in args.only]
    run_id = time.strftime("%Y%m%dT%H%M%S")
    env = environment()
    figures: list[Figure] = []
    failed: list[str] = []
    started = time.perf_counter()
    if args.scratch is not None:
        args.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="relaystore-bench-", dir=args.scratch) as scratch:
        ctx = Context(quick=args.quick, scratch=Path(scratch), seed=args.seed)
        for name in names:
            print(f"== {name}", file=sys.stderr, flush=True)
            began = time.perf_counter()
            try:
                found = load(name).run(ctx)
            except Exception:  # noqa: BLE001 - reported; the other benchmarks still run
                traceback.print_exc()
                failed.append(name)
                continue
            seconds = time.perf_counter() - began
            print(f"   {name} took {seconds:.0f} s", file=sys.stderr, flush=True)
            for figure in found:
                figure.details.setdefault("benchmark_seconds", round(seconds, 1))
            figures += found
    elapsed = time.perf_counter() - started

    mode = "quick" if args.quick else "full"
    print(
        f"relaystore benchmarks ({mode} run {run_id}, {elapsed:.0f} s, commit {str(env['git_commit'])[:10]}{' +dirty' if env['git_dirty'] else ''})"
    )
    print(table(figures))
    aimed = [f for f in figures if f.ok is not None]
    print(f"aims met: {sum(bool(f.ok) for f in aimed)} of {len(aimed)}")
    if failed:
        print(f"FAILED to run: {', '.join(failed)}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    with args.json.open("a") as out:
        for figure in figures:
            row = {"run_id": run_id, "mode": mode, **env, **figure.as_json()}
            out.write(json.dumps(row) + "\n")
    print(f"appended {len(figures)} figures to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
