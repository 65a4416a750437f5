"""The publisher's acknowledgements: what a connection sent and the stream has not yet
confirmed, in order, and what each confirmation said.

:class:`AckWindow` sends each message with a reply subject of its own (``REPLY.TOKEN``)
and settles the acks in send order: a message counts as stored only once every message
sent before it is, so ``acked`` (events) and ``acked_change`` (changes) never pass a
gap. At most ``max_outstanding`` messages wait for their ack (a slow server slows the
sender); no ack for ``ack_timeout`` seconds, an ack no stream gave, an unreadable ack or
a refusal ends the connection (:class:`Lost`); a refusal also notes the refused number
(``refused``, ``refused_change``), so the next connection can tell a gap from a retry. A
message larger than the server's ``max_payload`` is a :class:`StoreError` before it is
sent.

Must not: decide what to send or when (the rounds: :mod:`relaystore.actors.nats.publish`),
or read the store.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

import msgspec

from ...domain.errors import StoreError
from .replication import Outgoing

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = ["AckWindow", "Lost"]


class Lost(Exception):
    """The connection is no longer trustworthy: drop it and resume from the stream."""


class _AckFault(msgspec.Struct):
    code: int = 0
    err_code: int = 0
    description: str = ""


class _Ack(msgspec.Struct):
    stream: str = ""
    seq: int = 0
    duplicate: bool = False
    error: _AckFault | None = None


_ACK = msgspec.json.Decoder(_Ack)
_NAMES = {
    "e": "event seq",
    "c": "change",
    "m": "the commit marker of change",
    "g": "the gap from seq",
}
"""What each kind of message is called in a message: ``e`` an event (its seq), ``c`` a
change (its number), ``m`` a commit marker (the change it follows), ``g`` a gap (its
first seq)."""


class AckWindow:
    """The messages in flight on one connection and the figures their acks add up to.

    :meth:`reset` starts a connection; the figures (``acked``, ``published`` and the
    others) run across connections, and the publisher may move ``acked`` and
    ``acked_change`` forward (what it resumed from, what it skipped).
    """

    def __init__(self, max_outstanding: int, ack_timeout: float) -> None:
        self._max_outstanding = max_outstanding
        self._ack_timeout = ack_timeout
        # Tokens sent, in order; each one's (kind, number) and, once acked, its outcome.
        self._sent: deque[int] = deque()
        self._pending: dict[int, tuple[str, int]] = {}
        self._token = 0
        self._outcomes: dict[int, BaseException | bool] = {}
        self._progress = asyncio.Event()
        self._failure: BaseException | None = None
        self.refused: int | None = None
        """The lowest event seq the server refused (until a connection resumes)."""
        self.refused_change: int | None = None
        """The lowest change the server refused (until a connection resumes)."""
        self.acked = 0
        self.acked_change = 0
        self.stored = 0
        """The last event seq the stream acknowledged (the publisher moves ``acked`` past
        events it skipped; this never passes what the stream was given)."""
        self.stored_change = 0
        """The last change the stream acknowledged."""
        self.published = 0
        self.duplicates = 0
        self.changes_published = 0
        self.markers = 0

    @property
    def outstanding(self) -> int:
        """How many messages wait for their ack."""
        return len(self._sent)

    def reset(self) -> None:
        """Forget the last connection's messages in flight and its failure."""
        self._sent.clear()
        self._pending.clear()
        self._outcomes.clear()
        self._failure = None

    def check(self) -> None:
        """Raise what ended this connection, if anything did."""
        if self._failure is not None:
            raise self._failure

    async def publish(
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

    async def settle(self) -> None:
        """Wait until every sent message is acknowledged."""
        while self._sent:
            await self._wait_progress()

    async def _wait_progress(self) -> None:
        self.check()
        self._progress.clear()
        oldest = self._pending.get(self._sent[0]) if self._sent else None
        try:
            await asyncio.wait_for(self._progress.wait(), self._ack_timeout)
        except TimeoutError:
            what = "" if oldest is None else f"{_NAMES[oldest[0]]} {oldest[1]}"
            raise Lost(f"no acknowledgement for {what} within {self._ack_timeout:g} s") from None
        self.check()

    async def on_ack(self, message: Msg) -> None:
        """One ack (a reply to ``REPLY.TOKEN``): settle what it completes, in order."""
        try:
            token = int(message.subject.rsplit(".", 1)[1])
        except (ValueError, IndexError):
            return
        sent, pending = self._sent, self._pending
        entry = pending.get(token)
        if entry is None:
            return  # an ack of an earlier connection's message, or a repeat
        kind, number = entry
        self._outcomes[token] = self._outcome(kind, number, message)
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
                    self.duplicates += 1
                else:
                    self.published += 1
                self.acked = self.stored = number
            elif kind == "c":
                self.changes_published += not result
                self.acked_change = self.stored_change = number
            elif kind == "m":
                self.markers += not result
        self._progress.set()

    def _outcome(self, kind: str, number: int, message: Msg) -> BaseException | bool:
        """What an ack says: stored (``True`` as a duplicate), or why the connection ends."""
        name = f"{_NAMES[kind]} {number}"
        if not message.data:
            status = (message.headers or {}).get("Status", "")
            return Lost(f"no stream answered for {name} (status {status or 'none'})")
        try:
            ack = _ACK.decode(message.data)
        except msgspec.DecodeError:
            return Lost(f"unreadable acknowledgement for {name}")
        if ack.error is None:
            return ack.duplicate
        if kind == "e":
            self.refused = min(self.refused or number, number)
        elif kind == "c":
            self.refused_change = min(self.refused_change or number, number)
        return Lost(
            f"the server refused {name}: {ack.error.description} "
            f"(code {ack.error.code}, error {ack.error.err_code})"
        )
