"""The ``relaystore`` command: replay journals, verify them, print, follow, serve and keep
the store.

Exit status 0 on success, 1 when the input or the store is bad (one line on stderr, never
a traceback), 2 on a usage error (argparse's usage line: an unknown command, a missing
argument, an option value out of range), 130 when interrupted (Ctrl-C).

``--db PATH`` may come before or after the command; without it the store is
``$RELAYSTORE_DB``, else ``relaystore.sqlite3`` in the current folder.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, get_args

from relaystore.domain.errors import InvalidInput, StoreError

# Each command imports what it runs, when it runs: ``--version``, ``--help`` and a usage
# error load no runtime (no actors, no SQLite, no codec).
if TYPE_CHECKING:
    from relaystore.actors.replay import ReplayReport
    from relaystore.actors.store import EventStore
    from relaystore.domain.materialized import ProjectionBehind
    from relaystore.domain.relay import RelayCursor

__all__ = ["main"]

DEFAULT_DB = "relaystore.sqlite3"
_PROGRESS_BYTES = 4 * 1024 * 1024  # show a progress bar on a terminal above this much journal
_HTTP_MODULES = ("starlette", "sse_starlette", "uvicorn")
_COMPLETION_SHELLS = ("bash", "zsh", "tcsh")
_DEBUG_ENV = "RELAYSTORE_DEBUG"  # set to 1 to see the traceback of an unexpected error
# How shtab completes a path argument, per shell (shtab.FILE, spelled out so that building
# the parser never needs shtab).
_FILE_COMPLETION = {"bash": "_shtab_compgen_files", "zsh": "_files", "tcsh": "f"}


def _version() -> str:
    """The installed distribution's version: what ``relaystore.__version__`` says (the
    command line is below the facade, so it asks the same metadata)."""
    try:
        return importlib.metadata.version("relaystore")
    except importlib.metadata.PackageNotFoundError:  # a bare source tree
        return "0+unknown"


# -- option values: bad ones are usage errors (exit 2) -----------------------------------


def _whole(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _seq(text: str) -> int:
    """A sequence number: 0 up to SQLite's largest integer."""
    from relaystore.domain.integers import INT64_MAX

    value = _whole(text)
    if not 0 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be 0 or more (and at most {INT64_MAX}), got {text}")
    return value


def _count(text: str) -> int:
    """A positive count (``--limit``): 1 up to SQLite's largest integer."""
    from relaystore.domain.integers import INT64_MAX

    value = _whole(text)
    if not 1 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def _port(text: str) -> int:
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 0 (any free one) to 65535, got {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def _host(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the host must not be empty")
    return text


def _path(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("the path must not be empty")
    return text


def _id(kind: str) -> Callable[[str], str]:
    def check(text: str) -> str:
        from relaystore.domain.sessions import validate_id

        try:
            validate_id(kind, text)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(exc.detail) from None
        return text

    check.__name__ = f"{kind} id"
    return check


def _checked(check: Callable[[str], object], name: str) -> Callable[[str], str]:
    def run(text: str) -> str:
        try:
            check(text)
        except InvalidInput as exc:
            raise argparse.ArgumentTypeError(exc.detail) from None
        return text

    run.__name__ = name
    return run


def _nats_name(kind: str) -> Callable[[str], str]:
    from relaystore.actors.nats_common import validate_consumer_name, validate_stream_name

    return _checked(validate_stream_name if kind == "stream" else validate_consumer_name, kind)


def _store_id(text: str) -> str:
    from relaystore.actors.nats_common import validate_store_id

    return _checked(validate_store_id, "store id")(text)


def _nats_servers(text: str) -> str:
    from relaystore.actors.nats_common import validate_servers

    return _checked(validate_servers, "NATS URL")(text)


def _web_origin(text: str) -> str:
    from relaystore.domain.origins import validate_origin

    return _checked(validate_origin, "origin")(text)


def _subject_prefix(text: str) -> str:
    from relaystore.actors.nats_common import validate_subject_prefix

    return _checked(validate_subject_prefix, "subject prefix")(text)


def _nats_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nats",
        type=_nats_servers,
        required=True,
        metavar="URL",
        help="the NATS server(s): nats://HOST:PORT, comma-separated for several",
    )
    parser.add_argument(
        "--stream",
        type=_nats_name("stream"),
        default="RELAYSTORE",
        metavar="NAME",
        help="the JetStream stream (default RELAYSTORE)",
    )
    parser.add_argument(
        "--subject-prefix",
        type=_subject_prefix,
        default="relaystore",
        metavar="PREFIX",
        help="subjects are PREFIX.STORE_ID.WORKSPACE.SESSION (default relaystore)",
    )


# -- the parser ---------------------------------------------------------------------------


def _file_argument(action: argparse.Action) -> None:
    action.complete = _FILE_COMPLETION  # type: ignore[attr-defined]  # read by shtab


class _Parser(argparse.ArgumentParser):
    """The command line's parser: a usage error never shows a credential it echoes
    (an option's value, an unrecognized argument); its subcommands' parsers are too."""

    def error(self, message: str) -> NoReturn:
        from relaystore.domain.redaction import redact

        super().error(redact(message))


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="relaystore",
        description="Replay, verify, read, serve and keep relaystore event stores.",
        epilog="--db may also follow the command. Exit status: 0 success, 1 bad input or "
        "store (one line on stderr), 2 usage error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"relaystore {_version()}")
    db_help = f"the store (default ${{RELAYSTORE_DB}}, else {DEFAULT_DB})"
    _file_argument(
        parser.add_argument("--db", type=_path, default=None, metavar="PATH", help=db_help)
    )
    # The same option after the command; SUPPRESS keeps the value given before it.
    after = _Parser(add_help=False)
    _file_argument(
        after.add_argument(
            "--db", type=_path, default=argparse.SUPPRESS, metavar="PATH", help=db_help
        )
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=text, description=text, parents=[after])

    replay = command(
        "replay",
        "replay relay journals into the store: worker roots, folders of worker roots, "
        "relay-journal/ folders or .jsonl / .jsonl.gz files",
    )
    _file_argument(replay.add_argument("sources", nargs="+", metavar="SOURCE", type=_path))
    replay.add_argument(
        "--session",
        type=_id("session"),
        help="session id (default: relay-state.json, else the folder or file name)",
    )
    replay.add_argument(
        "--workspace", type=_id("workspace"), help="workspace of a session the store lacks"
    )
    replay.add_argument(
        "--from-first",
        action="store_true",
        help="start a session whose journal lost its earlier segments at its first event",
    )
    replay.add_argument(
        "--projection",
        choices=("thread", "process"),
        default="process",
        help="project in worker processes (default) or in this process's threads",
    )
    replay.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: on a terminal, for journals over 4 MiB)",
    )

    verify = command("verify", "check digests and chain continuity, without a store")
    _file_argument(verify.add_argument("sources", nargs="+", metavar="SOURCE", type=_path))
    verify.add_argument("--session", type=_id("session"), help="session id for the sources")
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.add_argument(
        "--from-first",
        action="store_true",
        help="as replay --from-first: accept a journal that lost its earlier segments",
    )

    events = command("events", "print API events as JSON lines, oldest first")
    events.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="start after SEQ")
    events.add_argument("--limit", type=_count, default=None, metavar="N", help="at most N")
    events.add_argument("--session", type=_id("session"))
    events.add_argument("--workspace", type=_id("workspace"))
    events.add_argument("--follow", action="store_true", help="keep printing new events")

    show = command("show", "print a session's materialized projection as JSON")
    show.add_argument("session", type=_id("session"))

    stats = command("stats", "print the store's revision, sessions and event counts")
    stats.add_argument("--json", action="store_true", help="print one JSON object")

    _read_commands(command)

    serve = command(
        "serve", "serve the web viewer, the read routes and the event stream over HTTP, read-only"
    )
    serve.add_argument("--host", type=_host, default="127.0.0.1", help="(default 127.0.0.1)")
    serve.add_argument(
        "--port", type=_port, default=8040, help="(default 8040; 0: a free port, announced)"
    )
    _file_argument(
        serve.add_argument(
            "--token-file",
            type=_path,
            default=None,
            metavar="PATH",
            help="bearer token file, created 0600 on first start (default: DB.api-token)",
        )
    )
    serve.add_argument(
        "--keepalive",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="keepalive comment interval of idle streams (default 15)",
    )
    serve.add_argument(
        "--cors-origin",
        type=_web_origin,
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web origin (scheme://host[:port]) whose pages may call the API with the "
        "bearer token (CORS); repeat for several; others are refused",
    )

    backup = command("backup", "write a consistent copy of the store (safe while it is written)")
    _file_argument(backup.add_argument("destination", metavar="DEST", type=_path))

    command("vacuum", "compact the store after deletes (needs the store's write lock)")
    command(
        "new-store-id",
        "give a store restored from a backup a new id, so that it publishes as a new "
        "store (needs the store's write lock)",
    )

    reproject = command(
        "reproject",
        "rebuild sessions' projections from their relay logs with this build's rules "
        "(appends only the API events the feed lacks)",
    )
    reproject.add_argument(
        "sessions", nargs="*", type=_id("session"), metavar="SESSION", help="(default: all)"
    )
    reproject.add_argument(
        "--behind",
        action="store_true",
        help="only the sessions whose projection is behind their relay log (catch them up)",
    )

    audit = command(
        "audit",
        "re-derive sessions from their relay logs (or the journals given) and compare with "
        "the stored projection and API events; exit 1 on any divergence (reads only)",
    )
    audit.add_argument(
        "sessions", nargs="*", type=_id("session"), metavar="SESSION", help="(default: all)"
    )
    _file_argument(
        audit.add_argument(
            "--journals",
            nargs="+",
            type=_path,
            metavar="SOURCE",
            help="derive from these worker journals instead of the store's relay log",
        )
    )
    audit.add_argument("--json", action="store_true", help="print one JSON object")

    prune = command(
        "prune-log",
        "delete a session's relay log through an ordinal its verified checkpoint covers",
    )
    prune.add_argument("session", type=_id("session"))
    prune.add_argument(
        "--through", type=_count, required=True, metavar="N", help="the last ordinal to delete"
    )

    compact = command(
        "compact", "forget what old tool calls no longer show, behind each verified checkpoint"
    )
    compact.add_argument(
        "session", nargs="?", type=_id("session"), help="one session (default: every session)"
    )

    publish = command(
        "publish",
        "publish every committed API event, session record change and relay log page to "
        "a NATS JetStream stream, read-only and resumable (needs relaystore[nats])",
    )
    _nats_options(publish)
    publish.add_argument(
        "--once", action="store_true", help="publish what is committed now, then exit"
    )
    _replica_commands(command)

    fleet = command("fleet", "read the merged feed of many stores from NATS (relaystore[nats])")
    fleet_commands = fleet.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    fleet_events = fleet_commands.add_parser(
        "events",
        help="print every store's API events as JSON lines {store, seq, event}",
        description="print every store's API events in the stream as JSON lines "
        '{"store": ..., "seq": ..., "event": <the wire object>}, each store in seq order',
    )
    _nats_options(fleet_events)
    fleet_events.add_argument("--store", type=_store_id, metavar="ID", help="one store's events")
    fleet_events.add_argument("--workspace", type=_id("workspace"))
    fleet_events.add_argument("--session", type=_id("session"))
    fleet_events.add_argument(
        "--durable",
        type=_nats_name("durable"),
        metavar="NAME",
        help="a durable consumer: a later run with this name resumes where this one acknowledged",
    )
    fleet_events.add_argument("--follow", action="store_true", help="keep printing new events")

    completion = command("completion", "print a shell completion script (needs shtab)")
    completion.add_argument("shell", choices=_COMPLETION_SHELLS)
    return parser


# -- running ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        if args.db is None:
            args.db = os.environ.get("RELAYSTORE_DB") or DEFAULT_DB
        handler: Callable[[argparse.Namespace], int] = _COMMANDS[args.command]
        if args.command == "completion":
            return _completion(parser, args)
        return handler(args)
    except StoreError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``relaystore events | head``): stop quietly, and keep
        # Python from complaining when it flushes stdout on the way out.
        _silence_stdout()
        return 0
    except OSError as exc:
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename is not None else ""
        return _fail(f"{where}{exc.strerror or exc}")
    except Exception as exc:  # a bug must still end in one line (re-raised on request)
        if os.environ.get(_DEBUG_ENV):
            raise
        return _fail(
            f"unexpected {type(exc).__name__}: {exc} (set {_DEBUG_ENV}=1 for the traceback)"
        )


def _fail(message: str) -> int:
    from relaystore.domain.redaction import redact

    print(f"relaystore: {redact(' '.join(message.split()))}", file=sys.stderr)
    return 1


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


# -- replay -------------------------------------------------------------------------------


@dataclass
class _SessionTotals:
    read: int = 0
    applied: int = 0
    already: int = 0
    written: int = 0
    frontier: RelayCursor | None = None
    held: int = 0
    behind: ProjectionBehind | None = None

    def add(self, report: ReplayReport) -> None:
        self.read += report.read
        self.applied += report.applied
        self.already += report.already_applied
        self.written += report.written
        self.held += report.held
        if report.frontier is not None:
            self.frontier = report.frontier
        if report.behind is not None:
            self.behind = report.behind


def _expand(paths: Sequence[str]) -> list[str]:
    """The sources, with each folder of worker roots replaced by its worker roots."""
    from relaystore.actors.journal.sources import worker_roots

    expanded: list[str] = []
    for path in paths:
        roots = worker_roots(path)
        expanded.extend(map(str, roots) if roots else [path])
    return expanded


def _sources(args: argparse.Namespace) -> list[str]:
    from relaystore.actors.journal import resolve_source

    sources = _expand(args.sources)
    if args.session is not None and len(sources) > len(args.sources):
        sessions = {resolve_source(path).session_id for path in sources}
        if len(sessions) > 1:
            raise InvalidInput(
                f"--session {args.session} would merge {len(sessions)} sessions of a folder "
                "of worker roots into one; leave --session out, or give one worker root"
            )
    return sources


def _replay(args: argparse.Namespace) -> int:
    from relaystore.actors.journal import resolve_source
    from relaystore.actors.replay import replay_source
    from relaystore.actors.store import EventStore

    started = time.monotonic()
    sources = _sources(args)
    sessions: dict[str, _SessionTotals] = {}
    with EventStore.open(args.db, projection=args.projection) as store:
        for path in sources:
            source = resolve_source(path, session_id=args.session)
            progress = _Progress(args.progress, source.size_bytes, source.session_id)
            try:
                report = replay_source(
                    store,
                    source,
                    workspace=args.workspace,
                    on_start=progress.start,
                    on_batch=progress.advance,
                    from_first=args.from_first,
                )
            finally:
                progress.close()
            sessions.setdefault(source.session_id, _SessionTotals()).add(report)
            for tail in report.torn_tails:
                print(
                    f"relaystore: warning: {tail.path}:{tail.line}: torn final line "
                    f"({tail.byte_count} bytes without a newline) was not applied",
                    file=sys.stderr,
                )
    elapsed = max(time.monotonic() - started, 1e-9)
    for session_id, totals in sessions.items():
        if totals.frontier is None:  # nothing to replay into a session the store lacks
            print(
                f"session {session_id}: empty journal, nothing replayed (no session created)",
                file=sys.stderr,
            )
            continue
        frontier = f"{totals.frontier.ordinal} ({totals.frontier.digest[:12]})"
        print(
            f"session {session_id}: {totals.read} read, {totals.applied} applied, "
            f"{totals.already} already applied, {totals.written} API events written, "
            f"frontier {frontier}",
            file=sys.stderr,
        )
        if totals.behind is not None:
            print(
                f"relaystore: warning: session {session_id}: {totals.behind.describe()} "
                "(upgrade relaystore; the session then catches up from its relay log)",
                file=sys.stderr,
            )
    read = sum(totals.read for totals in sessions.values())
    stored = sum(totals.frontier is not None for totals in sessions.values())
    print(
        f"replayed {read} events: "
        f"{sum(totals.applied for totals in sessions.values())} applied, "
        f"{sum(totals.already for totals in sessions.values())} already applied, "
        f"{sum(totals.written for totals in sessions.values())} API events written "
        f"({read / elapsed:,.0f} events/s, {stored} {'session' if stored == 1 else 'sessions'})",
        file=sys.stderr,
    )
    return 0


class _Progress:
    """A tqdm bar on stderr for one source, sized once the replay knows its total.

    ``wanted`` is ``--progress`` (True), ``--no-progress`` (False) or neither (None: a bar
    on a terminal for a journal over 4 MiB).
    """

    def __init__(self, wanted: bool | None, size: int, session_id: str) -> None:
        self.enabled = wanted is True or (
            wanted is None and size >= _PROGRESS_BYTES and _tty(sys.stderr)
        )
        self.session_id = session_id
        self.bar: Any = None

    def start(self, report: ReplayReport) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        self.bar = tqdm(
            desc=self.session_id,
            total=report.expected,
            unit="ev",
            file=sys.stderr,
            disable=False,
            dynamic_ncols=True,
        )

    def advance(self, report: ReplayReport) -> None:
        if self.bar is not None:
            self.bar.update(report.read - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


# -- verify -------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from relaystore.actors.journal import verify_sources

    report = verify_sources(_sources(args), session_id=args.session, from_first=args.from_first)
    starts = {
        session: {"ordinal": start.after.ordinal + 1, "from": start.origin}
        for session, start in report.starts.items()
    }
    if args.json:
        document = {
            "ok": report.ok,
            "records": report.records,
            "valid_digests": report.valid_digests,
            "already_applied": report.already_applied,
            "problem_count": len(report.problems),
            "problems": [
                {
                    "file": str(problem.path),
                    "line": problem.line,
                    "ordinal": problem.ordinal,
                    "fault": problem.kind.value,
                    "message": problem.message,
                }
                for problem in report.problems
            ],
            "torn_tails": [
                {"file": str(tail.path), "line": tail.line, "bytes": tail.byte_count}
                for tail in report.torn_tails
            ],
            "frontiers": {
                session: {"ordinal": cursor.ordinal, "digest": cursor.digest}
                for session, cursor in report.frontiers.items()
            },
            "starts": starts,
            "newer_kinds": [
                {
                    "file": str(newer.path),
                    "line": newer.line,
                    "session_id": newer.session_id,
                    "ordinal": newer.ordinal,
                    "position": newer.position,
                    "kind": newer.kind,
                }
                for newer in report.newer_kinds
            ],
        }
        print(json.dumps(document, indent=2))
        return 0 if report.ok else 1
    for session, start in report.starts.items():
        if start.origin != "genesis":
            print(f"session {session}: {start.note}")
    for problem in report.problems:
        print(str(problem))
    for newer in report.newer_kinds:
        print(f"note: {newer}")
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


# -- events, show, stats ------------------------------------------------------------------


def _require_store(db: str) -> None:
    if not Path(db).exists():
        raise InvalidInput(f"no store at {db}; replay a journal into it first")


def _open_read_only(db: str) -> EventStore:
    from relaystore.actors.store import EventStore

    _require_store(db)
    return EventStore.open(db, read_only=True, readers=1)


def _events(args: argparse.Namespace) -> int:
    from relaystore.domain.api_events import ApiEventFilter
    from relaystore.domain.messages import LoadRawApiEvents
    from relaystore.domain.validation import check_cursor

    event_filter = ApiEventFilter(session_id=args.session, workspace_id=args.workspace)
    remaining = args.limit
    after = args.after
    out = sys.stdout.buffer
    with _open_read_only(args.db) as store:
        # Refused as the HTTP feed refuses them, rather than printing nothing (or
        # following for ever): a cursor past the newest event, an unknown session.
        check_cursor(after, store.latest_seq)
        if args.session is not None:
            _require_session(args.db, args.session)
        while True:
            limit = 1000 if remaining is None else min(remaining, 1000)
            if limit <= 0:
                return 0
            # The stored bytes in the ApiEvent wire shape: nothing decoded or re-encoded.
            page = store.ask(LoadRawApiEvents(filter=event_filter, after_seq=after, limit=limit))
            if page.events:
                out.write(b"\n".join([event.json for event in page.events]) + b"\n")
            out.flush()
            if remaining is not None:
                remaining -= len(page.events)
            after = page.next_after_seq
            if page.events:
                continue
            if not args.follow:
                return 0
            store.wait_for(after + 1, timeout=1.0)


def _require_session(db: str, session_id: str) -> None:
    """Refuse a session the store does not hold, as ``show`` does (one record read)."""
    from relaystore.domain.reads import LoadSessionDetail

    with _open_read_only(db) as store:
        found = store.ask(LoadSessionDetail(session_id=session_id)) is not None
    if not found:
        raise _no_session(db, session_id)


def _no_session(db: str, session_id: str) -> InvalidInput:
    return InvalidInput(f"no session {session_id} in {db}")


_SHOW_ATTEMPTS = 3
"""How often ``show`` reads a session that moves under it again before it gives up."""


def _show(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    with _open_read_only(args.db) as store, tempfile.TemporaryFile() as staged:
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

    from relaystore.actors.transcript_pages import SessionMoved, stored_items
    from relaystore.domain.materialized import SystemBody, TranscriptItem
    from relaystore.domain.reads import LoadProjectionTail

    tail = store.ask(LoadProjectionTail(session_id=session_id, limit=0))
    if tail is None:
        raise _no_session(db, session_id)
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
    from relaystore.domain.messages import LoadStats
    from relaystore.domain.reports import stats_document

    with _open_read_only(args.db) as store:
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


# -- sessions, transcript, history, usage: the read side ---------------------------------


def _read_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    from relaystore.domain.roles import TranscriptRole

    sessions = command("sessions", "list the store's sessions (lifecycle, chat phase, title)")
    sessions.add_argument("--workspace", type=_id("workspace"), help="only this workspace's")
    sessions.add_argument("--json", action="store_true", help="print GET /api/v1/sessions")

    transcript = command("transcript", "print a session's transcript items as JSON lines")
    transcript.add_argument("session", type=_id("session"))
    transcript.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="after SEQ")
    transcript.add_argument("--limit", type=_count, default=None, metavar="N", help="at most N")
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

    history = command("history", "print a page of a session's earlier messages as JSON")
    history.add_argument("session", type=_id("session"))
    before = history.add_mutually_exclusive_group()
    before.add_argument("--before-position", type=_count, metavar="N", help="items before N")
    before.add_argument("--before-id", metavar="ID", help="items before the item ID")
    history.add_argument("--limit", type=_count, default=128, metavar="N", help="(default 128)")

    usage = command("usage", "print a session's recorded turn usage as JSON")
    usage.add_argument("session", type=_id("session"))
    usage.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="after SEQ")
    usage.add_argument("--limit", type=_count, default=200, metavar="N", help="(default 200)")


def _print_json(reply: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.encode(reply) + b"\n")


def _sessions(args: argparse.Namespace) -> int:
    from relaystore.domain.reads import ListSessions

    with _open_read_only(args.db) as store:
        listed = store.ask(ListSessions(workspace_id=args.workspace))
    if args.json:
        _print_json(listed)
        return 0
    for session in listed.sessions:
        print(
            f"{session.id}\t{session.workspace_id}\t{session.lifecycle}\t"
            f"{session.chat_phase}\t{session.title}"
        )
    return 0


def _transcript(args: argparse.Namespace) -> int:
    import msgspec

    from relaystore.domain.reads import LoadTranscriptPage

    remaining = args.limit
    after = args.after
    roles = tuple(dict.fromkeys(args.role or ()))
    out = sys.stdout.buffer
    with _open_read_only(args.db) as store:
        while remaining is None or remaining > 0:
            page = store.ask(
                LoadTranscriptPage(
                    session_id=args.session,
                    after_seq=after,
                    limit=1000 if remaining is None else min(remaining, 1000),
                    roles=roles,
                    finished_only=args.finished_only,
                )
            )
            if page is None:
                raise InvalidInput(f"no session {args.session} in {args.db}")
            items = page.items if remaining is None else page.items[:remaining]
            if items:
                out.write(b"\n".join(msgspec.json.encode(item) for item in items) + b"\n")
            out.flush()
            if remaining is not None:
                remaining -= len(items)
            moved = page.next_after_seq != after
            after = page.next_after_seq
            if page.items and moved:
                continue
            if not args.follow:
                break
            store.wait_for(store.latest_seq + 1, timeout=1.0)  # items may change without events
    return 0


def _history(args: argparse.Namespace) -> int:
    from relaystore.domain.reads import LoadTranscriptHistory

    with _open_read_only(args.db) as store:
        page = store.ask(
            LoadTranscriptHistory(
                session_id=args.session,
                before_position=args.before_position,
                before_id=args.before_id,
                limit=args.limit,
            )
        )
    if page is None:
        raise InvalidInput(f"no session {args.session} in {args.db}")
    _print_json(page)
    return 0


def _usage(args: argparse.Namespace) -> int:
    from relaystore.domain.reads import LoadUsagePage

    with _open_read_only(args.db) as store:
        page = store.ask(
            LoadUsagePage(session_id=args.session, after_seq=args.after, limit=args.limit)
        )
    if page is None:
        raise InvalidInput(f"no session {args.session} in {args.db}")
    _print_json(page)
    return 0


_READ_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sessions": _sessions,
    "transcript": _transcript,
    "history": _history,
    "usage": _usage,
}


# -- publish, fleet -------------------------------------------------------------------------


def _publish(args: argparse.Namespace) -> int:
    from relaystore.actors.nats_common import require_nats

    require_nats("publish")
    _require_store(args.db)
    import asyncio

    return asyncio.run(_publish_until_stopped(args))


@contextlib.contextmanager
def _nats_log(*, publisher: bool) -> Iterator[None]:
    """The publisher's log lines (with ``publisher``) and nats-py's own errors on stderr,
    one line each, credentials masked."""
    import logging

    from relaystore.domain.redaction import redact

    class Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(" ".join(super().format(record).split()))

        def formatException(self, ei: Any) -> str:
            return f"({ei[0].__name__}: {ei[1]})"

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting("relaystore: %(message)s"))
    logs = [logging.getLogger("nats")]
    if publisher:
        logs.append(logging.getLogger("relaystore.actors.nats_publish"))
        logs[-1].setLevel(logging.INFO)
    for log in logs:
        log.addHandler(handler)
    try:
        yield
    finally:
        for log in logs:
            log.removeHandler(handler)


async def _publish_until_stopped(args: argparse.Namespace) -> int:
    import asyncio
    import signal

    from relaystore.actors.aio import AsyncEventStore
    from relaystore.actors.nats_publish import Publisher
    from relaystore.domain.redaction import redact

    with _nats_log(publisher=True):
        async with AsyncEventStore.open(args.db, read_only=True, readers=1) as store:
            publisher = Publisher(
                store,
                args.nats,
                stream=args.stream,
                subject_prefix=args.subject_prefix,
                once=args.once,
            )
            loop = asyncio.get_running_loop()
            loop.add_signal_handler(signal.SIGTERM, publisher.stop)
            print(
                f"relaystore: publishing {args.db} (store {publisher.store_id}) to stream "
                f"{args.stream} on {redact(args.nats)} as {args.subject_prefix}.{publisher.store_id}.>; "
                "Ctrl-C stops",
                file=sys.stderr,
                flush=True,
            )
            await publisher.run()
            figures = publisher.metrics()
            print(
                f"relaystore: stopped at seq {figures.acked_seq} ({figures.published} "
                f"published, {figures.duplicates} duplicates dropped by the server), "
                f"change {figures.acked_change} ({figures.changes_published} published)",
                file=sys.stderr,
            )
    return 0


def _fleet(args: argparse.Namespace) -> int:
    from relaystore.actors.nats_common import require_nats

    require_nats("fleet events")
    import asyncio

    return asyncio.run(_fleet_events(args))


async def _fleet_events(args: argparse.Namespace) -> int:
    from relaystore.actors.fleet import FleetFeed

    out = sys.stdout.buffer
    with _nats_log(publisher=False):
        async with FleetFeed(
            args.nats,
            stream=args.stream,
            subject_prefix=args.subject_prefix,
            store_id=args.store,
            workspace_id=args.workspace,
            session_id=args.session,
            durable=args.durable,
            follow=args.follow,
        ) as feed:
            async for event in feed:
                # Flushed before the feed acknowledges the batch: a crash repeats, never loses.
                out.write(event.line() + b"\n")
                out.flush()
    return 0


def _replica_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``restore`` and ``mirror``: stores filled from a stream (:mod:`relaystore.actors.replica`)."""
    restore = command(
        "restore",
        "restore a published store's sessions (records, relay logs, projections and its "
        "API feed with the same seqs) from a NATS stream into --db; run again to continue",
    )
    _nats_options(restore)
    restore.add_argument("--store", type=_store_id, required=True, metavar="ID")
    restore.add_argument(
        "--session",
        type=_id("session"),
        action="append",
        default=[],
        metavar="S",
        help="only this session (repeat for several; default: every session)",
    )
    mirror = command(
        "mirror",
        "keep --db a read replica of every store published to a NATS stream (serve it "
        "for the whole fleet); rebuildable from the stream",
    )
    _nats_options(mirror)
    mirror.add_argument("--follow", action="store_true", help="keep applying new commits")


def _replica(args: argparse.Namespace) -> int:
    from relaystore.actors.nats_common import require_nats

    require_nats(args.command)
    from relaystore.actors.replica import run_command

    return run_command(args)


# -- serve, backup, vacuum, completion -----------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    missing = [name for name in _HTTP_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidInput(
            f"serve needs {', '.join(missing)}, which are not installed: "
            'pip install "relaystore[http]"'
        )
    # Refuse a missing or foreign store in one line before the token file is made.
    with _open_read_only(args.db):
        pass
    from relaystore.actors import http

    token_file = Path(args.token_file) if args.token_file else Path(f"{args.db}.api-token")
    keepalive = http.KEEPALIVE_SECONDS if args.keepalive is None else args.keepalive

    def announce(url: str) -> None:  # called once the port is bound and the store open
        print(
            f"relaystore: serving {args.db} at {url}/api/v1/events "
            f"(bearer token in {token_file}; the viewer at {url}/); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )

    stopped_by = http.serve(
        Path(args.db),
        host=args.host,
        port=args.port,
        token_file=token_file,
        keepalive=keepalive,
        announce=announce,
        cors_origins=args.cors_origin,
    )
    # Ctrl-C exits 130 as for every command (a script running serve sees the interrupt);
    # SIGTERM, how a service manager stops it, is a normal stop.
    return 130 if stopped_by == signal.SIGINT else 0


def _backup(args: argparse.Namespace) -> int:
    from relaystore.domain.messages import BackupStore

    folder = Path(args.destination).absolute().parent
    if not folder.is_dir():
        raise InvalidInput(
            f"the backup's folder {folder} does not exist; create it first",
            path=args.destination,
        )
    with _open_read_only(args.db) as store:
        report = store.ask(BackupStore(destination=args.destination))
    print(
        f"backed up {args.db} to {report.path}: {report.pages} pages, "
        f"latest seq {report.latest_seq}, schema revision {report.schema_revision}"
    )
    return 0


def _vacuum(args: argparse.Namespace) -> int:
    from relaystore.actors.store import EventStore
    from relaystore.domain.messages import CompactStore

    _require_store(args.db)
    with EventStore.open(args.db, readers=1) as store:
        report = store.ask(CompactStore())
    print(
        f"vacuumed {args.db}: {report.pages_before} pages before, {report.pages_after} after "
        f"({report.pages_before - report.pages_after} reclaimed)"
    )
    return 0


def _new_store_id(args: argparse.Namespace) -> int:
    from relaystore.storage.connection import open_writer
    from relaystore.storage.schema import renew_store_id

    _require_store(args.db)
    handle = open_writer(args.db)
    try:
        old, new = renew_store_id(handle.connection)
    finally:
        handle.close()
    print(f"store {args.db} was {old}, is now {new}; it publishes as a new store from seq 1")
    return 0


def _compact(args: argparse.Namespace) -> int:
    from relaystore.actors.store import EventStore
    from relaystore.domain.messages import CompactTranscript, LoadState

    _require_store(args.db)
    with EventStore.open(args.db, readers=1) as store:
        if args.session is not None:
            sessions = [args.session]
        else:
            sessions = [
                sid for sid, record in store.ask(LoadState()).sessions.items() if record.checkpoint
            ]
        total_items = total_bytes = 0
        for session_id in sessions:
            items = reclaimed = 0
            while True:  # one transaction per pass: the writer serves between them
                report = store.ask(CompactTranscript(session_id=session_id))
                items, reclaimed = items + report.items, reclaimed + report.bytes
                if not report.remaining or not report.items:
                    break
            print(
                f"session {session_id}: {items} tool calls compacted, {reclaimed} bytes reclaimed"
            )
            total_items, total_bytes = total_items + items, total_bytes + reclaimed
    print(
        f"compacted {total_items} tool calls in {len(sessions)} sessions, {total_bytes} bytes reclaimed"
    )
    return 0


def _session_ids(store: EventStore, given: Sequence[str]) -> list[str]:
    """The sessions named, else every session of the store."""
    from relaystore.domain.messages import LoadState

    return list(given) if given else sorted(store.ask(LoadState()).sessions)


def _reproject(args: argparse.Namespace) -> int:
    from relaystore.actors.store import EventStore
    from relaystore.domain.messages import LoadStats, Reproject

    _require_store(args.db)
    refused = 0
    with EventStore.open(args.db, readers=1) as store:
        sessions = _session_ids(store, args.sessions)
        if args.behind:
            behind = store.ask(LoadStats()).projection_behind
            sessions = [session_id for session_id in sessions if session_id in behind]
            if not sessions:
                print("no session is behind its relay log")
        for session_id in sessions:
            try:
                report = store.ask(Reproject(session_id=session_id))
            except StoreError as exc:
                refused += 1
                print(f"relaystore: {' '.join(str(exc).split())}", file=sys.stderr)
                continue
            appended = ", ".join(
                f"{n} {kind}" for kind, n in sorted(report.appended_by_kind.items())
            )
            changed = report.first_changed_position
            print(
                f"reprojected {session_id}: {report.events_reprojected} events; "
                f"API events appended: {appended or 'none'}; first changed transcript "
                f"position: {'none' if changed is None else changed}"
            )
            if report.caught_up_from is not None:
                print(
                    f"  caught up: the projection was behind at ordinal {report.caught_up_from}"
                    " and now reaches the frontier"
                    if report.behind is None
                    else f"  caught up from ordinal {report.caught_up_from}"
                )
            if report.behind is not None:
                print(f"  still {report.behind.describe()}")
    return 1 if refused else 0


def _audit(args: argparse.Namespace) -> int:
    import msgspec

    from relaystore.actors.audit import audit_session
    from relaystore.actors.journal import JournalSource, resolve_source

    journals: dict[str, JournalSource] = {}
    for path in _expand(args.journals or []):
        source = resolve_source(path)
        if source.session_id in journals:
            raise InvalidInput(
                f"two journals of session {source.session_id} were given ({journals[source.session_id].path}"
                f" and {source.path}); audit one at a time"
            )
        journals[source.session_id] = source
    results = []
    with _open_read_only(args.db) as store:
        if args.sessions:
            wanted = list(args.sessions)
        elif journals:
            wanted = sorted(journals)
        else:
            wanted = _session_ids(store, [])
        for session_id in wanted:
            results.append(audit_session(store, session_id, journals.get(session_id)))
    if args.json:
        document = {
            "matches": all(result.matches for result in results),
            "sessions": msgspec.to_builtins(results),
        }
        print(json.dumps(document, indent=2))
    else:
        for result in results:
            if result.refused is not None:
                print(f"{result.session_id}: cannot audit ({result.refused})")
            elif result.divergence is not None:
                print(f"{result.session_id}: diverges from {result.source} at {result.divergence}")
            else:
                print(
                    f"{result.session_id}: matches {result.source} ({result.events} events, "
                    f"{result.api_events} API events)"
                )
    return 0 if all(result.matches for result in results) else 1


def _prune_log(args: argparse.Namespace) -> int:
    from relaystore.actors.store import EventStore
    from relaystore.domain.messages import PruneRelayLog

    _require_store(args.db)
    with EventStore.open(args.db, readers=1) as store:
        report = store.ask(PruneRelayLog(session_id=args.session, through_ordinal=args.through))
    starts = "empty" if report.log_starts_at is None else f"at ordinal {report.log_starts_at}"
    print(
        f"pruned the relay log of {report.session_id}: {report.pages_pruned} pages, "
        f"{report.events_pruned} events; it now starts {starts}"
    )
    return 0


def _completion(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    try:
        shtab = importlib.import_module("shtab")  # optional: relaystore[completion]
    except ImportError:
        raise InvalidInput(
            'completion needs shtab, which is not installed: pip install "relaystore[completion]"'
        ) from None
    script: str = shtab.complete(parser, shell=args.shell)
    sys.stdout.write(script if script.endswith("\n") else script + "\n")
    return 0


def _no_handler(args: argparse.Namespace) -> int:  # pragma: no cover - main dispatches it
    raise AssertionError(args.command)


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "replay": _replay,
    "verify": _verify,
    "events": _events,
    "show": _show,
    "stats": _stats,
    "serve": _serve,
    "backup": _backup,
    "vacuum": _vacuum,
    "new-store-id": _new_store_id,
    "prune-log": _prune_log,
    "compact": _compact,
    "publish": _publish,
    "fleet": _fleet,
    "reproject": _reproject,
    "audit": _audit,
    "restore": _replica,
    "mirror": _replica,
    "completion": _no_handler,
    **_READ_COMMANDS,
}


if __name__ == "__main__":
    sys.exit(main())
