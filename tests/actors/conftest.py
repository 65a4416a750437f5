"""Fixtures the actor-level tests share."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from tests.actors.cli_support import stop


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; any still running at the end are killed, by pid."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        stop(process)
