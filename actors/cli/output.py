"""What the ``relaystore`` command prints, in one shape for every command.

Guarantees:

* ``--json``: a list or a stream is JSON lines, one compact object per line, flushed as
  it is printed (:func:`print_line`: ``events``, ``transcript``, ``sessions``, ``search``,
  ``replay``, ``fleet events``); a report is one JSON object (:func:`print_object`:
  ``verify``, ``stats``, ``audit``, ``show``, ``history``, ``usage``, ``backup``,
  ``new-store-id``, and
  the maintenance commands ``vacuum``, ``compact``, ``reproject``, ``prune-log``,
  ``delete``, ``checkpoint``). Nothing else is printed on stdout with ``--json``;
  messages go to stderr.
* A maintenance command's object: ``command``; ``ok``; ``run_by`` (``"writer"``: the
  desk of the running writer that holds the store ran it, ``writer_pid`` its process;
  ``"command"``: the command opened the store itself, ``writer_pid`` null);
  ``request_id`` (null when the command ran it unnamed); the fields of what it did
  (:data:`~relaystore.domain.maintenance.MaintenanceOutcome`: vacuum's bytes and pages
  before and after, compact's sessions and totals, reproject's sessions and failures,
  prune-log's pages and events, delete's session, checkpoint's archive); and ``error``
  / ``error_type`` (null unless it was refused as a whole). A request that got no
  answer (``RequestUnanswered``, ``StoreLocked``, ``WriterStopped``) prints the object
  too: ``run_by`` null, ``writer_pid`` the holder's process.
* Counts in sentences agree with their number: "1 session", "2 sessions", "1 event".
* ``-o text`` of the follow commands prints one human line per event or item; a line
  of an error or fault (:mod:`relaystore.domain.faults`: a failed or interrupted turn,
  a session fault, a failed command, a failed tool call or shell command) starts with
  ``!`` and names it (``ERROR ...``, ``FAULT ...``); ``transcript -o text`` also
  shows the faults the feed holds for its session (:func:`fault_text`: a failed turn at
  the seq it ended, a session fault) among its items.
* A follow that waits notices a reader that went away (``relaystore events --follow |
  head``) within :data:`READER_POLL_SECONDS`, even when nothing is printed meanwhile.

Must not: read a store or decide what a command reports; :mod:`msgspec` is imported
inside the printing functions, so ``--help`` loads no runtime.
"""

from __future__ import annotations

import argparse
import json
import select
import sys
from collections.abc import Mapping
from typing import Any, BinaryIO

from ...domain.faults import FAULT_MARK, event_fault, item_fault
from ...domain.redaction import redact
from ...domain.text_formats import utc_clock

__all__ = [
    "READER_POLL_SECONDS",
    "clock",
    "event_text",
    "fail",
    "fault_text",
    "follow_options",
    "is_tty",
    "item_line",
    "json_option",
    "print_line",
    "print_object",
    "reader_gone",
]

READER_POLL_SECONDS = 0.25
"""How often a waiting follow looks whether its reader is still there."""
_TEXT_WIDTH = 160  # a human line's summary is cut here


def json_option(parser: argparse.ArgumentParser, text: str) -> None:
    """The command's ``--json`` (see the module doc for the shapes)."""
    parser.add_argument("--json", action="store_true", help=text)


def follow_options(parser: argparse.ArgumentParser, noun: str, needs: str) -> None:
    """``-o {json,text}`` (``--json`` is ``-o json``) and ``--wait`` of a follow command."""
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument(
        "-o",
        "--output",
        choices=("json", "text"),
        default="json",
        help=f"json: one JSON line per {noun} (the default); text: one human line per {noun}",
    )
    shape.add_argument(
        "--json", dest="output", action="store_const", const="json", help="the same as -o json"
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help=f"wait for a session the store does not hold yet instead of refusing it ({needs} "
        "names it)",
    )


def fail(message: str) -> int:
    """Say ``message`` on stderr as the command's one line (whitespace folded,
    credentials masked); returns exit status 1."""
    print(f"relaystore: {redact(' '.join(message.split()))}", file=sys.stderr)
    return 1


def print_object(document: object) -> None:
    """A report: one JSON object, indented, on stdout."""
    import msgspec

    print(json.dumps(msgspec.to_builtins(document), indent=2), flush=True)


def print_line(value: object, out: BinaryIO | None = None) -> None:
    """One item of a list or a stream: one compact JSON line on stdout, flushed."""
    import msgspec

    stream = out or sys.stdout.buffer
    stream.write(msgspec.json.encode(value) + b"\n")
    stream.flush()


def reader_gone(stream: Any = None) -> bool:
    """Whether the reading end of ``stream`` (default stdout) is closed: a pipe whose
    reader exited. Always False for a terminal or a file."""
    target = stream if stream is not None else sys.stdout
    try:
        poller = select.poll()
        poller.register(target.fileno(), select.POLLERR | select.POLLHUP)
        return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def clock(at_ms: object) -> str:
    """A time in milliseconds as ``YYYY-MM-DD HH:MM:SS`` (UTC); ``-`` for none."""
    return utc_clock(at_ms)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT_WIDTH else flat[: _TEXT_WIDTH - 1] + "…"


def _scalar_fields(data: object) -> str:
    """The scalar fields of an event's data as ``key=value``, nested ones by their key."""
    if not isinstance(data, Mapping):
        return "" if data is None else _short(json.dumps(data))
    parts: list[str] = []
    for key, value in data.items():
        if isinstance(value, str | int | float | bool):
            parts.append(f"{key}={value}")
        elif isinstance(value, Mapping):
            inner = value.get("id") or value.get("command_id") or value.get("turn_id")
            parts.append(f"{key}={inner}" if isinstance(inner, str) else f"{key}={{…}}")
    return _short(" ".join(parts))


def event_text(raw: bytes) -> str:
    """One API event (its wire JSON) as a human line: seq, time, session, type, fields.
    An error or fault (:func:`~relaystore.domain.faults.event_fault`) starts with
    ``!`` and says what failed (``ERROR ...``, ``FAULT ...``) before the fields."""
    event = json.loads(raw)
    fault = event_fault(event) if isinstance(event, Mapping) else None
    mark = f"{FAULT_MARK} " if fault else ""
    said = f"{_short(fault)}  " if fault else ""
    return (
        f"{mark}{event.get('seq')}  {clock(event.get('recorded_at_ms'))}  "
        f"{event.get('session_id')}  {event.get('type')}  {said}{_scalar_fields(event.get('data'))}"
    ).rstrip()


def fault_text(event: Mapping[str, Any]) -> tuple[int | None, str] | None:
    """The transcript's text line of an API event (its wire JSON) that reports a fault,
    with the ordinal it belongs at (a turn's completed ordinal; None for a fault of no
    turn); None when the event reports none."""
    fault = event_fault(event)
    if fault is None:
        return None
    data = event.get("data")
    turn = data.get("turn") if isinstance(data, Mapping) else None
    ordinal = turn.get("completed_ordinal") if isinstance(turn, Mapping) else None
    ordinal = ordinal if isinstance(ordinal, int) else None
    where = ordinal if ordinal is not None else "-"
    kind = {"turn_ended": "turn", "command_ended": "command"}.get(str(event.get("type")), "session")
    return (
        ordinal,
        f"{FAULT_MARK} {where}  {clock(event.get('recorded_at_ms'))}  {kind}: {_short(fault)}",
    )


def item_line(item: Mapping[str, Any]) -> str:
    """One transcript item (its JSON) as a human line: seq, time, role, its text. An
    item showing an error (:func:`~relaystore.domain.faults.item_fault`) starts with
    ``!`` and says so (``ERROR ...``) before its text."""
    body = item.get("body")
    streaming = isinstance(body, Mapping) and body.get("streaming") is True
    text = _short(str(item.get("text") or ""))
    fault = item_fault(item)
    mark = f"{FAULT_MARK} " if fault else ""
    said = f"{fault} · " if fault else ""
    return (
        f"{mark}{item.get('seq')}  {clock(item.get('last_changed_at_ms'))}  {item.get('role')}"
        f"{' (streaming)' if streaming else ''}: {said}{text}"
    ).rstrip()


def is_tty(stream: object) -> bool:
    """Whether ``stream`` is a terminal (a person reads it); False for anything else."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False
