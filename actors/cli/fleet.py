"""``relaystore publish``, ``restore``, ``mirror`` and ``fleet events``: the commands
that talk to a NATS JetStream stream (the fleet side).

Owns: their parsers, their lines on stderr (what is published where, how far it got;
nats-py's own errors one line each, credentials masked), and ``fleet events``' output:
one JSON line per event, flushed before the feed acknowledges its batch (a crash
repeats a line, never loses one).

Must not: publish, read or apply a stream itself (:mod:`..nats_publish`,
:mod:`..fleet`, :mod:`..replica` do), or write a store other than ``restore`` and
``mirror``'s ``--db``. nats-py is the optional extra ``relaystore[nats]``: it is looked
for when a command runs, and the modules that import it (and the store) are imported
inside the handlers, so the rest of the command line works without it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...domain.redaction import redact
from ..nats.common import require_nats
from .follow import require_store
from .options import (
    checked_id,
    config_option,
    count,
    nats_name,
    nats_options,
    store_id,
)

if TYPE_CHECKING:
    from . import Commands

__all__ = ["register"]


def register(commands: Commands) -> None:
    publish = commands.add(
        "publish",
        "publish every committed API event, session record change and relay log page to "
        "a NATS JetStream stream, read-only and resumable (needs relaystore[nats])",
        _publish,
    )
    nats_options(publish)
    config_option(publish)
    publish.add_argument(
        "--once", action="store_true", help="publish what is committed now, then exit"
    )
    publish.add_argument(
        "--connect-attempts",
        type=_attempts,
        metavar="N",
        help="give up (exit 1) after N attempts in a row that reach no server (default 5 "
        "with --once, no bound without)",
    )
    publish.add_argument(
        "--remove-foreign",
        type=count,
        metavar="STREAM_SEQ",
        help="first delete the message at this stream seq, which publish named as one "
        "relaystore did not publish for this store (it refuses any other message)",
    )

    restore = commands.add(
        "restore",
        "restore a published store's sessions (records, relay logs, projections and its "
        "API feed with the same seqs) from a NATS stream into --db; run again to continue",
        _replica,
    )
    nats_options(restore)
    restore.add_argument(
        "--store",
        type=store_id,
        required=True,
        metavar="ID",
        help="the id of the store to restore",
    )
    restore.add_argument(
        "--session",
        type=checked_id("session"),
        action="append",
        default=[],
        metavar="S",
        help="only this session (repeat for several; default: every session)",
    )
    mirror = commands.add(
        "mirror",
        "keep --db a read replica of every store published to a NATS stream (serve it "
        "for the whole fleet); rebuildable from the stream",
        _replica,
    )
    nats_options(mirror)
    mirror.add_argument("--follow", action="store_true", help="keep applying new commits")

    fleet = commands.add(
        "fleet",
        "read the merged feed of many stores from NATS (relaystore[nats])",
        _fleet,
        no_store="reads NATS, not a store",
    )
    fleet_commands = fleet.add_subparsers(dest="fleet_command", required=True, metavar="COMMAND")
    fleet_events = fleet_commands.add_parser(
        "events",
        parents=[commands.no_db],
        help="print every store's API events as JSON lines {store, seq, event}",
        description="print every store's API events in the stream as JSON lines "
        '{"store": ..., "seq": ..., "event": <the wire object>}, each store in seq order',
    )
    nats_options(fleet_events)
    fleet_events.add_argument("--store", type=store_id, metavar="ID", help="one store's events")
    fleet_events.add_argument(
        "--workspace", type=checked_id("workspace"), help="only this workspace's events"
    )
    fleet_events.add_argument(
        "--session", type=checked_id("session"), help="only this session's events"
    )
    fleet_events.add_argument(
        "--durable",
        type=nats_name("durable"),
        metavar="NAME",
        help="a durable consumer: a later run with this name resumes where this one acknowledged",
    )
    fleet_events.add_argument("--follow", action="store_true", help="keep printing new events")


def _attempts(text: str) -> int:
    """``--connect-attempts``: 1 to 1000000."""
    value = count(text)
    if value > 1_000_000:
        raise argparse.ArgumentTypeError(f"must be 1 to 1000000, got {text}")
    return value


def _publish(args: argparse.Namespace) -> int:
    require_nats("publish")
    require_store(args.db)
    return asyncio.run(_publish_until_stopped(args))


@contextlib.contextmanager
def _nats_log(*, publisher: bool) -> Iterator[None]:
    """The publisher's log lines (with ``publisher``) and nats-py's own errors on stderr,
    one line each, credentials masked."""

    class Redacting(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return redact(" ".join(super().format(record).split()))

        def formatException(self, ei: Any) -> str:
            return f"({ei[0].__name__}: {ei[1]})"

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Redacting("relaystore: %(message)s"))
    logs = [logging.getLogger("nats")]
    if publisher:
        logs.append(logging.getLogger("relaystore.actors.nats.publish"))
        logs[-1].setLevel(logging.INFO)
    for log in logs:
        log.addHandler(handler)
    try:
        yield
    finally:
        for log in logs:
            log.removeHandler(handler)


async def _publish_until_stopped(args: argparse.Namespace) -> int:
    from ..aio import AsyncEventStore  # the store: imported when the command runs
    from ..nats.publish import Publisher  # needs relaystore[nats]

    with _nats_log(publisher=True):
        async with AsyncEventStore.open(args.db, read_only=True, readers=1) as store:
            publisher = Publisher(
                store,
                args.nats,
                stream=args.stream,
                subject_prefix=args.subject_prefix,
                once=args.once,
                connect_attempts=args.connect_attempts,
                remove_foreign=args.remove_foreign,
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
    require_nats("fleet events")
    return asyncio.run(_fleet_events(args))


async def _fleet_events(args: argparse.Namespace) -> int:
    from ..nats.fleet import FleetFeed  # needs relaystore[nats]

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


def _replica(args: argparse.Namespace) -> int:
    require_nats(args.command)
    from ..nats.replica import run_command  # needs relaystore[nats]

    return run_command(args)
