"""Transcript retention: what a checkpoint lets the store forget of an old tool call.

A checkpoint archive holds the whole transcript up to its event frontier, so the store
may forget what a tool call's line no longer shows, for calls at or below the session's
verified checkpoint frontier (the origin's ``compact_tool_call_for_retention``):

* only ``tool`` items whose stored body is over :data:`RETENTION_BODY_FLOOR` characters;
* the call loses ``rawInput``, ``rawOutput`` and its own ``_meta``; its terminal outputs
  and references go; of its ``content`` only ``diff`` items stay (an empty list stays);
* each diff keeps its stat: its patch text is dropped, its ``_meta["dev.mj.diffPatch"]``
  becomes ``{"text": "", "insertions": N, "deletions": M, ["created": true,]
  "truncated": true}``, ``oldText`` goes and ``newText`` is ``""``; a diff that still
  holds both file copies gets its counts from them first (:func:`line_changes`);
* a body that does not get strictly shorter (in UTF-8 bytes) is left as it is.

There is no "compacted" marker: the truncated patch is the only trace. Position,
times and ordinals stay, so the item keeps its place and its ``seq``. Key order follows
the origin's ``serde_json`` with ``preserve_order``, whose ``remove`` moves the last key
into the removed one's place (:func:`_swap_remove`).
"""

from __future__ import annotations

import msgspec

from .materialized import MaterializedSession, ToolBody
from .wire import JSON, encode

__all__ = [
    "DIFF_PATCH_META_KEY",
    "RETENTION_BATCH_ITEMS",
    "RETENTION_BODY_FLOOR",
    "TranscriptRetention",
    "compact_tool_body",
    "line_changes",
    "retained_body",
    "retained_session",
]

RETENTION_BATCH_ITEMS = 4_096
"""Rows one pass rewrites at most; the rest wait for the next pass."""
RETENTION_BODY_FLOOR = 4 * 1024
"""Bodies of at most this many characters (SQLite's ``length``) are left as they are."""
DIFF_PATCH_META_KEY = "dev.mj.diffPatch"
_CALL_DROPS = ("rawInput", "rawOutput", "_meta")
DIFF_WORK_BUDGET = 200_000
"""Steps (diagonals tried plus lines matched) one diff may take, about a tenth of a
second: past it the counts are the blunt ones (every old line deleted, every new one
inserted), as the origin's diff settles for a blunter one after its 250 ms deadline, so a
pass never holds the writer for long."""


class TranscriptRetention(msgspec.Struct, frozen=True, kw_only=True):
    """What one retention pass rewrote: ``items`` rows, ``bytes`` reclaimed (UTF-8), and
    whether candidates were left for the next pass (``remaining``)."""

    items: int = 0
    bytes: int = 0
    remaining: bool = False


def _swap_remove(mapping: dict[str, JSON], key: str) -> bool:
    """Remove ``key`` as ``serde_json``'s ordered map does: the last entry takes its slot."""
    if key not in mapping:
        return False
    keys = list(mapping)
    last = keys[-1]
    if last == key:
        del mapping[key]
        return True
    moved = mapping.pop(last)
    rebuilt = {
        (last if name == key else name): (moved if name == key else mapping[name])
        for name in keys[:-1]
    }
    mapping.clear()
    mapping.update(rebuilt)
    return True


def _lines(text: str) -> list[str]:
    """Lines as a line diff sees them: each ends at its ``\\n`` (kept), the last may not."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def line_changes(old: str | None, new: str) -> tuple[int, int]:
    """``(insertions, deletions)`` of a minimal line diff from ``old`` to ``new``.

    Myers' algorithm finds the edit distance D; insertions and deletions follow from D
    and the line counts. Past :data:`DIFF_WORK_BUDGET` steps the blunt counts are
    returned.
    """
    a, b = _lines(old or ""), _lines(new)
    n, m = len(a), len(b)
    furthest = {1: 0}
    work = 0
    for distance in range(n + m + 1):
        work += distance + 1
        if work > DIFF_WORK_BUDGET:
            break
        for diagonal in range(-distance, distance + 1, 2):
            if diagonal == -distance or (
                diagonal != distance and furthest[diagonal - 1] < furthest[diagonal + 1]
            ):
                x = furthest[diagonal + 1]
            else:
                x = furthest[diagonal - 1] + 1
            y = x - diagonal
            start = x
            while x < n and y < m and a[x] == b[y]:
                x, y = x + 1, y + 1
            work += x - start
            furthest[diagonal] = x
            if x >= n and y >= m:
                inserted = (distance + m - n) // 2
                return inserted, distance - inserted
    return m, n


def _drop_patch_text(item: dict[str, JSON]) -> bool:
    """Drop a diff's patch text, keeping its counts; False when there is nothing to drop."""
    changed = False
    meta = item.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else None
    if not isinstance(item.get("path"), str):
        return False  # not a diff the origin reads: left as it is
    if item.get("oldText") is not None or item.get("newText"):
        old, new = item.get("oldText"), item.get("newText")
        if not (old is None or isinstance(old, str)) or not isinstance(new, str):
            return False
        insertions, deletions = line_changes(old, new)
        patch: dict[str, JSON] = {"text": "", "insertions": insertions, "deletions": deletions}
        if old is None:
            patch["created"] = True
        meta = meta or {}
        meta[DIFF_PATCH_META_KEY] = patch
        changed = True
    stored = None if meta is None else meta.get(DIFF_PATCH_META_KEY)
    if not _is_patch(stored):
        return _rebuild_diff(item, meta, changed)
    assert isinstance(stored, dict)
    if stored.get("text") == "" and stored.get("truncated") is True and not changed:
        return False
    patch = {
        "text": "",
        "insertions": stored.get("insertions", 0),
        "deletions": stored.get("deletions", 0),
    }
    if stored.get("created"):
        patch["created"] = True
    patch["truncated"] = True
    assert meta is not None
    meta[DIFF_PATCH_META_KEY] = patch
    return _rebuild_diff(item, meta, True)


def _is_patch(value: JSON) -> bool:
    """Whether ``value`` reads as the origin's ``DiffPatch`` (a malformed one is left as
    it is, as the origin leaves a patch it cannot read)."""
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return False
    counts = (value.get("insertions"), value.get("deletions"))
    if not all(type(count) is int and count >= 0 for count in counts):
        return False
    return all(type(value.get(flag, False)) is bool for flag in ("created", "truncated"))


def _rebuild_diff(item: dict[str, JSON], meta: dict[str, JSON] | None, changed: bool) -> bool:
    """Write the diff back as the origin's typed diff does: ``type``, ``path``,
    ``newText`` (empty), then ``_meta``."""
    if not changed:
        return False
    rebuilt: dict[str, JSON] = {"type": "diff", "path": item.get("path"), "newText": ""}
    if meta is not None:
        rebuilt["_meta"] = meta
    item.clear()
    item.update(rebuilt)
    return True


def compact_tool_body(body: ToolBody) -> ToolBody | None:
    """``body`` with what retention forgets dropped (see the module doc); None when
    nothing would change."""
    call = body.call
    if not isinstance(call, dict):
        return None
    call = dict(call)
    changed = bool(body.terminal_outputs or body.terminal_refs)
    for field in _CALL_DROPS:
        changed |= _swap_remove(call, field)
    content = call.get("content")
    if isinstance(content, list):
        kept = [
            dict(item) for item in content if isinstance(item, dict) and item.get("type") == "diff"
        ]
        changed |= len(kept) != len(content)
        for item in kept:
            changed |= _drop_patch_text(item)
        call["content"] = kept
    if not changed:
        return None
    return ToolBody(call=call, presentation=body.presentation)


def retained_body(body: ToolBody, stored: str) -> ToolBody | None:
    """What retention keeps of a ``tool`` body whose stored JSON is ``stored``: None
    when it keeps the body as it is (at most :data:`RETENTION_BODY_FLOOR` characters,
    nothing to drop, or not strictly shorter in UTF-8 bytes)."""
    if len(stored) <= RETENTION_BODY_FLOOR:
        return None
    compacted = compact_tool_body(body)
    if compacted is None or len(encode(compacted)) >= len(stored.encode()):
        return None
    return compacted


def retained_session(session: MaterializedSession, frontier: int | None) -> MaterializedSession:
    """``session`` with retention applied to every ``tool`` item at or below the
    checkpoint ``frontier`` (None: no checkpoint, nothing changes): what the store holds
    of it once every pass ran. Audit compares both sides through it, so a body retention
    shrank matches the whole one its events derive, and nothing else is forgiven."""
    if frontier is None:
        return session
    changed = False
    items = []
    for item in session.transcript:
        body = item.body
        if item.position <= frontier and isinstance(body, ToolBody):
            kept = retained_body(body, encode(body).decode())
            if kept is not None:
                item = msgspec.structs.replace(item, body=kept)
                changed = True
        items.append(item)
    return msgspec.structs.replace(session, transcript=items) if changed else session
