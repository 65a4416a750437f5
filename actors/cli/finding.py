"""``relaystore search`` and ``export``: find transcript text, write a session out.

Owns: their parsers and what they print. ``search QUERY`` prints one line per hit
(session, seq, time, role, the snippet with each matching word in ``[...]``), or with
``--json`` one JSON line per hit (:class:`~relaystore.domain.search.SearchHit`); when more
hits follow, one line on stderr gives the ``--cursor`` that prints them. ``export
SESSION`` writes the session as one self-contained Markdown or HTML file
(:mod:`relaystore.domain.export`) to ``-o FILE`` or stdout; a file is written whole or
not at all (a temporary file beside it, renamed).

Must not: write the store (both open it read-only), or load the runtime before a
handler runs: the store's messages are imported inside the handlers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from ...domain.paging import MAX_PAGE_LIMIT
from ...domain.roles import TranscriptRole
from .follow import no_session, open_read_only
from .options import checked_id, count, file_argument, path
from .output import clock, json_option, print_line

if TYPE_CHECKING:
    from ..store import EventStore
    from . import Commands

__all__ = ["register"]

_DEFAULT_HITS = 20


def register(commands: Commands) -> None:
    search = commands.add(
        "search",
        "find transcript items whose text matches a query (SQLite FTS5 syntax: words, "
        '"a phrase", word*, OR, NOT), newest first',
        _search,
    )
    search.add_argument("query", help='what to find; quote words ("...") to find them as they are')
    search.add_argument(
        "--plain",
        action="store_true",
        help="QUERY is plain words, each to match as written (no FTS5 syntax)",
    )
    search.add_argument("--session", type=checked_id("session"), help="only this session's items")
    search.add_argument("--role", choices=get_args(TranscriptRole), help="only items of this role")
    search.add_argument(
        "--limit",
        type=count,
        default=_DEFAULT_HITS,
        metavar="N",
        help=f"at most N hits (default {_DEFAULT_HITS})",
    )
    search.add_argument(
        "--cursor", type=count, metavar="C", help="the hits after an earlier page (stderr says C)"
    )
    json_option(search, "print each hit as a JSON line (as GET /api/v1/search lists it)")

    export = commands.add(
        "export",
        "write a session (facts, errors, questions, transcript) as one Markdown or HTML file "
        "to attach to a bug report",
        _export,
    )
    export.add_argument("session", type=checked_id("session"), help="the session id")
    export.add_argument(
        "--format", choices=("markdown", "html"), default="markdown", help="default markdown"
    )
    file_argument(
        export.add_argument(
            "-o", "--output", type=path, metavar="FILE", help="write FILE (default: stdout)"
        )
    )


def _search(args: argparse.Namespace) -> int:
    from ...domain.search import SearchTranscripts

    with open_read_only(args.db) as store:
        page = store.ask(
            SearchTranscripts(
                query=args.query,
                session_id=args.session,
                role=args.role,
                limit=args.limit,
                cursor=args.cursor,
                plain=args.plain,
            )
        )
    for hit in page.hits:
        if args.json:
            print_line(hit)
            continue
        snippet = "".join(f"[{part.text}]" if part.match else part.text for part in hit.parts)
        print(
            f"{hit.session_id}  {hit.seq}  {clock(hit.last_changed_at_ms)}  {hit.role}: "
            + " ".join(snippet.split())
        )
    if not args.json and not page.hits:
        print(f"no transcript item matches {args.query!r}", file=sys.stderr)
    if page.next_cursor is not None:
        print(f"relaystore: more hits follow: add --cursor {page.next_cursor}", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    import time

    from ...domain.export import SessionExport, render_export
    from ...domain.reads import LoadElicitationAnswers, LoadSessionDetail

    with open_read_only(args.db) as store:
        session = store.ask(LoadSessionDetail(session_id=args.session))
        if session is None:
            raise no_session(args.db, args.session)
        answers = store.ask(LoadElicitationAnswers(session_id=args.session))
        export = SessionExport(
            session=session,
            items=_items(store, args.session),
            events=_events(store, args.session),
            store=os.fspath(args.db),
            exported_at_ms=int(time.time() * 1000),
            answers=() if answers is None else answers.answers,
        )
    text = render_export(export, args.format)
    if args.output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return 0
    _write_whole(Path(args.output), text)
    print(f"relaystore: wrote session {args.session} to {args.output}", file=sys.stderr)
    return 0


def _items(store: EventStore, session_id: str) -> list[Any]:
    """The session's whole transcript, page by page in seq order (the newest version of
    an item that grew while it was read)."""
    from ...domain.reads import LoadTranscriptPage

    items: dict[str, Any] = {}
    after = 0
    while True:
        page = store.ask(
            LoadTranscriptPage(session_id=session_id, after_seq=after, limit=MAX_PAGE_LIMIT)
        )
        if page is None:
            break
        for item in page.items:
            items.pop(item.stable_id, None)
            items[item.stable_id] = item
        if not page.items or page.next_after_seq <= after:
            break
        after = page.next_after_seq
    return sorted(items.values(), key=lambda item: (item.seq, item.position))


def _events(store: EventStore, session_id: str) -> list[dict[str, Any]]:
    """The session's API events, as their wire JSON, in seq order."""
    import json

    from ...domain.api_events import ApiEventFilter
    from ...domain.messages import LoadRawApiEvents

    wanted = ApiEventFilter(session_id=session_id)
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        page = store.ask(LoadRawApiEvents(filter=wanted, after_seq=after, limit=MAX_PAGE_LIMIT))
        found += [json.loads(event.json) for event in page.events]
        if not page.events:
            return found
        after = page.next_after_seq


def _write_whole(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` whole or not at all."""
    folder = target.parent if str(target.parent) else Path(".")
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
