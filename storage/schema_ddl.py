"""The DDL of the store's schema: the shared tables and what each revision adds.

Owns the SQL text only: ``storage/tables.sql`` (:func:`tables_ddl`, the tables every
revision shares) and each revision's additions, named after what they hold (the revision
that adds each is in :mod:`.schema`'s notes). The current baseline and the migration
ladder (:mod:`.migrations`) both execute these, so a fresh store and a migrated one have
the same definitions. It executes nothing and must not: no connection is opened here.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

__all__ = [
    "ACCOUNTING_DDL",
    "ACCOUNTING_TABLES",
    "CHECKPOINT_OPERATIONS_DDL",
    "FORWARD_DDL",
    "HISTORY_START_DDL",
    "INDEX_FACTS_DDL",
    "ITEM_VIEW_DDL",
    "MAINTENANCE_REQUESTS_DDL",
    "NEW_STORE_ID",
    "RANDOM_STORE_ID",
    "RELAY_LOG_DDL",
    "SEARCH_DDL",
    "STORE_IDENTITY_DDL",
    "TRANSCRIPT_SEQ_INDEX_DDL",
    "tables_ddl",
]

CHECKPOINT_OPERATIONS_DDL = """
CREATE TABLE IF NOT EXISTS checkpoint_operations (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    command_id TEXT NOT NULL UNIQUE CHECK(length(trim(command_id)) > 0),
    related_command_ids TEXT NOT NULL DEFAULT '[]'
        CHECK(json_valid(related_command_ids) AND json_type(related_command_ids) = 'array')
) STRICT;
"""
"""At most one in-flight checkpoint operation per session; a command id owns at most one."""

HISTORY_START_DDL = """
CREATE TABLE IF NOT EXISTS materialized_history_start (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    first_ordinal INTEGER NOT NULL CHECK(first_ordinal > 1),
    source TEXT NOT NULL CHECK(source IN ('seed', 'first_event'))
) STRICT;
"""
"""Where a session's history starts, for the sessions that do not start at ordinal 1."""

RELAY_LOG_DDL = """
CREATE TABLE IF NOT EXISTS relay_log_pages (
    session_id TEXT NOT NULL
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    first_ordinal INTEGER NOT NULL CHECK(first_ordinal >= 1),
    last_ordinal INTEGER NOT NULL CHECK(last_ordinal >= first_ordinal),
    raw_bytes INTEGER NOT NULL CHECK(raw_bytes >= 0),
    lines BLOB NOT NULL,
    PRIMARY KEY(session_id, first_ordinal)
) STRICT;
"""
"""The relay log: each committed page's journal lines, newline-joined, zlib-compressed
(:mod:`relaystore.domain.relay.log`); ``raw_bytes`` is their uncompressed size."""

FORWARD_DDL = """
CREATE TABLE IF NOT EXISTS projection_behind (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL CHECK(ordinal >= 1),
    kind TEXT NOT NULL,
    position TEXT NOT NULL,
    path TEXT NOT NULL,
    kept_ordinal INTEGER NOT NULL CHECK(kept_ordinal >= ordinal),
    kept_digest TEXT NOT NULL CHECK(length(kept_digest) = 64)
) STRICT;
CREATE TABLE IF NOT EXISTS materialized_seeds (
    session_id TEXT PRIMARY KEY
        REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    start_ordinal INTEGER NOT NULL CHECK(start_ordinal >= 1),
    start_digest TEXT NOT NULL CHECK(length(start_digest) = 64),
    queued_prompts_json TEXT NOT NULL
        CHECK(json_valid(queued_prompts_json) AND json_type(queued_prompts_json) = 'array')
) STRICT;
"""
"""Revision 8: a session behind its log (:class:`~relaystore.domain.materialized.ProjectionBehind`),
and a seeded session's start (the cursor it continues from and its queued prompts)."""


INDEX_FACTS_DDL = """
ALTER TABLE materialized_transcript_items ADD COLUMN index_facts TEXT;
CREATE TRIGGER IF NOT EXISTS materialized_transcript_facts_stale
AFTER UPDATE OF body_json ON materialized_transcript_items
WHEN NEW.index_facts IS OLD.index_facts
BEGIN
    UPDATE materialized_transcript_items SET index_facts = NULL
    WHERE session_id = NEW.session_id AND stable_id = NEW.stable_id;
END;
"""
"""Revision 9: each item's index facts, forgotten when its body changes without them."""

ITEM_VIEW_DDL = """
ALTER TABLE materialized_transcript_items ADD COLUMN view_role TEXT;
ALTER TABLE materialized_transcript_items ADD COLUMN view_text TEXT;
ALTER TABLE materialized_transcript_items ADD COLUMN view_writes INTEGER;
CREATE TRIGGER IF NOT EXISTS materialized_transcript_view_stale
AFTER UPDATE OF body_json ON materialized_transcript_items
WHEN NEW.view_writes IS OLD.view_writes
BEGIN
    UPDATE materialized_transcript_items
    SET view_role = NULL, view_text = NULL, view_writes = NULL
    WHERE session_id = NEW.session_id AND stable_id = NEW.stable_id;
END;
"""
"""Revision 12: each item's role and flattened text, forgotten when its body changes
without them (this build counts its writes in ``view_writes``, an older build does not)."""

SEARCH_DDL = """
CREATE TABLE IF NOT EXISTS transcript_search_keys (
    search_id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    stable_id TEXT NOT NULL,
    UNIQUE(session_id, stable_id)
) STRICT;
CREATE VIEW IF NOT EXISTS transcript_search_text AS
    SELECT keys.search_id AS search_id, items.view_text AS text
    FROM transcript_search_keys AS keys JOIN materialized_transcript_items AS items
    ON items.session_id = keys.session_id AND items.stable_id = keys.stable_id;
CREATE VIRTUAL TABLE IF NOT EXISTS transcript_search USING fts5(
    text, content='transcript_search_text', content_rowid='search_id',
    tokenize='unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS transcript_search_added
AFTER INSERT ON materialized_transcript_items
WHEN NEW.view_text IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO transcript_search_keys(session_id, stable_id)
    VALUES (NEW.session_id, NEW.stable_id);
    INSERT INTO transcript_search(rowid, text)
    SELECT search_id, NEW.view_text FROM transcript_search_keys
    WHERE session_id = NEW.session_id AND stable_id = NEW.stable_id;
END;
CREATE TRIGGER IF NOT EXISTS transcript_search_changed
AFTER UPDATE OF view_text ON materialized_transcript_items
WHEN NEW.view_text IS NOT OLD.view_text
BEGIN
    INSERT INTO transcript_search(transcript_search, rowid, text)
    SELECT 'delete', search_id, OLD.view_text FROM transcript_search_keys
    WHERE OLD.view_text IS NOT NULL
        AND session_id = OLD.session_id AND stable_id = OLD.stable_id;
    DELETE FROM transcript_search_keys
    WHERE NEW.view_text IS NULL AND session_id = OLD.session_id AND stable_id = OLD.stable_id;
    INSERT OR IGNORE INTO transcript_search_keys(session_id, stable_id)
    SELECT NEW.session_id, NEW.stable_id WHERE NEW.view_text IS NOT NULL;
    INSERT INTO transcript_search(rowid, text)
    SELECT search_id, NEW.view_text FROM transcript_search_keys
    WHERE NEW.view_text IS NOT NULL
        AND session_id = NEW.session_id AND stable_id = NEW.stable_id;
END;
CREATE TRIGGER IF NOT EXISTS transcript_search_removed
AFTER DELETE ON materialized_transcript_items
WHEN OLD.view_text IS NOT NULL
BEGIN
    INSERT INTO transcript_search(transcript_search, rowid, text)
    SELECT 'delete', search_id, OLD.view_text FROM transcript_search_keys
    WHERE session_id = OLD.session_id AND stable_id = OLD.stable_id;
    DELETE FROM transcript_search_keys
    WHERE session_id = OLD.session_id AND stable_id = OLD.stable_id;
END;
"""
"""The search index of transcript text (full-text, SQLite FTS5): one row per item whose
``view_text`` is known. ``transcript_search_keys`` numbers the indexed items
(``search_id``, an INTEGER PRIMARY KEY, so ``VACUUM`` keeps it: an item's implicit rowid
it does not); ``transcript_search`` indexes their text without a copy of it (its content
is the view ``transcript_search_text``, the items' own ``view_text``). The triggers keep
it in the transaction of every write of an item's text, whichever build writes it, and
whatever writes it (a page, retention, a reprojection, a deletion's cascade, the stale
trigger forgetting a view): an item is indexed exactly while its ``view_text`` is known,
under the same ``search_id`` while it stays known."""

MAINTENANCE_REQUESTS_DDL = """
CREATE TABLE IF NOT EXISTS maintenance_requests (
    request_id TEXT PRIMARY KEY CHECK(length(request_id) BETWEEN 1 AND 64),
    kind TEXT NOT NULL CHECK(length(kind) > 0),
    request_json TEXT NOT NULL CHECK(json_valid(request_json)),
    state TEXT NOT NULL CHECK(state IN ('pending', 'running', 'done', 'failed')),
    requested_at_ms INTEGER NOT NULL,
    requester_pid INTEGER NOT NULL,
    taken_by_pid INTEGER,
    answered_at_ms INTEGER,
    answer_json TEXT CHECK(answer_json IS NULL OR json_valid(answer_json))
) STRICT;
CREATE UNIQUE INDEX IF NOT EXISTS maintenance_requests_open
    ON maintenance_requests(request_json) WHERE state IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS maintenance_requests_state
    ON maintenance_requests(state, requested_at_ms);
"""
"""Revision 10: maintenance requests for the store's writer; one open request per
distinct request (a command run again joins it)."""


ACCOUNTING_TABLES = ("session_turn_usage", "session_provider_cost")
"""The usage tables revision 5 rebuilds to outlive their session."""
ACCOUNTING_DDL: Mapping[str, str] = MappingProxyType(
    {
        "session_turn_usage": """
CREATE TABLE session_turn_usage_next (
    session_id TEXT NOT NULL REFERENCES session_contexts(session_id),
    command_id TEXT NOT NULL,
    completed_ordinal INTEGER NOT NULL,
    turn_start_position INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY(session_id, command_id)
);
INSERT INTO session_turn_usage_next(session_id, command_id, completed_ordinal,
    turn_start_position, body)
SELECT session_id, command_id, completed_ordinal, turn_start_position, body
FROM session_turn_usage;
DROP TABLE session_turn_usage;
ALTER TABLE session_turn_usage_next RENAME TO session_turn_usage;
CREATE INDEX session_turn_usage_order ON session_turn_usage(session_id, completed_ordinal);
""",
        "session_provider_cost": """
CREATE TABLE session_provider_cost_next (
    session_id TEXT PRIMARY KEY REFERENCES session_contexts(session_id),
    body TEXT NOT NULL
);
INSERT INTO session_provider_cost_next(session_id, body)
SELECT session_id, body FROM session_provider_cost;
DROP TABLE session_provider_cost;
ALTER TABLE session_provider_cost_next RENAME TO session_provider_cost;
""",
    }
)
"""Each usage table's rebuild: a copy referencing ``session_contexts``, rows kept."""
TRANSCRIPT_SEQ_INDEX_DDL = """
CREATE INDEX IF NOT EXISTS materialized_transcript_seq ON materialized_transcript_items(
    session_id, COALESCE(latest_content_event_ordinal, position), stable_id);
"""
"""Transcript pages walk items by (session, seq, stable id); the expression must read
exactly as the one in ``storage/reads.py``."""


STORE_IDENTITY_DDL = """
CREATE TABLE IF NOT EXISTS store_identity (
    singleton INTEGER PRIMARY KEY CHECK(singleton = 1),
    store_id TEXT NOT NULL
        CHECK(length(store_id) = 32 AND store_id NOT GLOB '*[^0-9a-f]*')
) STRICT;
"""
"""The store's id (one row, written once; see revision 6)."""

RANDOM_STORE_ID = "lower(hex(randomblob(16)))"
"""A fresh store id: 32 random lowercase hex digits."""

NEW_STORE_ID = (
    f"INSERT INTO store_identity(singleton, store_id) VALUES (1, {RANDOM_STORE_ID})"
    " ON CONFLICT(singleton) DO NOTHING"
)


@functools.cache
def tables_ddl() -> str:
    """The DDL of the tables every revision shares (``storage/tables.sql``)."""
    return resources.files("relaystore.storage").joinpath("tables.sql").read_text(encoding="utf-8")
