"""The commands that follow a store: ``events`` and ``transcript``, and opening a store
read-only for every reading command.

Guarantees:

* A session the store lacks is refused in the one wording every command and route uses
  (:func:`~relaystore.domain.reads.unknown_session_text`), located at the store; with
  ``--wait`` the command waits for it instead (one line on stderr says so), then prints
  it as if it had been there.
* ``--follow`` prints what commits in this or another process until interrupted, and
  ends (exit 0) within :data:`~relaystore.actors.cli.output.READER_POLL_SECONDS` of its
  reader going away, even while nothing new commits (``events --follow | head``).
* ``-o text`` prints one human line per event or item instead of its JSON line; the
  transcript's text also shows the session's failed turns and faults among its items
  (:mod:`.fault_lines`), every error line starting with ``!``.

Must not: write the store (it is opened read-only), or import the store and its
messages at module level: they are imported inside the functions, so ``--help`` loads no
runtime.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ...domain.errors import InvalidInput
from ...domain.paging import MAX_PAGE_LIMIT
from .fault_lines import FaultLines
from .output import READER_POLL_SECONDS, event_text, item_line, reader_gone

if TYPE_CHECKING:
    from ..store import EventStore

__all__ = [
    "events_command",
    "no_session",
    "open_read_only",
    "require_store",
    "transcript_command",
]


def require_store(db: str) -> None:
    """Refuse a store that is not there, naming it."""
    if not Path(db).exists():
        raise InvalidInput(f"no store at {db}; replay a journal into it first")


def open_read_only(db: str) -> EventStore:
    from ..store import EventStore

    require_store(db)
    return EventStore.open(db, read_only=True, readers=1)


def no_session(db: str, session_id: str) -> InvalidInput:
    """The refusal of a session the store lacks (the one wording, located at ``db``)."""
    from ...domain.reads import unknown_session_text

    return InvalidInput(unknown_session_text(session_id), path=db)


def _idle(store: EventStore, seq: int) -> None:
    """Wait up to a poll for ``seq`` to commit; end the command if its reader is gone."""
    store.wait_for(seq, timeout=READER_POLL_SECONDS)
    if reader_gone():
        raise BrokenPipeError  # the command ends quietly, exit 0


def await_session(store: EventStore, db: str, session_id: str, *, wait: bool) -> None:
    """Return once the store holds ``session_id``; refuse it unless ``wait``."""
    from ...domain.reads import LoadSessionDetail

    announced = False
    while store.ask(LoadSessionDetail(session_id=session_id)) is None:
        if not wait:
            raise no_session(db, session_id)
        if not announced:
            print(
                f"relaystore: waiting for session {session_id} in {db}; Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
            announced = True
        _idle(store, store.latest_seq + 1)


def events_command(args: argparse.Namespace) -> int:
    from ...domain.api_events import ApiEventFilter
    from ...domain.messages import LoadRawApiEvents
    from ...domain.paging import check_cursor

    if args.wait and args.session is None:
        raise InvalidInput("--wait waits for a session: give it with --session")
    event_filter = ApiEventFilter(
        session_id=args.session, workspace_id=args.workspace, command_id=args.command_id
    )
    event_filter.validate()
    remaining = args.limit
    after = args.after
    text = args.output == "text"
    out = sys.stdout.buffer
    with open_read_only(args.db) as store:
        # Refused as the HTTP feed refuses them, rather than printing nothing (or
        # following for ever): a cursor past the newest event, an unknown session.
        check_cursor(after, store.latest_seq)
        if args.session is not None:
            await_session(store, args.db, args.session, wait=args.wait)
        while True:
            limit = MAX_PAGE_LIMIT if remaining is None else min(remaining, MAX_PAGE_LIMIT)
            if limit <= 0:
                return 0
            # The stored bytes in the ApiEvent wire shape: nothing decoded or re-encoded.
            page = store.ask(LoadRawApiEvents(filter=event_filter, after_seq=after, limit=limit))
            if page.events:
                lines = [
                    event_text(event.json).encode() if text else event.json for event in page.events
                ]
                out.write(b"\n".join(lines) + b"\n")
            out.flush()
            if remaining is not None:
                remaining -= len(page.events)
            after = page.next_after_seq
            if page.events:
                continue
            if not args.follow:
                return 0
            _idle(store, after + 1)


def transcript_command(args: argparse.Namespace) -> int:
    import msgspec

    from ...domain.reads import LoadTranscriptPage

    remaining = args.limit
    after = args.after
    roles = tuple(dict.fromkeys(args.role or ()))
    text = args.output == "text"
    out = sys.stdout.buffer
    with open_read_only(args.db) as store:
        await_session(store, args.db, args.session, wait=args.wait)
        faults = FaultLines(store, args.session, after) if text else None
        while remaining is None or remaining > 0:
            page = store.ask(
                LoadTranscriptPage(
                    session_id=args.session,
                    after_seq=after,
                    limit=MAX_PAGE_LIMIT if remaining is None else min(remaining, MAX_PAGE_LIMIT),
                    roles=roles,
                    finished_only=args.finished_only,
                )
            )
            if page is None:
                raise no_session(args.db, args.session)  # deleted while followed
            items = page.items if remaining is None else page.items[:remaining]
            more = bool(page.items) and page.next_after_seq != after
            if faults is not None:  # -o text: the session's faults among its items
                shown = [(item.seq, item_line(msgspec.to_builtins(item))) for item in items]
                through = items[-1].seq if more and items else None
                written = faults.merge(shown, through=through)
                if written:
                    out.write("\n".join(written).encode() + b"\n")
            elif items:
                lines = [msgspec.json.encode(item) for item in items]
                out.write(b"\n".join(lines) + b"\n")
            out.flush()
            if remaining is not None:
                remaining -= len(items)
            moved = page.next_after_seq != after
            after = page.next_after_seq
            if page.items and moved:
                continue
            if not args.follow:
                break
            _idle(store, store.latest_seq + 1)  # items may change without events
    return 0
