"""What relay commands and outcomes carry: a cursor, a user shell's result, retained history.

Owns the values several entries of the relay catalogue share: :class:`RelayCursor` (a
position in a journal), :class:`UserShellResult` with its :class:`UserShellStatus` (a
shell command's outcome), and :class:`ContextHistory` with its :class:`EvidenceMessage`
(the authorization history a controller seeds a worker with). Mirrors the origin's
relay protocol field for field.

Pure wire types: it must not name a command, outcome or observation (those are
:mod:`.relay_commands`, :mod:`.relay_outcomes` and :mod:`.relay_observations`).
"""

from __future__ import annotations

import enum

from ..integers import Int64, UInt64
from ..wire import Wire, emitted

__all__ = [
    "ContextHistory",
    "EvidenceMessage",
    "RelayCursor",
    "UserShellResult",
    "UserShellStatus",
]


# -- cursor and shell results ---------------------------------------------------------


class RelayCursor(Wire, kw_only=True, forbid_unknown_fields=True):
    """A position in a relay journal: an ordinal and the digest of the event there."""

    ordinal: UInt64
    digest: str


class UserShellStatus(enum.Enum):
    EXITED = "exited"
    SIGNALED = "signaled"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class UserShellResult(Wire, kw_only=True, forbid_unknown_fields=True):
    """What a user shell command produced and how it ended."""

    command: str
    stdout: str
    stderr: str
    stdout_truncated: bool = emitted(False)
    stderr_truncated: bool = emitted(False)
    exit_code: Int64 | None = None
    signal: str | None = None
    duration_ms: Int64
    status: UserShellStatus
    error: str | None = None


# -- mailbox events and assessment context ---------------------------------------------


class EvidenceMessage(Wire, kw_only=True, forbid_unknown_fields=True):
    """One message of a retained authorization history (``role`` is free text)."""

    id: str
    role: str
    text: str


class ContextHistory(Wire, kw_only=True):
    """The retained authorization history a controller seeds a worker with.

    Every field is always written; the origin takes unknown fields and drops them.
    """

    messages: list[EvidenceMessage]
    authorization_complete: bool
    assistant_history_omitted: bool
    open_assistant_id: str | None = emitted(None)
    final_reply_omitted: bool = emitted(False)
