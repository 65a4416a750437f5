"""The fork rule: a store publishes under its id only the history the stream holds for it."""

from __future__ import annotations

import pytest

from relaystore.domain.errors import StoreForked
from relaystore.domain.publishing import fork_from_stream, lost_from_stream

SID = "0" * 32


def _fork(stream_seq: int, store_latest: int, store_event: bytes | None) -> StoreForked | None:
    return fork_from_stream(
        store_id=SID,
        stream="S",
        stream_seq=stream_seq,
        stream_event=b'{"seq":4000}',
        store_latest=store_latest,
        store_event=store_event,
    )


@pytest.mark.parametrize(
    ("stream_seq", "store_latest", "store_event"),
    [
        (0, 0, None),  # nothing published yet
        (4000, 4000, b'{"seq":4000}'),  # the same event: resume after it
        (4000, 4600, b'{"seq":4000}'),  # and the store went on
        (4000, 4600, None),  # its session deleted since it was published
    ],
)
def test_the_history_the_stream_holds_is_not_a_fork(
    stream_seq: int, store_latest: int, store_event: bytes | None
) -> None:
    assert _fork(stream_seq, store_latest, store_event) is None


def test_a_store_behind_the_stream_has_forked() -> None:
    fork = _fork(4000, 3600, None)
    assert isinstance(fork, StoreForked)
    assert (fork.store_id, fork.stream_seq) == (SID, 4000)
    assert "up to seq 4000, but the store's latest seq is 3600" in str(fork)
    assert "relaystore new-store-id" in str(fork)
    assert "\n" not in str(fork)


def test_a_store_whose_event_differs_from_the_stream_has_forked() -> None:
    fork = _fork(4000, 4600, b'{"seq":4000,"other":1}')
    assert isinstance(fork, StoreForked)
    assert "its event seq 4000 differs from the one stream S holds" in str(fork)


@pytest.mark.parametrize(
    ("stream_seq", "stream_change", "lost"),
    [(40, 7, False), (41, 9, False), (39, 7, True), (40, 6, True), (0, 0, True)],
)
def test_a_stream_behind_what_it_acknowledged_lost_messages(
    stream_seq: int, stream_change: int, lost: bool
) -> None:
    said = lost_from_stream(
        store_id="s" * 32,
        stream="RELAYSTORE",
        stream_seq=stream_seq,
        stream_change=stream_change,
        published_seq=40,
        published_change=7,
    )
    assert (said is not None) == lost
    if said is not None:
        assert said.startswith(
            f"stream RELAYSTORE holds store {'s' * 32}'s events up to seq {stream_seq} and "
            f"its changes up to {stream_change}, but it acknowledged events up to seq 40 "
            "and changes up to 7 before"
        )


def test_a_store_the_stream_never_had_lost_nothing() -> None:
    assert (
        lost_from_stream(
            store_id="s" * 32,
            stream="RELAYSTORE",
            stream_seq=0,
            stream_change=0,
            published_seq=0,
            published_change=0,
        )
        is None
    )
