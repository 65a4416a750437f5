"""Tool calls and terminal output: attaching, parking and claiming terminals, fallbacks."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ..materialized import (
    TerminalOutputBody,
    TerminalOutputRecord,
    ToolBody,
    TranscriptItem,
    TranscriptRemove,
)
from ..wire import JSON
from .calls import (
    RawResultKey,
    is_fallback_terminal_call,
    raw_result_candidate,
    raw_result_key,
    terminal_result_key,
    tool_call_json,
    tool_call_terminal_ids,
)
from .context import (
    ProjectionContext,
    changed,
    id_text,
    new_item,
    upsert,
)
from .markers import FALLBACK_TERMINAL_TOOL_ID_PREFIX
from .streams import close_streams

__all__ = [
    "project_terminal_output",
    "project_tool_call",
    "project_tool_call_update",
]
_PRESENTATION_INPUTS = ("title", "kind", "rawInput", "rawOutput")
_UPDATE_FIELDS = ("title", "kind", "status", "content", "locations", "rawInput", "rawOutput")


def _presentation(old_call: JSON, new_call: JSON, presentation: JSON) -> JSON:
    # relaystore does not derive display summaries; a cached one stays valid only
    # while every input it was derived from stays the same.
    if presentation is None or not isinstance(old_call, dict):
        return None
    same = all(old_call.get(key) == new_call.get(key) for key in _PRESENTATION_INPUTS)
    return presentation if same else None


def project_tool_call(ctx: ProjectionContext, update: Mapping[str, JSON]) -> None:
    """Create or replace ``tool:{toolCallId}``; a re-sent call keeps its identity fields."""
    close_streams(ctx)
    call = tool_call_json(update)
    if _fallback_already_claimed(ctx, call):
        return
    stable_id = f"tool:{id_text(call['toolCallId'])}"
    existing = ctx.get(stable_id)
    if existing is not None:
        _replace_call(ctx, existing, _existing_tool(ctx, existing), call)
    else:
        item = new_item(ctx, stable_id, ToolBody(call=call))
        _finish_tool_item(ctx, item, may_adopt_identity=True)


def project_tool_call_update(ctx: ProjectionContext, update: Mapping[str, JSON]) -> None:
    """Merge the fields an update carries into a known tool call; unknown ids are ignored.

    An update for a call the transcript never saw (a resumed harness finishing history
    it did not replay) has no target, so it changes nothing rather than wedging the
    journal.
    """
    stable_id = f"tool:{id_text(update.get('toolCallId'))}"
    existing = ctx.get(stable_id)
    if existing is None:
        return
    close_streams(ctx)
    body = _existing_tool(ctx, existing)
    merged = dict(body.call) if isinstance(body.call, dict) else {}
    for key in _UPDATE_FIELDS:
        value = update.get(key)
        if value is not None:
            merged[key] = value
    _replace_call(ctx, existing, body, tool_call_json(merged))


def _existing_tool(ctx: ProjectionContext, item: TranscriptItem) -> ToolBody:
    """The tool body of ``tool:{id}``; another kind of item under that id is an error."""
    if not isinstance(item.body, ToolBody):
        stable_id = item.stable_id
        raise ctx.error(
            f"ACP tool call {stable_id[5:]!r} conflicts with transcript item {stable_id!r}"
        )
    return item.body


def _replace_call(
    ctx: ProjectionContext, existing: TranscriptItem, body: ToolBody, call: JSON
) -> None:
    """Give the tool item ``existing`` (``body``) a new call; a stale presentation goes."""
    body = msgspec.structs.replace(
        body, call=call, presentation=_presentation(body.call, call, body.presentation)
    )
    item = changed(existing, ctx.event.recorded_at_ms, body=body)
    _finish_tool_item(ctx, item, may_adopt_identity=False)


def _finish_tool_item(
    ctx: ProjectionContext, item: TranscriptItem, *, may_adopt_identity: bool
) -> None:
    item = _attach_terminal_outputs(ctx, item)
    item = _consume_fallback_tools(ctx, item, may_adopt_identity)
    upsert(ctx, _finalize_fallback_tool(item))


def _tool(item: TranscriptItem) -> ToolBody:
    assert isinstance(item.body, ToolBody)
    return item.body


def _replace_or_push(
    records: list[TerminalOutputRecord], record: TerminalOutputRecord
) -> list[TerminalOutputRecord]:
    for offset, existing in enumerate(records):
        if existing.terminal_id == record.terminal_id:
            return [*records[:offset], record, *records[offset + 1 :]]
    return [*records, record]


def _matches_raw_result(record: TerminalOutputRecord, call: JSON) -> bool:
    """Whether ``call``'s raw result is ``record``: the rule the index's result keys
    (:func:`raw_result_key`, :func:`terminal_result_key`) implement as equal keys."""
    # Kimi reports shell output as raw bytes beside the exit status but omits the ACP
    # terminal reference, so the exact result is the only ownership it publishes.
    if not raw_result_candidate(call):
        return False
    raw = call["rawOutput"]
    exit_code = raw["exit_code"]
    if record.exit_code != exit_code or record.signal is not None:
        return False
    output = raw.get("output")
    if isinstance(output, list):
        expected = record.output.encode()
        return len(output) == len(expected) and all(
            type(value) is int and value == byte
            for value, byte in zip(output, expected, strict=True)
        )
    return isinstance(output, str) and output == record.output


def _parked_record(item: TranscriptItem | None) -> TerminalOutputRecord | None:
    """The output a parked item holds (a ``terminal:`` item or a fallback tool)."""
    body = None if item is None else item.body
    if isinstance(body, TerminalOutputBody):
        return body.record
    if isinstance(body, ToolBody) and body.terminal_outputs:
        return body.terminal_outputs[0]
    return None


def _unique_raw_terminal(ctx: ProjectionContext, call: JSON) -> str | None:
    """The one parked terminal result a provider call's raw result claims, if exactly one.

    The index files parked output by result key, so this is one lookup: exactly the
    parked records :func:`_matches_raw_result` accepts share the call's key.
    """
    stable_id = _sole(ctx.index.parked_results, raw_result_key(call))
    record = None if stable_id is None else _parked_record(ctx.get(stable_id))
    return None if record is None else record.terminal_id


def _attach_terminal_outputs(ctx: ProjectionContext, item: TranscriptItem) -> TranscriptItem:
    body = _tool(item)
    refs = list(body.terminal_refs)
    for terminal_id in tool_call_terminal_ids(body.call):
        if terminal_id not in refs:
            refs.append(terminal_id)
    if not refs:
        claimed = _unique_raw_terminal(ctx, body.call)
        if claimed is not None:
            refs.append(claimed)
    outputs = body.terminal_outputs
    for terminal_id in refs:
        parked = ctx.get(f"terminal:{terminal_id}")
        if parked is None or not isinstance(parked.body, TerminalOutputBody):
            continue
        if parked.body.record.terminal_id != terminal_id:
            continue
        outputs = _replace_or_push(outputs, parked.body.record)
        ctx.mutation.transcript.append(TranscriptRemove(parked.stable_id))
    if refs == body.terminal_refs and outputs is body.terminal_outputs:
        return item
    return msgspec.structs.replace(
        item, body=msgspec.structs.replace(body, terminal_refs=refs, terminal_outputs=outputs)
    )


def _fallback_already_claimed(ctx: ProjectionContext, call: JSON) -> bool:
    # A provider may publish its real tool before the interim one arrives; the
    # interim call would only duplicate the start item then.
    if not is_fallback_terminal_call(call):
        return False
    return any(
        isinstance(referrer.body, ToolBody) and not is_fallback_terminal_call(referrer.body.call)
        for terminal_id in tool_call_terminal_ids(call)
        for referrer in ctx.terminal_referrers(terminal_id)
    )


def _consume_fallback_tools(
    ctx: ProjectionContext, item: TranscriptItem, may_adopt_identity: bool
) -> TranscriptItem:
    body = _tool(item)
    if is_fallback_terminal_call(body.call):
        return item
    outputs, refs = body.terminal_outputs, list(body.terminal_refs)
    position, created, last_changed = item.position, item.created_at_ms, item.last_changed_at_ms
    consumed = False
    # The refs already hold the call's own ids: visit each id once, call ids first.
    for terminal_id in dict.fromkeys([*tool_call_terminal_ids(body.call), *body.terminal_refs]):
        stable_id = f"tool:{FALLBACK_TERMINAL_TOOL_ID_PREFIX}{terminal_id}"
        if stable_id == item.stable_id:
            continue
        fallback = ctx.get(stable_id)
        if fallback is None or not isinstance(fallback.body, ToolBody):
            continue
        if not is_fallback_terminal_call(fallback.body.call):
            continue
        for record in fallback.body.terminal_outputs:
            outputs = _replace_or_push(outputs, record)
        for ref in [*fallback.body.terminal_refs, terminal_id]:
            if ref not in refs:
                refs.append(ref)
        if may_adopt_identity:
            position = min(position, fallback.position)
            created = min(created, fallback.created_at_ms)
        last_changed = max(last_changed, fallback.last_changed_at_ms)
        ctx.mutation.transcript.append(TranscriptRemove(stable_id))
        consumed = True
    if not consumed:
        return item
    return msgspec.structs.replace(
        item,
        position=position,
        created_at_ms=created,
        last_changed_at_ms=last_changed,
        body=msgspec.structs.replace(body, terminal_outputs=outputs, terminal_refs=refs),
    )


def _finalize_fallback_tool(item: TranscriptItem) -> TranscriptItem:
    # Terminal exit is a worker event, not an ACP update: complete only the interim
    # call the worker created; a provider's own call keeps its own status.
    body = _tool(item)
    if not body.terminal_outputs or not is_fallback_terminal_call(body.call):
        return item
    clean = all(record.exit_code == 0 and record.signal is None for record in body.terminal_outputs)
    call = tool_call_json({**body.call, "status": "completed" if clean else "failed"})
    return msgspec.structs.replace(item, body=msgspec.structs.replace(body, call=call))


def project_terminal_output(ctx: ProjectionContext, record: TerminalOutputRecord) -> None:
    """Attach a terminal's output to every tool that refers to it, else park it.

    Output may land before or after the tool call naming the terminal; both orders end
    the same way: on the referring tool items, or in ``terminal:{id}`` until a call
    claims it. A provider tool whose raw result uniquely matches also claims it, and
    then replaces the interim fallback tool.
    """
    terminal_id = record.terminal_id
    at_ms = ctx.event.recorded_at_ms
    owner = _unique_raw_tool(ctx, record)
    referrers = ctx.terminal_referrers(terminal_id)
    attached = False
    for existing in referrers:
        body = _tool(existing)
        if (
            owner is not None
            and owner.stable_id != existing.stable_id
            and is_fallback_terminal_call(body.call)
        ):
            ctx.mutation.transcript.append(TranscriptRemove(existing.stable_id))
            attached = True
            continue
        refs = (
            body.terminal_refs
            if terminal_id in body.terminal_refs
            else [*body.terminal_refs, terminal_id]
        )
        new_body = msgspec.structs.replace(
            body,
            terminal_outputs=_replace_or_push(body.terminal_outputs, record),
            terminal_refs=refs,
        )
        upsert(ctx, _finalize_fallback_tool(changed(existing, at_ms, body=new_body)))
        attached = True
    if owner is not None and all(referrer.stable_id != owner.stable_id for referrer in referrers):
        body = _tool(owner)
        new_body = msgspec.structs.replace(
            body,
            terminal_outputs=_replace_or_push(body.terminal_outputs, record),
            terminal_refs=[*body.terminal_refs, terminal_id],
        )
        upsert(ctx, changed(owner, at_ms, body=new_body))
        attached = True
    if attached:
        return
    stable_id = f"terminal:{terminal_id}"
    parked = ctx.get(stable_id)
    if parked is not None:
        upsert(ctx, changed(parked, at_ms, body=TerminalOutputBody(record=record)))
    else:
        upsert(ctx, new_item(ctx, stable_id, TerminalOutputBody(record=record)))


def _unique_raw_tool(ctx: ProjectionContext, record: TerminalOutputRecord) -> TranscriptItem | None:
    """The one provider tool whose raw result is ``record``; identical results claim none.

    The index files provider tools by raw result key, so this is one lookup: exactly
    the tools :func:`_matches_raw_result` accepts share the record's key.
    """
    stable_id = _sole(ctx.index.raw_results, terminal_result_key(record))
    item = None if stable_id is None else ctx.get(stable_id)
    return item if item is not None and isinstance(item.body, ToolBody) else None


def _sole(by_key: Mapping[RawResultKey, set[str]], key: RawResultKey | None) -> str | None:
    """The only stable id filed under ``key``: identical results claim nothing."""
    ids = None if key is None else by_key.get(key)
    return next(iter(ids)) if ids is not None and len(ids) == 1 else None
