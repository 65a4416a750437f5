"""The ``relaystore`` command: replay journals, verify them, print or follow the feed.

Exit status 0 on success, 1 when the input or the store is bad (one line on stderr),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from relaystore.actors.journal import resolve_source, verify_sources
from relaystore.actors.replay import BATCH, replay_source
from relaystore.actors.store import EventStore
from relaystore.domain.api_events import ApiEventFilter
from relaystore.domain.errors import InvalidInput, StoreError
from relaystore.domain.messages import LoadApiEvents, LoadMaterializedSession
from relaystore.storage.connection import open_reader
from relaystore.storage.stats import load_stats

__all__ = ["main"]

DEFAULT_DB = "relaystore.sqlite3"
_PROGRESS_BYTES = 4 * 1024 * 1024  # show a progress bar above this much journal


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="relaystore", description="Replay, verify and read relaystore event stores."
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("RELAYSTORE_DB", DEFAULT_DB),
        help=f"the store (default ${{RELAYSTORE_DB}} or {DEFAULT_DB})",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    replay = commands.add_parser("replay", help="replay relay journals into the store")
    replay.add_argument("sources", nargs="+", metavar="SOURCE")
    replay.add_argument(
        "--session", help="session id (default: relay-state.json, else the file stem)"
    )
    replay.add_argument("--workspace", help="workspace of a session the store lacks")
    verify = commands.add_parser("verify", help="check digests and chain continuity")
    verify.add_argument("sources", nargs="+", metavar="SOURCE")
    verify.add_argument("--session", help="session id for the sources")
    events = commands.add_parser("events", help="print API events as JSON lines")
    events.add_argument("--after", type=int, default=0)
    events.add_argument("--limit", type=int, default=None, help="print at most N events")
    events.add_argument("--session")
    events.add_argument("--workspace")
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    show = commands.add_parser("show", help="print a session's materialized projection")
    show.add_argument("session")
    commands.add_parser("stats", help="print the store's revision, sessions and event counts")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
        if args.command == "verify":
            return _verify(args)
        if args.command == "events":
            return _events(args)
        if args.command == "show":
            return _show(args)
        return _stats(args)
    except StoreError as exc:
        print(f"relaystore: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


# -- replay -----------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    started = time.monotonic()
    read = applied = already = 0
    with EventStore.open(args.db) as store:
        first_seq = store.latest_seq
        for path in args.sources:
            source = resolve_source(path, session_id=args.session)
            progress = _progress(source.size_bytes, source.session_id)
            try:
                report = replay_source(
                    store,
                    source,
                    workspace=args.workspace,
                    on_batch=None if progress is None else _advance(progress),
                )
            finally:
                if progress is not None:
                    progress.close()
            read, applied = read + report.read, applied + report.applied
            already += report.already_applied
            for tail in report.torn_tails:
                print(
                    f"relaystore: warning: {tail.path}:{tail.line}: torn final line "
                    f"({tail.byte_count} bytes without a newline) was not applied",
                    file=sys.stderr,
                )
        written = store.latest_seq - first_seq
    elapsed = max(time.monotonic() - started, 1e-9)
    print(
        f"replayed {read} events: {applied} applied, {already} already "
        f"applied, {written} API events written ({read / elapsed:,.0f} events/s)",
        file=sys.stderr,
    )
    return 0


def _advance(progress: Any) -> Callable[[object], None]:
    return lambda _report: progress.update(BATCH)


def _progress(size: int, session_id: str) -> Any:
    if size < _PROGRESS_BYTES:
        return None
    from tqdm import tqdm

    return tqdm(desc=session_id, unit="ev", file=sys.stderr, disable=None)


# -- verify, events, show, stats --------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    report = verify_sources(args.sources, session_id=args.session)
    for problem in report.problems:
        print(str(problem))
    for tail in report.torn_tails:
        print(
            f"warning: {tail.path}:{tail.line}: torn final line ({tail.byte_count} bytes) ignored"
        )
    duplicates = (
        f", {report.already_applied} already applied (duplicates)" if report.already_applied else ""
    )
    print(
        f"{report.records} records, {report.valid_digests} valid digests, "
        f"{len(report.problems)} problems{duplicates}"
    )
    return 0 if report.ok else 1


def _open_read_only(db: str) -> EventStore:
    if not Path(db).exists():
        raise InvalidInput(f"no store at {db}; replay a journal into it first")
    return EventStore.open(db, read_only=True, readers=1)


def _events(args: argparse.Namespace) -> int:
    event_filter = ApiEventFilter(session_id=args.session, workspace_id=args.workspace)
    remaining = args.limit
    after = args.after
    out = sys.stdout.buffer
    with _open_read_only(args.db) as store:
        while True:
            limit = 1000 if remaining is None else min(remaining, 1000)
            if limit <= 0:
                return 0
            page = store.ask(LoadApiEvents(filter=event_filter, after_seq=after, limit=limit))
            for event in page.events:
                out.write(msgspec.json.encode(event) + b"\n")
            out.flush()
            if remaining is not None:
                remaining -= len(page.events)
            after = page.next_after_seq
            if page.events:
                continue
            if not args.follow:
                return 0
            store.wait_for(after + 1, timeout=1.0)


def _show(args: argparse.Namespace) -> int:
    with _open_read_only(args.db) as store:
        session = store.ask(LoadMaterializedSession(session_id=args.session))
    if session is None:
        raise InvalidInput(f"no session {args.session} in {args.db}")
    sys.stdout.buffer.write(msgspec.json.format(msgspec.json.encode(session), indent=2) + b"\n")
    return 0


def _stats(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        raise InvalidInput(f"no store at {args.db}; replay a journal into it first")
    connection = open_reader(args.db)
    try:
        stats = load_stats(connection)
    finally:
        connection.close()
    print(f"schema revision {stats.revision}")
    print(f"sessions {stats.sessions}")
    print(f"latest seq {stats.latest_seq}")
    for kind, total in stats.events_by_kind.items():
        print(f"{kind} {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
