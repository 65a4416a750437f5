"""Each optional extra is named where its absence is met, with ``relaystore[all]`` beside
it (issue 43, item 9), and ``all`` is every optional extra a user installs."""

from __future__ import annotations

import sys
import tomllib

import pytest

from relaystore.actors.cli import main
from tests.paths import ROOT

# Extras for the project's own work, not a user's: all leaves them out.
_OURS = {"all", "test", "dev", "bench"}


def test_all_is_every_extra_a_user_installs() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    (only,) = extras["all"]
    named = set(only.removeprefix("relaystore[").removesuffix("]").split(","))
    assert named == set(extras) - _OURS


def test_completion_without_shtab_names_its_extra_and_all(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "shtab", None)  # as if it were not installed
    assert main(["completion", "bash"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert 'pip install "relaystore[completion]"' in err
    assert '"relaystore[all]"' in err
    assert "Traceback" not in err
