"""What counts as an error or a fault, so a person reading a session sees it.

The command line's ``-o text`` marks these lines (``events``, ``transcript``) and
``relaystore export`` marks them in its file; both ask here, so they agree:

* an API event (its wire JSON, :func:`event_fault`): a ``session_fault``; a
  ``turn_ended`` whose outcome is ``failed``, ``rejected`` or ``interrupted`` (a
  provider failure, a quota limit, a worker restart; a turn cancelled on request is
  no fault); a ``command_ended`` that ``failed`` or was ``rejected``; a
  ``legacy_notice`` that was an ``error``;
* a transcript item (its JSON, as a page carries it, :func:`item_fault`): a tool call
  whose status is ``failed``; terminal output that exited non-zero or on a signal; a
  user shell command that failed, was signalled or timed out; a ``warning:`` line.

Each answers a short summary (``None``: not a fault) that names the kind and reason.
:data:`FAULT_MARK` is the marker a text line starts with. Pure: it reads JSON values
only, never a store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FAULT_MARK", "event_fault", "item_fault"]

FAULT_MARK = "!"
"""What a text line of an error or fault starts with (other lines start with their seq)."""

_FAILED_TURNS = frozenset({"failed", "rejected", "interrupted"})
_FAILED_COMMANDS = frozenset({"failed", "rejected"})
_FAILED_SHELL = ("Shell · failed", "Shell · signaled", "Shell · timed out")


def _get(value: object, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _why(kind: str, reason: object, message: object) -> str:
    text = kind
    if isinstance(reason, str) and reason:
        text += f" ({reason})"
    if isinstance(message, str) and message.strip():
        text += f": {' '.join(message.split())}"
    return text


def event_fault(event: Mapping[str, Any]) -> str | None:
    """The fault an API event (its wire JSON) reports, summarised; None when none."""
    kind, data = event.get("type"), event.get("data")
    if kind == "session_fault":
        return "FAULT " + _why("session fault", _get(data, "reason"), _get(data, "message"))
    if kind == "turn_ended":
        outcome = _get(data, "turn", "outcome")
        ended = _get(outcome, "kind")
        if ended not in _FAILED_TURNS:
            return None
        message = _get(outcome, "message") or _get(data, "turn", "diagnostic", "message")
        return "ERROR " + _why(f"turn {ended}", _get(outcome, "reason"), message)
    if kind == "command_ended":
        ended = _get(data, "outcome")
        if ended not in _FAILED_COMMANDS:
            return None
        name = _get(data, "command_kind") or "command"
        return "ERROR " + _why(f"{name} {ended}", _get(data, "reason"), _get(data, "message"))
    if kind == "legacy_notice" and _get(data, "original_type") == "error":
        return "ERROR " + _why("error", None, _get(data, "message"))
    return None


def item_fault(item: Mapping[str, Any]) -> str | None:
    """The fault a transcript item (its JSON: ``role``, ``text``, ``body``) shows,
    summarised; None when none."""
    body = item.get("body")
    kind = _get(body, "kind")
    if kind == "tool" and _get(body, "call", "status") == "failed":
        return "ERROR tool call failed"
    if kind == "terminal_output":
        code, signal = _get(body, "record", "exit_code"), _get(body, "record", "signal")
        if isinstance(signal, str) and signal:
            return f"ERROR terminal ended by {signal}"
        if isinstance(code, int) and code != 0:
            return f"ERROR terminal exited {code}"
    if kind == "system":
        text = _get(body, "text")
        if isinstance(text, str):
            if text.startswith(_FAILED_SHELL):
                status = text.split("\n", 1)[0].removeprefix("Shell · ").split(" · ", 1)[0]
                return f"ERROR shell command {status}"
            if text.startswith("warning:"):
                return "WARNING"
    return None
