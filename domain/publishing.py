"""Whether a store's history is the one a stream published under its id: the fork rule.

A store id names one history in a NATS stream: every ``(store id, seq)`` is published
once, and a consumer keys on it. A store restored from a backup keeps its id, which is
right while the backup holds everything that was published (it then publishes what
follows, as the same store). A backup older than what was published is another
history under the same id: its next events would take seqs the stream holds already
with other content.

Rule (:func:`fork_from_stream`), checked each time a publisher resumes, against the
stream's last message for the id (its seq ``S`` and bytes) and the store in one
snapshot (its latest seq ever committed, its event ``S`` if it still holds one):

* the store's latest seq is below ``S``: forked (a store's seqs never go back, deletes
  included, so it never committed what the stream holds at ``S``);
* the store holds event ``S`` and its bytes differ from the stream's: forked;
* otherwise not: event ``S`` is the same, or the store deleted that event's session
  since it was published (nothing left to compare; the seqs still agree).

The same rule holds for the store's numbered changes (:func:`fork_from_changes`): the
stream's last change ``N`` for the id against the store's newest change number and its
change ``N`` (what changed: kind and session).

A stream can also lose what a store published to it: purged, or its limits (``max_age``,
``max_msgs``, ``max_bytes``) removed the store's messages. Limits remove the oldest
first, so a stream that still holds any message of the store holds its newest; what the
stream acknowledged is recorded beside it (the publisher's record, written after the
acks). Rule (:func:`lost_from_stream`): the stream's last event (or change) of the store
is below the one recorded: the stream lost the store's newest messages and the publisher
will publish them again from there. That is said, never silent: a consumer that kept
them (a mirror) applies none twice, but one that reads the stream afresh finds what was
published again, and what the server drops as a repeat while its duplicate window still
holds the lost ids is missing from it.

A forked store is refused, never published: it takes a new id
(``relaystore new-store-id``) and then publishes its whole history as a new store,
while the stream keeps the old id's history as it was.
"""

from __future__ import annotations

from .errors import StoreForked

__all__ = ["fork_from_changes", "fork_from_stream", "lost_from_stream"]


def fork_from_stream(
    *,
    store_id: str,
    stream: str,
    stream_seq: int,
    stream_event: bytes,
    store_latest: int,
    store_event: bytes | None,
) -> StoreForked | None:
    """The refusal when the store forked from what ``stream`` holds for ``store_id``
    (its last message: ``stream_seq``, ``stream_event``), or None; see the module doc.
    ``store_event``: the store's event ``stream_seq`` as published bytes, None when the
    store does not hold it."""
    return _fork(
        store_id,
        stream,
        ("events up to seq", "latest seq", "event seq"),
        stream_seq,
        stream_event,
        store_latest,
        store_event,
    )


def fork_from_changes(
    *,
    store_id: str,
    stream: str,
    stream_change: int,
    stream_what: tuple[str, str],
    store_latest: int,
    store_what: tuple[str, str] | None,
) -> StoreForked | None:
    """The refusal when the store's changes forked from what ``stream`` holds for
    ``store_id`` (its last change: number ``stream_change``, ``(kind, session)``), or
    None; ``store_what``: the store's change of that number, None when it lacks it."""
    return _fork(
        store_id,
        stream,
        ("changes up to", "newest change", "change"),
        stream_change,
        stream_what,
        store_latest,
        store_what,
    )


def _fork(
    store_id: str,
    stream: str,
    words: tuple[str, str, str],
    number: int,
    streamed: object,
    store_latest: int,
    held: object | None,
) -> StoreForked | None:
    """The one rule (see the module doc) for events and for changes alike."""
    held_up_to, newest, one = words
    if number <= 0:
        return None
    if store_latest < number:
        why = (
            f"stream {stream} holds its {held_up_to} {number}, but the store's "
            f"{newest} is {store_latest}"
        )
    elif held is not None and held != streamed:
        why = f"its {one} {number} differs from the one stream {stream} holds"
    else:
        return None
    return _forked(store_id, number, why)


def _forked(store_id: str, stream_seq: int, why: str) -> StoreForked:
    return StoreForked(
        f"store {store_id} has forked from its published history: {why} (a backup "
        "restored after later events were published); publishing it under this id "
        "would give the id two histories, so give the store a new id with "
        "`relaystore new-store-id` and publish it again as a new store",
        store_id=store_id,
        stream_seq=stream_seq,
    )


def lost_from_stream(
    *,
    store_id: str,
    stream: str,
    stream_seq: int,
    stream_change: int,
    published_seq: int,
    published_change: int,
) -> str | None:
    """What to say when ``stream`` lost messages this store published to it (its last
    event ``stream_seq`` or change ``stream_change`` is below what the stream
    acknowledged before, as recorded: ``published_seq``, ``published_change``), or None."""
    if stream_seq >= published_seq and stream_change >= published_change:
        return None
    return (
        f"stream {stream} holds store {store_id}'s events up to seq {stream_seq} and its "
        f"changes up to {stream_change}, but it acknowledged events up to seq "
        f"{published_seq} and changes up to {published_change} before: it was purged or "
        "its limits (max_age, max_msgs, max_bytes) removed them; publishing them again "
        f"from seq {stream_seq + 1} and change {stream_change + 1} (a mirror applies none "
        "twice; the server drops as repeats what its duplicate window still remembers)"
    )
