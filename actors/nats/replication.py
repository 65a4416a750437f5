"""The source of truth on the wire: subjects, headers and values of what ``publish`` sends.

One store's messages in the stream, all under ``PREFIX.STORE_ID``:

=======================================  =============================================
subject                                   what
=======================================  =============================================
``PREFIX.STORE.WORKSPACE.SESSION``        an API event (unchanged: the fleet feed)
``PREFIX.STORE.WORKSPACE.SESSION.record`` a ``record`` change: JSON
                                          :class:`~relaystore.domain.replication.RecordState`
``PREFIX.STORE.WORKSPACE.SESSION.start``  a ``start`` change: JSON
                                          :class:`~relaystore.domain.replication.StartState`
``PREFIX.STORE.WORKSPACE.SESSION.log``    a ``log`` change: one relay log page, the
                                          worker's lines as the store keeps them
                                          (newline-joined, zlib-compressed)
``PREFIX.STORE.commit``                   a commit marker: everything before it in the
                                          stream is a committed state of the store
``PREFIX.STORE.gap``                      a gap: seqs the store no longer held when they
                                          were published (its sessions deleted); no data
=======================================  =============================================

Headers: every message carries ``Relaystore-Store`` and a ``Nats-Msg-Id`` (the
stream's duplicate window drops a repeat): ``STORE:SEQ`` for an event (with
``Relaystore-Seq``), ``STORE:c:N`` for change ``N`` (with ``Relaystore-Change``,
``Relaystore-Kind`` and ``Relaystore-Session``; a log page adds
``Relaystore-First-Ordinal``, ``Relaystore-Last-Ordinal`` and ``Relaystore-Raw-Bytes``,
or ``Relaystore-Gone: 1`` with no data for a page pruned or deleted before it was
sent), ``STORE:m:N:SEQ`` for a marker (with ``Relaystore-Change: N`` and
``Relaystore-Seq: SEQ``: the store's newest change and event it covers;
``Relaystore-Gaps: 1``: its publisher sends a gap for every seq it does not send), and
``STORE:g:FIRST:LAST`` for a gap (``Relaystore-Seq: FIRST``, ``Relaystore-Last-Seq:
LAST``).

The subjects of the three sorts have different token counts, so a filter selects one
sort: ``PREFIX.STORE.*.*`` the feed (what ``fleet events`` reads), ``PREFIX.STORE.*.*.*``
the changes, ``PREFIX.STORE.commit`` the markers, ``PREFIX.STORE.gap`` the gaps.

A reader of the stream (:mod:`relaystore.actors.nats.replica`) applies a store's messages
marker to marker, each span in one transaction, so what it holds is always a state
the store committed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from ...domain.activity import published_activity
from ...domain.errors import InvalidInput, StoreError
from ...domain.replication import (
    GAP,
    Change,
    Incoming,
    LogPageRow,
    RecordState,
    ReplicationRound,
    StartState,
    WireEvent,
    check_record_ids,
)
from .common import HEADER_SEQ, HEADER_STORE, subject_token

if TYPE_CHECKING:
    from ..aio import AsyncEventStore

__all__ = [
    "HEADER_CHANGE",
    "HEADER_KIND",
    "HEADER_SESSION",
    "MARKER",
    "Outgoing",
    "change_message",
    "change_subjects",
    "decode_incoming",
    "event_message",
    "event_subjects",
    "gap_message",
    "load_round",
    "marker_message",
    "marker_subject",
    "session_subject",
]

HEADER_CHANGE = "Relaystore-Change"
HEADER_KIND = "Relaystore-Kind"
HEADER_SESSION = "Relaystore-Session"
HEADER_FIRST = "Relaystore-First-Ordinal"
HEADER_LAST = "Relaystore-Last-Ordinal"
HEADER_RAW = "Relaystore-Raw-Bytes"
HEADER_GONE = "Relaystore-Gone"
HEADER_LAST_SEQ = "Relaystore-Last-Seq"
HEADER_GAPS = "Relaystore-Gaps"
MARKER = "commit"
_KINDS = ("record", "start", "log")


def event_subjects(prefix: str, store_id: str) -> str:
    """The filter of one store's API events."""
    return f"{prefix}.{store_id}.*.*"


def change_subjects(prefix: str, store_id: str) -> str:
    """The filter of one store's changes."""
    return f"{prefix}.{store_id}.*.*.*"


def marker_subject(prefix: str, store_id: str) -> str:
    """The subject of one store's commit markers."""
    return f"{prefix}.{store_id}.{MARKER}"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message to publish."""

    subject: str
    data: bytes
    headers: dict[str, str]


_JSON = msgspec.json.Encoder()


def session_subject(prefix: str, store_id: str, workspace_id: str, session_id: str) -> str:
    """``PREFIX.STORE.WORKSPACE.SESSION``: the subject of a session's events, and the stem
    of its changes'; :class:`StoreError` for ids no subject token can hold."""
    try:
        workspace = subject_token("workspace", workspace_id)
        session = subject_token("session", session_id)
    except InvalidInput as exc:
        raise StoreError(
            f"cannot name a NATS subject for session {session_id!r}: {exc.detail}"
        ) from None
    return f"{prefix}.{store_id}.{workspace}.{session}"


def event_message(subject: str, store_id: str, seq: int, data: bytes) -> Outgoing:
    """The message of the API event ``seq`` (its wire line ``data``) on ``subject``."""
    return Outgoing(
        subject,
        data,
        {"Nats-Msg-Id": f"{store_id}:{seq}", HEADER_STORE: store_id, HEADER_SEQ: str(seq)},
    )


def change_message(prefix: str, store_id: str, change: Change) -> Outgoing:
    """The message of one change (see the module doc)."""
    ref = change.ref
    stem = session_subject(prefix, store_id, ref.workspace_id, ref.session_id)
    headers = {
        "Nats-Msg-Id": f"{store_id}:c:{ref.change_seq}",
        HEADER_STORE: store_id,
        HEADER_CHANGE: str(ref.change_seq),
        HEADER_KIND: ref.kind,
        HEADER_SESSION: ref.session_id,
    }
    value = change.value
    if isinstance(value, LogPageRow):
        headers[HEADER_FIRST] = str(value.first_ordinal)
        headers[HEADER_LAST] = str(value.last_ordinal)
        headers[HEADER_RAW] = str(value.raw_bytes)
        data = value.lines
    elif value is None:
        headers[HEADER_GONE] = "1"
        headers[HEADER_FIRST] = str(ref.first_ordinal)
        data = b""
    else:
        data = _JSON.encode(value)
    return Outgoing(f"{stem}.{ref.kind}", data, headers)


def marker_message(prefix: str, store_id: str, change: int, seq: int) -> Outgoing:
    """The commit marker after everything through ``change`` and ``seq``."""
    return Outgoing(
        marker_subject(prefix, store_id),
        b"",
        {
            "Nats-Msg-Id": f"{store_id}:m:{change}:{seq}",
            HEADER_STORE: store_id,
            HEADER_CHANGE: str(change),
            HEADER_SEQ: str(seq),
            HEADER_KIND: MARKER,
            HEADER_GAPS: "1",
        },
    )


def gap_message(prefix: str, store_id: str, first: int, last: int) -> Outgoing:
    """The gap of seqs ``first..last``: the store held none of them when the round that
    would have sent them was read (their sessions deleted)."""
    return Outgoing(
        f"{prefix}.{store_id}.{GAP}",
        b"",
        {
            "Nats-Msg-Id": f"{store_id}:g:{first}:{last}",
            HEADER_STORE: store_id,
            HEADER_SEQ: str(first),
            HEADER_LAST_SEQ: str(last),
        },
    )


async def load_round(
    store: AsyncEventStore, after_seq: int, after_change: int, limit: int
) -> ReplicationRound:
    """The next round to publish, read by one of the store's readers in one snapshot."""
    from ..store_internals import store_internals

    door = store_internals(store)
    return await asyncio.to_thread(door.replication_round, after_seq, after_change, limit)


# -- reading them back ---------------------------------------------------------------------


_EVENT = msgspec.json.Decoder(WireEvent)
_RECORD = msgspec.json.Decoder(RecordState)
_START = msgspec.json.Decoder(StartState)


def _number(headers: dict[str, str], name: str, where: str) -> int:
    value = headers.get(name, "")
    if not value.isdigit():
        raise StoreError(f"{where}: header {name} is missing or not a number")
    return int(value)


def decode_incoming(
    prefix: str, subject: str, headers: dict[str, str] | None, data: bytes, stream_seq: int
) -> Incoming:
    """Check and decode one message of the stream (:class:`StoreError` naming its
    subject and stream sequence when relaystore did not publish it so)."""
    where = f"the message on {subject} (stream seq {stream_seq})"
    headers = headers or {}
    store_id = headers.get(HEADER_STORE, "")
    tokens = subject[len(prefix) + 1 :].split(".") if subject.startswith(prefix + ".") else []
    if not tokens or tokens[0] != store_id:
        raise StoreError(f"{where} was not published by relaystore (no matching {HEADER_STORE})")
    try:
        if len(tokens) == 3:
            event = _EVENT.decode(data)
            if event.seq != _number(headers, HEADER_SEQ, where):
                raise StoreError(f"{where}: its {HEADER_SEQ} is not the event's seq")
            check_record_ids(where, event.session_id, None)
            published_activity(event.type, event.data, where=where)
            return Incoming("event", store_id, event.seq, event.session_id, event)
        if len(tokens) == 2 and tokens[1] == MARKER:
            return Incoming(
                MARKER,
                store_id,
                _number(headers, HEADER_CHANGE, where),
                None,
                None,
                marker_seq=_number(headers, HEADER_SEQ, where),
                says_gaps=headers.get(HEADER_GAPS) == "1",
            )
        if len(tokens) == 2 and tokens[1] == GAP:
            first = _number(headers, HEADER_SEQ, where)
            last = _number(headers, HEADER_LAST_SEQ, where)
            if not 1 <= first <= last:
                raise StoreError(f"{where}: a gap of seqs {first}..{last}")
            return Incoming(GAP, store_id, first, None, None, marker_seq=last)
        kind = headers.get(HEADER_KIND, "")
        session = headers.get(HEADER_SESSION, "")
        if len(tokens) != 4 or tokens[3] != kind or kind not in _KINDS or not session:
            raise StoreError(f"{where} is not an event, a change or a commit marker")
        number = _number(headers, HEADER_CHANGE, where)
        value: RecordState | StartState | LogPageRow | None
        if kind == "record":
            value = _RECORD.decode(data)
        elif kind == "start":
            value = _START.decode(data)
        elif headers.get(HEADER_GONE) == "1":
            check_record_ids(where, session, None)
            gone = _number(headers, HEADER_FIRST, where)
            return Incoming(kind, store_id, number, session, None, first_ordinal=gone)
        else:
            value = LogPageRow(
                first_ordinal=_number(headers, HEADER_FIRST, where),
                last_ordinal=_number(headers, HEADER_LAST, where),
                raw_bytes=_number(headers, HEADER_RAW, where),
                lines=bytes(data),
            )
        if isinstance(value, RecordState | StartState) and value.session_id != session:
            raise StoreError(f"{where}: its value is of session {value.session_id!r}")
        check_record_ids(where, session, value)
        logged = value.first_ordinal if isinstance(value, LogPageRow) else None
        return Incoming(kind, store_id, number, session, value, first_ordinal=logged)
    except msgspec.DecodeError as exc:
        raise StoreError(f"{where} does not decode: {exc}") from None
