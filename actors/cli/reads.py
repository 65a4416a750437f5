"""``relaystore sessions``, ``subagents``, ``transcript``, ``history`` and ``usage``: the
read side, as the HTTP read routes answer it.

Owns: their parsers and what they print: ``sessions`` is text lines, or one JSON line
per session with ``--json`` (``--no-all``: top-level sessions only); ``subagents`` is
one text line per child, or with ``--json`` the one object ``GET .../subagents``
answers; ``transcript`` is JSON lines (or ``-o text``) and may follow
(the loop is :mod:`.follow`'s); ``history`` and ``usage`` print one page as one JSON
object.

Must not: write the store (every read opens it read-only), or load the runtime before
the handler runs: the store's messages (and :mod:`msgspec`) are imported inside the
handlers, so ``--help`` loads none of them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, get_args

from ...domain.paging import DEFAULT_HISTORY_LIMIT, DEFAULT_PAGE_LIMIT
from ...domain.roles import TranscriptRole
from .follow import no_session, open_read_only, transcript_command
from .options import checked_id, count, seq
from .output import follow_options, json_option, print_line

if TYPE_CHECKING:
    from . import Commands

__all__ = ["register"]


def register(commands: Commands) -> None:
    sessions = commands.add(
        "sessions", "list the store's sessions (lifecycle, chat phase, title)", _sessions
    )
    sessions.add_argument("--workspace", type=checked_id("workspace"), help="only this workspace's")
    sessions.add_argument(
        "--all",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="list sub-agent sessions too (the default); --no-all lists top-level sessions "
        "only (as GET /api/v1/sessions?all=false)",
    )
    json_option(sessions, "print each session as a JSON line (as GET /api/v1/sessions lists it)")

    subagents = commands.add(
        "subagents", "list a session's sub-agents (task, lifecycle, chat phase, title)", _subagents
    )
    subagents.add_argument("session", type=checked_id("session"), help="the parent session id")
    json_option(subagents, "print the list as one JSON object (as GET .../subagents answers)")

    transcript = commands.add(
        "transcript", "print a session's transcript items as JSON lines", transcript_command
    )
    transcript.add_argument("session", type=checked_id("session"), help="the session id")
    transcript.add_argument("--after", type=seq, default=0, metavar="SEQ", help="after SEQ")
    transcript.add_argument("--limit", type=count, default=None, metavar="N", help="at most N")
    transcript.add_argument(
        "--role",
        action="append",
        choices=get_args(TranscriptRole),
        default=None,
        help="only items of this role (repeatable)",
    )
    transcript.add_argument(
        "--finished-only",
        action="store_true",
        help="only agent messages that finished streaming (implies --role agent); the "
        "cursor stops before the first one still open",
    )
    transcript.add_argument("--follow", action="store_true", help="keep printing new items")
    follow_options(transcript, "item", "SESSION")

    history = commands.add(
        "history", "print a page of a session's earlier messages as JSON", _history
    )
    history.add_argument("session", type=checked_id("session"), help="the session id")
    before = history.add_mutually_exclusive_group()
    before.add_argument("--before-position", type=count, metavar="N", help="items before N")
    before.add_argument("--before-id", metavar="ID", help="items before the item ID")
    history.add_argument(
        "--limit",
        type=count,
        default=DEFAULT_HISTORY_LIMIT,
        metavar="N",
        help=f"at most N items (default {DEFAULT_HISTORY_LIMIT})",
    )
    json_option(history, "the page is one JSON object (the only output)")

    usage = commands.add("usage", "print a session's recorded turn usage as JSON", _usage)
    usage.add_argument("session", type=checked_id("session"), help="the session id")
    usage.add_argument("--after", type=seq, default=0, metavar="SEQ", help="after SEQ")
    usage.add_argument(
        "--limit",
        type=count,
        default=DEFAULT_PAGE_LIMIT,
        metavar="N",
        help=f"at most N turns (default {DEFAULT_PAGE_LIMIT})",
    )
    json_option(usage, "the page is one JSON object (the only output)")


def _sessions(args: argparse.Namespace) -> int:
    from ...domain.reads import ListSessions

    with open_read_only(args.db) as store:
        listed = store.ask(ListSessions(workspace_id=args.workspace, all=args.all))
    if args.json:
        for session in listed.sessions:
            print_line(session)
        return 0
    for session in listed.sessions:
        print(
            f"{session.id}\t{session.workspace_id}\t{session.lifecycle}\t"
            f"{session.chat_phase}\t{session.title}"
        )
    return 0


def _subagents(args: argparse.Namespace) -> int:
    from ...domain.reads import ListSubagents

    with open_read_only(args.db) as store:
        listed = store.ask(ListSubagents(parent_session_id=args.session))
    if listed is None:
        raise no_session(args.db, args.session)
    if args.json:
        print_line(listed)  # one object, on one line
        return 0
    for child in listed.subagents:
        session = child.session
        print(
            f"{session.id}\t{child.task_name}\t{session.lifecycle}\t"
            f"{session.chat_phase}\t{session.title}"
        )
    return 0


def _history(args: argparse.Namespace) -> int:
    from ...domain.reads import LoadTranscriptHistory

    with open_read_only(args.db) as store:
        page = store.ask(
            LoadTranscriptHistory(
                session_id=args.session,
                before_position=args.before_position,
                before_id=args.before_id,
                limit=args.limit,
            )
        )
    if page is None:
        raise no_session(args.db, args.session)
    print_line(page)  # one page: one JSON object, on one line
    return 0


def _usage(args: argparse.Namespace) -> int:
    from ...domain.reads import LoadUsagePage

    with open_read_only(args.db) as store:
        page = store.ask(
            LoadUsagePage(session_id=args.session, after_seq=args.after, limit=args.limit)
        )
    if page is None:
        raise no_session(args.db, args.session)
    print_line(page)  # one page: one JSON object, on one line
    return 0
