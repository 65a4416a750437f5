"""Agent and thought chunks, the streams they keep open, and plans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import msgspec

from ..materialized import (
    AgentBody,
    ExecutionRunning,
    PlanBody,
    ThoughtBody,
    TranscriptItem,
)
from ..wire import JSON
from .context import (
    ProjectionContext,
    changed,
    id_text,
    new_item,
    upsert,
)

__all__ = [
    "close_stream_kind",
    "close_streams",
    "merge_content_chunk",
    "project_plan",
    "project_stream_chunk",
]


def close_stream_kind(ctx: ProjectionContext, agent: bool) -> None:
    """Mark every open agent (or thought) stream as finished."""
    at_ms = ctx.event.recorded_at_ms
    for item in ctx.open_streams(agent):
        body = item.body
        assert isinstance(body, AgentBody | ThoughtBody)
        upsert(ctx, changed(item, at_ms, body=msgspec.structs.replace(body, streaming=False)))


def close_streams(ctx: ProjectionContext) -> None:
    """Finish open agent streams, then open thought streams (a turn, tool or plan boundary)."""
    close_stream_kind(ctx, agent=True)
    close_stream_kind(ctx, agent=False)


def _mergeable(last: JSON, chunk: JSON) -> bool:
    if not isinstance(last, dict) or not isinstance(chunk, dict):
        return False
    last_content, content = last.get("content"), chunk.get("content")
    return (
        _is_text_block(last_content)
        and _is_text_block(content)
        and _same_except(last, chunk, "content")
        and _same_except(last_content, content, "text")
    )


def _is_text_block(value: JSON) -> TypeGuard[dict[str, JSON]]:
    return (
        isinstance(value, dict)
        and value.get("type") == "text"
        and isinstance(value.get("text"), str)
    )


def _same_except(left: dict[str, JSON], right: dict[str, JSON], key: str) -> bool:
    """True when the two dicts differ at most in ``key`` (a plain loop: every chunk runs it)."""
    if len(left) != len(right):
        return False
    for name, value in left.items():
        if name != key and (name not in right or right[name] != value):
            return False
    return True


def merge_content_chunk(chunks: list[JSON], chunk: JSON) -> list[JSON]:
    """A new chunk list with ``chunk`` appended, its text joined to the last chunk's.

    Two chunks join only when nothing but the text differs (same ``messageId``, meta
    and annotations). ``chunks`` and its dicts are left untouched.
    """
    if chunks and _mergeable(chunks[-1], chunk):
        last = chunks[-1]
        content = dict(last["content"])
        content["text"] = content["text"] + chunk["content"]["text"]
        merged = dict(last)
        merged["content"] = content
        return [*chunks[:-1], merged]
    return [*chunks, chunk]


def project_stream_chunk(ctx: ProjectionContext, update: Mapping[str, JSON], agent: bool) -> None:
    """Add an agent message or thought chunk to its item.

    A chunk with a ``messageId`` goes to ``agent:{id}``/``thought:{id}``; one without
    goes to the newest open stream of its kind, else (while the session is not running)
    into the transcript's last item when that is of the same kind, else to a new item
    ``agent:{ordinal}``/``thought:{ordinal}``. ``streaming`` follows the session's
    running state, so a chunk recorded while idle never reopens a stream.
    """
    close_stream_kind(ctx, agent=not agent)
    running = isinstance(ctx.mutation.execution or ctx.current.execution, ExecutionRunning)
    body_type: type[AgentBody] | type[ThoughtBody] = AgentBody if agent else ThoughtBody
    chunk = {key: value for key, value in update.items() if key != "sessionUpdate"}
    message_id = update.get("messageId")
    prefix = "agent:" if agent else "thought:"
    event = ctx.event
    explicit = None if message_id is None else f"{prefix}{id_text(message_id)}"
    if explicit is not None:
        existing = ctx.get(explicit)
    else:
        streams = ctx.open_streams(agent)
        existing = streams[-1] if streams else None
    if existing is not None:
        body = existing.body
        if type(body) is not body_type:
            raise ctx.error(f"ACP message id conflicts with transcript item {existing.stable_id!r}")
        assert isinstance(body, AgentBody | ThoughtBody)
        new_body = body_type(chunks=merge_content_chunk(body.chunks, chunk), streaming=running)
        _upsert_chunk_item(ctx, existing, new_body, agent)
        return
    last = ctx.newest()
    if explicit is None and not running and last is not None and type(last.body) is body_type:
        body = last.body
        assert isinstance(body, AgentBody | ThoughtBody)
        new_body = msgspec.structs.replace(body, chunks=merge_content_chunk(body.chunks, chunk))
        _upsert_chunk_item(ctx, last, new_body, agent)
        return
    item = new_item(
        ctx, explicit or f"{prefix}{event.ordinal}", body_type(chunks=[chunk], streaming=running)
    )
    if agent:
        item = msgspec.structs.replace(item, latest_content_event_ordinal=event.ordinal)
    upsert(ctx, item)


def _upsert_chunk_item(
    ctx: ProjectionContext, item: TranscriptItem, body: Any, agent: bool
) -> None:
    latest = ctx.event.ordinal if agent else item.latest_content_event_ordinal
    upsert(
        ctx, changed(item, ctx.event.recorded_at_ms, body=body, latest_content_event_ordinal=latest)
    )


def project_plan(ctx: ProjectionContext, plan: JSON) -> None:
    """Replace the plan of the latest turn, or start ``plan:{ordinal}``.

    A plan belongs to the turn that produced it, so a plan from a later turn (a user
    prompt or a turn the harness started on its own) never overwrites an earlier one.
    The latest turn starts at its newest user prompt or harness turn item. A plan is
    created at the end of the transcript, positioned at the event that creates it, and
    keeps its position, so the newest plan is the only one that can belong to it.
    """
    close_streams(ctx)
    turn = _newest(ctx, ctx.index.turns)
    turn_start = 0 if turn is None else turn.position
    latest = _newest(ctx, ctx.index.plans)
    if latest is not None and latest.position > turn_start:
        upsert(ctx, changed(latest, ctx.event.recorded_at_ms, body=PlanBody(plan=plan)))
    else:
        upsert(ctx, new_item(ctx, f"plan:{ctx.event.ordinal}", PlanBody(plan=plan)))


def _newest(ctx: ProjectionContext, ids: dict[str, None]) -> TranscriptItem | None:
    """The item of the last id of ``ids`` (kept in transcript order), if any."""
    return ctx.get(next(reversed(ids))) if ids else None
