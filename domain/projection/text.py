"""Text the projection shows: terminal sanitizing, hidden prompt context, titles, shell lines."""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..materialized import MaterializedSession, TranscriptItem, UserBody
from ..relay.payloads import UserShellResult, UserShellStatus
from ..wire import JSON

__all__ = [
    "config_command_text",
    "materialized_chunks_text",
    "materialized_content_text",
    "normalize_session_title",
    "provisional_session_title",
    "resolved_title",
    "sanitize_terminal_text",
    "strip_hidden_prompt_context",
    "user_shell_result_text",
    "user_shell_text",
]
_MAX_TITLE_CHARS = 64
_SHELL_CONTINUES = "\n[output continues; final tail will be shown on completion]"


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


def materialized_chunks_text(chunks: Iterable[JSON]) -> str:
    """The visible text of streamed message chunks (``{"content": block, ...}``): their
    blocks' texts joined without separators, then hidden controller context removed."""
    joined = "".join(
        _block_text(chunk["content"])
        for chunk in chunks
        if isinstance(chunk, dict) and chunk.get("content") is not None
    )
    return strip_hidden_prompt_context(sanitize_terminal_text(joined))


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


def resolved_title(
    session: MaterializedSession, transcript: Iterable[TranscriptItem]
) -> str | None:
    """The session's title, else one derived from its first titled prompt (``transcript``
    is the session's, which a projection keeps apart from ``session``)."""
    if session.session_title is not None:
        title = normalize_session_title(session.session_title)
        if title is not None:
            return title
    for item in transcript:
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
