"""Transcript retention's rule, as the origin's ``compact_tool_call_for_retention`` and
``drop_patch_text`` have it (their database tests' fixtures, byte for byte)."""

from __future__ import annotations

import pytest

from relaystore.domain.materialized import TerminalOutputRecord, ToolBody
from relaystore.domain.retention import DIFF_PATCH_META_KEY, compact_tool_body, line_changes
from relaystore.domain.wire import encode

_OLD = "".join(f"line {n}\n" for n in range(400))
_NEW = _OLD.replace("line 200\n", "line 200 edited\n")


def _patched_diff(path: str) -> dict[str, object]:
    patch = {"text": "@@ -198,7 +198,7 @@\n...", "insertions": 1, "deletions": 1}
    return {"type": "diff", "path": path, "newText": "", "_meta": {DIFF_PATCH_META_KEY: patch}}


def _call(content: list[object]) -> dict[str, object]:
    return {
        "toolCallId": "call-10",
        "title": "Edit files",
        "kind": "edit",
        "status": "completed",
        "locations": [{"path": "src/covered.rs"}],
        "content": content,
        "rawInput": {"file_text": "y" * 65536},
        "rawOutput": {"formatted_output": "z" * 65536},
    }


def test_a_covered_tool_call_keeps_what_its_line_shows_and_the_diffstat() -> None:
    text = {"type": "content", "content": {"type": "text", "text": "x" * 65536}}
    body = ToolBody(call=_call([_patched_diff("src/covered.rs"), text]))
    compacted = compact_tool_body(body)
    assert compacted is not None
    assert encode(compacted) == (
        b'{"kind":"tool","call":{"toolCallId":"call-10","title":"Edit files","kind":"edit",'
        b'"status":"completed","locations":[{"path":"src/covered.rs"}],"content":[{"type":"diff",'
        b'"path":"src/covered.rs","newText":"","_meta":{"dev.mj.diffPatch":{"text":"",'
        b'"insertions":1,"deletions":1,"truncated":true}}}]}}'
    )
    assert compact_tool_body(compacted) is None  # nothing left to release


def test_a_diff_written_before_patches_gets_its_counts_from_the_copies() -> None:
    legacy = {"type": "diff", "path": "src/legacy.rs", "oldText": _OLD, "newText": _NEW}
    compacted = compact_tool_body(ToolBody(call=_call([legacy])))
    assert compacted is not None
    (diff,) = compacted.call["content"]
    assert diff == {
        "type": "diff",
        "path": "src/legacy.rs",
        "newText": "",
        "_meta": {
            DIFF_PATCH_META_KEY: {"text": "", "insertions": 1, "deletions": 1, "truncated": True}
        },
    }


def test_a_created_file_says_so_and_terminal_output_goes() -> None:
    created = {"type": "diff", "path": "new.rs", "newText": "a\nb\nc\n"}
    record = TerminalOutputRecord(terminal_id="t1", output="o" * 10)
    body = ToolBody(call=_call([created]), terminal_outputs=[record], terminal_refs=["t1"])
    compacted = compact_tool_body(body)
    assert compacted is not None
    assert compacted.terminal_outputs == []
    assert compacted.terminal_refs == []
    patch = compacted.call["content"][0]["_meta"][DIFF_PATCH_META_KEY]
    assert list(patch.items()) == [
        ("text", ""),
        ("insertions", 3),
        ("deletions", 0),
        ("created", True),
        ("truncated", True),
    ]


def test_a_removed_key_takes_the_last_keys_place_as_serde_json_preserve_order_does() -> None:
    call = {"toolCallId": "c", "rawInput": {}, "title": "t", "status": "completed"}
    compacted = compact_tool_body(ToolBody(call=call))
    assert compacted is not None
    assert list(compacted.call) == ["toolCallId", "status", "title"]


def test_a_call_with_nothing_to_release_is_left_alone() -> None:
    call = {"toolCallId": "c", "title": "t", "content": [_patched_diff("x")]}
    call["content"][0]["_meta"][DIFF_PATCH_META_KEY] = {
        "text": "",
        "insertions": 0,
        "deletions": 0,
        "truncated": True,
    }  # type: ignore[index]
    assert compact_tool_body(ToolBody(call=call)) is None
    assert compact_tool_body(ToolBody(call="not an object")) is None


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        (None, "a\nb\n", (2, 0)),
        ("a\nb\n", "a\nb\n", (0, 0)),
        ("a\nb", "a\nb\n", (1, 1)),  # the last line gained its newline
        ("x\ny\nz\n", "y\nq\n", (1, 2)),
        (_OLD, _NEW, (1, 1)),
        ("", "", (0, 0)),
    ],
)
def test_line_changes_are_a_minimal_line_diffs(
    old: str | None, new: str, changes: tuple[int, int]
) -> None:
    assert line_changes(old, new) == changes


def test_a_huge_rewrite_gets_the_blunt_counts_within_the_work_budget() -> None:
    old = "".join(f"old {n}\n" for n in range(10_000))
    new = "".join(f"new {n}\n" for n in range(10_000))
    assert line_changes(old, new) == (10_000, 10_000)


def test_a_diff_without_a_path_is_left_as_it_is() -> None:
    pathless = {"type": "diff", "oldText": "a\n" * 10, "newText": "b\n" * 10}
    compacted = compact_tool_body(ToolBody(call={"toolCallId": "c", "content": [pathless]}))
    assert compacted is None


def test_a_malformed_stored_patch_is_left_as_it_is() -> None:
    bad = {"text": "x", "insertions": "many", "deletions": None, "created": "yes"}
    diff = {"type": "diff", "path": "p", "newText": "", "_meta": {DIFF_PATCH_META_KEY: bad}}
    call = {"toolCallId": "c", "content": [diff], "rawInput": {"x": 1}}
    compacted = compact_tool_body(ToolBody(call=call))
    assert compacted is not None  # the raw input still goes
    assert compacted.call["content"] == [diff]
