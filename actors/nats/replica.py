"""``relaystore restore`` and ``relaystore mirror``: a local store filled from a stream.

:class:`ReplicaReader` reads the stream's messages (one store's for ``restore``, every
store's for ``mirror``; subjects: :mod:`relaystore.actors.nats.replication`) with an
ephemeral pull consumer, keeps each store's messages since its last commit marker,
and applies complete spans with :func:`relaystore.storage.replica.apply_commits`, each
store's spans in one transaction with the stream position they reach.

Guarantees:

* **Resumable.** What is applied and where it reaches commit together, so a run that
  stops anywhere (killed, a server lost, the stream still being written) is continued
  by running it again: it starts after the last position committed
  (``replica_sources``), and a span that was read but not applied is read again.
  A ``mirror`` also keeps its floor: the stream position before which every store's
  messages are applied, so a store first seen later is not skipped.
* **Committed states only.** Messages after a store's last marker wait for the next
  marker; a run that ends (caught up, without ``--follow``) leaves them to the next run
  (and says so: :attr:`ReplicaReader.waiting`). At each marker the span it closes is
  checked whole before any of it is applied
  (:func:`~relaystore.domain.replication.cut_span`: no change or event missing since
  the last applied marker, nothing applied twice, nothing past the marker); a refusal
  is a :class:`~relaystore.domain.errors.StoreError` that ends the run with nothing of
  that span written.
* **Its own target.** A restore refuses, before it connects, a store holding sessions
  it did not restore from that store or restores of other stores
  (:func:`~relaystore.domain.replication.check_restore_target`).
* **A lost server is not a lost restore.** A failure talking to NATS (a cluster node
  killed, a consumer gone with it) drops the connection and what was read past the
  last applied span, and reconnects (backing off up to 5 s) from the committed
  position; the consumer is made again on whichever server answers.
* **Bounded.** At most ``chunk`` messages wait to be applied: past that, the complete
  spans are applied first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...domain.errors import StoreError
from ...domain.redaction import redact
from ...domain.replication import Incoming, Mark, check_restore_target, cut_span
from .common import (
    connect,
    is_transient,
    last_stream_seq,
    require_stream,
    shown_servers,
    validate_servers,
    validate_store_id,
    validate_stream_name,
    validate_subject_prefix,
)
from .replication import MARKER, decode_incoming

if TYPE_CHECKING:
    from nats.aio.client import Client

    from ...storage.connection import WriterConnection

__all__ = ["ReplicaReader", "run_command"]

logger = logging.getLogger(__name__)

_FLOOR_STORE = "0" * 32
"""The ``replica_sources`` row of a mirror's floor (no store has this id)."""


class ReplicaReader:
    """Fills the store at ``db`` from ``servers``' stream; run with :meth:`run`.

    ``store_id`` given: a ``restore`` of that store (``sessions``: only those); None: a
    ``mirror`` of every store in the stream.
    """

    def __init__(
        self,
        db: str,
        servers: str | Sequence[str],
        *,
        stream: str = "RELAYSTORE",
        subject_prefix: str = "relaystore",
        store_id: str | None = None,
        sessions: Sequence[str] = (),
        follow: bool = False,
        chunk: int = 20_000,
        batch: int = 1000,
        wait: float = 2.0,
        connect_timeout: float = 2.0,
        on_apply: Callable[[], None] | None = None,
    ) -> None:
        self._db = db
        self._on_apply = on_apply
        self._servers = validate_servers(servers)
        self._stream = validate_stream_name(stream)
        self._prefix = validate_subject_prefix(subject_prefix)
        self._store_id = None if store_id is None else validate_store_id(store_id)
        self._sessions = frozenset(sessions) or None
        self._scope = "mirror" if store_id is None else ",".join(sorted(sessions)) or "*"
        self._follow = follow
        self._chunk = chunk
        self._batch = batch
        self._wait = wait
        self._connect_timeout = connect_timeout
        self._handle: WriterConnection | None = None
        self._path = db
        self._adopt = False
        self._fresh = False  # an empty target takes the store's id with its first span
        # Per store: messages since its last marker, complete spans ready to apply, and
        # the stream seq each store is applied (or ready) through.
        self._partial: dict[str, list[tuple[int, Incoming]]] = {}
        self._ready: dict[str, list[Incoming]] = {}
        self._ready_seq: dict[str, int] = {}
        self._applied: dict[str, int] = {}
        # Per store: the mark applied (committed) and the one its ready spans reach.
        self._marks: dict[str, Mark | None] = {}
        self._cut: dict[str, Mark | None] = {}
        self._holes: dict[str, str] = {}  # per store: a span's unexplained hole (waits)
        self._buffered = 0
        self._seen = 0  # the last stream seq read
        self.events = 0
        self.changes = 0
        self.sessions: set[str] = set()
        self.reconnects = 0
        self.connected_url: str | None = None
        """The server the current connection reached (None between connections)."""

    # -- the store ---------------------------------------------------------------------

    def _open(self) -> None:
        from ...storage.connection import open_writer
        from ...storage.replica_sources import (
            replica_mark,
            replica_position,
            restore_target,
            target_is_empty,
        )
        from ...storage.schema import read_store_id

        self._handle = handle = open_writer(self._db)
        connection = handle.connection
        if self._store_id is not None:
            own_sessions, own_events, other_stores = restore_target(connection, self._store_id)
            check_restore_target(
                self._store_id,
                own_sessions=own_sessions,
                own_events=own_events,
                other_stores=other_stores,
            )
            self._marks[self._store_id] = replica_mark(
                connection, self._store_id, self._stream, self._scope
            )
            whole = self._scope == "*"
            self._fresh = whole and target_is_empty(connection)
            self._adopt = whole and (self._fresh or read_store_id(connection) == self._store_id)
            self._applied[self._store_id] = replica_position(
                connection, self._store_id, self._stream, self._scope
            )
        else:
            for store_id, seq in connection.execute(
                "SELECT store_id, stream_seq FROM replica_sources WHERE stream = ? AND scope = ?",
                (self._stream, self._scope),
            ):
                self._applied[str(store_id)] = int(seq)
                self._marks[str(store_id)] = replica_mark(
                    connection, str(store_id), self._stream, self._scope
                )
        self._cut = dict(self._marks)

    def _floor(self) -> int:
        """Where a new consumer starts after: every message before it is applied."""
        if self._store_id is not None:
            return self._applied.get(self._store_id, 0)
        return self._applied.get(_FLOOR_STORE, 0)

    def _apply_ready(self) -> None:
        from ...storage.replica import apply_commits
        from ...storage.replica_sources import adopt_store_id

        assert self._handle is not None
        connection = self._handle.connection
        if self._fresh and self._store_id is not None and self._ready:
            adopt_store_id(connection, self._store_id)
            self._fresh = False
        for store_id, messages in self._ready.items():  # in the order their markers came
            mark = self._cut[store_id]
            assert mark is not None
            report = apply_commits(
                connection,
                store_id=store_id,
                stream=self._stream,
                scope=self._scope,
                stream_seq=self._ready_seq[store_id],
                mark=mark,
                messages=messages,
                sessions=self._sessions,
                mirror=self._store_id is None,
                adopt=self._adopt,
            )
            self._applied[store_id] = self._ready_seq[store_id]
            self._marks[store_id] = mark
            self.events += report.events
            self.changes += report.changes
            self.sessions |= report.sessions
        self._ready.clear()
        self._buffered = sum(len(partial) for partial in self._partial.values())
        if self._store_id is None:
            firsts = [partial[0][0] - 1 for partial in self._partial.values() if partial]
            floor = min([self._seen, *firsts])
            if floor > self._applied.get(_FLOOR_STORE, 0):
                self._save_floor(floor)
        if self._on_apply is not None:
            self._on_apply()

    def _save_floor(self, floor: int) -> None:
        from ...storage.transaction import transaction

        assert self._handle is not None
        connection = self._handle.connection
        with transaction(connection, "record the mirror's stream position"):
            connection.execute(
                "INSERT INTO replica_sources(store_id, stream, scope, stream_seq) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(store_id, stream, scope) "
                "DO UPDATE SET stream_seq = excluded.stream_seq",
                (_FLOOR_STORE, self._stream, self._scope, floor),
            )
        self._applied[_FLOOR_STORE] = floor

    @property
    def waiting(self) -> int:
        """Messages read past each store's last commit marker: for a later marker."""
        return sum(len(partial) for partial in self._partial.values())

    def _take(self, stream_seq: int, message: Incoming) -> None:
        store_id = message.store_id
        self._seen = max(self._seen, stream_seq)
        if stream_seq <= self._applied.get(store_id, 0):
            return  # applied before this run (a mirror's consumer starts at its floor)
        partial = self._partial.setdefault(store_id, [])
        if message.kind != MARKER:
            partial.append((stream_seq, message))
            self._buffered += 1
            return
        # What the marker closes, checked whole before any of it is applied (the rule:
        # relaystore.domain.replication.cut_span).
        mark = self._cut.get(store_id, Mark(0, 0))
        span = cut_span(store_id, mark, message, stream_seq, partial)
        if span.hole is not None:
            if store_id not in self._holes and self._follow:
                logger.warning("%s; waiting for the next commit marker", span.hole)
            self._holes[store_id] = span.hole
        else:
            self._holes.pop(store_id, None)
        if span.mark != mark:
            self._ready.setdefault(store_id, []).extend(span.messages)
            self._cut[store_id] = span.mark
            # Where a run resumes: before the first message that still waits.
            self._ready_seq[store_id] = span.held[0][0] - 1 if span.held else stream_seq
        self._buffered -= len(partial) - len(span.held)
        partial[:] = span.held

    # -- the stream ----------------------------------------------------------------------

    async def run(self) -> None:
        """Read and apply until caught up (or, following, until cancelled)."""
        self._open()
        try:
            backoff = 0.1
            while True:
                try:
                    await self._connection()
                    return
                except StoreError:
                    raise
                except Exception as exc:
                    if not is_transient(exc) and not isinstance(exc, _Lost):
                        raise
                    self.reconnects += 1
                    self._partial.clear()
                    self._ready.clear()
                    self._ready_seq.clear()
                    self._cut = dict(self._marks)
                    self._holes.clear()
                    self._buffered = 0
                    pause = backoff * random.uniform(0.5, 1.0)
                    logger.warning(
                        "%s from %s: %s; reconnecting in %.1f s (applied through stream seq %d)",
                        "restore" if self._store_id else "mirror",
                        shown_servers(self._servers),
                        redact(f"{type(exc).__name__}: {exc}"),
                        pause,
                        self._floor(),
                    )
                    await asyncio.sleep(pause)
                    backoff = min(backoff * 2, 5.0)
        finally:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    async def _connection(self) -> None:
        nc = await connect(
            self._servers,
            name="relaystore-restore" if self._store_id else "relaystore-mirror",
            connect_timeout=self._connect_timeout,
            reconnect=False,
        )
        self.connected_url = nc.connected_url.geturl() if nc.connected_url else None
        try:
            subscription = await self._consumer(nc)
            # A run that ends reads to the stream leader's last message: a consumer's
            # num_pending on a replica still catching up reaches 0 before it.
            seen = self._floor()
            end = (
                0
                if self._follow
                else await last_stream_seq(
                    nc, self._stream, self._subject(), self._connect_timeout * 2
                )
            )
            while True:
                try:
                    messages = await subscription.fetch(self._batch, timeout=self._wait)
                except TimeoutError:
                    if nc.is_closed:
                        raise _Lost("the connection closed") from None
                    if self._follow:
                        info = await subscription.consumer_info()
                        if info.num_pending == 0:
                            self._apply_ready()
                    elif seen >= end:
                        self._apply_ready()
                        return self._refuse_a_hole()
                    continue
                for message in messages:
                    incoming = decode_incoming(
                        self._prefix,
                        message.subject,
                        message.headers,
                        message.data,
                        message.metadata.sequence.stream,
                    )
                    if self._store_id is None or incoming.store_id == self._store_id:
                        self._take(message.metadata.sequence.stream, incoming)
                await messages[-1].ack()
                seen = max(seen, messages[-1].metadata.sequence.stream)
                caught_up = messages[-1].metadata.num_pending == 0 if self._follow else seen >= end
                if caught_up or self._buffered >= self._chunk:
                    self._apply_ready()
                if caught_up and not self._follow:
                    return self._refuse_a_hole()
        finally:
            self.connected_url = None
            with contextlib.suppress(Exception):
                await nc.close()

    async def _consumer(self, nc: Client) -> Any:
        from nats.js import api

        await require_stream(
            nc, self._stream, self._servers, self._connect_timeout * 2, "give --stream"
        )
        jsm = nc.jsm(timeout=self._connect_timeout * 2)
        floor = self._floor()
        subject = self._subject()
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE if floor else api.DeliverPolicy.ALL,
            opt_start_seq=floor + 1 if floor else None,
            ack_policy=api.AckPolicy.ALL,
            filter_subject=subject,
            max_ack_pending=max(1024, 4 * self._batch),
            inactive_threshold=60.0,
        )
        info = await jsm.add_consumer(self._stream, config)
        js = nc.jetstream(timeout=self._connect_timeout * 2)
        return await js.pull_subscribe_bind(info.name, self._stream)

    def _subject(self) -> str:
        """The subjects read: every store's, or the one restored."""
        if self._store_id is None:
            return f"{self._prefix}.>"
        return f"{self._prefix}.{self._store_id}.>"

    def _refuse_a_hole(self) -> None:
        """At the end of a run: a span still waiting on a hole no later span explained
        is refused (what came before it is applied)."""
        for hole in self._holes.values():
            raise StoreError(hole)


class _Lost(Exception):
    """The connection is no longer trustworthy: drop it and resume from the store."""


def run_command(args: argparse.Namespace) -> int:
    """``relaystore restore`` / ``relaystore mirror`` (see :mod:`relaystore.actors.cli`)."""
    restore = args.command == "restore"
    reader = ReplicaReader(
        args.db,
        args.nats,
        stream=args.stream,
        subject_prefix=args.subject_prefix,
        store_id=args.store if restore else None,
        sessions=args.session if restore else (),
        follow=getattr(args, "follow", False),
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("relaystore: %(message)s"))
    logger.addHandler(handler)
    try:
        asyncio.run(reader.run())
    finally:
        logger.removeHandler(handler)
    what = f"store {args.store}" if restore else "the stream's stores"
    waiting = reader.waiting
    more = (
        f" ({waiting} message{'s' if waiting != 1 else ''} past the last commit marker wait "
        "for the next: run again to continue)"
        if waiting
        else ""
    )
    print(
        f"{'restored' if restore else 'mirrored'} {what} into {args.db}: "
        f"{len(reader.sessions)} sessions changed, {reader.events} API events, "
        f"{reader.changes} changes{more}"
    )
    return 0
