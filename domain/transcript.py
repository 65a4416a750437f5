"""Transcript rules of the projection: item ids, streamed chunks, tool calls, terminals.

These are the pieces :mod:`domain.projection` assembles into one relay event's
mutation. Every function here is pure: it reads the session *before* the event (through
a :class:`TranscriptIndex`) and writes only into the :class:`ProjectionContext`'s
mutation. Items are never changed in place; a changed item is a new
:class:`TranscriptItem`, so a session handed to another thread stays as it was.

Stable-id prefixes and fixed texts are wire data shared with the origin's journals and
stores, so they keep the origin's spelling.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard, TypeVar

import msgspec

from relaystore.domain.errors import ProjectionError
from relaystore.domain.materialized import (
    AgentBody,
    ExecutionRunning,
    MaterializedSession,
    MaterializedSessionMutation,
    PlanBody,
    SystemBody,
    TerminalOutputBody,
    TerminalOutputRecord,
    ThoughtBody,
    ToolBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
    UserBody,
)
from relaystore.domain.relay import RelayEvent, UserShellResult, UserShellStatus
from relaystore.domain.wire import JSON

__all__ = [
    "CONTEXT_BOUNDARY_PREFIX",
    "CONTEXT_BOUNDARY_TEXT",
    "CONTINUATION_PROMPT",
    "FALLBACK_TERMINAL_META_KEY",
    "FALLBACK_TERMINAL_TOOL_ID_PREFIX",
    "HARNESS_TURN_ITEM_PREFIX",
    "HARNESS_TURN_TEXT",
    "PLAN_REVIEW_ID_PREFIX",
    "PLAN_REVIEW_MESSAGE_PREFIX",
    "SESSION_RESTART_ITEM_PREFIX",
    "SESSION_RESTART_TEXT",
    "TURN_INTERRUPTED_ITEM_PREFIX",
    "TURN_INTERRUPTED_TEXT",
    "WORK_INTERRUPTED_ITEM_PREFIX",
    "ProjectionContext",
    "TranscriptIndex",
    "close_stream_kind",
    "close_streams",
    "config_command_text",
    "index_for",
    "index_for_copy",
    "materialized_content_text",
    "merge_content_chunk",
    "normalize_session_title",
    "project_plan",
    "project_stream_chunk",
    "project_terminal_output",
    "project_tool_call",
    "project_tool_call_update",
    "provisional_session_title",
    "push_system",
    "push_system_with_id",
    "resolved_title",
    "sanitize_terminal_text",
    "strip_hidden_prompt_context",
    "upsert",
    "user_shell_result_text",
    "user_shell_text",
]

# -- wire constants -------------------------------------------------------------------

SESSION_RESTART_ITEM_PREFIX = "system:session-restarted:"
SESSION_RESTART_TEXT = "[session restarted]"
WORK_INTERRUPTED_ITEM_PREFIX = "system:work-interrupted:"
TURN_INTERRUPTED_ITEM_PREFIX = "system:turn-interrupted:"
TURN_INTERRUPTED_TEXT = "Interrupted"
HARNESS_TURN_ITEM_PREFIX = "harness-turn:"
HARNESS_TURN_TEXT = "Agent continued on its own"
CONTEXT_BOUNDARY_PREFIX = "system:context-cleared:"
"""Stable-id prefix of the line a context clear leaves (``{prefix}{command_id}``).

The origin's value was not found in the source that was read; relaystore chooses this
spelling, in the family of the other ``system:`` markers.
"""
CONTEXT_BOUNDARY_TEXT = "Context cleared — a new conversation starts here."
PLAN_REVIEW_ID_PREFIX = "plan-review-"
PLAN_REVIEW_MESSAGE_PREFIX = "Review the agent's plan:\n\n"
FALLBACK_TERMINAL_META_KEY = "hel.dev/fallback-terminal"
FALLBACK_TERMINAL_TOOL_ID_PREFIX = "hel-terminal:"
CONTINUATION_PROMPT = (
    "Continue the unfinished work already requested by the user, following their latest "
    "instructions. This message supplies no new approval or missing information. If a "
    "genuine decision, required approval, or external action remains necessary, explain "
    "it and stop."
)
"""The text the worker sends for ``continue_authorized_work`` and ``resume_after_quota``."""

_T = TypeVar("_T")

_MAX_TITLE_CHARS = 64
_SHELL_CONTINUES = "\n[output continues; final tail will be shown on completion]"

# -- the index of the session before the event ----------------------------------------


_OPEN_AGENTS = "open_agents"
_OPEN_THOUGHTS = "open_thoughts"
_RAW_TOOLS = "raw_tools"
_PARKED = "parked"
_PLANS = "plans"
_TURNS = "turns"
_ID_SETS = (_OPEN_AGENTS, _OPEN_THOUGHTS, _RAW_TOOLS, _PARKED)
_ORDERED = (_PLANS, _TURNS)
_PARTS = ("positions", *_ID_SETS, *_ORDERED, "referrers")


@dataclass(slots=True)
class TranscriptIndex:
    """Lookups over one transcript list, so projecting an event does not walk it.

    ``positions`` maps stable ids to list offsets; the id sets hold open agent and
    thought streams, provider tools whose raw result can claim a terminal
    (``raw_tools``) and terminal output not yet owned by a provider tool (``parked``);
    ``plans`` and ``turns`` (the items that start a turn: user prompts and harness
    turns) keep their ids in transcript order, so the newest is the last;
    ``referrers`` maps terminal ids to the tool items referring to them.

    An index describes exactly one list, and changes only together with it: applying
    an event changes the list and its index step by step (:meth:`append`,
    :meth:`replace`, :meth:`remove`), so the cost follows the change, not the length of
    the transcript. Applying an event to a *copy* of a list changes a :meth:`fork` of its
    index, which shares every part with the original until its first change to that
    part, so the original index (which another thread may be reading) never changes.
    Readers must not change an index.
    """

    positions: dict[str, int]
    open_agents: set[str]
    open_thoughts: set[str]
    raw_tools: set[str]
    parked: set[str]
    plans: dict[str, None]
    turns: dict[str, None]
    referrers: dict[str, frozenset[str]]
    _borrowed: set[str] = field(default_factory=set, compare=False, repr=False)
    """Parts shared with a fork (or the index this one was forked from): copied before a change."""

    @classmethod
    def build(cls, transcript: list[TranscriptItem]) -> TranscriptIndex:
        """Index ``transcript`` from scratch (one pass)."""
        positions: dict[str, int] = {}
        sets: dict[str, set[str]] = {name: set() for name in _ID_SETS}
        ordered: dict[str, dict[str, None]] = {name: {} for name in _ORDERED}
        referrers: dict[str, set[str]] = {}
        for offset, item in enumerate(transcript):
            stable_id = item.stable_id
            positions[stable_id] = offset
            for name in _sets_of(item):
                if name in ordered:
                    ordered[name][stable_id] = None
                else:
                    sets[name].add(stable_id)
            for terminal_id in _item_terminal_ids(item.body):
                referrers.setdefault(terminal_id, set()).add(stable_id)
        return cls(
            positions=positions,
            open_agents=sets[_OPEN_AGENTS],
            open_thoughts=sets[_OPEN_THOUGHTS],
            raw_tools=sets[_RAW_TOOLS],
            parked=sets[_PARKED],
            plans=ordered[_PLANS],
            turns=ordered[_TURNS],
            referrers={key: frozenset(value) for key, value in referrers.items()},
        )

    def fork(self) -> TranscriptIndex:
        """An equal index sharing every part with this one until either changes that part.

        Both sides copy a shared part before their first change to it, so neither ever
        sees the other's changes; forking costs nothing, a change copies what it changes.
        """
        self._borrowed = set(_PARTS)
        return TranscriptIndex(
            positions=self.positions,
            open_agents=self.open_agents,
            open_thoughts=self.open_thoughts,
            raw_tools=self.raw_tools,
            parked=self.parked,
            plans=self.plans,
            turns=self.turns,
            referrers=self.referrers,
            _borrowed=set(_PARTS),
        )

    def append(self, item: TranscriptItem, offset: int) -> None:
        """Index ``item``, just appended to the list at ``offset``."""
        self._own("positions")[item.stable_id] = offset
        self._enter(item.stable_id, _sets_of(item), _item_terminal_ids(item.body), at_end=True)

    def replace(self, before: TranscriptItem, after: TranscriptItem) -> None:
        """Re-index the item whose offset now holds ``after`` instead of ``before``."""
        stable_id = after.stable_id
        was, now = _sets_of(before), _sets_of(after)
        if was != now:
            self._leave(stable_id, [name for name in was if name not in now], [])
            self._enter(stable_id, [name for name in now if name not in was], [], at_end=False)
        if type(before.body) is ToolBody or type(after.body) is ToolBody:
            old_refs, new_refs = _item_terminal_ids(before.body), _item_terminal_ids(after.body)
            if old_refs != new_refs:
                self._leave(stable_id, [], old_refs)
                self._enter(stable_id, [], new_refs, at_end=False)

    def remove(self, item: TranscriptItem, offset: int, transcript: list[TranscriptItem]) -> None:
        """Un-index ``item``, just deleted from ``transcript`` at ``offset``.

        The items after it moved up one place; they are re-indexed, so a removal costs
        the number of items after it (the items removed are recent ones: parked
        terminal output and interim tools).
        """
        positions = self._own("positions")
        del positions[item.stable_id]
        for later in range(offset, len(transcript)):
            positions[transcript[later].stable_id] = later
        self._leave(item.stable_id, _sets_of(item), _item_terminal_ids(item.body))

    def _own(self, name: str) -> Any:
        """The part ``name``, copied first if it is shared with another index."""
        part = getattr(self, name)
        if name in self._borrowed:
            self._borrowed.discard(name)
            part = part.copy()  # referrers: its frozensets are replaced, never changed
            setattr(self, name, part)
        return part

    def _enter(
        self, stable_id: str, sets: Iterable[str], terminal_ids: list[str], *, at_end: bool
    ) -> None:
        for name in sets:
            ids = self._own(name)
            if isinstance(ids, set):
                ids.add(stable_id)
                continue
            ids[stable_id] = None
            if not at_end and len(ids) > 1:
                # Joined in the middle of the list (an item changed into a plan): re-sort.
                positions = self.positions
                setattr(self, name, dict.fromkeys(sorted(ids, key=positions.__getitem__)))
        if terminal_ids:
            referrers = self._own("referrers")
            for terminal_id in terminal_ids:
                referrers[terminal_id] = referrers.get(terminal_id, frozenset()) | {stable_id}

    def _leave(self, stable_id: str, sets: Iterable[str], terminal_ids: list[str]) -> None:
        for name in sets:
            ids = self._own(name)
            if isinstance(ids, set):
                ids.discard(stable_id)
            else:
                ids.pop(stable_id, None)
        if terminal_ids:
            referrers = self._own("referrers")
            for terminal_id in terminal_ids:
                remaining = referrers.get(terminal_id, frozenset()) - {stable_id}
                if remaining:
                    referrers[terminal_id] = remaining
                else:
                    referrers.pop(terminal_id, None)


def _sets_of(item: TranscriptItem) -> tuple[str, ...]:
    """The index id sets ``item`` belongs to."""
    if isinstance(item.body, UserBody) or item.stable_id.startswith(HARNESS_TURN_ITEM_PREFIX):
        return (*_body_sets(item.body), _TURNS)
    return _body_sets(item.body)


def _body_sets(body: Any) -> tuple[str, ...]:
    if isinstance(body, AgentBody):
        return (_OPEN_AGENTS,) if body.streaming else ()
    if isinstance(body, ThoughtBody):
        return (_OPEN_THOUGHTS,) if body.streaming else ()
    if isinstance(body, PlanBody):
        return (_PLANS,)
    if isinstance(body, TerminalOutputBody):
        return (_PARKED,)
    if isinstance(body, ToolBody):
        if is_fallback_terminal_call(body.call):
            return (_PARKED,) if body.terminal_outputs else ()
        return (_RAW_TOOLS,) if _raw_result_candidate(body.call) else ()
    return ()


def _item_terminal_ids(body: Any) -> list[str]:
    if type(body) is not ToolBody:
        return []
    ids = tool_call_terminal_ids(body.call)
    ids.extend(body.terminal_refs)
    return ids


_INDEX_CACHE: dict[int, tuple[list[TranscriptItem], TranscriptIndex]] = {}
_INDEX_CACHE_LIMIT = 256


def index_for(transcript: list[TranscriptItem]) -> TranscriptIndex:
    """The index of ``transcript``, from the cache or built now.

    The cache keys on the list's identity and holds the list itself, so an id is never
    reused while its entry lives. A list may change only together with its index, as
    applying an event does (:meth:`TranscriptIndex.append` and the rest); a list changed
    any other way after it was indexed would be misread. At most 256 lists are
    remembered, the least recently asked for dropped first; a list whose entry was
    dropped is simply indexed again.
    """
    key = id(transcript)
    entry = _INDEX_CACHE.pop(key, None)
    if entry is None or entry[0] is not transcript:
        entry = (transcript, TranscriptIndex.build(transcript))
    _remember(key, entry)
    return entry[1]


def index_for_copy(
    previous: list[TranscriptItem], transcript: list[TranscriptItem], index: TranscriptIndex
) -> TranscriptIndex:
    """The index of ``transcript``, a fresh copy of ``previous`` about to be changed.

    It is a :meth:`TranscriptIndex.fork` of ``index`` (the index of ``previous``), cached
    for ``transcript`` and to be changed together with it. ``previous``'s index stays as
    it was but leaves the cache, since a chain of sessions needs only its newest one.
    """
    _INDEX_CACHE.pop(id(previous), None)  # an entry holds its list: under this id, it is previous
    fork = index.fork()
    _remember(id(transcript), (transcript, fork))
    return fork


def _remember(key: int, entry: tuple[list[TranscriptItem], TranscriptIndex]) -> None:
    _INDEX_CACHE[key] = entry
    if len(_INDEX_CACHE) > _INDEX_CACHE_LIMIT:
        for stale in list(_INDEX_CACHE)[: _INDEX_CACHE_LIMIT // 2]:
            _INDEX_CACHE.pop(stale, None)


# -- the projection context -----------------------------------------------------------


@dataclass(slots=True)
class ProjectionContext:
    """What projecting one event reads (``current``, ``index``, ``event``) and writes."""

    current: MaterializedSession
    index: TranscriptIndex
    event: RelayEvent
    mutation: MaterializedSessionMutation
    session_id: str

    def get(self, stable_id: str) -> TranscriptItem | None:
        """The item ``stable_id`` as it was before this event."""
        offset = self.index.positions.get(stable_id)
        return None if offset is None else self.current.transcript[offset]

    def error(self, detail: str) -> ProjectionError:
        """A :class:`ProjectionError` located at this session and event."""
        return ProjectionError(detail, session_id=self.session_id, ordinal=self.event.ordinal)

    def open_streams(self, agent: bool) -> list[TranscriptItem]:
        """Open agent (or thought) streams, oldest first."""
        ids = self.index.open_agents if agent else self.index.open_thoughts
        if not ids:
            return []
        items = [item for item in map(self.get, ids) if item is not None]
        items.sort(key=lambda item: (item.position, item.stable_id))
        return items

    def terminal_referrers(self, terminal_id: str) -> list[TranscriptItem]:
        """Tool items whose call or history refers to ``terminal_id``, by stable id."""
        ids = sorted(self.index.referrers.get(terminal_id, ()))
        return [item for item in map(self.get, ids) if item is not None]


# -- mutation helpers -----------------------------------------------------------------


def upsert(ctx: ProjectionContext, item: TranscriptItem) -> None:
    """Record ``item``; a later upsert of the same id in this event replaces the earlier."""
    changes = ctx.mutation.transcript
    for offset, change in enumerate(changes):
        if isinstance(change, TranscriptUpsert) and change.item.stable_id == item.stable_id:
            changes[offset] = TranscriptUpsert(item)
            return
    changes.append(TranscriptUpsert(item))


def new_item(
    ctx: ProjectionContext, stable_id: str, body: Any, *, at_ms: int | None = None
) -> TranscriptItem:
    """An item created by this event (position = its ordinal)."""
    when = ctx.event.recorded_at_ms if at_ms is None else at_ms
    return TranscriptItem(
        stable_id=stable_id,
        position=ctx.event.ordinal,
        latest_content_event_ordinal=None,
        created_at_ms=when,
        last_changed_at_ms=when,
        body=body,
    )


def push_system_with_id(ctx: ProjectionContext, stable_id: str, text: str) -> None:
    """Add a System line with a chosen id, created by this event."""
    upsert(ctx, new_item(ctx, stable_id, SystemBody(text=text)))


def push_system(ctx: ProjectionContext, text: str) -> None:
    """Add the System line ``system:{ordinal}``."""
    push_system_with_id(ctx, f"system:{ctx.event.ordinal}", text)


def changed(item: TranscriptItem, at_ms: int, **fields: Any) -> TranscriptItem:
    """A copy of ``item`` with ``fields`` replaced; its change time never moves back."""
    return msgspec.structs.replace(
        item, last_changed_at_ms=max(item.last_changed_at_ms, at_ms), **fields
    )


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


# -- text -----------------------------------------------------------------------------


def sanitize_terminal_text(text: str) -> str:
    """Drop terminal escape sequences and controls; keep newlines and tabs.

    A lone carriage return becomes a newline. Harness output is untrusted, so escapes
    are consumed iteratively and a malformed string payload stops at a line break.
    """
    if "\x1b" not in text and "\r" not in text and text.isprintable():
        return text
    out: list[str] = []
    length = len(text)
    i = 0
    while i < length:
        ch = text[i]
        i += 1
        if ch == "\x1b":
            i = _skip_escapes(text, i)
        elif ch == "\r":
            if i >= length or text[i] != "\n":
                out.append("\n")
        elif ch in "\n\t" or not _is_control(ch):
            out.append(ch)
    return "".join(out)


def _is_control(ch: str) -> bool:
    code = ord(ch)
    return code < 0x20 or 0x7F <= code < 0xA0


def _skip_escapes(text: str, i: int) -> int:
    # Returns the index after one or more chained escape bodies (ESC already consumed).
    length = len(text)
    while True:
        if i >= length:
            return i
        ch = text[i]
        i += 1
        if ch == "[":
            while i < length and not "@" <= text[i] <= "~":
                i += 1
            return min(i + 1, length)
        if ch in "]PX^_":
            while i < length:
                c = text[i]
                if c in "\n\r\x18\x1a":
                    return i
                i += 1
                if c == "\x07":
                    return i
                if c == "\x1b":
                    break
            else:
                return i
            continue
        if ch in "()*+-./#% ":
            return min(i + 1, length)
        return i


def strip_hidden_prompt_context(text: str) -> str:
    """Remove leading controller-only ``<mj-…>``/``<hel-…>``/``<user_shell_command>`` blocks.

    An unterminated reserved block hides everything after it: it is a truncated hidden
    value, not text safe to show.
    """
    while True:
        text = text.lstrip()
        if not text.startswith("<"):
            return text
        after_open = text[1:]
        end = after_open.find(">")
        if end < 0:
            reserved = after_open.startswith(("hel-", "mj-", "user_shell_command"))
            return "" if reserved else text
        tag = after_open[:end]
        if not _reserved_tag(tag):
            return text
        close = f"</{tag}>"
        rest = after_open[end + 1 :]
        close_at = rest.rfind(close)
        if close_at < 0:
            return ""
        text = rest[close_at + len(close) :]


def _reserved_tag(tag: str) -> bool:
    if tag == "user_shell_command":
        return True
    return tag.startswith(("hel-", "mj-")) and all(
        ch.isascii() and (ch.islower() or ch.isdigit() or ch == "-") for ch in tag
    )


def _block_text(value: JSON) -> str:
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "text" and isinstance(value.get("text"), str):
            return str(value["text"])
        if kind == "image":
            return "[image]"
        if kind == "audio":
            return "[audio]"
        if kind == "resource_link":
            return f"[{value.get('name', '')}]({value.get('uri', '')})"
        if kind == "resource" and isinstance(value.get("resource"), dict):
            resource = value["resource"]
            if isinstance(resource.get("text"), str):
                return str(resource["text"])
            if "blob" in resource:
                return f"[embedded resource: {resource.get('uri', '')}]"
            return "[embedded resource]"
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def materialized_content_text(content: Iterable[JSON]) -> str:
    """The visible text of ACP content blocks, hidden controller context removed."""
    parts = [sanitize_terminal_text(_block_text(block)) for block in content]
    return strip_hidden_prompt_context("\n".join(part for part in parts if part))


def normalize_session_title(title: str) -> str | None:
    """A title with hidden context removed and whitespace collapsed; None when blank."""
    normalized = " ".join(strip_hidden_prompt_context(title).split())
    return normalized or None


def provisional_session_title(prompt: str) -> str | None:
    """A bounded title from a prompt: at most 64 characters, cut at a word, with "…"."""
    normalized = normalize_session_title(prompt)
    if normalized is None or len(normalized) <= _MAX_TITLE_CHARS:
        return normalized
    truncated = normalized[: _MAX_TITLE_CHARS - 1]
    for offset in range(len(truncated) - 1, -1, -1):
        if truncated[offset].isspace():
            truncated = truncated[:offset]
            break
    return truncated + "…"


def resolved_title(session: MaterializedSession) -> str | None:
    """The session's title, else one derived from its first titled prompt."""
    if session.session_title is not None:
        title = normalize_session_title(session.session_title)
        if title is not None:
            return title
    for item in session.transcript:
        if isinstance(item.body, UserBody):
            title = provisional_session_title(materialized_content_text(item.body.content))
            if title is not None:
                return title
    for entry in session.queued_prompts:
        if entry.kind is None:
            title = provisional_session_title(materialized_content_text(entry.content))
            if title is not None:
                return title
    return None


def config_command_text(key: str, value: str) -> str:
    """The composer text of a configuration change (``/fast`` for fast mode)."""
    return "/fast" if key == "fast-mode" else f"/{key} {value}"


# -- user shell -----------------------------------------------------------------------


def user_shell_text(
    command: str,
    status: str,
    stdout: str,
    stderr: str,
    stdout_truncated: bool,
    stderr_truncated: bool,
) -> str:
    """The System line of a user shell command in ``status``."""
    text = f"Shell · {status}\n$ {command}"
    if stdout:
        text += "\n\nstdout:\n" + stdout + (_SHELL_CONTINUES if stdout_truncated else "")
    if stderr:
        text += "\n\nstderr:\n" + stderr + (_SHELL_CONTINUES if stderr_truncated else "")
    return text


def user_shell_result_text(result: UserShellResult) -> str:
    """The final System line of a finished user shell command."""
    status = result.status
    if status is UserShellStatus.EXITED:
        if result.exit_code == 0:
            label = "done"
        elif result.exit_code is None:
            label = "finished"
        else:
            label = f"failed (exit {result.exit_code})"
    elif status is UserShellStatus.SIGNALED:
        label = f"signaled ({result.signal or 'unknown signal'})"
    elif status is UserShellStatus.TIMED_OUT:
        label = "timed out"
    else:
        label = status.value
    text = user_shell_text(
        result.command,
        f"{label} · {result.duration_ms} ms",
        result.stdout,
        result.stderr,
        result.stdout_truncated,
        result.stderr_truncated,
    )
    if result.error is not None:
        text += "\n\nerror: " + result.error
    return text


# -- streamed chunks ------------------------------------------------------------------


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
    explicit = None if message_id is None else f"{prefix}{_id_text(message_id)}"
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
    last = ctx.current.transcript[-1] if ctx.current.transcript else None
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


def _id_text(value: JSON) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


# -- tool calls -----------------------------------------------------------------------

_PRESENTATION_INPUTS = ("title", "kind", "rawInput", "rawOutput")
_UPDATE_FIELDS = ("title", "kind", "status", "content", "locations", "rawInput", "rawOutput")


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
    stable_id = f"tool:{_id_text(call['toolCallId'])}"
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
    stable_id = f"tool:{_id_text(update.get('toolCallId'))}"
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
    # Kimi reports shell output as raw bytes beside the exit status but omits the ACP
    # terminal reference, so the exact result is the only ownership it publishes.
    if not _raw_result_candidate(call):
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


def _raw_result_candidate(call: JSON) -> bool:
    if not isinstance(call, dict) or call.get("status") not in ("completed", "failed"):
        return False
    raw = call.get("rawOutput")
    if not isinstance(raw, dict):
        return False
    code = raw.get("exit_code")
    return type(code) is int and 0 <= code <= 0xFFFFFFFF


def _unique(matches: Iterator[_T]) -> _T | None:
    """The only match, or None when there is none or more than one."""
    first = next(matches, None)
    return first if first is not None and next(matches, None) is None else None


def _parked_record(item: TranscriptItem | None) -> TerminalOutputRecord | None:
    """The output a parked item holds (a ``terminal:`` item or a fallback tool)."""
    body = None if item is None else item.body
    if isinstance(body, TerminalOutputBody):
        return body.record
    if isinstance(body, ToolBody) and body.terminal_outputs:
        return body.terminal_outputs[0]
    return None


def _unique_raw_terminal(ctx: ProjectionContext, call: JSON) -> str | None:
    """The one parked terminal result a provider call's raw result claims, if exactly one."""
    if not _raw_result_candidate(call):
        return None
    records = map(_parked_record, map(ctx.get, sorted(ctx.index.parked)))
    return _unique(
        record.terminal_id
        for record in records
        if record is not None and _matches_raw_result(record, call)
    )


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
    """The one provider tool whose raw result is ``record``; identical results claim none."""
    return _unique(
        item
        for item in map(ctx.get, sorted(ctx.index.raw_tools))
        if item is not None
        and isinstance(item.body, ToolBody)
        and _matches_raw_result(record, item.body.call)
    )


# -- plans ----------------------------------------------------------------------------


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
