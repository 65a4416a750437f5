"""Reading relay journals: sources, the streaming reader, verification.

* :mod:`.sources` finds a journal on disk (worker root, ``relay-journal/`` folder,
  segments, single files) and resolves it into a :class:`JournalSource`;
* :mod:`.reader` streams its events (:class:`JournalReader`, :func:`read_journal`),
  judging each by the one chain rule, :func:`relaystore.domain.chain.advance`;
* :mod:`.verify` checks sources without a store (:func:`verify_sources`).
"""

from ...domain.worker_root import ACTIVE_JOURNAL_NAME, JOURNAL_DIR_NAME, RELAY_STATE_NAME
from .lines import MAX_BLANK_BYTES, MAX_BLANK_LINES, MAX_DRAIN_BYTES
from .reader import (
    JournalProblem,
    JournalReader,
    Location,
    ProblemKind,
    ReadMode,
    TornTail,
    read_journal,
)
from .sources import JournalFile, JournalSource, gather_sources, resolve_source
from .verify import VerifyReport, verify_sources

__all__ = [
    "ACTIVE_JOURNAL_NAME",
    "JOURNAL_DIR_NAME",
    "MAX_BLANK_BYTES",
    "MAX_BLANK_LINES",
    "MAX_DRAIN_BYTES",
    "RELAY_STATE_NAME",
    "JournalFile",
    "JournalProblem",
    "JournalReader",
    "JournalSource",
    "Location",
    "ProblemKind",
    "ReadMode",
    "TornTail",
    "VerifyReport",
    "gather_sources",
    "read_journal",
    "resolve_source",
    "verify_sources",
]
