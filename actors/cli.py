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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, get_args

from ..domain.errors import InvalidInput, StoreError
from ..domain.paging import DEFAULT_HISTORY_LIMIT, DEFAULT_PAGE_LIMIT
from .cli_output import (
    follow_options,
    is_tty,
    json_option,
    plural,
    print_line,
    print_object,
)
from .cli_reads import (
    events_command,
    no_session,
    open_read_only,
    require_store,
    transcript_command,
)

# Each command imports what it runs, when it runs: ``--version``, ``--help`` and a usage
# error load no runtime (no actors, no SQLite, no codec).
if TYPE_CHECKING:
    from ..domain.maintenance import MaintenanceRequest
    from .store import EventStore

__all__ = ["main"]

DEFAULT_DB = "relaystore.sqlite3"
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
    from ..domain.integers import INT64_MAX

    value = _whole(text)
    if not 0 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be 0 or more (and at most {INT64_MAX}), got {text}")
    return value


def _count(text: str) -> int:
    """A positive count (``--limit``): 1 up to SQLite's largest integer."""
    from ..domain.integers import INT64_MAX

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
        from ..domain.sessions import validate_id

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
    from .nats_common import validate_consumer_name, validate_stream_name

    return _checked(validate_stream_name if kind == "stream" else validate_consumer_name, kind)


def _store_id(text: str) -> str:
    from .nats_common import validate_store_id

    return _checked(validate_store_id, "store id")(text)


def _sha256(text: str) -> str:
    from ..domain.hashing import is_relay_digest

    if not is_relay_digest(text):
        raise argparse.ArgumentTypeError(
            f"expected 64 lowercase hexadecimal characters, got {text!r}"
        )
    return text


def _nats_servers(text: str) -> str:
    from .nats_common import validate_servers

    return _checked(validate_servers, "NATS URL")(text)


def _web_origin(text: str) -> str:
    from ..domain.origins import validate_origin

    return _checked(validate_origin, "origin")(text)


def _subject_prefix(text: str) -> str:
    from .nats_common import validate_subject_prefix

    return _checked(validate_subject_prefix, "subject prefix")(text)


def _nats_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    parser.add_argument(
        "--nats",
        type=_nats_servers,
        required=required,
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


def _config_option(parser: argparse.ArgumentParser) -> None:
    _file_argument(
        parser.add_argument(
            "--config",
            type=_path,
            default=None,
            metavar="PATH",
            help="read options from this TOML file (db, and this command's table); "
            "options given here override it",
        )
    )


_SOURCE_HELP = (
    "a worker root, a folder of worker roots, a relay-journal/ folder, or .jsonl / .jsonl.gz "
    "files (the files of one session are read in ordinal order, in whatever order given)"
)


def _file_argument(action: argparse.Action) -> None:
    action.complete = _FILE_COMPLETION  # type: ignore[attr-defined]  # read by shtab


class _Parser(argparse.ArgumentParser):
    """The command line's parser: a usage error never shows a credential it echoes
    (an option's value, an unrecognized argument); its subcommands' parsers are too."""

    def error(self, message: str) -> NoReturn:
        from ..domain.redaction import redact

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
    # The same option after the command; SUPPRESS keeps the value given before it. A
    # command that uses no store takes it hidden, to refuse it by name (main).
    after = _Parser(add_help=False)
    _file_argument(
        after.add_argument(
            "--db", type=_path, default=argparse.SUPPRESS, metavar="PATH", help=db_help
        )
    )
    hidden = _Parser(add_help=False)
    hidden.add_argument("--db", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, text: str) -> argparse.ArgumentParser:
        parent = hidden if name in _NO_STORE else after
        return commands.add_parser(name, help=text, description=text, parents=[parent])

    replay = command(
        "replay",
        "replay relay journals into the store: worker roots, folders of worker roots, "
        "relay-journal/ folders or .jsonl / .jsonl.gz files",
    )
    _file_argument(
        replay.add_argument("sources", nargs="+", metavar="SOURCE", type=_path, help=_SOURCE_HELP)
    )
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
        help="show one progress bar over all journals on stderr (default: on a terminal, "
        "once the replay has run a second)",
    )
    replay.add_argument(
        "--json", action="store_true", help="also print each session's report as a JSON line"
    )

    verify = command("verify", "check digests and chain continuity, without a store")
    _file_argument(
        verify.add_argument("sources", nargs="+", metavar="SOURCE", type=_path, help=_SOURCE_HELP)
    )
    verify.add_argument("--session", type=_id("session"), help="session id for the sources")
    verify.add_argument("--json", action="store_true", help="print the report as one JSON object")
    verify.add_argument(
        "--from-first",
        action="store_true",
        help="as replay --from-first: accept a journal that lost its earlier segments",
    )

    events = command("events", "print API events as JSON lines, oldest first")
    events.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="start after SEQ")
    events.add_argument("--limit", type=_count, default=None, metavar="N", help="at most N")
    events.add_argument("--session", type=_id("session"), help="only this session's events")
    events.add_argument("--workspace", type=_id("workspace"), help="only this workspace's events")
    events.add_argument("--follow", action="store_true", help="keep printing new events")
    follow_options(events, "event", "--session")

    show = command("show", "print a session's materialized projection as JSON")
    show.add_argument("session", type=_id("session"), help="the session id")
    json_option(show, "the projection is one JSON object (the only output)")

    stats = command("stats", "print the store's revision, sessions and event counts")
    json_option(stats, "print the report as one JSON object")

    _read_commands(command)

    serve = command(
        "serve", "serve the web viewer, the read routes and the event stream over HTTP, read-only"
    )
    serve.add_argument(
        "--host",
        type=_host,
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1; beyond loopback, use TLS)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=8040,
        help="the TCP port (default 8040; 0: a free port, announced)",
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
    serve.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="log one line per request on stderr (client, request line, status)",
    )
    for name, what in (("certfile", "certificate chain"), ("keyfile", "private key")):
        _file_argument(
            serve.add_argument(
                f"--{name}",
                type=_path,
                default=None,
                metavar="PATH",
                help=f"speak HTTPS with this PEM {what} (give --certfile and --keyfile together)",
            )
        )
    _config_option(serve)

    backup = command("backup", "write a consistent copy of the store (safe while it is written)")
    _file_argument(
        backup.add_argument(
            "destination", metavar="DEST", type=_path, help="the new file (must not exist)"
        )
    )
    json_option(backup, "print the report as one JSON object")

    def maintenance(name: str, text: str) -> argparse.ArgumentParser:
        """A command that changes the store: run here, or by the writer that holds it."""
        parser = command(
            name,
            f"{text} (beside a running supervisor its store runs it: the request waits in "
            "the store for the writer, which prints nothing; this command prints its answer)",
        )
        parser.add_argument(
            "--timeout",
            type=_seconds,
            default=None,
            metavar="SECONDS",
            help="how long a running supervisor has to take the request before it is "
            "withdrawn undone (default 30)",
        )
        parser.add_argument(
            "--request-id",
            type=_id("request"),
            default=None,
            metavar="ID",
            help="name the request (a run again with the same id prints its recorded "
            "answer instead of running it twice; default: a fresh id, shown on stderr)",
        )
        return parser

    maintenance("vacuum", "compact the store after deletes")
    command(
        "new-store-id",
        "give a store restored from a backup a new id, so that it publishes as a new "
        "store (needs the store's write lock)",
    )

    reproject = maintenance(
        "reproject",
        "rebuild sessions' projections from their relay logs with this build's rules "
        "(appends only the API events the feed lacks; retention applies again)",
    )
    reproject.add_argument(
        "sessions",
        nargs="*",
        type=_id("session"),
        metavar="SESSION",
        help="(default: all sessions)",
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
        "sessions",
        nargs="*",
        type=_id("session"),
        metavar="SESSION",
        help="(default: all sessions, or those of --journals); before or after --journals",
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
    json_option(audit, "print the report as one JSON object")

    prune = maintenance(
        "prune-log",
        "delete a session's relay log through an ordinal its verified checkpoint covers",
    )
    prune.add_argument("session", type=_id("session"), help="the session id")
    prune.add_argument(
        "--through", type=_count, required=True, metavar="N", help="the last ordinal to delete"
    )

    compact = maintenance(
        "compact", "forget what old tool calls no longer show, behind each verified checkpoint"
    )
    compact.add_argument(
        "session", nargs="?", type=_id("session"), help="one session (default: every session)"
    )

    delete = maintenance(
        "delete",
        "delete a session: its record, events, activity, checkpoint and projection "
        "(its usage stays)",
    )
    delete.add_argument("session", type=_id("session"), help="the session")

    checkpoint = maintenance(
        "checkpoint",
        "record a verified checkpoint of a session: an archive holding its history "
        "through an ordinal the store applied (compact and prune-log act behind it)",
    )
    checkpoint.add_argument("session", type=_id("session"), help="the session")
    checkpoint.add_argument(
        "--through",
        type=_count,
        required=True,
        metavar="ORDINAL",
        help="the last ordinal the archive holds (at most the session's frontier; "
        "checkpoints only move forward)",
    )
    _file_argument(
        checkpoint.add_argument(
            "--archive",
            type=_path,
            required=True,
            metavar="PATH",
            help="the checkpoint archive; its SHA-256 is read and recorded",
        )
    )
    checkpoint.add_argument(
        "--sha256",
        type=_sha256,
        default=None,
        metavar="HEX",
        help="the archive's expected SHA-256: refused unless the file has it",
    )

    publish = command(
        "publish",
        "publish every committed API event, session record change and relay log page to "
        "a NATS JetStream stream, read-only and resumable (needs relaystore[nats])",
    )
    _nats_options(publish)
    _config_option(publish)
    publish.add_argument(
        "--once", action="store_true", help="publish what is committed now, then exit"
    )
    _replica_commands(command)

    fleet = command("fleet", "read the merged feed of many stores from NATS (relaystore[nats])")
    fleet_commands = fleet.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    fleet_events = fleet_commands.add_parser(
        "events",
        parents=[hidden],
        help="print every store's API events as JSON lines {store, seq, event}",
        description="print every store's API events in the stream as JSON lines "
        '{"store": ..., "seq": ..., "event": <the wire object>}, each store in seq order',
    )
    _nats_options(fleet_events)
    fleet_events.add_argument("--store", type=_store_id, metavar="ID", help="one store's events")
    fleet_events.add_argument(
        "--workspace", type=_id("workspace"), help="only this workspace's events"
    )
    fleet_events.add_argument("--session", type=_id("session"), help="only this session's events")
    fleet_events.add_argument(
        "--durable",
        type=_nats_name("durable"),
        metavar="NAME",
        help="a durable consumer: a later run with this name resumes where this one acknowledged",
    )
    fleet_events.add_argument("--follow", action="store_true", help="keep printing new events")

    completion = command("completion", "print a shell completion script (needs shtab)")
    completion.add_argument("shell", choices=_COMPLETION_SHELLS, help="the shell the script is for")
    return parser


# -- running ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    try:
        from .service_config import COMMANDS, configure

        parser = _parser()
        given = list(sys.argv[1:] if argv is None else argv)
        configured_db = configure({name: _subparser(parser, name) for name in COMMANDS}, given)
        args = parser.parse_args(given)
        if args.db is None:
            args.db = configured_db
        unused = _NO_STORE.get(args.command)
        if unused is not None and args.db is not None:
            _subparser(parser, args.command).error(
                f"--db is not used by {args.command}, which {unused}; leave it out"
            )
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


_NO_STORE = {
    "verify": "reads journals without a store",
    "fleet": "reads NATS, not a store",
    "completion": "prints a shell script",
}
"""The commands that use no store, and what they do instead (``--db`` is refused)."""


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of command ``name``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[name]
            return found
    raise AssertionError(name)  # pragma: no cover - _parser() always has its commands


def _fail(message: str) -> int:
    from ..domain.redaction import redact

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


def _expand(paths: Sequence[str]) -> list[str]:
    """The sources, with each folder of worker roots replaced by its worker roots."""
    from .journal.sources import worker_roots

    expanded: list[str] = []
    for path in paths:
        roots = worker_roots(path)
        expanded.extend(map(str, roots) if roots else [path])
    return expanded


def _sources(args: argparse.Namespace) -> list[str]:
    from .journal import resolve_source

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
    from .cli_replay import replay_command

    return replay_command(args, _sources(args))


# -- verify -------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from .journal import verify_sources

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
        f"{plural(report.records, 'record')}, {plural(report.valid_digests, 'valid digest')}, "
        f"{plural(len(report.problems), 'problem')}{duplicates}"
    )
    return 0 if report.ok else 1


# -- events, show, stats ------------------------------------------------------------------


_SHOW_ATTEMPTS = 3
"""How often ``show`` reads a session that moves under it again before it gives up."""


def _show(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

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

    from ..domain.materialized import SystemBody, TranscriptItem
    from ..domain.reads import LoadProjectionTail
    from .transcript_pages import SessionMoved, stored_items

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
    from ..domain.messages import LoadStats
    from ..domain.reports import stats_document

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


# -- sessions, transcript, history, usage: the read side ---------------------------------


def _read_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    from ..domain.roles import TranscriptRole

    sessions = command("sessions", "list the store's sessions (lifecycle, chat phase, title)")
    sessions.add_argument("--workspace", type=_id("workspace"), help="only this workspace's")
    json_option(sessions, "print each session as a JSON line (as GET /api/v1/sessions lists it)")

    transcript = command("transcript", "print a session's transcript items as JSON lines")
    transcript.add_argument("session", type=_id("session"), help="the session id")
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
    follow_options(transcript, "item", "SESSION")

    history = command("history", "print a page of a session's earlier messages as JSON")
    history.add_argument("session", type=_id("session"), help="the session id")
    before = history.add_mutually_exclusive_group()
    before.add_argument("--before-position", type=_count, metavar="N", help="items before N")
    before.add_argument("--before-id", metavar="ID", help="items before the item ID")
    history.add_argument(
        "--limit",
        type=_count,
        default=DEFAULT_HISTORY_LIMIT,
        metavar="N",
        help=f"at most N items (default {DEFAULT_HISTORY_LIMIT})",
    )
    json_option(history, "the page is one JSON object (the only output)")

    usage = command("usage", "print a session's recorded turn usage as JSON")
    usage.add_argument("session", type=_id("session"), help="the session id")
    usage.add_argument("--after", type=_seq, default=0, metavar="SEQ", help="after SEQ")
    usage.add_argument(
        "--limit",
        type=_count,
        default=DEFAULT_PAGE_LIMIT,
        metavar="N",
        help=f"at most N turns (default {DEFAULT_PAGE_LIMIT})",
    )
    json_option(usage, "the page is one JSON object (the only output)")


def _print_json(reply: object) -> None:
    import msgspec

    sys.stdout.buffer.write(msgspec.json.encode(reply) + b"\n")


def _sessions(args: argparse.Namespace) -> int:
    from ..domain.reads import ListSessions

    with open_read_only(args.db) as store:
        listed = store.ask(ListSessions(workspace_id=args.workspace))
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


def _history(args: argparse.Namespace) -> int:
    from ..domain.reads import LoadTranscriptHistory

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
    _print_json(page)
    return 0


def _usage(args: argparse.Namespace) -> int:
    from ..domain.reads import LoadUsagePage

    with open_read_only(args.db) as store:
        page = store.ask(
            LoadUsagePage(session_id=args.session, after_seq=args.after, limit=args.limit)
        )
    if page is None:
        raise no_session(args.db, args.session)
    _print_json(page)
    return 0


_READ_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "sessions": _sessions,
    "transcript": transcript_command,
    "history": _history,
    "usage": _usage,
}


# -- publish, fleet -------------------------------------------------------------------------


def _publish(args: argparse.Namespace) -> int:
    from .nats_common import require_nats

    require_nats("publish")
    require_store(args.db)
    import asyncio

    return asyncio.run(_publish_until_stopped(args))


@contextlib.contextmanager
def _nats_log(*, publisher: bool) -> Iterator[None]:
    """The publisher's log lines (with ``publisher``) and nats-py's own errors on stderr,
    one line each, credentials masked."""
    import logging

    from ..domain.redaction import redact

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

    from ..domain.redaction import redact
    from .aio import AsyncEventStore
    from .nats_publish import Publisher

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
    from .nats_common import require_nats

    require_nats("fleet events")
    import asyncio

    return asyncio.run(_fleet_events(args))


async def _fleet_events(args: argparse.Namespace) -> int:
    from .fleet import FleetFeed

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
    restore.add_argument(
        "--store",
        type=_store_id,
        required=True,
        metavar="ID",
        help="the id of the store to restore",
    )
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
    from .nats_common import require_nats

    require_nats(args.command)
    from .replica import run_command

    return run_command(args)


# -- serve, backup, vacuum, completion -----------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    missing = [name for name in _HTTP_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise InvalidInput(
            f"serve needs {', '.join(missing)}, which are not installed: "
            'pip install "relaystore[http]"'
        )
    if (args.certfile is None) != (args.keyfile is None):
        given, lacking = (
            ("--certfile", "--keyfile") if args.keyfile is None else ("--keyfile", "--certfile")
        )
        raise InvalidInput(f"{given} needs {lacking} too: TLS takes the certificate and its key")
    # Refuse a missing or foreign store in one line before the token file is made.
    with open_read_only(args.db):
        pass
    from . import http

    token_file = Path(args.token_file) if args.token_file else Path(f"{args.db}.api-token")
    keepalive = http.KEEPALIVE_SECONDS if args.keepalive is None else args.keepalive
    tls = None if args.certfile is None else http.TlsFiles(Path(args.certfile), Path(args.keyfile))
    if tls is None and http.beyond_loopback(args.host):
        print(
            f"relaystore: warning: serving on {args.host}, beyond loopback, without TLS: the "
            "bearer token and every answer cross the network readable; give --certfile and "
            "--keyfile, or serve behind a TLS proxy",
            file=sys.stderr,
            flush=True,
        )

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
        tls=tls,
        access_log=args.access_log,
    )
    # Ctrl-C exits 130 as for every command (a script running serve sees the interrupt);
    # SIGTERM, how a service manager stops it, is a normal stop.
    return 130 if stopped_by == signal.SIGINT else 0


def _backup(args: argparse.Namespace) -> int:
    from ..domain.messages import BackupStore

    folder = Path(args.destination).absolute().parent
    if not folder.is_dir():
        raise InvalidInput(
            f"the backup's folder {folder} does not exist; create it first",
            path=args.destination,
        )
    with open_read_only(args.db) as store:
        report = store.ask(BackupStore(destination=args.destination))
    if args.json:
        print_object(report)
        return 0
    print(
        f"backed up {args.db} to {report.path}: {plural(report.pages, 'page')}, "
        f"latest seq {report.latest_seq}, schema revision {report.schema_revision}"
    )
    return 0


def _maintain(args: argparse.Namespace, request: MaintenanceRequest) -> int:
    """Run a maintenance request on the store (here, or by the writer that holds it) and
    print its answer: exit 1 when it failed."""
    from .maintenance_requests import REQUEST_TIMEOUT_SECONDS, maintain

    require_store(args.db)

    def announce(request_id: str, holder: Any) -> None:
        if is_tty(sys.stderr):  # a person waiting; a script's stderr stays one line a failure
            print(
                f"relaystore: {holder.describe()} holds the store: it runs request "
                f"{request_id} (--request-id finds its answer again)",
                file=sys.stderr,
                flush=True,
            )

    timeout = REQUEST_TIMEOUT_SECONDS if args.timeout is None else args.timeout
    answer = maintain(
        args.db, request, timeout=timeout, request_id=args.request_id, announce=announce
    )
    for line in answer.out:
        print(line)
    for line in answer.err:
        print(f"relaystore: {line}", file=sys.stderr)
    if answer.error is not None:
        return _fail(answer.error)
    return 1 if answer.failed else 0


def _vacuum(args: argparse.Namespace) -> int:
    from ..domain.maintenance import VacuumRequest

    return _maintain(args, VacuumRequest())


def _delete(args: argparse.Namespace) -> int:
    from ..domain.maintenance import DeleteRequest

    return _maintain(args, DeleteRequest(session_id=args.session))


def _checkpoint(args: argparse.Namespace) -> int:
    import hashlib

    from ..domain.maintenance import CheckpointRequest

    archive = Path(args.archive).absolute()
    digest = hashlib.sha256()
    with open(archive, "rb") as file:  # OSError: one line naming the file
        while chunk := file.read(1024 * 1024):
            digest.update(chunk)
    sha256 = digest.hexdigest()
    if args.sha256 is not None and args.sha256 != sha256:
        raise InvalidInput(
            f"the archive's SHA-256 is {sha256}, not {args.sha256}: not the archive meant",
            path=str(archive),
        )
    return _maintain(
        args,
        CheckpointRequest(
            session_id=args.session,
            through_ordinal=args.through,
            archive_path=str(archive),
            sha256=sha256,
        ),
    )


def _new_store_id(args: argparse.Namespace) -> int:
    from ..storage.connection import open_writer
    from ..storage.schema import renew_store_id

    require_store(args.db)
    handle = open_writer(args.db)
    try:
        old, new = renew_store_id(handle.connection)
    finally:
        handle.close()
    print(f"store {args.db} was {old}, is now {new}; it publishes as a new store from seq 1")
    return 0


def _compact(args: argparse.Namespace) -> int:
    from ..domain.maintenance import CompactRequest

    return _maintain(args, CompactRequest(session_id=args.session))


def _session_ids(store: EventStore, given: Sequence[str]) -> list[str]:
    """The sessions named, else every session of the store."""
    from ..domain.messages import LoadState

    return list(given) if given else sorted(store.ask(LoadState()).sessions)


def _reproject(args: argparse.Namespace) -> int:
    from ..domain.maintenance import ReprojectRequest

    return _maintain(args, ReprojectRequest(session_ids=list(args.sessions), behind=args.behind))


def _audit(args: argparse.Namespace) -> int:
    import msgspec

    from .audit import audit_session
    from .journal import JournalSource, resolve_source

    sessions, paths = _audit_arguments(args.sessions, args.journals or [])
    journals: dict[str, JournalSource] = {}
    for path in _expand(paths):
        source = resolve_source(path)
        if source.session_id in journals:
            raise InvalidInput(
                f"two journals of session {source.session_id} were given ({journals[source.session_id].path}"
                f" and {source.path}); audit one at a time"
            )
        journals[source.session_id] = source
    results = []
    with open_read_only(args.db) as store:
        if sessions:
            wanted = sessions
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


def _audit_arguments(sessions: list[str], journals: list[str]) -> tuple[list[str], list[str]]:
    """``audit SESSION... --journals SOURCE...`` in any order: what ``--journals`` took that
    is no file or folder but a session id is a session (the journals must exist anyway)."""
    from ..domain.sessions import validate_id

    named, paths = list(sessions), []
    for given in journals:
        if not os.path.lexists(given):
            try:
                validate_id("session", given)
            except InvalidInput:
                pass
            else:
                named.append(given)
                continue
        paths.append(given)
    return named, paths


def _prune_log(args: argparse.Namespace) -> int:
    from ..domain.maintenance import PruneLogRequest

    return _maintain(args, PruneLogRequest(session_id=args.session, through_ordinal=args.through))


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
    "events": events_command,
    "show": _show,
    "stats": _stats,
    "serve": _serve,
    "backup": _backup,
    "vacuum": _vacuum,
    "new-store-id": _new_store_id,
    "prune-log": _prune_log,
    "compact": _compact,
    "delete": _delete,
    "checkpoint": _checkpoint,
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
