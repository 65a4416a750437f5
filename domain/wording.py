"""English wording every surface shares (the command line, the maintenance desk's
answers, replay's progress): one home for a plural, so "1 session" and "2 sessions"
read the same wherever they are printed. Pure: it formats, it prints nothing."""

from __future__ import annotations

__all__ = ["install_extra", "plural"]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``count`` and its noun, singular for exactly 1: ``plural(2, "session")`` is
    ``"2 sessions"``; ``many`` spells an irregular plural."""
    if count == 1:
        return f"{count} {singular}"
    return f"{count} {many or singular + 's'}"


def install_extra(extra: str) -> str:
    """How to install the optional extra ``extra``, and every extra at once: what each
    message about a missing optional package ends with."""
    return f'pip install "relaystore[{extra}]" (or "relaystore[all]": every optional extra)'
