"""The publisher's stream: that it exists and holds this store's subjects, where this
store's history in it ends, and which subject each event goes to.

* :meth:`StreamTarget.ensure` creates the stream when absent (file storage, subjects
  ``PREFIX.>``, the :data:`~relaystore.actors.nats.common.DUPLICATE_WINDOW_SECONDS`
  duplicate window) and refuses one that does not hold ``PREFIX.STORE_ID.>``.
* :meth:`StreamTarget.last_event` and :meth:`StreamTarget.last_change` read, from the
  stream itself, this store's last event and last change in it (the server's
  last-by-subject lookup): where a connection resumes. Each first checks that the store
  holds the history the stream holds under its id (the fork rules of
  :mod:`relaystore.domain.publishing`) and that the message is relaystore's.
* :meth:`StreamTarget.remove_foreign` deletes one message on this store's subjects
  that relaystore did not publish for it (``publish --remove-foreign``), and nothing else.
* :class:`PublishedRecord` keeps, beside the stream, what the stream acknowledged of
  this store, so that a stream that lost the store's messages (purged, or removed by
  its limits) is told apart from one that never had them, and the publisher says so.
* :class:`SubjectCache` names each event's subject from its session's workspace, asking
  the store once per session it has not seen (a deleted session: no subject, the event
  is skipped).

Must not: publish (the acknowledgements are :mod:`relaystore.actors.nats.acks`', the
rounds :mod:`relaystore.actors.nats.publish`'), or log but through the logger it is
given (the publisher's, which ``relaystore publish`` shows).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from ...domain.api_events import RawApiEvent
from ...domain.errors import InvalidInput, StoreError
from ...domain.messages import LoadRawApiEvents, LoadState
from ...domain.publishing import fork_from_changes, fork_from_stream, lost_from_stream
from ..aio import AsyncEventStore
from .common import DUPLICATE_WINDOW_SECONDS, HEADER_SEQ, HEADER_STORE, store_subjects
from .replication import (
    HEADER_CHANGE,
    HEADER_KIND,
    HEADER_SESSION,
    change_subjects,
    event_subjects,
    load_round,
    session_subject,
)

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js.api import RawStreamMsg

__all__ = [
    "PUBLISHED_BUCKET",
    "RECORD_INTERVAL",
    "SUBJECT_CACHE",
    "PublishedRecord",
    "StreamTarget",
    "SubjectCache",
]

SUBJECT_CACHE = 4096
"""How many sessions' subjects the publisher keeps (a miss asks the store once)."""


class _Head(msgspec.Struct):
    session_id: str


_HEAD = msgspec.json.Decoder(_Head)


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """Where one store publishes: ``stream``, under ``prefix``, as ``store_id``;
    ``timeout`` bounds each JetStream API request."""

    stream: str
    prefix: str
    store_id: str
    timeout: float

    async def ensure(self, nc: Client, log: logging.Logger) -> None:
        """Create the stream when absent; :class:`InvalidInput` when it does not hold
        this store's subjects (naming the stream that does, if any)."""
        import nats.js.errors
        from nats.js import api

        jsm = nc.jsm(timeout=self.timeout)
        try:
            await jsm.stream_info(self.stream)
        except nats.js.errors.NotFoundError:
            config = api.StreamConfig(
                name=self.stream,
                subjects=[f"{self.prefix}.>"],
                storage=api.StorageType.FILE,
                retention=api.RetentionPolicy.LIMITS,
                discard=api.DiscardPolicy.OLD,
                duplicate_window=DUPLICATE_WINDOW_SECONDS,
                description="relaystore API events (relaystore publish)",
            )
            try:
                await jsm.add_stream(config)
                log.info("created stream %s for %s.>", self.stream, self.prefix)
            except nats.js.errors.BadRequestError as exc:
                if exc.err_code != 10058:  # not "stream name already in use" (a race)
                    raise InvalidInput(
                        f"cannot create stream {self.stream}: {exc.description}"
                    ) from None
        probe = f"{self.prefix}.{self.store_id}.x.x"
        try:
            owner = await jsm.find_stream_name_by_subject(probe)
        except (nats.js.errors.NotFoundError, KeyError, TypeError, IndexError):
            owner = None
        if owner != self.stream:
            elsewhere = f"they belong to stream {owner}" if owner else "no stream holds them"
            subjects = store_subjects(self.prefix, self.store_id)
            raise InvalidInput(
                f"stream {self.stream} does not hold the subjects {subjects} ({elsewhere}); "
                f"give --stream {owner} or another --subject-prefix"
                if owner
                else f"stream {self.stream} does not hold the subjects {subjects} "
                f"({elsewhere}); add {self.prefix}.> to its subjects or give another --stream"
            )

    async def last_event(self, nc: Client, store: AsyncEventStore) -> int:
        """The seq of this store's last event in the stream (0 for none), once the
        store is known to hold the history the stream published under its id."""
        message = await self._last(nc, event_subjects(self.prefix, self.store_id))
        if message is None:
            return 0
        seq = self._number(message, HEADER_SEQ)
        # The store's event at that seq and its latest seq, in one snapshot.
        page = await store.ask(LoadRawApiEvents(after_seq=seq - 1, limit=1))
        held = page.events[0].json if page.events and page.events[0].seq == seq else None
        fork = fork_from_stream(
            store_id=self.store_id,
            stream=self.stream,
            stream_seq=seq,
            stream_event=message.data or b"",
            store_latest=page.latest_seq,
            store_event=held,
        )
        if fork is not None:
            raise fork
        return seq

    async def last_change(self, nc: Client, store: AsyncEventStore) -> int:
        """The number of this store's last change in the stream (0 for none), once the
        store is known to hold it (the fork rule of :func:`fork_from_changes`)."""
        message = await self._last(nc, change_subjects(self.prefix, self.store_id))
        if message is None:
            return 0
        number = self._number(message, HEADER_CHANGE)
        headers = message.headers or {}
        held = await load_round(store, store.latest_seq, number - 1, 1)
        change = held.changes[0].ref if held.changes else None
        fork = fork_from_changes(
            store_id=self.store_id,
            stream=self.stream,
            stream_change=number,
            stream_what=(headers.get(HEADER_KIND, ""), headers.get(HEADER_SESSION, "")),
            store_latest=held.latest_change,
            store_what=None
            if change is None or change.change_seq != number
            else (change.kind, change.session_id),
        )
        if fork is not None:
            raise fork
        return number

    async def _last(self, nc: Client, subjects: str) -> RawStreamMsg | None:
        """The stream's last message on ``subjects`` (None: it holds none)."""
        import nats.js.errors

        try:
            return await nc.jsm(timeout=self.timeout).get_last_msg(self.stream, subjects)
        except nats.js.errors.NotFoundError:
            return None

    def _number(self, message: RawStreamMsg, header: str) -> int:
        """The number in ``header`` of a message relaystore published for this store;
        :class:`StoreError` for any other message, naming it and the remedy."""
        number = self._ours(message, header)
        if number is None:
            raise StoreError(
                f"stream {self.stream} holds a message on {message.subject} (stream seq "
                f"{message.seq}) that relaystore did not publish for store {self.store_id}; "
                f"remove it with `relaystore publish --remove-foreign {message.seq}` (or "
                f"`nats stream rmm {self.stream} {message.seq}`) and publish again"
            )
        return number

    def _ours(self, message: RawStreamMsg, *headers: str) -> int | None:
        """The number in the first of ``headers`` a message relaystore published for
        this store carries; None for a message relaystore did not publish for it."""
        held = message.headers or {}
        if held.get(HEADER_STORE) != self.store_id:
            return None
        for header in headers:
            number = held.get(header)
            if isinstance(number, str) and number.isdigit():
                return int(number)
        return None

    async def remove_foreign(self, nc: Client, stream_seq: int, log: logging.Logger) -> None:
        """Delete the message at ``stream_seq`` when it is on this store's subjects and
        relaystore did not publish it for this store; :class:`InvalidInput` for any
        other message (nothing is deleted). A message already gone is logged."""
        import nats.js.errors

        jsm = nc.jsm(timeout=self.timeout)
        try:
            message = await jsm.get_msg(self.stream, stream_seq, direct=False)
        except nats.js.errors.NotFoundError:
            log.info("stream %s holds no message at stream seq %d", self.stream, stream_seq)
            return
        subject = message.subject or ""
        mine = store_subjects(self.prefix, self.store_id)
        if not subject.startswith(mine[:-1]):
            raise InvalidInput(
                f"--remove-foreign {stream_seq}: that message of stream {self.stream} is on "
                f"{subject}, not on this store's subjects {mine}; nothing removed"
            )
        if self._ours(message, HEADER_SEQ, HEADER_CHANGE) is not None:
            raise InvalidInput(
                f"--remove-foreign {stream_seq}: the message on {subject} is one relaystore "
                f"published for store {self.store_id}; nothing removed"
            )
        await jsm.delete_msg(self.stream, stream_seq)
        log.warning(
            "removed the foreign message on %s (stream seq %d) from stream %s",
            subject,
            stream_seq,
            self.stream,
        )


PUBLISHED_BUCKET = "{stream}_published"
"""The key-value bucket beside a stream where each store's publisher records what the
stream acknowledged (key ``PREFIX.STORE_ID``, value ``{"seq": N, "change": M}``)."""

RECORD_INTERVAL = 1.0
"""At most one record write a second while publishing (and one when a round of
``once`` ends or the publisher stops): the record may lag the stream, never pass it."""


class _Published(msgspec.Struct):
    seq: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0
    change: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)] = 0


_PUBLISHED_DECODER = msgspec.json.Decoder(_Published)


class PublishedRecord:
    """What the stream acknowledged of one store, kept in :data:`PUBLISHED_BUCKET`
    (created with the stream's replicas when absent). Best effort: a server that does
    not let the publisher keep it (no key-value store, no permission) costs the
    warning of :meth:`check`, once, and nothing else."""

    def __init__(self, target: StreamTarget, log: logging.Logger) -> None:
        self._target = target
        self._log = log
        self._kv: Any = None
        self._key = f"{target.prefix}.{target.store_id}"
        self._recorded = _Published()
        self._written_at = 0.0
        self._failed = False

    async def check(self, nc: Client, stream_seq: int, stream_change: int) -> str | None:
        """Read the record and return what to say when the stream, whose last event and
        change of the store are ``stream_seq`` and ``stream_change``, lost messages it
        acknowledged (:func:`~relaystore.domain.publishing.lost_from_stream`); the
        record then follows the stream to where it ends."""
        import nats.errors
        import nats.js.errors
        from nats.js import api

        bucket = PUBLISHED_BUCKET.format(stream=self._target.stream)
        try:
            js = nc.jetstream(timeout=self._target.timeout)
            try:
                self._kv = await js.key_value(bucket)
            except nats.js.errors.BucketNotFoundError:
                info = await nc.jsm(timeout=self._target.timeout).stream_info(self._target.stream)
                self._kv = await js.create_key_value(
                    bucket=bucket,
                    history=1,
                    storage=api.StorageType.FILE,
                    replicas=info.config.num_replicas or 1,
                    description=f"what stream {self._target.stream} acknowledged of each store",
                )
            try:
                entry = await self._kv.get(self._key)
                self._recorded = _PUBLISHED_DECODER.decode(entry.value or b"{}")
            except nats.js.errors.KeyNotFoundError:
                self._recorded = _Published()
        except (msgspec.ValidationError, msgspec.DecodeError):
            self._recorded = _Published()  # not relaystore's: written over below
        except (nats.errors.Error, OSError) as exc:
            self._give_up(exc)
            return None
        said = lost_from_stream(
            store_id=self._target.store_id,
            stream=self._target.stream,
            stream_seq=stream_seq,
            stream_change=stream_change,
            published_seq=self._recorded.seq,
            published_change=self._recorded.change,
        )
        await self.write(stream_seq, stream_change, force=True)
        return said

    async def write(self, seq: int, change: int, *, force: bool = False) -> None:
        """Record that the stream acknowledged events up to ``seq`` and changes up to
        ``change``: at most once per :data:`RECORD_INTERVAL` unless ``force``, and
        nothing when the record says so already."""
        now = time.monotonic()
        if self._kv is None or (seq, change) == (self._recorded.seq, self._recorded.change):
            return
        if not force and now - self._written_at < RECORD_INTERVAL:
            return
        import nats.errors

        value = _Published(seq=seq, change=change)
        try:
            await self._kv.put(self._key, msgspec.json.encode(value))
        except (nats.errors.Error, OSError) as exc:
            self._give_up(exc)
            return
        self._recorded, self._written_at = value, now

    def _give_up(self, exc: BaseException) -> None:
        self._kv = None
        if not self._failed:
            self._failed = True
            self._log.warning(
                "cannot keep the record of what stream %s acknowledged of store %s in "
                "bucket %s (%s): a purge of its messages will not be told",
                self._target.stream,
                self._target.store_id,
                PUBLISHED_BUCKET.format(stream=self._target.stream),
                type(exc).__name__,
            )


class SubjectCache:
    """Each event's subject, the :data:`SUBJECT_CACHE` most recently used sessions' kept."""

    def __init__(self, store: AsyncEventStore, prefix: str, store_id: str) -> None:
        self._store = store
        self._prefix = prefix
        self._store_id = store_id
        self._subjects: OrderedDict[str, str] = OrderedDict()

    async def subjects_of(self, events: list[RawApiEvent]) -> list[str | None]:
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
                    resolved[session] = cache[session] = session_subject(
                        self._prefix, self._store_id, record.workspace_id, session
                    )
            while len(cache) > SUBJECT_CACHE:
                cache.popitem(last=False)
        return [resolved[session] for session in sessions]
