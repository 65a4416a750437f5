"""The shipped example worker roots: reproducible from their script, and clean journals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from relaystore.actors.journal import read_journal, verify_sources

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "make_worker_root.py"
COMMITTED = ROOT / "examples" / "worker-root"


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.integration
def test_the_script_reproduces_the_committed_worker_roots_byte_for_byte(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr

    generated = files_under(tmp_path / "out")
    committed = files_under(COMMITTED)
    assert sorted(generated) == sorted(committed)
    changed = [name for name in generated if generated[name] != committed[name]]
    assert changed == [], "regenerate with: python examples/make_worker_root.py"


def test_every_example_journal_verifies_clean_up_to_its_relay_state():
    roots = sorted(path for path in COMMITTED.iterdir() if path.is_dir())
    assert len(roots) >= 3

    for root in roots:
        state = json.loads((root / "relay-state.json").read_text())
        report = verify_sources([root])

        assert report.ok, [str(problem) for problem in report.problems]
        assert report.torn_tails == []
        assert report.records == report.valid_digests == state["latest_ordinal"]
        assert state["session_id"] == root.name
        frontier = report.frontiers[root.name]
        assert (frontier.ordinal, frontier.digest) == (
            state["latest_ordinal"],
            state["latest_digest"],
        )


def test_the_examples_show_every_scenario_they_promise():
    observations: set[str] = set()
    updates: set[str] = set()
    formats: set[int] = set()
    commands: set[str] = set()
    reasons: set[str] = set()
    for root in COMMITTED.iterdir():
        for event, _ in read_journal(root, check_chain=True):
            formats.add(event.format)
            observation = json.loads(event.observation_json)
            kind = observation["type"]
            observations.add(kind)
            data = observation.get("data", {})
            if kind == "session_update":
                updates.add(data["update"]["sessionUpdate"])
            elif kind == "command_queued":
                commands.add(data["command"]["type"])
            elif kind == "command_interrupted":
                reasons.add(data["reason"])
            elif kind == "agent_initialized":
                assert data["runtime"]["id"].startswith("mj-runtime-v1:")

    assert formats == {1, 2}
    assert {
        "agent_initialized",
        "session_opened",
        "elicitation_requested",
        "elicitation_resolved",
        "user_shell_output",
        "command_completed",
        "checkpoint_ready",
        "session_restarted",
        "command_interrupted",
    } <= observations
    assert {"agent_message_chunk", "tool_call", "tool_call_update"} <= updates
    assert {"prompt", "run_user_shell", "begin_checkpoint", "complete_checkpoint"} <= commands
    assert reasons == {"worker_restarted"}


@pytest.mark.integration
def test_the_embedding_example_replays_pages_and_wakes(tmp_path: Path) -> None:
    script = Path(__file__).resolve().parents[1] / "examples" / "embed_store.py"
    result = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store.sqlite3")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(script.parents[1])},
    )
    lines = result.stdout.splitlines()
    assert lines[0] == "applied 40 relay events, frontier 40"
    seqs = [int(line.split()[0]) for line in lines[1:] if line.startswith("  ")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) > 0
    assert "wait_for woke on the activity commit: True" in lines
