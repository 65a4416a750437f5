"""The benchmark command keeps working (a smoke run; the figures themselves are not asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT


def test_the_quick_benchmark_run_writes_a_ratio_for_each_figure(tmp_path: Path) -> None:
    figures = tmp_path / "figures.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--quick",
            "--only",
            "open",
            "replay",
            "--json",
            str(figures),
            "--scratch",
            str(tmp_path / "scratch"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
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
