"""NATS JetStream: the publisher (`publish`, `stream`, `acks`), the wire of what it sends
(`replication`), restore and mirror (`replica`), the fleet feed (`fleet`) and what they
share (`common`).

Needs the `nats` extra. The runtime a supervisor imports never loads this package.
"""

from __future__ import annotations

__all__: list[str] = []
