"""The worker root: the names of the files and folders a relay journal is found under.

A worker root (the origin worker's folder for one session) holds:

* :data:`RELAY_STATE_NAME` (``relay-state.json``), the worker's snapshot;
* :data:`SEED_NAME` (``relay-seed.json``), left by a checkpoint restore;
* :data:`JOURNAL_DIR_NAME` (``relay-journal/``), the journal folder, which holds
  :data:`ACTIVE_JOURNAL_NAME` (``active.jsonl``) and sealed segments named
  ``segment-{first:020}-{last:020}.jsonl.gz`` (:func:`segment_name`, read back with
  :data:`SEGMENT_NAME`).

Stated once here: the journal reader (:mod:`relaystore.actors.journal.sources`) finds
journals by these names and the test kit (:mod:`relaystore.testing`) writes worker roots
with them. Pure: it names files and must not touch the disk.
"""

from __future__ import annotations

import re

__all__ = [
    "ACTIVE_JOURNAL_NAME",
    "JOURNAL_DIR_NAME",
    "RELAY_STATE_NAME",
    "SEED_NAME",
    "SEGMENT_NAME",
    "segment_name",
]

JOURNAL_DIR_NAME = "relay-journal"
"""The journal folder inside a worker root."""
RELAY_STATE_NAME = "relay-state.json"
"""The worker's snapshot beside the journal folder: its ``session_id`` names the session;
its ``latest_ordinal`` only sizes a progress bar."""
SEED_NAME = "relay-seed.json"
"""What a checkpoint restore leaves in a worker root (the origin's ``RESTORED_RELAY_SEED_FILE``)."""
ACTIVE_JOURNAL_NAME = "active.jsonl"
"""The append-only journal file the worker writes to."""
SEGMENT_NAME = re.compile(r"segment-(\d{20})-(\d{20})\.jsonl\.gz")
"""A sealed segment's file name; its groups are the first and last ordinal it holds."""


def segment_name(first: int, last: int) -> str:
    """The file name of the sealed segment holding ordinals ``first..=last``."""
    return f"segment-{first:020}-{last:020}.jsonl.gz"
