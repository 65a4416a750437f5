"""A session written out for a person: one self-contained Markdown or HTML file.

What ``relaystore export`` writes, to attach to a bug report: the session's facts; its
errors and faults first (:mod:`relaystore.domain.faults`: failed or interrupted turns,
session faults, failed commands, failing tool calls and shell commands); the questions
it asked and how each was resolved (the journal's action), with who answered and what
where an answer was recorded (a secret field masked, as the store keeps it); then the whole transcript in order, each item with
its seq, time and role, a turn that failed marked where it ended (its completed ordinal
is a transcript seq).

Guarantees: everything the session holds is text in the file, never markup: HTML is
escaped (``html.escape``, quotes too) and styled by one inline ``<style>``, no script
and nothing fetched; in Markdown each item's text is a fenced block whose fence is
longer than any run of backticks in it, and the facts' values are escaped.

Pure: :func:`render_export` turns what the command read (:class:`SessionExport`) into
the file's text; it reads no store and writes no file.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from .faults import event_fault, item_fault
from .read_replies import ApiSession, ElicitationAnswer, TranscriptItemView
from .text_formats import utc_clock

__all__ = ["EXPORT_FORMATS", "ExportFormat", "SessionExport", "render_export"]

ExportFormat = Literal["markdown", "html"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("markdown", "html")


@dataclass(frozen=True, slots=True)
class SessionExport:
    """What an export shows: the session, its transcript in seq order, its API events
    (their wire JSON, in seq order), where it was read and when, and the answers
    recorded for its questions."""

    session: ApiSession
    items: Sequence[TranscriptItemView]
    events: Sequence[Mapping[str, Any]]
    store: str
    exported_at_ms: int
    answers: Sequence[ElicitationAnswer] = ()


@dataclass(slots=True)
class _Entry:
    """One line of the transcript as exported: an item, or a turn's failed end."""

    seq: int
    at_ms: int | None
    label: str
    text: str
    fault: str | None = None


_NOT_ANSWERED = "not answered"


@dataclass(slots=True)
class _Question:
    id: str
    asked_at_ms: int | None
    message: str
    fields: list[str] = field(default_factory=list)
    answer: str = _NOT_ANSWERED


def _clock(at_ms: object) -> str:
    return utc_clock(at_ms, " UTC")


def _facts(export: SessionExport) -> list[tuple[str, str]]:
    session = export.session
    facts = [
        ("session", session.id),
        ("title", session.title),
        ("workspace", session.workspace_id),
        ("harness", session.harness_kind),
        ("profile", session.profile_id),
        ("state", f"{session.state} ({session.lifecycle}, chat {session.chat_phase})"),
        ("created", session.created_at),
        ("updated", session.updated_at),
    ]
    if session.error:
        facts.append(("error", session.error))
    outcome = session.last_turn_outcome
    if outcome is not None:
        facts.append(("last turn", _kind(msgspec.to_builtins(outcome.result()))))
    facts += [
        ("transcript items", str(len(export.items))),
        ("store", export.store),
        ("exported", _clock(export.exported_at_ms)),
    ]
    return facts


def _kind(result: Mapping[str, Any]) -> str:
    text = str(result.get("kind"))
    if result.get("reason"):
        text += f" ({result['reason']})"
    return text


def _faults(export: SessionExport) -> list[tuple[str, str]]:
    """Every error and fault, in order: (when, what)."""
    found: list[tuple[int, str, str]] = []
    for event in export.events:
        fault = event_fault(event)
        if fault is not None:
            seq = event.get("seq")
            found.append((0, _clock(event.get("recorded_at_ms")), f"event {seq}: {fault}"))
    for item in export.items:
        fault = item_fault(msgspec.to_builtins(item))
        if fault is not None:
            found.append((1, _clock(item.last_changed_at_ms), f"item {item.seq}: {fault}"))
    return [(when, what) for _, when, what in found]


def _entries(export: SessionExport) -> list[_Entry]:
    entries = [
        _Entry(
            seq=item.seq,
            at_ms=item.last_changed_at_ms,
            label=item.role,
            text=item.text,
            fault=item_fault(msgspec.to_builtins(item)),
        )
        for item in export.items
    ]
    for event in export.events:  # a failed turn, where it ended
        fault = event_fault(event) if event.get("type") == "turn_ended" else None
        turn = event.get("data", {}).get("turn") if isinstance(event.get("data"), Mapping) else None
        ended = turn.get("completed_ordinal") if isinstance(turn, Mapping) else None
        if fault is not None and isinstance(ended, int):
            entries.append(_Entry(ended, event.get("recorded_at_ms"), "turn ended", "", fault))
    entries.sort(key=lambda entry: entry.seq)  # stable: an item before its turn's end
    return entries


def _questions(export: SessionExport) -> list[_Question]:
    asked: dict[str, _Question] = {}
    for event in export.events:
        data = event.get("data")
        if not isinstance(data, Mapping):
            continue
        request = data.get("request")
        if event.get("type") == "input_required" and isinstance(request, Mapping):
            ident = str(request.get("id"))
            labels = [
                str(each.get("label") or each.get("id") or each.get("name"))
                for each in request.get("fields") or []
                if isinstance(each, Mapping)
            ]
            asked[ident] = _Question(
                ident, event.get("recorded_at_ms"), str(request.get("message", "")), labels
            )
        elif event.get("type") == "input_resolved":
            question = asked.get(str(data.get("elicitation_id")))
            if question is not None:
                question.answer = f"{data.get('action')} at {_clock(event.get('recorded_at_ms'))}"
    for given in export.answers:  # who answered and what, where it was recorded
        question = asked.get(given.elicitation_id)
        if question is not None:
            said = f"answered by {given.answered_by} at {_clock(given.answered_at_ms)}: "
            said += given.answer
            waiting = question.answer == _NOT_ANSWERED
            question.answer = said if waiting else f"{question.answer}; {said}"
    return list(asked.values())


def render_export(export: SessionExport, form: ExportFormat) -> str:
    """The file's text: Markdown or HTML (see the module doc)."""
    if form == "html":
        return _html(export)
    return _markdown(export)


# -- Markdown ---------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def _md(text: str) -> str:
    """``text`` as literal Markdown on one line: special characters escaped, ``<`` and
    ``&`` as entities (no HTML passes through)."""
    flat = " ".join(text.split())
    flat = flat.replace("&", "&amp;").replace("<", "&lt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat)


def _fenced(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _markdown(export: SessionExport) -> str:
    out = [f"# Session {_md(export.session.title or export.session.id)}", ""]
    out += [f"- **{name}**: {_md(value)}" for name, value in _facts(export)]
    faults = _faults(export)
    out += ["", f"## Errors and faults ({len(faults)})", ""]
    out += [f"- **!** {_md(when)}: {_md(what)}" for when, what in faults] or ["None."]
    questions = _questions(export)
    out += ["", f"## Questions ({len(questions)})", ""]
    for question in questions:
        out.append(f"- {_md(_clock(question.asked_at_ms))}: {_md(question.message)}")
        if question.fields:
            out.append(f"  - fields: {_md(', '.join(question.fields))}")
        out.append(f"  - answer: {_md(question.answer)}")
    if not questions:
        out.append("None.")
    out += ["", "## Transcript", ""]
    for entry in _entries(export):
        mark = f" — **! {_md(entry.fault)}**" if entry.fault else ""
        out.append(f"### {entry.seq} · {_md(entry.label)} · {_md(_clock(entry.at_ms))}{mark}")
        out.append("")
        if entry.text:
            out += [_fenced(entry.text), ""]
    return "\n".join(out).rstrip() + "\n"


# -- HTML -------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ccc; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
.entry { border-left: 3px solid #ccc; margin: .8em 0; padding: .2em .8em; }
.entry .head { color: #555; font-size: .9em; }
.entry pre { white-space: pre-wrap; word-break: break-word; margin: .3em 0; }
.role-user { border-color: #2b6cb0; } .role-agent { border-color: #2f855a; }
.fault { border-color: #c53030; background: #fff5f5; }
.fault .mark, li.fault { color: #c53030; font-weight: bold; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html(export: SessionExport) -> str:
    title = _e(export.session.title or export.session.id)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Session {title}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>Session {title}</h1>",
        '<dl class="facts">',
    ]
    out += [f"<dt>{_e(name)}</dt><dd>{_e(value)}</dd>" for name, value in _facts(export)]
    out.append("</dl>")
    faults = _faults(export)
    out.append(f"<h2>Errors and faults ({len(faults)})</h2>")
    if faults:
        out.append("<ul>")
        out += [f'<li class="fault">! {_e(when)}: {_e(what)}</li>' for when, what in faults]
        out.append("</ul>")
    else:
        out.append("<p>None.</p>")
    questions = _questions(export)
    out.append(f"<h2>Questions ({len(questions)})</h2>")
    if questions:
        out.append("<ul>")
        for question in questions:
            fields = f"<br>fields: {_e(', '.join(question.fields))}" if question.fields else ""
            out.append(
                f"<li>{_e(_clock(question.asked_at_ms))}: {_e(question.message)}{fields}"
                f"<br>answer: {_e(question.answer)}</li>"
            )
        out.append("</ul>")
    else:
        out.append("<p>None.</p>")
    out.append("<h2>Transcript</h2>")
    for entry in _entries(export):
        kind = " fault" if entry.fault else ""
        role = re.sub(r"[^a-z_]", "_", entry.label)
        mark = f' <span class="mark">! {_e(entry.fault)}</span>' if entry.fault else ""
        out.append(f'<div class="entry role-{role}{kind}">')
        out.append(
            f'<div class="head">{entry.seq} · {_e(entry.label)} · '
            f"{_e(_clock(entry.at_ms))}{mark}</div>"
        )
        if entry.text:
            out.append(f"<pre>{_e(entry.text)}</pre>")
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
