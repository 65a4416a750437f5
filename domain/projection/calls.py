"""What a stored ACP tool call says: its wire form, the terminals it names, its kind.

Read by the transcript index (which items own or may claim terminal output) and by the
tool-call projection (:mod:`relaystore.domain.projection.tools`).
"""

from __future__ import annotations

from collections.abc import Mapping
from hashlib import blake2b

from ..materialized import TerminalOutputRecord
from ..wire import JSON
from .markers import FALLBACK_TERMINAL_META_KEY

__all__ = [
    "RawResultKey",
    "is_fallback_terminal_call",
    "output_digest",
    "raw_result_candidate",
    "raw_result_key",
    "terminal_result_key",
    "tool_call_json",
    "tool_call_terminal_ids",
]


RawResultKey = tuple[object, bytes]
"""An exit code and a digest of the output text (:func:`output_digest`): a terminal
result and a raw result match when keys are equal. The digest keeps an index of results
small (and storable) whatever the output's length."""


def output_digest(text: str) -> bytes:
    """The 128-bit BLAKE2b digest of ``text``'s UTF-8 bytes: two outputs share a result
    key only when their texts are equal (a collision is beyond reach)."""
    return blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


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


def raw_result_key(call: JSON) -> RawResultKey | None:
    """The key of the terminal result a finished call's raw result names, if it names one.

    Equal to :func:`terminal_result_key` of exactly the records the raw result matches:
    the same exit code, and output either the same text or a list of ints that is the
    text's UTF-8 encoding (bytes that are not UTF-8 match no text).
    """
    if not raw_result_candidate(call):
        return None
    assert isinstance(call, dict)
    raw = call["rawOutput"]
    assert isinstance(raw, dict)
    output = raw.get("output")
    if isinstance(output, list):
        if not all(type(value) is int and 0 <= value <= 0xFF for value in output):
            return None
        try:
            text = bytes(output).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return (raw["exit_code"], output_digest(text))
    if isinstance(output, str):
        return (raw["exit_code"], output_digest(output))
    return None


def terminal_result_key(record: TerminalOutputRecord) -> RawResultKey | None:
    """The key a raw result must have to match ``record`` (None: a signal, or no exit code
    a raw result could equal)."""
    if record.signal is not None:
        return None
    exit_code = record.exit_code
    try:
        hash(exit_code)
    except TypeError:
        return None
    return (exit_code, output_digest(record.output))
