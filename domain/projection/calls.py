"""What a stored ACP tool call says: its wire form, the terminals it names, its kind.

Read by the transcript index (which items own or may claim terminal output) and by the
tool-call projection (:mod:`domain.projection.tools`).
"""

from __future__ import annotations

from collections.abc import Mapping

from relaystore.domain.projection.markers import FALLBACK_TERMINAL_META_KEY
from relaystore.domain.wire import JSON

__all__ = [
    "is_fallback_terminal_call",
    "raw_result_candidate",
    "tool_call_json",
    "tool_call_terminal_ids",
]


def tool_call_json(fields: Mapping[str, JSON]) -> dict[str, JSON]:
    """An ACP ToolCall as the origin stores it: key order fixed, defaults left out.

    ``kind`` "other", ``status`` "pending", empty ``content``/``locations`` and null raw
    values are omitted, as ACP's own serializer does.
    """
    call: dict[str, JSON] = {
        "toolCallId": fields.get("toolCallId"),
        "title": fields.get("title", ""),
    }
    kind = fields.get("kind")
    if kind is not None and kind != "other":
        call["kind"] = kind
    status = fields.get("status")
    if status is not None and status != "pending":
        call["status"] = status
    for key in ("content", "locations"):
        if fields.get(key):
            call[key] = fields[key]
    for key in ("rawInput", "rawOutput", "_meta"):
        if fields.get(key) is not None:
            call[key] = fields[key]
    return call


def tool_call_terminal_ids(call: JSON) -> list[str]:
    """Terminal ids a stored call's content refers to (malformed content names none)."""
    if not isinstance(call, dict):
        return []
    content = call.get("content")
    if not isinstance(content, list):
        return []
    return [
        str(block["terminalId"])
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "terminal"
        and isinstance(block.get("terminalId"), str)
    ]


def is_fallback_terminal_call(call: JSON) -> bool:
    """True for the interim call the worker creates for a terminal no ACP call owns."""
    if not isinstance(call, dict):
        return False
    meta = call.get("_meta")
    return isinstance(meta, dict) and meta.get(FALLBACK_TERMINAL_META_KEY) is True


def raw_result_candidate(call: JSON) -> bool:
    """True for a finished call whose raw result (an exit code) can claim terminal output."""
    if not isinstance(call, dict) or call.get("status") not in ("completed", "failed"):
        return False
    raw = call.get("rawOutput")
    if not isinstance(raw, dict):
        return False
    code = raw.get("exit_code")
    return type(code) is int and 0 <= code <= 0xFFFFFFFF
