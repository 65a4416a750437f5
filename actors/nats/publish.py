"""The NATS publisher: a store's source of truth, each piece once, in commit order.

:class:`Publisher` follows a store (an :class:`~relaystore.actors.aio.AsyncEventStore`,
usually opened ``read_only`` beside the supervisor that writes it) and publishes each
API event to JetStream: subject ``PREFIX.STORE_ID.WORKSPACE.SESSION`` (see
:mod:`relaystore.actors.nats.common`), data the event's wire line (the bytes
``relaystore events`` prints), headers ``Nats-Msg-Id: STORE_ID:SEQ``,
``Relaystore-Store`` and ``Relaystore-Seq``. Besides the feed it publishes every
numbered change to a session's record, start and relay log
(:mod:`relaystore.storage.changes`), and after each round that reached what the store
had committed, a commit marker; subjects, headers and values:
:mod:`relaystore.actors.nats.replication`. Each round reads its changes and events in one
snapshot; a change is resumed, deduplicated and checked for a fork exactly as an event
is (the stream's last change for the store, by subject; ``Nats-Msg-Id STORE:c:N``).

Guarantees, and why they hold:

* **Nothing lost, nothing twice in the stream.** Each connection starts by reading, from
  the stream itself, the last message it holds for this store (the server's
  last-by-subject lookup on ``PREFIX.STORE_ID.>``) and publishes what follows it. One
  connection is one ordered byte stream and nats-py's own reconnect (which would resend
  a buffered tail after a lost middle) is off: on any failure the connection is dropped
  and a new one resumes from the stream again. What a dead connection's server still
  processes after the new one looked is a repeat of the same ``Nats-Msg-Id`` inside the
  stream's duplicate window, which the server drops.
* **One history per store id.** A store whose history is not the one the stream holds
  under its id (a backup restored after later events were published: its latest seq
  is behind the stream's last message for it, or its event at that seq differs) is
  refused with :class:`~relaystore.domain.errors.StoreForked` before anything is sent
  (the rule: :mod:`relaystore.domain.publishing`); ``relaystore new-store-id`` gives
  it a new id, under which it publishes as a new store.
* **A stream that lost the store's messages is said.** What the stream acknowledged is
  recorded beside it (:class:`~relaystore.actors.nats.stream.PublishedRecord`); a
  connection that finds the stream's last message of the store behind that record (the
  stream purged, or its limits removed them) logs a warning naming what was lost before
  it publishes it again (the rule: :func:`~relaystore.domain.publishing.lost_from_stream`)
  and counts it (``stream_lost``).
* **Order.** Events are sent in ``seq`` order and changes in their number's order on
  one connection, so each store's messages are in that order in the stream; a commit
  marker follows only what a whole snapshot held.
* **A refusal is not skipped.** When the server refuses one message (an error ack), the
  connection ends; if a later message of the same connection was stored anyway, the
  publisher stops with a :class:`~relaystore.domain.errors.StoreError` naming the gap
  instead of publishing past it.
* **Bounded.** At most ``max_outstanding`` messages wait for their ack: a slow server
  slows the publisher (backpressure), and no ack for ``ack_timeout`` seconds ends the
  connection. Reconnects back off exponentially (with jitter) up to ``backoff_max``.
  After ``connect_attempts`` attempts in a row that reach no server (default
  :data:`CONNECT_ATTEMPTS_ONCE` with ``once``, no bound without) :meth:`Publisher.run`
  raises a :class:`~relaystore.domain.errors.StoreError` naming the servers, their
  credentials masked.

Events of a session deleted before they were sent are skipped (``relaystore events``
no longer shows them either); events sent before the delete stay in the stream.

This module owns the reconnect loop, one connection's start and its rounds (read a
snapshot, send its changes and events, mark it, settle, wait for more) and the
figures (:class:`PublisherMetrics`). The stream's setup, the resume point and the
subjects are :mod:`relaystore.actors.nats.stream`'s; the acknowledgements, the
backpressure and the gap check :mod:`relaystore.actors.nats.acks`'; the messages' subjects,
headers and values :mod:`relaystore.actors.nats.replication`'s. Must not: read the stream
or build a message itself; it logs on its own logger, which ``relaystore publish``
shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ...domain.api_events import RawApiEvent
from ...domain.errors import InvalidInput, StoreClosed, StoreError
from ...domain.paging import MAX_PAGE_LIMIT
from ...domain.redaction import redact
from ...domain.replication import Change
from ..aio import AsyncEventStore
from .acks import AckWindow, Lost
from .common import (
    DEFAULT_STREAM,
    DEFAULT_SUBJECT_PREFIX,
    connect,
    is_transient,
    require_nats,
    shown_servers,
    validate_servers,
    validate_store_id,
    validate_stream_name,
    validate_subject_prefix,
)
from .replication import (
    Outgoing,
    change_message,
    event_message,
    gap_message,
    load_round,
    marker_message,
)
from .stream import PublishedRecord, StreamTarget, SubjectCache

if TYPE_CHECKING:
    from nats.aio.client import Client

__all__ = ["CONNECT_ATTEMPTS_ONCE", "Publisher", "PublisherMetrics"]

CONNECT_ATTEMPTS_ONCE = 5
"""How many attempts in a row that reach no server a ``once`` publisher makes before it
gives up (unless told otherwise): each tries every server at most twice, each try
bounded by ``connect_timeout``, with the reconnect backoff between attempts."""

logger = logging.getLogger(__name__)
"""The publisher's log (``relaystore publish`` shows it on stderr)."""


class PublisherMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of a :class:`Publisher`, cheap enough to poll every second.

    ``acked_seq``: every event up to it is in the stream (or was deleted before it was
    sent); ``lag`` is ``store_latest_seq - acked_seq``.
    """

    store_id: str
    stream: str
    subject_prefix: str
    connected: bool
    resumed_after_seq: int
    sent_seq: int
    acked_seq: int
    store_latest_seq: int
    lag: int
    outstanding_acks: int
    published: int
    duplicates: int
    skipped: int
    reconnects: int
    last_error: str | None
    acked_change: int = 0
    """Every change up to it is in the stream."""
    store_latest_change: int = 0
    change_lag: int = 0
    """``store_latest_change - acked_change``: what a lost machine would lose."""
    changes_published: int = 0
    markers: int = 0
    stream_lost: int = 0
    """Connections that found the stream had lost messages of the store it acknowledged
    before (purged, or removed by its limits), each said in a warning."""


class Publisher:
    """Publishes one store's API events to a JetStream stream; run with :meth:`run`.

    ``servers`` is a URL (``nats://HOST:PORT``, comma-separated for several) or a list.
    The stream is created when absent (file storage, subjects ``PREFIX.>``, a
    :data:`~relaystore.actors.nats.common.DUPLICATE_WINDOW_SECONDS` duplicate window).
    """

    def __init__(
        self,
        store: AsyncEventStore,
        servers: str | Sequence[str],
        *,
        stream: str = DEFAULT_STREAM,
        subject_prefix: str = DEFAULT_SUBJECT_PREFIX,
        max_outstanding: int = 2048,
        ack_timeout: float = 10.0,
        connect_timeout: float = 2.0,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        log_interval: float = 10.0,
        once: bool = False,
        connect_attempts: int | None = None,
        remove_foreign: int | None = None,
    ) -> None:
        require_nats("the NATS publisher")
        if not isinstance(store, AsyncEventStore):
            raise InvalidInput("Publisher: store must be an AsyncEventStore")
        self._servers = validate_servers(servers)
        self._stream = validate_stream_name(stream)
        self._prefix = validate_subject_prefix(subject_prefix)
        if type(max_outstanding) is not int or not 1 <= max_outstanding <= 1_000_000:
            raise InvalidInput("Publisher: max_outstanding must be an int from 1 to 1000000")
        for name, value in (
            ("ack_timeout", ack_timeout),
            ("connect_timeout", connect_timeout),
            ("backoff_initial", backoff_initial),
            ("backoff_max", backoff_max),
            ("log_interval", log_interval),
        ):
            if type(value) not in (int, float) or not 0 < value < 1e6:
                raise InvalidInput(f"Publisher: {name} must be a number of seconds > 0")
        if connect_attempts is not None and (
            type(connect_attempts) is not int or not 1 <= connect_attempts <= 1_000_000
        ):
            raise InvalidInput("Publisher: connect_attempts must be an int from 1 to 1000000")
        self._connect_attempts = (
            CONNECT_ATTEMPTS_ONCE if connect_attempts is None and once else connect_attempts
        )
        if remove_foreign is not None and (
            type(remove_foreign) is not int or not 1 <= remove_foreign < 2**63
        ):
            raise InvalidInput("Publisher: remove_foreign must be a stream seq (an int >= 1)")
        self._remove_foreign = remove_foreign
        self._store = store
        self._store_id = validate_store_id(store.metrics().store_id)
        self._max_outstanding = max_outstanding
        self._ack_timeout = float(ack_timeout)
        self._connect_timeout = float(connect_timeout)
        self._target = StreamTarget(
            stream=self._stream,
            prefix=self._prefix,
            store_id=self._store_id,
            timeout=self._connect_timeout * 2,
        )
        self._backoff = (float(backoff_initial), max(float(backoff_initial), float(backoff_max)))
        self._log_interval = float(log_interval)
        self._stopping = asyncio.Event()
        self._subjects = SubjectCache(store, self._prefix, self._store_id)
        self._record = PublishedRecord(self._target, logger)
        self._stream_lost = 0
        self._acks = AckWindow(max_outstanding, float(ack_timeout))
        self._once = bool(once)
        # Figures.
        self._connected = False
        self._resumed = 0
        self._sent_seq = 0
        self._latest = store.latest_seq
        self._skipped = 0
        self._reconnects = 0
        self._last_error: str | None = None
        self._latest_change = 0
        self._reached = False

    @property
    def store_id(self) -> str:
        """The id of the store this publisher publishes."""
        return self._store_id

    def metrics(self) -> PublisherMetrics:
        """Where the publisher is: what it sent, what the stream acknowledged, the lag."""
        latest = max(self._latest, self._store.latest_seq)
        acks = self._acks
        return PublisherMetrics(
            store_id=self._store_id,
            stream=self._stream,
            subject_prefix=self._prefix,
            connected=self._connected,
            resumed_after_seq=self._resumed,
            sent_seq=self._sent_seq,
            acked_seq=acks.acked,
            store_latest_seq=latest,
            lag=max(0, latest - acks.acked),
            outstanding_acks=acks.outstanding,
            published=acks.published,
            duplicates=acks.duplicates,
            skipped=self._skipped,
            reconnects=self._reconnects,
            last_error=self._last_error,
            acked_change=acks.acked_change,
            store_latest_change=self._latest_change,
            change_lag=max(0, self._latest_change - acks.acked_change),
            changes_published=acks.changes_published,
            markers=acks.markers,
            stream_lost=self._stream_lost,
        )

    def stop(self) -> None:
        """Ask :meth:`run` to finish: it waits for the acks of what it sent, then returns."""
        self._stopping.set()

    async def run(self) -> None:
        """Publish until :meth:`stop` or the store closes; reconnect on NATS failures.
        With ``once``, return once what the store had committed when a round began is
        in the stream, with its commit marker.

        Raises :class:`~relaystore.domain.errors.StoreError` (or ``InvalidInput``) for
        what a retry cannot fix: a stream whose subjects do not cover the prefix, an
        event larger than the server's ``max_payload``, a message the server refused
        while storing a later one.
        """
        backoff = self._backoff[0]
        unreached = 0  # attempts in a row that reached no server
        while not self._stopping.is_set():
            started = time.monotonic()
            self._reached = False
            try:
                await self._connection()
                return
            except StoreClosed:
                return
            except StoreError:
                raise
            except Exception as exc:
                if not (isinstance(exc, Lost) or is_transient(exc)):
                    raise
                self._reconnects += 1
                self._last_error = _describe(exc)
                unreached = 0 if self._reached else unreached + 1
                if self._connect_attempts is not None and unreached >= self._connect_attempts:
                    raise StoreError(
                        f"cannot reach a NATS server at {shown_servers(self._servers)} after "
                        f"{unreached} attempt{'s' if unreached > 1 else ''} "
                        f"({self._last_error}); is it running, and is --nats right?"
                    ) from None
                if time.monotonic() - started > 30:
                    backoff = self._backoff[0]
                pause = backoff * random.uniform(0.5, 1.0)
                logger.warning(
                    "publish to %s: %s; reconnecting in %.1f s (stream holds up to seq %d)",
                    shown_servers(self._servers),
                    self._last_error,
                    pause,
                    self._acks.acked,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pause)
                backoff = min(backoff * 2, self._backoff[1])

    # -- one connection --------------------------------------------------------------

    async def _connection(self) -> None:
        nc = await connect(
            self._servers,
            name=f"relaystore-publish {self._store_id}",
            connect_timeout=self._connect_timeout,
            reconnect=False,
        )
        self._reached = True
        acks = self._acks
        acks.reset()
        try:
            self._connected = True
            await self._target.ensure(nc, logger)
            if self._remove_foreign is not None:
                await self._target.remove_foreign(nc, self._remove_foreign, logger)
                self._remove_foreign = None
            after = await self._target.last_event(nc, self._store)
            after_change = await self._target.last_change(nc, self._store)
            for what, refused, stored in (
                ("event seq", acks.refused, after),
                ("change", acks.refused_change, after_change),
            ):
                if refused is not None and stored > refused:
                    raise StoreError(
                        f"the NATS server refused {what} {refused} of store "
                        f"{self._store_id} ({self._last_error}) but stored {what} {stored} "
                        f"after it: stream {self._stream} has a gap; fix the server's limits, "
                        "purge this store's subjects and publish again"
                    )
            acks.refused = acks.refused_change = None
            lost = await self._record.check(nc, after, after_change)
            if lost is not None:
                self._stream_lost += 1
                logger.warning("%s", lost)
            self._resumed = acks.acked = acks.stored = self._sent_seq = after
            acks.acked_change = acks.stored_change = after_change
            logger.info(
                "publishing store %s to stream %s on %s after seq %d",
                self._store_id,
                self._stream,
                shown_servers(
                    [nc.connected_url.geturl() if nc.connected_url else self._servers[0]]
                ),
                after,
            )
            inbox = nc.new_inbox()
            await nc.subscribe(f"{inbox}.*", cb=acks.on_ack)
            await self._pump(nc, f"{inbox}.", after, after_change)
        finally:
            self._connected = False
            with contextlib.suppress(Exception):
                await nc.close()

    async def _pump(self, nc: Client, reply: str, after: int, after_change: int) -> None:
        cursor, changes = after, after_change
        logged = time.monotonic()
        logged_seq = after
        store, acks = self._store, self._acks
        unmarked = True  # a new connection marks its first complete round
        while not self._stopping.is_set():
            batch = await load_round(store, cursor, changes, MAX_PAGE_LIMIT)
            self._latest = max(self._latest, batch.latest_seq)
            self._latest_change = max(self._latest_change, batch.latest_change)
            if batch.changes:
                await self._send_changes(nc, reply, batch.changes)
                changes = batch.changes[-1].ref.change_seq
                unmarked = True
            if batch.events:
                await self._send(nc, reply, cursor, batch.events)
                cursor = batch.events[-1].seq
                unmarked = True
            elif batch.next_after_seq > cursor:  # deleted, every one: a gap says so
                await self._gap(nc, reply, cursor + 1, batch.next_after_seq)
                cursor = batch.next_after_seq
                unmarked = True
            now = time.monotonic()
            if now - logged >= self._log_interval:
                rate = (acks.acked - logged_seq) / (now - logged)
                logger.info(
                    "published store %s up to seq %d of %d (lag %d, %.0f events/s), "
                    "change %d of %d",
                    self._store_id,
                    acks.acked,
                    self._latest,
                    max(0, self._latest - acks.acked),
                    rate,
                    acks.acked_change,
                    self._latest_change,
                )
                logged, logged_seq = now, acks.acked
            if not batch.complete:
                continue  # more are committed already
            changes = max(changes, batch.latest_change)
            if unmarked:
                await acks.publish(nc, reply, "m", changes, self._marker(changes, cursor))
                unmarked = False
            await acks.settle()
            acks.acked = max(acks.acked, cursor)  # skipped or deleted events included
            acks.acked_change = max(acks.acked_change, changes)
            await self._record.write(acks.stored, acks.stored_change, force=self._once)
            if self._once:
                return
            while not self._stopping.is_set():
                if nc.is_closed:
                    raise Lost("the connection to the NATS server closed")
                # A change without an event (a record saved) wakes no wait_for: look
                # again after a short while anyway.
                if await store.wait_for(cursor + 1, timeout=0.25):
                    break
                if await self._changed_since(changes):
                    break
        await acks.settle()
        await self._record.write(acks.stored, acks.stored_change, force=True)

    def _marker(self, changes: int, cursor: int) -> Outgoing:
        return marker_message(self._prefix, self._store_id, changes, cursor)

    async def _changed_since(self, changes: int) -> bool:
        batch = await load_round(self._store, self._store.latest_seq, changes, 1)
        return bool(batch.changes)

    async def _send_changes(self, nc: Client, reply: str, changes: list[Change]) -> None:
        for change in changes:
            message = change_message(self._prefix, self._store_id, change)
            await self._acks.publish(nc, reply, "c", change.ref.change_seq, message)
        self._acks.check()

    async def _send(self, nc: Client, reply: str, after: int, events: list[RawApiEvent]) -> None:
        """Send ``events`` (the round's, after seq ``after``), and a gap for each run of
        seqs among them the store no longer holds (deleted, or its session deleted
        since the round was read)."""
        subjects = await self._subjects.subjects_of(events)
        missing = after + 1  # the first seq of the run not sent yet
        for event, subject in zip(events, subjects, strict=True):
            if subject is None:
                self._skipped += 1
                continue
            if event.seq > missing:
                await self._gap(nc, reply, missing, event.seq - 1)
            message = event_message(subject, self._store_id, event.seq, event.json)
            await self._acks.publish(nc, reply, "e", event.seq, message)
            self._sent_seq = event.seq
            missing = event.seq + 1
        if events[-1].seq >= missing:
            await self._gap(nc, reply, missing, events[-1].seq)
        self._acks.check()

    async def _gap(self, nc: Client, reply: str, first: int, last: int) -> None:
        message = gap_message(self._prefix, self._store_id, first, last)
        await self._acks.publish(nc, reply, "g", first, message)


def _describe(exc: BaseException) -> str:
    text = redact(str(exc).strip())
    name = type(exc).__name__
    if isinstance(exc, Lost):
        return text
    return f"{name}: {text}" if text and text != name else name
