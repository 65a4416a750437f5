"""``relaystore completion SHELL``: the scripts complete session ids from the store.

The bash script runs in a real bash: sourced, then asked what it completes at a session
argument, as bash's completion would ask it (``COMP_WORDS``, ``COMP_CWORD``); its session
function runs this interpreter's ``relaystore sessions``. The zsh and fish scripts are
checked for the same function wired to the same arguments (and by the shell's own syntax
check where that shell is installed).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from relaystore import EventStore, SaveSession
from relaystore.testing import example_session
from tests.actors.cli_support import ENV, TIMEOUT, command

pytestmark = pytest.mark.integration  # bash, zsh and fish complete through relaystore processes

BIN = str(Path(sys.executable).parent)  # where this interpreter's `relaystore` is


def _script(shell: str, cwd: Path) -> str:
    result = subprocess.run(
        command(cwd / "unused.sqlite3", "completion", shell),
        cwd=cwd,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def _store(path: Path, *session_ids: str) -> Path:
    with EventStore.open(path, projection="thread") as store:
        for session_id in session_ids:
            store.ask(SaveSession(record=example_session(session_id)))
    return path


def _bash_completes(script: Path, cwd: Path, words: list[str]) -> list[str]:
    """What bash's completion of ``relaystore`` offers for the last of ``words``."""
    quoted = " ".join(f"'{word}'" for word in words)
    program = f"""
        source '{script}'
        COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}
        COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}
        _shtab_relaystore relaystore "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    bash = shutil.which("bash")
    assert bash is not None, "bash runs the project's own scripts"
    env = {**ENV, "PATH": f"{BIN}{os.pathsep}{ENV.get('PATH', '')}"}
    done = subprocess.run(
        [bash, "-c", program], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_bash_completes_session_arguments_with_the_stores_session_ids(tmp_path: Path) -> None:
    script = tmp_path / "relaystore.bash"
    script.write_text(_script("bash", tmp_path))
    _store(tmp_path / "relaystore.sqlite3", "alpha-1", "alpha-2", "beta-1")  # the default
    other = _store(tmp_path / "other.sqlite3", "gamma-1")
    # A positional SESSION, from the default store; what is typed narrows it.
    assert _bash_completes(script, tmp_path, ["relaystore", "show", ""]) == [
        "alpha-1",
        "alpha-2",
        "beta-1",
    ]
    assert _bash_completes(script, tmp_path, ["relaystore", "audit", "al"]) == [
        "alpha-1",
        "alpha-2",
    ]
    # --session, from the store the line's --db names.
    assert _bash_completes(
        script, tmp_path, ["relaystore", "--db", str(other), "events", "--session", ""]
    ) == ["gamma-1"]
    # A store that cannot be read completes nothing (and says nothing).
    missing = str(tmp_path / "missing.sqlite3")
    assert _bash_completes(script, tmp_path, ["relaystore", "--db", missing, "show", ""]) == []
    assert not Path(missing).exists()


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_complete_sessions_too(tmp_path: Path, shell: str) -> None:
    script = _script(shell, tmp_path)
    assert "_relaystore_sessions" in script
    assert "relaystore $db sessions" in script  # the store the line names
    calls = script.count("_relaystore_sessions")
    assert calls >= 5, script  # defined once, then each session argument uses it
    checker = shutil.which(shell)
    if checker is not None:  # its own syntax check, where the shell is installed
        checked = subprocess.run(
            [checker, "-n"], input=script, text=True, capture_output=True, check=False
        )
        assert checked.returncode == 0, checked.stderr


def test_the_shells_are_named_and_another_is_a_usage_error_naming_them(tmp_path: Path) -> None:
    refused = subprocess.run(
        command(tmp_path / "unused.sqlite3", "completion", "nushell"),
        cwd=tmp_path,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert refused.returncode == 2
    assert "'bash', 'zsh', 'fish', 'tcsh'" in refused.stderr
    assert "Traceback" not in refused.stderr
