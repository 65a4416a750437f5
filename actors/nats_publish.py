"""The NATS publisher: a store's source of truth, each piece once, in commit order.

:class:`Publisher` follows a store (an :class:`~relaystore.actors.aio.AsyncEventStore`,
usually opened ``read_only`` beside the supervisor that writes it) and publishes each
API event to JetStream: subject ``PREFIX.STORE_ID.WORKSPACE.SESSION`` (see
:mod:`relaystore.actors.nats_common`), data the event's wire line (the bytes
``relaystore events`` prints), headers ``Nats-Msg-Id: STORE_ID:SEQ``,
``Relaystore-Store`` and ``Relaystore-Seq``. Besides the feed it publishes every
numbered change to a session's record, start and relay log
(:mod:`relaystore.storage.changes`), and after each round that reached what the store
had committed, a commit marker; subjects, headers and values:
:mod:`relaystore.actors.replication`. Each round reads its changes and events in one
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

Events of a session deleted before they were sent are skipped (``relaystore events``
no longer shows them either); events sent before the delete stay in the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ..domain.api_events import RawApiEvent
from ..domain.errors import InvalidInput, StoreClosed, StoreError
from ..domain.messages import LoadRawApiEvents, LoadState
from ..domain.paging import MAX_PAGE_LIMIT
from ..domain.publishing import fork_from_changes, fork_from_stream
from ..domain.redaction import redact
from ..domain.replication import Change
from .aio import AsyncEventStore
from .nats_common import (
    DEFAULT_STREAM,
    DEFAULT_SUBJECT_PREFIX,
    DUPLICATE_WINDOW_SECONDS,
    HEADER_SEQ,
    HEADER_STORE,
    connect,
    is_transient,
    require_nats,
    shown_servers,
    store_subjects,
    subject_token,
    validate_servers,
    validate_store_id,
    validate_stream_name,
    validate_subject_prefix,
)
from .replication import (
    HEADER_CHANGE,
    HEADER_KIND,
    HEADER_SESSION,
    Outgoing,
    change_message,
    change_subjects,
    event_subjects,
    load_round,
    marker_message,
)

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = ["Publisher", "PublisherMetrics"]

logger = logging.getLogger(__name__)

_SUBJECT_CACHE = 4096
"""How many sessions' subjects the publisher keeps (a miss asks the store once)."""


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


class _Head(msgspec.Struct):
    session_id: str


class _AckFault(msgspec.Struct):
    code: int = 0
    err_code: int = 0
    description: str = ""


class _Ack(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: _AckFault | None = None


_HEAD = msgspec.json.Decoder(_Head)
_ACK = msgspec.json.Decoder(_Ack)


_NAMES = {"e": "event seq", "c": "change", "m": "the commit marker of change"}


class _Lost(Exception):
    """The connection is no longer trustworthy: drop it and resume from the stream."""


class Publisher:
    """Publishes one store's API events to a JetStream stream; run with :meth:`run`.

    ``servers`` is a URL (``nats://HOST:PORT``, comma-separated for several) or a list.
    The stream is created when absent (file storage, subjects ``PREFIX.>``, a
    :data:`~relaystore.actors.nats_common.DUPLICATE_WINDOW_SECONDS` duplicate window).
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
        self._store = store
        self._store_id = validate_store_id(store.metrics().store_id)
        self._max_outstanding = max_outstanding
        self._ack_timeout = float(ack_timeout)
        self._connect_timeout = float(connect_timeout)
        self._backoff = (float(backoff_initial), max(float(backoff_initial), float(backoff_max)))
        self._log_interval = float(log_interval)
        self._stopping = asyncio.Event()
        self._subjects: OrderedDict[str, str] = OrderedDict()
        # Per connection: the seqs sent and not yet settled, in order; ack outcomes.
        # Tokens sent, in order; each one's (kind, number): "e" an event's seq, "c" a
        # change's number, "m" a marker's change.
        self._sent: deque[int] = deque()
        self._pending: dict[int, tuple[str, int]] = {}
        self._token = 0
        self._outcomes: dict[int, BaseException | bool] = {}
        self._progress = asyncio.Event()
        self._failure: BaseException | None = None
        self._refused: int | None = None
        self._refused_change: int | None = None
        self._once = bool(once)
        # Figures.
        self._connected = False
        self._resumed = 0
        self._sent_seq = 0
        self._acked = 0
        self._latest = store.latest_seq
        self._published = 0
        self._duplicates = 0
        self._skipped = 0
        self._reconnects = 0
        self._last_error: str | None = None
        self._acked_change = 0
        self._latest_change = 0
        self._changes_published = 0
        self._markers = 0

    @property
    def store_id(self) -> str:
        """The id of the store this publisher publishes."""
        return self._store_id

    def metrics(self) -> PublisherMetrics:
        """Where the publisher is: what it sent, what the stream acknowledged, the lag."""
        latest = max(self._latest, self._store.latest_seq)
        return PublisherMetrics(
            store_id=self._store_id,
            stream=self._stream,
            subject_prefix=self._prefix,
            connected=self._connected,
            resumed_after_seq=self._resumed,
            sent_seq=self._sent_seq,
            acked_seq=self._acked,
            store_latest_seq=latest,
            lag=max(0, latest - self._acked),
            outstanding_acks=len(self._sent),
            published=self._published,
            duplicates=self._duplicates,
            skipped=self._skipped,
            reconnects=self._reconnects,
            last_error=self._last_error,
            acked_change=self._acked_change,
            store_latest_change=self._latest_change,
            change_lag=max(0, self._latest_change - self._acked_change),
            changes_published=self._changes_published,
            markers=self._markers,
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
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                await self._connection()
                return
            except StoreClosed:
                return
            except StoreError:
                raise
            except Exception as exc:
                if not (isinstance(exc, _Lost) or is_transient(exc)):
                    raise
                self._reconnects += 1
                self._last_error = _describe(exc)
                if time.monotonic() - started > 30:
                    backoff = self._backoff[0]
                pause = backoff * random.uniform(0.5, 1.0)
                logger.warning(
                    "publish to %s: %s; reconnecting in %.1f s (stream holds up to seq %d)",
                    shown_servers(self._servers),
                    self._last_error,
                    pause,
                    self._acked,
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
        self._sent.clear()
        self._pending.clear()
        self._outcomes.clear()
        self._failure = None
        try:
            self._connected = True
            await self._ensure_stream(nc)
            after = await self._last_in_stream(nc)
            after_change = await self._last_change_in_stream(nc)
            for what, refused, stored in (
                ("event seq", self._refused, after),
                ("change", self._refused_change, after_change),
            ):
                if refused is not None and stored > refused:
                    raise StoreError(
                        f"the NATS server refused {what} {refused} of store "
                        f"{self._store_id} ({self._last_error}) but stored {what} {stored} "
                        f"after it: stream {self._stream} has a gap; fix the server's limits, "
                        "purge this store's subjects and publish again"
                    )
            self._refused = self._refused_change = None
            self._resumed = self._acked = self._sent_seq = after
            self._acked_change = after_change
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
            await nc.subscribe(f"{inbox}.*", cb=self._on_ack)
            await self._pump(nc, f"{inbox}.", after, after_change)
        finally:
            self._connected = False
            with contextlib.suppress(Exception):
                await nc.close()

    async def _ensure_stream(self, nc: Client) -> None:
        import nats.js.errors
        from nats.js import api

        jsm = nc.jsm(timeout=self._connect_timeout * 2)
        try:
            await jsm.stream_info(self._stream)
        except nats.js.errors.NotFoundError:
            config = api.StreamConfig(
                name=self._stream,
                subjects=[f"{self._prefix}.>"],
                storage=api.StorageType.FILE,
                retention=api.RetentionPolicy.LIMITS,
                discard=api.DiscardPolicy.OLD,
                duplicate_window=DUPLICATE_WINDOW_SECONDS,
                description="relaystore API events (relaystore publish)",
            )
            try:
                await jsm.add_stream(config)
                logger.info("created stream %s for %s.>", self._stream, self._prefix)
            except nats.js.errors.BadRequestError as exc:
                if exc.err_code != 10058:  # not "stream name already in use" (a race)
                    raise InvalidInput(
                        f"cannot create stream {self._stream}: {exc.description}"
                    ) from None
        probe = f"{self._prefix}.{self._store_id}.x.x"
        try:
            owner = await jsm.find_stream_name_by_subject(probe)
        except (nats.js.errors.NotFoundError, KeyError, TypeError, IndexError):
            owner = None
        if owner != self._stream:
            elsewhere = f"they belong to stream {owner}" if owner else "no stream holds them"
            raise InvalidInput(
                f"stream {self._stream} does not hold the subjects "
                f"{store_subjects(self._prefix, self._store_id)} ({elsewhere}); give "
                f"--stream {owner} or another --subject-prefix"
                if owner
                else f"stream {self._stream} does not hold the subjects "
                f"{store_subjects(self._prefix, self._store_id)} ({elsewhere}); add "
                f"{self._prefix}.> to its subjects or give another --stream"
            )

    async def _last_in_stream(self, nc: Client) -> int:
        """The seq of this store's last message in the stream (0 for none), once the
        store is known to hold the history the stream published under its id."""
        import nats.js.errors

        jsm = nc.jsm(timeout=self._connect_timeout * 2)
        subjects = event_subjects(self._prefix, self._store_id)
        try:
            message = await jsm.get_last_msg(self._stream, subjects)
        except nats.js.errors.NotFoundError:
            return 0
        headers = message.headers or {}
        seq = headers.get(HEADER_SEQ)
        if headers.get(HEADER_STORE) != self._store_id or not (
            isinstance(seq, str) and seq.isdigit()
        ):
            raise StoreError(
                f"stream {self._stream} holds a message on {message.subject} (stream seq "
                f"{message.seq}) that relaystore did not publish for store {self._store_id}; "
                "remove it, or publish under another --subject-prefix"
            )
        # The store's event at that seq and its latest seq, in one snapshot.
        page = await self._store.ask(LoadRawApiEvents(after_seq=int(seq) - 1, limit=1))
        held = page.events[0].json if page.events and page.events[0].seq == int(seq) else None
        fork = fork_from_stream(
            store_id=self._store_id,
            stream=self._stream,
            stream_seq=int(seq),
            stream_event=message.data or b"",
            store_latest=page.latest_seq,
            store_event=held,
        )
        if fork is not None:
            raise fork
        return int(seq)

    async def _last_change_in_stream(self, nc: Client) -> int:
        """The number of this store's last change in the stream (0 for none), once the
        store is known to hold it (the fork rule of :func:`fork_from_changes`)."""
        import nats.js.errors

        jsm = nc.jsm(timeout=self._connect_timeout * 2)
        try:
            message = await jsm.get_last_msg(
                self._stream, change_subjects(self._prefix, self._store_id)
            )
        except nats.js.errors.NotFoundError:
            return 0
        headers = message.headers or {}
        number = headers.get(HEADER_CHANGE)
        if headers.get(HEADER_STORE) != self._store_id or not (
            isinstance(number, str) and number.isdigit()
        ):
            raise StoreError(
                f"stream {self._stream} holds a message on {message.subject} (stream seq "
                f"{message.seq}) that relaystore did not publish for store {self._store_id}; "
                "remove it, or publish under another --subject-prefix"
            )
        held = await load_round(self._store, self._store.latest_seq, int(number) - 1, 1)
        change = held.changes[0].ref if held.changes else None
        fork = fork_from_changes(
            store_id=self._store_id,
            stream=self._stream,
            stream_change=int(number),
            stream_what=(headers.get(HEADER_KIND, ""), headers.get(HEADER_SESSION, "")),
            store_latest=held.latest_change,
            store_what=None
            if change is None or change.change_seq != int(number)
            else (change.kind, change.session_id),
        )
        if fork is not None:
            raise fork
        return int(number)

    async def _pump(self, nc: Client, reply: str, after: int, after_change: int) -> None:
        cursor, changes = after, after_change
        logged = time.monotonic()
        logged_seq = after
        store = self._store
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
                await self._send(nc, reply, batch.events)
                cursor = batch.events[-1].seq
                unmarked = True
            else:
                cursor = max(cursor, batch.next_after_seq)
            now = time.monotonic()
            if now - logged >= self._log_interval:
                rate = (self._acked - logged_seq) / (now - logged)
                logger.info(
                    "published store %s up to seq %d of %d (lag %d, %.0f events/s), "
                    "change %d of %d",
                    self._store_id,
                    self._acked,
                    self._latest,
                    max(0, self._latest - self._acked),
                    rate,
                    self._acked_change,
                    self._latest_change,
                )
                logged, logged_seq = now, self._acked
            if not batch.complete:
                continue  # more are committed already
            changes = max(changes, batch.latest_change)
            if unmarked:
                await self._publish(nc, reply, "m", changes, self._marker(changes, cursor))
                unmarked = False
            await self._settle()
            self._acked = max(self._acked, cursor)  # skipped or deleted events included
            self._acked_change = max(self._acked_change, changes)
            if self._once:
                return
            while not self._stopping.is_set():
                if nc.is_closed:
                    raise _Lost("the connection to the NATS server closed")
                # A change without an event (a record saved) wakes no wait_for: look
                # again after a short while anyway.
                if await store.wait_for(cursor + 1, timeout=0.25):
                    break
                if await self._changed_since(changes):
                    break
        await self._settle()

    def _marker(self, changes: int, cursor: int) -> Outgoing:
        return marker_message(self._prefix, self._store_id, changes, cursor)

    async def _changed_since(self, changes: int) -> bool:
        batch = await load_round(self._store, self._store.latest_seq, changes, 1)
        return bool(batch.changes)

    async def _publish(
        self, nc: Client, reply: str, kind: str, number: int, message: Outgoing
    ) -> None:
        """Send one message, waiting while ``max_outstanding`` wait for their ack."""
        if len(message.data) > nc.max_payload:
            what = "API event seq" if kind == "e" else "change"
            raise StoreError(
                f"{what} {number} is {len(message.data)} bytes, more than the NATS "
                f"server's max_payload ({nc.max_payload}); raise max_payload in its "
                "configuration and publish again"
            )
        while len(self._sent) >= self._max_outstanding:
            await self._wait_progress()
        self._token += 1
        token = self._token
        await nc.publish(
            message.subject, message.data, reply=f"{reply}{token}", headers=message.headers
        )
        self._sent.append(token)
        self._pending[token] = (kind, number)

    async def _send_changes(self, nc: Client, reply: str, changes: list[Change]) -> None:
        for change in changes:
            message = change_message(self._prefix, self._store_id, change)
            await self._publish(nc, reply, "c", change.ref.change_seq, message)
        if self._failure is not None:
            raise self._failure

    async def _send(self, nc: Client, reply: str, events: list[RawApiEvent]) -> None:
        subjects = await self._subjects_of(events)
        store_id = self._store_id
        for event, subject in zip(events, subjects, strict=True):
            if subject is None:
                self._skipped += 1
                continue
            seq = event.seq
            await self._publish(
                nc,
                reply,
                "e",
                seq,
                Outgoing(
                    subject,
                    event.json,
                    {
                        "Nats-Msg-Id": f"{store_id}:{seq}",
                        HEADER_STORE: store_id,
                        HEADER_SEQ: str(seq),
                    },
                ),
            )
            self._sent_seq = seq
        if self._failure is not None:
            raise self._failure

    async def _settle(self) -> None:
        """Wait until every sent message is acknowledged."""
        while self._sent:
            await self._wait_progress()

    async def _wait_progress(self) -> None:
        if self._failure is not None:
            raise self._failure
        self._progress.clear()
        oldest = self._pending.get(self._sent[0]) if self._sent else None
        try:
            await asyncio.wait_for(self._progress.wait(), self._ack_timeout)
        except TimeoutError:
            what = "" if oldest is None else f"{_NAMES[oldest[0]]} {oldest[1]}"
            raise _Lost(f"no acknowledgement for {what} within {self._ack_timeout:g} s") from None
        if self._failure is not None:
            raise self._failure

    async def _on_ack(self, message: Msg) -> None:
        try:
            token = int(message.subject.rsplit(".", 1)[1])
        except (ValueError, IndexError):
            return
        sent, pending = self._sent, self._pending
        entry = pending.get(token)
        if entry is None:
            return  # an ack of an earlier connection's message, or a repeat
        kind, number = entry
        name = f"{_NAMES[kind]} {number}"
        outcome: BaseException | bool
        if not message.data:
            status = (message.headers or {}).get("Status", "")
            outcome = _Lost(f"no stream answered for {name} (status {status or 'none'})")
        else:
            try:
                ack = _ACK.decode(message.data)
            except msgspec.DecodeError:
                outcome = _Lost(f"unreadable acknowledgement for {name}")
            else:
                if ack.error is not None:
                    outcome = _Lost(
                        f"the server refused {name}: {ack.error.description} "
                        f"(code {ack.error.code}, error {ack.error.err_code})"
                    )
                    if kind == "e":
                        self._refused = min(self._refused or number, number)
                    elif kind == "c":
                        self._refused_change = min(self._refused_change or number, number)
                else:
                    outcome = ack.duplicate
        self._outcomes[token] = outcome
        outcomes = self._outcomes
        while sent and sent[0] in outcomes:
            head = sent.popleft()
            kind, number = pending.pop(head)
            result = outcomes.pop(head)
            if isinstance(result, BaseException):
                if self._failure is None:
                    self._failure = result
                sent.clear()
                pending.clear()
                outcomes.clear()
                break
            if kind == "e":
                if result:
                    self._duplicates += 1
                else:
                    self._published += 1
                self._acked = number
            elif kind == "c":
                self._changes_published += not result
                self._acked_change = number
            else:
                self._markers += not result
        self._progress.set()

    async def _subjects_of(self, events: list[RawApiEvent]) -> list[str | None]:
        """Each event's subject (``None``: its session is gone, skip the event)."""
        cache = self._subjects
        sessions = [_HEAD.decode(event.json).session_id for event in events]
        resolved: dict[str, str | None] = {}
        for session in set(sessions):
            if session in cache:
                resolved[session] = cache[session]
                cache.move_to_end(session)
        missing = set(sessions) - resolved.keys()
        if missing:
            state = await self._store.ask(LoadState())
            for session in missing:
                record = state.sessions.get(session)
                if record is None:  # deleted since: not cached, a new one may come
                    resolved[session] = None
                else:
                    resolved[session] = cache[session] = self._subject(session, record.workspace_id)
            while len(cache) > _SUBJECT_CACHE:
                cache.popitem(last=False)
        return [resolved[session] for session in sessions]

    def _subject(self, session_id: str, workspace_id: str) -> str:
        try:
            workspace = subject_token("workspace", workspace_id)
            session = subject_token("session", session_id)
        except InvalidInput as exc:
            raise StoreError(
                f"cannot name a NATS subject for session {session_id!r}: {exc.detail}"
            ) from None
        return f"{self._prefix}.{self._store_id}.{workspace}.{session}"


def _describe(exc: BaseException) -> str:
    text = redact(str(exc).strip())
    name = type(exc).__name__
    if isinstance(exc, _Lost):
        return text
    return f"{name}: {text}" if text and text != name else name
