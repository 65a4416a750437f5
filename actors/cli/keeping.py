"""Keeping the store: ``backup``, ``audit``, ``new-store-id``, and the maintenance
commands ``vacuum``, ``reproject``, ``prune-log``, ``compact``, ``delete`` and
``checkpoint``.

Owns: their parsers, and how a maintenance command runs: here on a store no writer holds,
or by the writer that holds it (its maintenance desk, :mod:`..maintenance_requests`),
with ``--timeout`` and ``--request-id``; the command prints the answer either way.
``backup`` and ``audit`` only read; ``new-store-id`` takes the write lock itself.

Must not: word or carry out a maintenance request (:mod:`..maintenance` does, the same
for the desk and for this command), or load the runtime before the handler runs: the
store, its messages and :mod:`msgspec` are imported inside the handlers, so ``--help``
loads none of them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...domain.errors import InvalidInput, StoreError
from ...domain.ids import validate_id
from ...domain.redaction import redact
from ...domain.wording import plural
from .follow import open_read_only, require_store
from .journals import expand
from .options import checked_id, count, file_argument, path, seconds, sha256
from .output import fail, is_tty, json_option, print_object

if TYPE_CHECKING:
    from ...domain.maintenance import MaintenanceRequest
    from . import Commands, Handler

__all__ = ["register"]


def register(commands: Commands) -> None:
    backup = commands.add(
        "backup", "write a consistent copy of the store (safe while it is written)", _backup
    )
    file_argument(
        backup.add_argument(
            "destination", metavar="DEST", type=path, help="the new file (must not exist)"
        )
    )
    json_option(backup, "print the report as one JSON object")

    def maintenance(name: str, text: str, handler: Handler) -> argparse.ArgumentParser:
        """A command that changes the store: run here, or by the writer that holds it."""
        parser = commands.add(
            name,
            f"{text} (beside a running supervisor its store runs it: the request waits in "
            "the store for the writer, which prints nothing; this command prints its answer)",
            handler,
        )
        parser.add_argument(
            "--timeout",
            type=seconds,
            default=None,
            metavar="SECONDS",
            help="how long a running supervisor has to take the request before it is "
            "withdrawn undone (default 30)",
        )
        parser.add_argument(
            "--request-id",
            type=checked_id("request"),
            default=None,
            metavar="ID",
            help="name the request (a run again with the same id prints its recorded "
            "answer instead of running it twice; default: a fresh id, shown on stderr)",
        )
        json_option(
            parser,
            "print the answer as one JSON object: what it did, and whether a running "
            "writer (run_by writer, writer_pid) or this command ran it",
        )
        return parser

    maintenance("vacuum", "compact the store after deletes", _vacuum)
    renew = commands.add(
        "new-store-id",
        "give a store restored from a backup a new id, so that it publishes as a new "
        "store (needs the store's write lock)",
        _new_store_id,
    )
    json_option(renew, "print the report as one JSON object (path, old and new store id)")

    reproject = maintenance(
        "reproject",
        "rebuild sessions' projections from their relay logs with this build's rules "
        "(appends only the API events the feed lacks; retention applies again)",
        _reproject,
    )
    reproject.add_argument(
        "sessions",
        nargs="*",
        type=checked_id("session"),
        metavar="SESSION",
        help="(default: all sessions)",
    )
    reproject.add_argument(
        "--behind",
        action="store_true",
        help="only the sessions whose projection is behind their relay log (catch them up)",
    )

    audit = commands.add(
        "audit",
        "re-derive sessions from their relay logs (or the journals given) and compare with "
        "the stored projection and API events; exit 1 on any divergence (reads only)",
        _audit,
    )
    audit.add_argument(
        "sessions",
        nargs="*",
        type=checked_id("session"),
        metavar="SESSION",
        help="(default: all sessions, or those of --journals); before or after --journals",
    )
    file_argument(
        audit.add_argument(
            "--journals",
            nargs="+",
            type=path,
            metavar="SOURCE",
            help="derive from these worker journals instead of the store's relay log",
        )
    )
    json_option(audit, "print the report as one JSON object")

    prune = maintenance(
        "prune-log",
        "delete a session's relay log through an ordinal its verified checkpoint covers; "
        "this cannot be undone, and the session can then no longer be audited or "
        "reprojected from its log (audit reports it pruned; audit --journals still works)",
        _prune_log,
    )
    prune.add_argument("session", type=checked_id("session"), help="the session id")
    prune.add_argument(
        "--through", type=count, required=True, metavar="N", help="the last ordinal to delete"
    )

    compact = maintenance(
        "compact",
        "forget what old tool calls no longer show, behind each verified checkpoint",
        _compact,
    )
    compact.add_argument(
        "session",
        nargs="?",
        type=checked_id("session"),
        help="one session (default: every session)",
    )

    delete = maintenance(
        "delete",
        "delete a session: its record, events, activity, checkpoint and projection "
        "(its usage stays)",
        _delete,
    )
    delete.add_argument("session", type=checked_id("session"), help="the session")

    checkpoint = maintenance(
        "checkpoint",
        "record a verified checkpoint of a session: an archive holding its history "
        "through an ordinal the store applied (compact and prune-log act behind it)",
        _checkpoint,
    )
    checkpoint.add_argument("session", type=checked_id("session"), help="the session")
    checkpoint.add_argument(
        "--through",
        type=count,
        required=True,
        metavar="ORDINAL",
        help="the last ordinal the archive holds (at most the session's frontier; "
        "checkpoints only move forward)",
    )
    file_argument(
        checkpoint.add_argument(
            "--archive",
            type=path,
            required=True,
            metavar="PATH",
            help="the checkpoint archive; its SHA-256 is read and recorded",
        )
    )
    checkpoint.add_argument(
        "--sha256",
        type=sha256,
        default=None,
        metavar="HEX",
        help="the archive's expected SHA-256: refused unless the file has it",
    )


def _backup(args: argparse.Namespace) -> int:
    from ...domain.messages import BackupStore

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
    print its answer (its text, or with ``--json`` one object, :func:`_answer_document`):
    exit 1 when it failed."""
    import msgspec

    from ..core import StoreCore
    from ..maintenance.desk import REQUEST_TIMEOUT_SECONDS, maintain

    require_store(args.db)
    handed: list[str] = []  # the request id, once a writer's desk was handed the request
    holders: list[int] = []  # the process of the writer it was handed to

    def announce(request_id: str, holder: Any) -> None:
        handed[:] = [request_id]
        holders[:] = [holder.pid]
        if is_tty(sys.stderr):  # a person waiting; a script's stderr stays one line a failure
            print(
                f"relaystore: {holder.describe()} holds the store: it runs request "
                f"{request_id} (--request-id finds its answer again)",
                file=sys.stderr,
                flush=True,
            )

    timeout = REQUEST_TIMEOUT_SECONDS if args.timeout is None else args.timeout
    try:
        answer = maintain(
            args.db,
            request,
            open_store=lambda path: StoreCore.open(path, readers=1),  # one reader is enough
            timeout=timeout,
            request_id=args.request_id,
            announce=announce,
        )
    except StoreError as exc:
        if args.json:  # no answer came: still one object, naming why (the line follows)
            print_object(_unanswered_document(args, exc, handed, holders))
        raise
    if args.json:
        desk = handed[-1] if handed and answer.writer_pid is not None else None
        request_id = args.request_id or desk
        print_object(
            {
                "command": args.command,
                "ok": not answer.failed,
                "run_by": "command" if answer.writer_pid is None else "writer",
                "writer_pid": answer.writer_pid,
                "request_id": request_id,
                **({} if answer.outcome is None else msgspec.to_builtins(answer.outcome)),
                "error": answer.error,
                "error_type": answer.error_type,
            }
        )
    else:
        for line in answer.out:
            print(line)
    for line in answer.err:
        print(f"relaystore: {line}", file=sys.stderr)
    if answer.error_type == "UnknownSession":  # located at the store, as the reads say it
        return fail(f"{args.db}: {answer.error}")
    if answer.error is not None:
        return fail(answer.error)
    return 1 if answer.failed else 0


def _unanswered_document(
    args: argparse.Namespace, error: StoreError, handed: list[str], holders: list[int]
) -> dict[str, Any]:
    """The ``--json`` object of a request that got no answer: nobody ran it to the end
    (``run_by`` null), ``writer_pid`` the process holding the store when one does, and the
    error's one line and type, as a request refused as a whole reports them."""
    from ..maintenance.runs import error_text

    holder = getattr(error, "holder_pid", None)
    request_id = getattr(error, "request_id", None) or args.request_id
    return {
        "command": args.command,
        "ok": False,
        "run_by": None,
        "writer_pid": holder if holder is not None else (holders[-1] if holders else None),
        "request_id": request_id or (handed[-1] if handed else None),
        "error": redact(error_text(error)),
        "error_type": type(error).__name__,
    }


def _vacuum(args: argparse.Namespace) -> int:
    from ...domain.maintenance import VacuumRequest

    return _maintain(args, VacuumRequest())


def _delete(args: argparse.Namespace) -> int:
    from ...domain.maintenance import DeleteRequest

    return _maintain(args, DeleteRequest(session_id=args.session))


def _checkpoint(args: argparse.Namespace) -> int:
    from ...domain.maintenance import CheckpointRequest

    archive = Path(args.archive).absolute()
    digest = hashlib.sha256()
    with open(archive, "rb") as file:  # OSError: one line naming the file
        while chunk := file.read(1024 * 1024):
            digest.update(chunk)
    found = digest.hexdigest()
    if args.sha256 is not None and args.sha256 != found:
        raise InvalidInput(
            f"the archive's SHA-256 is {found}, not {args.sha256}: not the archive meant",
            path=str(archive),
        )
    return _maintain(
        args,
        CheckpointRequest(
            session_id=args.session,
            through_ordinal=args.through,
            archive_path=str(archive),
            sha256=found,
        ),
    )


def _new_store_id(args: argparse.Namespace) -> int:
    from ...storage.connection import open_writer
    from ...storage.schema import renew_store_id

    require_store(args.db)
    handle = open_writer(args.db)
    try:
        old, new = renew_store_id(handle.connection)
    finally:
        handle.close()
    if args.json:
        print_object(
            {"command": args.command, "path": args.db, "old_store_id": old, "new_store_id": new}
        )
        return 0
    print(f"store {args.db} was {old}, is now {new}; it publishes as a new store from seq 1")
    return 0


def _compact(args: argparse.Namespace) -> int:
    from ...domain.maintenance import CompactRequest

    return _maintain(args, CompactRequest(session_id=args.session))


def _reproject(args: argparse.Namespace) -> int:
    from ...domain.maintenance import ReprojectRequest

    return _maintain(args, ReprojectRequest(session_ids=list(args.sessions), behind=args.behind))


def _prune_log(args: argparse.Namespace) -> int:
    from ...domain.maintenance import PruneLogRequest

    return _maintain(args, PruneLogRequest(session_id=args.session, through_ordinal=args.through))


def _audit(args: argparse.Namespace) -> int:
    import msgspec

    from ...domain.messages import LoadState
    from ..audit import audit_session
    from ..journal import JournalSource, resolve_source

    sessions, paths = _audit_arguments(args.sessions, args.journals or [])
    journals: dict[str, JournalSource] = {}
    for given in expand(paths):
        source = resolve_source(given)
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
            wanted = sorted(store.ask(LoadState()).sessions)
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
            elif result.pruned is not None:
                print(f"{result.session_id}: pruned ({result.pruned})")
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
