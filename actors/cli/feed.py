"""``relaystore events``, ``show`` and ``stats``: the store's feed, a session's
projection, and the store's figures.

Owns: their parsers and what they print: ``events`` is JSON lines (or ``-o text``) and
may follow (the loop is :mod:`.follow`'s); ``show`` is one JSON document written a
transcript page at a time, read again whole if the session moved meanwhile; ``stats``
is text, or one JSON object with ``--json``.

Must not: write the store (every read opens it read-only), or load the runtime
before the handler runs: the store, its messages and :mod:`msgspec` are imported inside
the handlers, so ``--help`` loads none of them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...domain.errors import InvalidInput
from .follow import events_command, no_session, open_read_only
from .options import checked_id, count, seq
from .output import follow_options, json_option

if TYPE_CHECKING:
    from ..store import EventStore
    from . import Commands

__all__ = ["register"]

_SHOW_ATTEMPTS = 3
"""How often ``show`` reads a session that moves under it again before it gives up."""


def register(commands: Commands) -> None:
    events = commands.add("events", "print API events as JSON lines, oldest first", events_command)
    events.add_argument("--after", type=seq, default=0, metavar="SEQ", help="start after SEQ")
    events.add_argument("--limit", type=count, default=None, metavar="N", help="at most N")
    events.add_argument("--session", type=checked_id("session"), help="only this session's events")
    events.add_argument(
        "--workspace", type=checked_id("workspace"), help="only this workspace's events"
    )
    events.add_argument(
        "--command-id",
        metavar="ID",
        help="only command ID's events (its turn_started, turn_ended, command_ended, "
        "session_fault)",
    )
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    follow_options(events, "event", "--session")

    show = commands.add("show", "print a session's materialized projection as JSON", _show)
    show.add_argument("session", type=checked_id("session"), help="the session id")
    json_option(show, "the projection is one JSON object (the only output)")

    stats = commands.add("stats", "print the store's revision, sessions and event counts", _stats)
    json_option(stats, "print the report as one JSON object")


def _show(args: argparse.Namespace) -> int:
    with open_read_only(args.db) as store, tempfile.TemporaryFile() as staged:
        for _ in range(_SHOW_ATTEMPTS):
            staged.seek(0)
            staged.truncate()
            if _stage_session(store, args.db, args.session, staged.write):
                break
        else:
            raise InvalidInput(
                f"session {args.session} kept changing while it was read "
                f"({_SHOW_ATTEMPTS} tries); show it again, or when its worker is idle"
            )
        staged.seek(0)
        shutil.copyfileobj(staged, sys.stdout.buffer)
    return 0


def _stage_session(
    store: EventStore, db: str, session_id: str, write: Callable[[bytes], object]
) -> bool:
    """Write the session's JSON (indented, as one document) through ``write``, reading its
    transcript a page at a time, so memory holds one page, not the session; False when
    the session moved on between two pages (the output is then incomplete)."""
    import msgspec

    from ...domain.materialized import SystemBody, TranscriptItem
    from ...domain.reads import LoadProjectionTail
    from ..transcript_pages import SessionMoved, stored_items

    tail = store.ask(LoadProjectionTail(session_id=session_id, limit=0))
    if tail is None:
        raise no_session(db, session_id)
    session, frontier = tail.session, tail.session.kept_frontier

    def formatted(value: object, indent: int) -> bytes:
        text = msgspec.json.format(msgspec.json.encode(value), indent=2)
        pad = b" " * indent
        return b"\n".join(pad + line for line in text.split(b"\n"))

    # The document with a marker item where the transcript goes, split around it.
    marker = TranscriptItem(
        stable_id="\x00relaystore-show",
        position=1,
        created_at_ms=0,
        last_changed_at_ms=0,
        body=SystemBody(text=""),
    )
    document = formatted(msgspec.structs.replace(session, transcript=[marker]), 0)
    head, _, rest = document.partition(formatted(marker, 4))
    first = True
    try:
        for item in stored_items(store.ask, session_id, frontier):
            write(head if first else b",\n")
            first = False
            write(formatted(item, 4))
    except SessionMoved:
        return False
    if first:  # no transcript: the document has none (an empty list is left out)
        write(formatted(session, 0))
    else:
        write(rest)
    write(b"\n")
    return True


def _stats(args: argparse.Namespace) -> int:
    from ...domain.messages import LoadStats
    from ...domain.reports import stats_document

    with open_read_only(args.db) as store:
        stats = store.ask(LoadStats())
    if args.json:
        print(json.dumps(stats_document(stats), indent=2))
        return 0
    print(f"schema revision {stats.revision}")
    print(f"sessions {stats.sessions}")
    print(f"latest seq {stats.latest_seq}")
    for kind, total in stats.events_by_kind.items():
        print(f"{kind} {total}")
    for session_id, behind in stats.projection_behind.items():
        print(f"session {session_id}: {behind.describe()}")
    return 0
