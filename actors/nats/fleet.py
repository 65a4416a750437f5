"""The fleet feed: the merged API events of every store in a JetStream stream.

``async for event in FleetFeed(servers, ...)`` yields :class:`FleetEvent` s in stream
order, so each store's events come in its ``seq`` order (the publisher sends them so).
Filters map to one subject filter (:func:`~relaystore.actors.nats.common.filter_subject`):
``--store`` the store's token, ``--workspace`` and ``--session`` theirs, ``*`` for any.

Delivery. A pull consumer, acknowledged with ``AckAll`` one batch at a time: a batch is
acknowledged when the iterator is asked for the event after it (or when the feed
closes). With ``durable`` the consumer is named and kept by the server, so a later feed
with the same name resumes after the last acknowledged batch: at least once, and what a
crash repeats is at most the batch it was in (recognisable by ``(store, seq)``): a feed
that finds its durable consumer holding such a batch starts it again right after the
acknowledged floor, so the repeat comes first and in order. One reader per durable name
(a second would restart the first's consumer). Without
``durable`` the consumer is ephemeral (the server drops it a minute after the feed goes
away) and starts at the stream's first message. Within one feed an event already
yielded for its store (a redelivery) is not yielded again.

Without ``follow`` the feed ends once it delivered the last message its filter selects
as the stream's leader has it when the feed starts (re-read whenever a wait brings
nothing: a message deleted meanwhile ends it sooner), never on a consumer's own count of
what is pending, which in a cluster is one replica's and may lag
(:func:`~relaystore.actors.nats.common.last_stream_seq`); with it, it waits for more.
nats-py reconnects on its own here (a consumer, unlike the publisher, has nothing to
resend).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import msgspec

from ...domain.errors import InvalidInput, StoreError
from ...domain.redaction import redact
from .common import (
    DEFAULT_STREAM,
    DEFAULT_SUBJECT_PREFIX,
    HEADER_SEQ,
    HEADER_STORE,
    connect,
    filter_subject,
    is_transient,
    last_stream_seq,
    require_nats,
    require_stream,
    shown_servers,
    validate_consumer_name,
    validate_servers,
    validate_store_id,
    validate_stream_name,
    validate_subject_prefix,
)

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = ["FleetEvent", "FleetFeed"]

_ACK_WAIT_SECONDS = 300.0
_EPHEMERAL_IDLE_SECONDS = 60.0


class FleetEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One API event of one store: ``event`` is its wire line, as ``relaystore events``
    prints it. ``line()`` is ``{"store": ..., "seq": ..., "event": <the wire object>}``."""

    store: str
    seq: int
    event: msgspec.Raw

    def line(self) -> bytes:
        """The event as one JSON line (no newline)."""
        return msgspec.json.encode(self)


class FleetFeed:
    """The merged feed of a stream's stores; iterate with ``async for``, close when done."""

    def __init__(
        self,
        servers: str | Sequence[str],
        *,
        stream: str = DEFAULT_STREAM,
        subject_prefix: str = DEFAULT_SUBJECT_PREFIX,
        store_id: str | None = None,
        workspace_id: str | None = None,
        session_id: str | None = None,
        durable: str | None = None,
        follow: bool = False,
        batch: int = 256,
        wait: float = 2.0,
        connect_timeout: float = 2.0,
    ) -> None:
        require_nats("the fleet feed")
        self._servers = validate_servers(servers)
        self._stream = validate_stream_name(stream)
        prefix = validate_subject_prefix(subject_prefix)
        if store_id is not None:
            validate_store_id(store_id)
        self._subject = filter_subject(
            prefix, store_id=store_id, workspace_id=workspace_id, session_id=session_id
        )
        self._durable = None if durable is None else validate_consumer_name(durable)
        if type(batch) is not int or not 1 <= batch <= 10_000:
            raise InvalidInput("FleetFeed: batch must be an int from 1 to 10000")
        for name, value in (("wait", wait), ("connect_timeout", connect_timeout)):
            if type(value) not in (int, float) or not 0 < value < 1e6:
                raise InvalidInput(f"FleetFeed: {name} must be a number of seconds > 0")
        self._follow = bool(follow)
        self._batch = batch
        self._wait = float(wait)
        self._connect_timeout = float(connect_timeout)
        self._nc: Client | None = None
        self._unacked: Msg | None = None

    @property
    def subject(self) -> str:
        """The subject filter the consumer uses."""
        return self._subject

    def __aiter__(self) -> AsyncIterator[FleetEvent]:
        return self._events()

    async def close(self) -> None:
        """Acknowledge what was yielded and disconnect (a durable consumer stays)."""
        nc, self._nc = self._nc, None
        if nc is None:
            return
        with contextlib.suppress(Exception):
            await self._ack()
            await nc.flush(timeout=2)
        with contextlib.suppress(Exception):
            await nc.close()

    async def __aenter__(self) -> FleetFeed:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _ack(self) -> None:
        message, self._unacked = self._unacked, None
        if message is not None:
            await message.ack()

    async def _events(self) -> AsyncIterator[FleetEvent]:
        # nats-py retries a first connection forever when it may reconnect: try once
        # without, so that an unreachable server is one clear error, not a hang.
        try:
            probe = await connect(
                self._servers,
                name="relaystore-fleet",
                connect_timeout=self._connect_timeout,
                reconnect=False,
            )
        except Exception as exc:
            if not is_transient(exc):
                raise
            raise StoreError(
                f"cannot reach a NATS server at {shown_servers(self._servers)} "
                f"({type(exc).__name__}: {redact(str(exc))})"
            ) from None
        await probe.close()
        self._nc = nc = await connect(
            self._servers,
            name="relaystore-fleet",
            connect_timeout=self._connect_timeout,
            reconnect=True,
        )
        try:
            subscription = await self._consumer(nc)
            # Without follow the feed ends at the stream's end as its leader has it (a
            # consumer's num_pending is only its replica's: see last_stream_seq).
            end = 0 if self._follow else await self._end(nc)
            if not self._follow and end == 0:
                return
            newest: dict[str, int] = {}
            while True:
                await self._ack()
                try:
                    messages = await subscription.fetch(self._batch, timeout=self._wait)
                except TimeoutError:
                    # nats-py raises its own TimeoutError (a subclass) or, when the wait
                    # runs out between its two pull requests, the builtin: both mean none yet.
                    # Unless this task was cancelled meanwhile: asyncio.wait_for (which
                    # nats-py waits with) can turn a cancellation that meets its timeout into
                    # a TimeoutError, and a feed that went on would never end.
                    _reraise_a_swallowed_cancel()
                    if self._follow:
                        continue
                    # Nothing came: the consumer's replica may still be catching up,
                    # or the messages up to the end were deleted meanwhile.
                    end = min(end, await self._end(nc))
                    info = await subscription.consumer_info()
                    if info.delivered.stream_seq >= end:
                        return
                    continue
                for message in messages:
                    event = _event(message)
                    self._unacked = message
                    if newest.get(event.store, 0) >= event.seq:
                        continue  # redelivered within this feed
                    newest[event.store] = event.seq
                    yield event
                if not self._follow and messages[-1].metadata.sequence.stream >= end:
                    return
        finally:
            await self.close()

    async def _end(self, nc: Client) -> int:
        """The stream sequence of the last message the feed's filter selects (0: none)."""
        return await last_stream_seq(nc, self._stream, self._subject, self._connect_timeout * 2)

    async def _consumer(self, nc: Client) -> Any:
        import nats.js.errors
        from nats.js import api

        await require_stream(
            nc,
            self._stream,
            self._servers,
            self._connect_timeout * 2,
            "start relaystore publish first, or give --stream",
        )
        jsm = nc.jsm(timeout=self._connect_timeout * 2)
        config = api.ConsumerConfig(
            durable_name=self._durable,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.ALL,
            ack_wait=_ACK_WAIT_SECONDS,
            filter_subject=self._subject,
            max_ack_pending=max(1024, 4 * self._batch),
            inactive_threshold=None if self._durable else _EPHEMERAL_IDLE_SECONDS,
        )
        if self._durable is not None:
            try:
                info = await jsm.consumer_info(self._stream, self._durable)
            except nats.js.errors.NotFoundError:
                info = None
            if info is not None and info.config.filter_subject != self._subject:
                raise InvalidInput(
                    f"durable consumer {self._durable} of stream {self._stream} follows "
                    f"{info.config.filter_subject}, not {self._subject}; give the filters it "
                    "was created with, or another --durable"
                )
            if info is not None and (info.num_ack_pending or 0) > 0:
                # A previous reader died holding a delivered, unacknowledged batch: the
                # server would hand it out again only after the ack wait, behind newer
                # messages. Start the consumer again right after what was acknowledged,
                # so the feed stays in order and repeats exactly that batch.
                floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
                await jsm.delete_consumer(self._stream, self._durable)
                config.deliver_policy = api.DeliverPolicy.BY_START_SEQUENCE
                config.opt_start_seq = floor + 1
                info = None
            if info is None:
                info = await jsm.add_consumer(self._stream, config)
        else:
            info = await jsm.add_consumer(self._stream, config)
        js = nc.jetstream(timeout=self._connect_timeout * 2)
        return await js.pull_subscribe_bind(info.name, self._stream)


def _event(message: Msg) -> FleetEvent:
    headers = message.headers or {}
    store, seq = headers.get(HEADER_STORE), headers.get(HEADER_SEQ)
    if not (isinstance(store, str) and isinstance(seq, str) and seq.isdigit()):
        raise StoreError(
            f"the stream holds a message on {message.subject} without relaystore's "
            f"{HEADER_STORE} and {HEADER_SEQ} headers; it was not published by relaystore"
        )
    return FleetEvent(store=store, seq=int(seq), event=msgspec.Raw(message.data))


def _reraise_a_swallowed_cancel() -> None:
    """Raise :class:`asyncio.CancelledError` when the running task has a cancellation
    requested that nothing has seen yet (a wait turned it into a timeout)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
