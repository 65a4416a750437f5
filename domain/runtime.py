"""Harness runtime identity: what ran a session, and the receipt that records it."""

from __future__ import annotations

import enum
import hashlib

from .errors import InvalidInput
from .wire import Wire, emitted, encode

__all__ = [
    "RUNTIME_ID_PREFIX",
    "HarnessKind",
    "RuntimeComponent",
    "RuntimeIdentity",
    "RuntimeProvenance",
    "RuntimeReceipt",
    "validate_expected_identity",
]

RUNTIME_ID_PREFIX = "mj-runtime-v1:"
"""Wire constant: real runtime ids carry it, so it stays as the origin wrote it."""


class HarnessKind(enum.Enum):
    """The coding-agent harness a session runs (kebab-case on the wire)."""

    CODEX = "codex"
    CLAUDE = "claude"
    KIMI = "kimi"
    GROK = "grok"
    MUSE = "muse"
    DEEPSEEK = "deepseek"
    ZCODE = "zcode"
    OPENCODE = "opencode"


class RuntimeProvenance(enum.Enum):
    """Where the harness installation came from."""

    MANAGED_INSTALLATION = "managed_installation"
    TARGET_INSTALLATION = "target_installation"


class RuntimeComponent(Wire, kw_only=True):
    """One component of a runtime (every field always written)."""

    name: str
    version: str | None = emitted(None)
    sha256: str | None = emitted(None)


class RuntimeIdentity(Wire, kw_only=True):
    """The identity of a harness runtime; ``id`` is derived by :meth:`refresh_id`."""

    id: str | None = emitted(None)
    harness: HarnessKind
    platform: str
    provenance: RuntimeProvenance
    components: list[RuntimeComponent] = emitted([])
    unavailable_reason: str | None = emitted(None)

    def refresh_id(self) -> None:
        """Sort the components by name (stably, in place) and recompute ``id``.

        The id hashes ``[1, harness, platform, provenance, components]``; it is ``None``
        when the runtime is unavailable.
        """
        self.components.sort(key=lambda component: component.name.encode())
        if self.unavailable_reason is not None:
            self.id = None
            return
        payload = encode(
            [1, self.harness.value, self.platform, self.provenance.value, self.components]
        )
        self.id = RUNTIME_ID_PREFIX + hashlib.sha256(payload).hexdigest()

    def require(self, expected: str) -> None:
        """Raise :class:`InvalidInput` unless this identity's id is ``expected``."""
        if self.id is None:
            raise InvalidInput(
                f"runtime identity unavailable: {self.unavailable_reason or 'no id was derived'}"
            )
        if self.id != expected:
            raise InvalidInput(f"runtime identity mismatch: expected {expected}, found {self.id}")


class RuntimeReceipt(RuntimeIdentity, kw_only=True):
    """A runtime identity as observed at one relay event: the identity's fields first,
    then where and when it was seen."""

    event_ordinal: int
    observed_at_ms: int

    @classmethod
    def observed(cls, identity: RuntimeIdentity, *, ordinal: int, at_ms: int) -> RuntimeReceipt:
        """The receipt of ``identity`` seen at relay ``ordinal``, recorded at ``at_ms``."""
        return cls(
            id=identity.id,
            harness=identity.harness,
            platform=identity.platform,
            provenance=identity.provenance,
            components=list(identity.components),
            unavailable_reason=identity.unavailable_reason,
            event_ordinal=ordinal,
            observed_at_ms=at_ms,
        )

    @property
    def identity(self) -> RuntimeIdentity:
        """The identity part of the receipt."""
        return RuntimeIdentity(
            id=self.id,
            harness=self.harness,
            platform=self.platform,
            provenance=self.provenance,
            components=list(self.components),
            unavailable_reason=self.unavailable_reason,
        )


def validate_expected_identity(value: str) -> None:
    """An expected runtime id is 1-256 bytes of printable ASCII without spaces."""
    raw = value.encode()
    if not raw or len(raw) > 256 or any(byte < 0x21 or byte > 0x7E for byte in raw):
        raise InvalidInput(
            f"invalid expected runtime identity {value!r}; use 1-256 printable ASCII characters without spaces"
        )
