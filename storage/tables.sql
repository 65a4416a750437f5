-- relaystore: the tables shared by schema revisions 1 (legacy) and 2 (current).
--
-- storage/schema.py builds a fresh store from this file plus checkpoint_operations
-- (revision 2) in one transaction; storage/legacy.py builds the revision-1 shape from
-- this file plus the legacy last_error triggers. Every table is STRICT except the three
-- materialized side tables the origin keeps non-STRICT. Foreign keys are enforced on
-- every connection relaystore opens.

CREATE TABLE schema_migrations (
    version INTEGER PRIMARY KEY CHECK(version > 0),
    applied_at TEXT NOT NULL
) STRICT;

CREATE TABLE schema_compatibility (
    singleton INTEGER PRIMARY KEY CHECK(singleton = 1),
    minimum_compatible_version INTEGER NOT NULL CHECK(minimum_compatible_version >= 1)
) STRICT;

-- Workspaces and session contexts outlive a deleted session: sessions reference
-- contexts, never the other way round.
CREATE TABLE workspaces (
    workspace_id TEXT PRIMARY KEY CHECK(length(trim(workspace_id)) > 0),
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE session_contexts (
    session_id TEXT PRIMARY KEY,
    bundle_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    workspace_id TEXT NOT NULL DEFAULT 'default' REFERENCES workspaces(workspace_id)
) STRICT;

CREATE INDEX session_contexts_bundle ON session_contexts(bundle_id, session_id);
CREATE INDEX session_contexts_workspace ON session_contexts(workspace_id, session_id);

-- One row per live session. The queryable columns mirror the record; record_json holds
-- the whole SessionRecord (checkpoint excluded: it lives in session_checkpoints), so a
-- record round-trips losslessly. Both are written together from one merged record.
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY REFERENCES session_contexts(session_id),
    title TEXT NOT NULL CHECK(length(trim(title)) > 0),
    harness_kind TEXT NOT NULL
        CHECK(harness_kind IN ('codex','claude','kimi','grok','deepseek','muse','zcode')),
    state TEXT NOT NULL CHECK(state IN (
        'provisioning','running','disconnected','checkpointing','closing','destroying',
        'stopped','parked','lost','error','destroyed-with-data-loss'
    )),
    updated_at TEXT NOT NULL,
    viewed_through_event_ordinal INTEGER NOT NULL DEFAULT 0
        CHECK(viewed_through_event_ordinal >= 0),
    last_error TEXT,
    last_checkpoint_error TEXT,
    native_session_id TEXT,
    record_json TEXT NOT NULL CHECK(json_valid(record_json))
) STRICT;

CREATE TABLE session_checkpoints (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    archive_path TEXT NOT NULL CHECK(length(archive_path) > 0),
    sha256 TEXT NOT NULL CHECK(length(sha256) = 64 AND sha256 NOT GLOB '*[^0-9a-f]*'),
    created_at TEXT NOT NULL,
    event_frontier INTEGER NOT NULL CHECK(event_frontier >= 0)
) STRICT;

-- The global feed as revisions 1 to 16 defined it: AUTOINCREMENT kept the high-water
-- mark in sqlite_sequence. Revision 17 rebuilds it numbered by the rowid, with a
-- high-water mark of its own (storage/sequences.py), in every store, fresh or migrated.
CREATE TABLE api_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    recorded_at_ms INTEGER NOT NULL,
    body TEXT NOT NULL CHECK(json_valid(body))
) STRICT;

CREATE INDEX api_events_session ON api_events(session_id, seq);

-- The last published ApiActivityState per session, for change detection only.
CREATE TABLE api_session_activity (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    body TEXT NOT NULL CHECK(json_valid(body))
) STRICT;

-- The materialized projection of each session (written by storage/materialized.py).
CREATE TABLE materialized_sessions (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    applied_event_ordinal INTEGER NOT NULL DEFAULT 0 CHECK(applied_event_ordinal >= 0),
    applied_event_digest TEXT NOT NULL
        DEFAULT '0000000000000000000000000000000000000000000000000000000000000000'
        CHECK(length(applied_event_digest) = 64
            AND applied_event_digest NOT GLOB '*[^0-9a-f]*'),
    last_activity_at_ms INTEGER,
    execution_state TEXT NOT NULL DEFAULT 'idle'
        CHECK(execution_state IN ('idle','running','closing','closed')),
    running_started_at_ms INTEGER,
    session_title TEXT CHECK(session_title IS NULL OR length(trim(session_title)) > 0),
    configuration_json TEXT NOT NULL DEFAULT '{}',
    pending_elicitations_json TEXT NOT NULL DEFAULT '[]',
    active_turn_json TEXT
        CHECK(active_turn_json IS NULL OR json_valid(active_turn_json)),
    last_turn_outcome_json TEXT
        CHECK(last_turn_outcome_json IS NULL OR json_valid(last_turn_outcome_json)),
    CHECK(
        (execution_state = 'running' AND running_started_at_ms IS NOT NULL)
        OR (execution_state != 'running' AND running_started_at_ms IS NULL)
    )
) STRICT;

CREATE TABLE materialized_transcript_items (
    session_id TEXT NOT NULL REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    stable_id TEXT NOT NULL CHECK(length(trim(stable_id)) > 0),
    position INTEGER NOT NULL CHECK(position > 0),
    latest_content_event_ordinal INTEGER
        CHECK(latest_content_event_ordinal IS NULL
            OR latest_content_event_ordinal >= position),
    created_at_ms INTEGER NOT NULL,
    last_changed_at_ms INTEGER NOT NULL CHECK(last_changed_at_ms >= created_at_ms),
    body_json TEXT NOT NULL,
    PRIMARY KEY(session_id, stable_id)
) STRICT;

CREATE INDEX materialized_transcript_position
    ON materialized_transcript_items(session_id, position, stable_id);

CREATE TABLE materialized_queued_prompts (
    session_id TEXT NOT NULL REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL CHECK(ordinal >= 0),
    command_id TEXT NOT NULL CHECK(length(trim(command_id)) > 0),
    content_json TEXT NOT NULL,
    queued_at_ms INTEGER NOT NULL,
    kind_json TEXT NOT NULL DEFAULT '"prompt"',
    accepted_ordinal INTEGER CHECK(accepted_ordinal IS NULL OR accepted_ordinal > 0),
    PRIMARY KEY(session_id, ordinal),
    UNIQUE(session_id, command_id)
) STRICT;

CREATE TABLE api_config_results (
    session_id TEXT NOT NULL REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    command_id TEXT NOT NULL,
    error TEXT,
    PRIMARY KEY(session_id, command_id)
);

CREATE TABLE session_turn_usage (
    session_id TEXT NOT NULL REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    command_id TEXT NOT NULL,
    completed_ordinal INTEGER NOT NULL,
    turn_start_position INTEGER,
    body TEXT NOT NULL,
    PRIMARY KEY(session_id, command_id)
);

CREATE INDEX session_turn_usage_order ON session_turn_usage(session_id, completed_ordinal);

CREATE TABLE session_provider_cost (
    session_id TEXT PRIMARY KEY REFERENCES materialized_sessions(session_id) ON DELETE CASCADE,
    body TEXT NOT NULL
);

INSERT INTO workspaces(workspace_id, created_at)
VALUES ('default', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
