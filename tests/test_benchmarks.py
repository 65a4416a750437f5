"""The benchmark command keeps working (a smoke run; the figures themselves are not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = pytest.mark.integration  # the benchmarks run as processes


def _python(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with ``args`` as the benchmarks run (the repository importable)."""
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


def test_the_quick_benchmark_run_writes_a_ratio_for_each_figure(tmp_path: Path) -> None:
    figures = tmp_path / "figures.jsonl"
    result = _python(
        str(ROOT / "benchmarks" / "run.py"),
        "--quick",
        "--only",
        "open",
        "replay",
        "--json",
        str(figures),
        "--scratch",
        str(tmp_path / "scratch"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in figures.read_text().splitlines()]
    assert {row["benchmark"] for row in rows} == {"open", "replay"}
    for row in rows:
        assert row["value"] > 0
        assert row["baseline_value"] > 0
        assert (
            abs(row["ratio"] - row["value"] / row["baseline_value"]) < 1e-9 * row["ratio"] + 1e-12
        )
    assert "| replay" in result.stdout


def test_compare_prints_two_runs_side_by_side(tmp_path: Path) -> None:
    def write(path: Path, run_id: str, ratio: float) -> None:
        row = {"run_id": run_id, "benchmark": "replay", "name": "events/s", "ratio": ratio}
        row |= {"aim": ">= 0.125", "ok": ratio >= 0.125}
        old = {**row, "run_id": "00000000T000000", "ratio": 99.0}  # an older run: ignored
        path.write_text(json.dumps(old) + "\n" + json.dumps(row) + "\n")

    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    write(before, "20261201T100000", 0.05)
    write(after, "20261201T110000", 0.1)
    result = _python(
        str(ROOT / "benchmarks" / "run.py"), "--compare", str(before), str(after), timeout=60
    )
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("| replay")]
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells == ["replay", "events/s", "0.05", "0.1", "2", ">= 0.125", "NO"]


def test_every_benchmark_module_loads_and_names_itself() -> None:
    """A full run imports each benchmark only when it reaches it: one that no longer
    imports (an API it reads moved) would fail minutes into the run, not here."""
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import suite\n"
        "for name in suite.BENCHMARKS:\n"
        "    module = suite.load(name)\n"
        "    assert module.NAME == name and callable(module.run), name\n"
        "print('loaded', len(suite.BENCHMARKS))\n"
    )
    result = _python("-c", program, str(ROOT / "benchmarks"), timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("loaded ")


def test_the_stage_profile_names_the_cpu_of_each_thread_and_of_the_worker() -> None:
    """``profile_hotpath.py stages`` (the replay's cost by stage, without a profiler)
    reports the reading thread, the writer and, projecting in a process, the worker."""
    result = _python(
        str(ROOT / "benchmarks" / "profile_hotpath.py"),
        "stages",
        "--events",
        "2000",
        "--projection",
        "process",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "replayed 2,000 events (process)" in result.stdout
    for stage in ("thread MainThread", "thread WriterActor", "worker process"):
        assert stage in result.stdout, result.stdout


def test_the_wal_row_counts_the_pages_each_commit_writes(tmp_path: Path) -> None:
    """``--only wal`` counts the frames of real commits: the bare one-row insert writes
    about one page a commit, and an event through the store names the b-trees its pages
    belong to (the feed's table among them)."""
    figures = tmp_path / "figures.jsonl"
    result = _python(
        str(ROOT / "benchmarks" / "run.py"),
        "--quick",
        "--only",
        "wal",
        "--json",
        str(figures),
        "--scratch",
        str(tmp_path / "scratch"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in figures.read_text().splitlines()]
    assert len(rows) == 3
    one = rows[0]
    assert one["unit"] == "pages/event"
    assert one["aim"] == "<= 2 pages"
    assert 1 <= one["baseline_value"] < 1.5  # the bare insert: its leaf, now and then more
    details = one["details"]
    assert details["commits"] == details["events"] > 0
    assert details["frames"] >= details["commits"]
    assert "api_events" in details["pages_per_commit_by_btree"]
    assert "| wal" in result.stdout
