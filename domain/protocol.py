"""The origin's relay protocol numbers that decide what this build reads.

Owns: the numbers, as the origin's ``mj-core/src/relay.rs`` has them. Must not: import
anything (every domain module may import it, the error tree included).
"""

from __future__ import annotations

__all__ = [
    "RELAY_LEGACY_MAILBOX_PROTOCOL",
    "RELAY_PROTOCOL_VERSION",
    "RELAY_SESSION_MESSAGE_PROTOCOL",
    "RELAY_STRUCTURED_MAILBOX_PROTOCOL",
]

RELAY_LEGACY_MAILBOX_PROTOCOL = 33
"""The first relay protocol with a durable mailbox: events in the text form."""
RELAY_STRUCTURED_MAILBOX_PROTOCOL = 34
"""The first relay protocol whose mailbox events carry a structured ``body`` (a parent's
message needs it)."""
RELAY_SESSION_MESSAGE_PROTOCOL = 36
"""The first relay protocol that carries a message from another session with its sender."""

RELAY_PROTOCOL_VERSION = RELAY_SESSION_MESSAGE_PROTOCOL
"""The newest relay protocol whose journal lines this build reads, every kind and shape of
it (36: mailbox events with structured bodies, and session messages)."""
