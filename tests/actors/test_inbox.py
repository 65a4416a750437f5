"""BoundedActor, the one place relaystore uses pykka's implementor API (the inbox hook).

Pins what backpressure relies on: a full inbox blocks ``tell`` until the actor takes a
message, messages keep their order, and a stop still reaches a full inbox.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from relaystore.actors.inbox import BoundedActor


class _Gated(BoundedActor):
    def __init__(self, gate: threading.Event, seen: list[Any]) -> None:
        super().__init__(capacity=2)
        self._gate = gate
        self._seen = seen

    def on_receive(self, message: Any) -> None:
        self._gate.wait(5)
        self._seen.append(message)


def test_a_full_inbox_blocks_the_sender_until_the_actor_takes_a_message() -> None:
    gate, seen = threading.Event(), []
    ref = _Gated.start(gate, seen)
    try:
        ref.tell(0)  # taken at once: the actor now waits on the gate
        threading.Event().wait(0.1)
        ref.tell(1)
        ref.tell(2)  # the inbox (capacity 2) is full now
        assert ref.actor_inbox.qsize() == 2
        blocked = threading.Thread(target=ref.tell, args=(3,))
        blocked.start()
        blocked.join(0.3)
        assert blocked.is_alive(), "a tell past the capacity must wait"
        gate.set()
        blocked.join(5)
        assert not blocked.is_alive()
    finally:
        gate.set()
        ref.stop()
    assert seen == [0, 1, 2, 3]


def test_an_inbox_needs_room_for_a_message() -> None:
    with pytest.raises(ValueError, match="capacity"):
        BoundedActor(capacity=0)
