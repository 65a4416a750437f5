"""``relaystore replay`` and ``relaystore verify``: the commands that read worker journals.

Owns: their parsers, turning the sources given into journals (a folder of worker roots
is its worker roots; ``--session`` never merges several sessions), and ``verify``'s
report (text, or one JSON object with ``--json``). ``replay``'s progress display and
summary lines are :mod:`.replay_display`'s.

Must not: decide what a journal holds or whether it is sound (:mod:`..journal`), or
write the store other than through ``replay``. The journal readers load :mod:`msgspec`,
so they are imported inside the handlers: ``--help`` loads no runtime.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...domain.errors import InvalidInput
from ...domain.wording import plural
from .options import SOURCE_HELP, checked_id, file_argument, path
from .replay_display import replay_command

if TYPE_CHECKING:
    from . import Commands

__all__ = ["expand", "register"]


def register(commands: Commands) -> None:
    replay = commands.add(
        "replay",
        "replay relay journals into the store: worker roots, folders of worker roots, "
        "relay-journal/ folders or .jsonl / .jsonl.gz files",
        _replay,
    )
    file_argument(
        replay.add_argument("sources", nargs="+", metavar="SOURCE", type=path, help=SOURCE_HELP)
    )
    replay.add_argument(
        "--session",
        type=checked_id("session"),
        help="session id (default: relay-state.json, else the folder or file name)",
    )
    replay.add_argument(
        "--workspace", type=checked_id("workspace"), help="workspace of a session the store lacks"
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

    verify = commands.add(
        "verify",
        "check digests and chain continuity, without a store",
        _verify,
        no_store="reads journals without a store",
    )
    file_argument(
        verify.add_argument("sources", nargs="+", metavar="SOURCE", type=path, help=SOURCE_HELP)
    )
    verify.add_argument("--session", type=checked_id("session"), help="session id for the sources")
    verify.add_argument("--json", action="store_true", help="print the report as one JSON object")
    verify.add_argument(
        "--from-first",
        action="store_true",
        help="as replay --from-first: accept a journal that lost its earlier segments",
    )


def expand(paths: Sequence[str]) -> list[str]:
    """The sources, with each folder of worker roots replaced by its worker roots."""
    from ..journal.sources import worker_roots

    expanded: list[str] = []
    for given in paths:
        roots = worker_roots(given)
        expanded.extend(map(str, roots) if roots else [given])
    return expanded


def _sources(args: argparse.Namespace) -> list[str]:
    from ..journal import resolve_source

    sources = expand(args.sources)
    if args.session is not None and len(sources) > len(args.sources):
        sessions = {resolve_source(source).session_id for source in sources}
        if len(sessions) > 1:
            raise InvalidInput(
                f"--session {args.session} would merge {len(sessions)} sessions of a folder "
                "of worker roots into one; leave --session out, or give one worker root"
            )
    return sources


def _replay(args: argparse.Namespace) -> int:
    return replay_command(args, _sources(args))


def _verify(args: argparse.Namespace) -> int:
    from ..journal import verify_sources

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
