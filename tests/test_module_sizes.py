"""No layer module over 500 lines: a module that grows past it holds two concerns, and
its concern's folder is where the second one goes (``docs/layout.md``)."""

from __future__ import annotations

from tests.paths import ROOT

MOST_LINES = 500
"""The most lines a module of ``domain/``, ``storage/`` or ``actors/`` holds."""


def test_no_layer_module_is_over_500_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for folder in ("domain", "storage", "actors")
        for path in (ROOT / folder).rglob("*.py")
    }
    assert len(sizes) > 150  # the layers were found
    assert {name: lines for name, lines in sizes.items() if lines > MOST_LINES} == {}
