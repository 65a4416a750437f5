"""The fork rule: a store publishes under its id only the history the stream holds for it."""

from __future__ import annotations

import pytest

from relaystore.domain.errors import StoreForked
from relaystore.domain.publishing import fork_from_stream

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
