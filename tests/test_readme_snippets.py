"""Every Python snippet of the README and of the contract runs, as written, right after
the README's own set-up command (``relaystore replay examples/worker-root`` into the
default store of a fresh folder): a newcomer who copies one gets what it promises."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", ROOT / "docs" / "relaystore-api.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
TIMEOUT = 120.0


def _snippets() -> list[tuple[str, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for number, match in enumerate(_BLOCK.finditer(text), start=1):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{document.name}:{line} (snippet {number})", match.group(1)))
    return found


SNIPPETS = _snippets()


def test_the_documents_have_snippets() -> None:
    assert len(SNIPPETS) >= 3


@pytest.fixture(scope="module")
def set_up(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder where the README's set-up has run: the examples replayed into the default
    store, and the example worker roots where the README's paths point."""
    folder = tmp_path_factory.mktemp("newcomer")
    shutil.copytree(ROOT / "examples", folder / "examples")
    result = subprocess.run(
        [sys.executable, "-m", "relaystore.actors.cli", "replay", "examples/worker-root"],
        cwd=folder,
        env={k: v for k, v in os.environ.items() if k != "RELAYSTORE_DB"},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return folder


@pytest.mark.parametrize(("where", "code"), SNIPPETS, ids=[where for where, _ in SNIPPETS])
def test_every_snippet_runs_after_the_set_up(set_up: Path, where: str, code: str) -> None:
    for attempt in range(2):  # a snippet must also survive being run a second time
        result = subprocess.run(
            [sys.executable, "-c", code],
            cwd=set_up,
            env={k: v for k, v in os.environ.items() if k != "RELAYSTORE_DB"},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert result.returncode == 0, f"{where}, run {attempt + 1}:\n{result.stderr}"
