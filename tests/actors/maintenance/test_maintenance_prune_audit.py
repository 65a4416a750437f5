"""``prune-log`` ends a session's audit from its relay log (issue 43.9): the command says
so as it prunes, and ``audit`` reports such a session as pruned, not as diverging or
refused; a log missing a prefix no checkpoint covers is still refused."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest

from tests.actors.cli_support import cli, ok
from tests.actors.retention_support import SESSION, maintenance_store

pytestmark = pytest.mark.integration  # its stores project in worker processes


def _checkpointed_and_pruned(tmp_path: Path) -> tuple[Path, str]:
    """A store whose SESSION's log was pruned behind its checkpoint; prune-log's output."""
    db, frontier, archive = maintenance_store(tmp_path)
    ok(db, "checkpoint", SESSION, "--through", str(frontier), "--archive", str(archive))
    return db, ok(db, "prune-log", SESSION, "--through", str(frontier)).stdout


def test_prune_log_says_the_session_can_no_longer_be_audited_from_its_log(
    tmp_path: Path,
) -> None:
    _, said = _checkpointed_and_pruned(tmp_path)
    lines = said.splitlines()
    assert lines[0].startswith(f"pruned the relay log of {SESSION}: 1 page,")
    assert f"{SESSION} can no longer be audited or reprojected from its relay log" in lines[1]
    assert "audit --journals" in lines[1]
    assert "cannot be undone" in cli(Path("unused"), "prune-log", "--help").stdout


def test_audit_reports_a_pruned_session_as_pruned_and_passes(tmp_path: Path) -> None:
    db, _ = _checkpointed_and_pruned(tmp_path)
    result = cli(db, "audit")
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith(SESSION))
    assert line.startswith(f"{SESSION}: pruned (its relay log was pruned through ordinal ")
    assert "doomed: matches log" in result.stdout
    document = json.loads(ok(db, "audit", "--json").stdout)
    assert document["matches"] is True
    (pruned,) = [found for found in document["sessions"] if found["session_id"] == SESSION]
    assert pruned["pruned"] is not None
    assert pruned["divergence"] is None
    assert pruned["refused"] is None


def test_a_log_missing_a_prefix_no_checkpoint_covers_is_still_refused(tmp_path: Path) -> None:
    db, frontier, _ = maintenance_store(tmp_path)
    connection = apsw.Connection(str(db))  # the prefix gone without a checkpoint
    connection.execute("DELETE FROM relay_log_pages WHERE session_id = ?", (SESSION,))
    connection.close()
    result = cli(db, "audit", SESSION)
    assert result.returncode == 1
    assert f"{SESSION}: cannot audit (" in result.stdout
    assert frontier > 0
