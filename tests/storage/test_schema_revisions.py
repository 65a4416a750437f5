"""Schema revisions: the fresh baseline, migrating revisions 1 and 2 in place, and every refusal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import ApiLegacyNotice, ApiTurnEnded, ApiTurnStarted
from relaystore.domain.errors import InvalidInput, SchemaMismatch, SchemaMismatchReason
from relaystore.domain.outcomes import (
    OutcomeReason,
    TurnOutcomeInterrupted,
    TurnOutcomeRejected,
    TurnResultKind,
)
from relaystore.domain.runtime import HarnessKind
from relaystore.domain.sessions.records import SessionRecord, SessionState
from relaystore.domain.wire import encode
from relaystore.storage.connection import open_reader, open_writer
from relaystore.storage.paging import load_api_events
from relaystore.storage.schema import (
    ACTIVITY_UNNUMBERED_REVISION,
    ANSWERS_REVISION,
    CHANGES_REVISION,
    COMPATIBILITY_FLOOR,
    FORWARD_REVISION,
    INDEX_FACTS_REVISION,
    ITEM_VIEW_REVISION,
    RELAY_LOG_REVISION,
    REQUESTS_REVISION,
    SCHEMA_VERSION,
    SEARCH_REVISION,
    SEQUENCES_REVISION,
    SUBAGENTS_REVISION,
    SchemaState,
    check_writer_schema,
    ensure_supported,
    read_schema_state,
    read_store_id,
)
from relaystore.storage.sessions import load_session, save_session
from relaystore.testing import example_session
from tests.storage.builders import old_turn_outcome, scan, turn_started
from tests.storage.legacy import (
    create_legacy_store,
    create_revision_2_store,
    create_revision_3_store,
    step_back_to_revision_2,
    step_back_to_revision_3,
    step_back_to_revision_5,
    step_back_to_revision_6,
    step_back_to_revision_7,
    step_back_to_revision_8,
    step_back_to_revision_9,
    step_back_to_revision_11,
    step_back_to_revision_12,
    step_back_to_revision_13,
    step_back_to_revision_14,
    step_back_to_revision_15,
    step_back_to_revision_16,
)

FUTURE = SCHEMA_VERSION + 1
"""A revision a newer build may have migrated the store to."""

# -- helpers ---------------------------------------------------------------------------


def raw(path: Path) -> apsw.Connection:
    """A plain connection that bypasses relaystore (an older build or a hand edit)."""
    connection = apsw.Connection(str(path))
    connection.pragma("foreign_keys", "ON")
    return connection


def metadata(path: Path) -> tuple[int, list[int], list[tuple[int, int]]]:
    """(user_version, ledger versions, floor rows) read without relaystore."""
    connection = raw(path)
    try:
        version = int(connection.pragma("user_version"))
        ledger = [
            int(v)
            for (v,) in connection.execute("SELECT version FROM schema_migrations ORDER BY version")
        ]
        floor = [
            (int(a), int(b)) for a, b in connection.execute("SELECT * FROM schema_compatibility")
        ]
    finally:
        connection.close()
    return version, ledger, floor


def advance_to(path: Path, revision: int, floor: int) -> None:
    """Make the store look like a newer build migrated it to ``revision`` with ``floor``."""
    connection = raw(path)
    with connection:
        for version in range(SCHEMA_VERSION + 1, revision + 1):
            connection.execute("INSERT INTO schema_migrations VALUES (?, 'later')", (version,))
        connection.execute(
            "UPDATE schema_compatibility SET minimum_compatible_version = ?", (floor,)
        )
        connection.execute(f"PRAGMA user_version = {revision}")
    connection.close()


def legacy_store_with_session(path: Path) -> apsw.Connection:
    """A revision-1 store holding the fixture session, open through a plain connection."""
    create_legacy_store(path)
    connection = raw(path)
    save_session(connection, example_session())
    return connection


def old_turn_ended_body(stop_reason: str = "end_turn") -> str:
    return encode({"type": "turn_ended", "data": {"turn": old_turn_outcome(stop_reason)}}).decode()


def schema_objects(path: Path) -> set[tuple[str, str, str]]:
    connection = raw(path)
    try:
        rows = connection.execute(
            "SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL"
        ).fetchall()
    finally:
        connection.close()
    return {(str(t), str(n), " ".join(str(s).split())) for t, n, s in rows}


# -- fresh stores ----------------------------------------------------------------------


def test_a_new_store_is_created_directly_at_the_current_revision(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION == SEQUENCES_REVISION
    # Revision 17 numbers the feed by the rowid, which a revision-16 build cannot keep.
    assert COMPATIBILITY_FLOOR == 17
    assert metadata(store_path) == (SCHEMA_VERSION, [SCHEMA_VERSION], [(1, COMPATIBILITY_FLOOR)])
    objects = {name for kind, name, _ in schema_objects(store_path)}
    assert "checkpoint_operations" in objects
    assert "materialized_history_start" in objects
    assert "api_session_error_updated" not in objects
    assert "api_session_error_inserted" not in objects


def test_every_table_is_strict_except_the_origins_three_side_tables(store_path: Path) -> None:
    open_writer(store_path).close()
    connection = raw(store_path)
    rows = connection.execute(
        "SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND type = 'table'"
        " AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    connection.close()
    loose = sorted(str(name) for name, strict in rows if not strict)
    assert loose == ["api_config_results", "session_provider_cost", "session_turn_usage"]
    assert {name for name, _ in rows} >= {
        "sessions",
        "session_contexts",
        "workspaces",
        "api_events",
        "api_session_activity",
        "checkpoint_operations",
        "session_checkpoints",
        "materialized_sessions",
        "materialized_transcript_items",
        "materialized_queued_prompts",
        "materialized_history_start",
        "schema_migrations",
        "schema_compatibility",
    }


def test_reopening_a_current_store_changes_nothing(store_path: Path) -> None:
    open_writer(store_path).close()
    before = metadata(store_path)
    open_writer(store_path).close()
    assert metadata(store_path) == before


# -- migrating older revisions ---------------------------------------------------------


def _stepped_back(step_back: Callable[[Path], None]) -> Callable[[Path], None]:
    """A builder of a store of an earlier revision: a fresh store, stepped back."""

    def create(path: Path) -> None:
        open_writer(path).close()
        step_back(path)

    return create


OLDER_STORES = {
    1: create_legacy_store,
    2: create_revision_2_store,
    3: create_revision_3_store,
    11: _stepped_back(step_back_to_revision_11),
    12: _stepped_back(step_back_to_revision_12),
    14: _stepped_back(step_back_to_revision_14),
    15: _stepped_back(step_back_to_revision_15),
}


@pytest.mark.parametrize(
    ("revision", "create"), OLDER_STORES.items(), ids=[f"{r}-to-current" for r in OLDER_STORES]
)
def test_a_migrated_store_has_exactly_the_schema_of_a_fresh_one(
    tmp_path: Path, revision: int, create: Callable[[Path], None]
) -> None:
    fresh, migrated = tmp_path / "fresh.sqlite3", tmp_path / "migrated.sqlite3"
    open_writer(fresh).close()
    create(migrated)
    assert metadata(migrated)[0] == revision
    with open_writer(migrated) as writer:
        assert writer.revision == SCHEMA_VERSION
    assert schema_objects(migrated) == schema_objects(fresh)
    version, ledger, floor = metadata(migrated)
    assert (version, ledger, floor) == (
        SCHEMA_VERSION,
        list(range(revision, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- revision 2 ------------------------------------------------------------------------


def test_the_revision_2_fixture_is_a_fresh_store_without_the_history_start_table(
    tmp_path: Path,
) -> None:
    fresh, old = tmp_path / "fresh.sqlite3", tmp_path / "old.sqlite3"
    open_writer(fresh).close()
    create_revision_2_store(old)
    assert metadata(old) == (2, [2], [(1, 2)])
    missing = schema_objects(fresh) - schema_objects(old)
    triggers = {name for kind, name, _ in missing if name.startswith("store_changes_")}
    assert len(triggers) == 22  # revisions 11, 14 and 15's, less the two 16 dropped
    assert all(kind == "trigger" for kind, name, _ in missing if name in triggers)
    assert {name for _, name, _ in missing} - triggers == {
        "api_events",  # revision 17: numbered by the rowid, with a high-water mark
        "api_events_high_water",
        "api_events_high_water_kept",
        "store_changes",  # revision 10: the change log
        "replica_sources",
        "replica_sessions",
        "materialized_history_start",
        "store_identity",  # revision 6
        "sessions",
        "session_turn_usage",  # revision 5: usage references session_contexts
        "session_provider_cost",
        "materialized_transcript_seq",
        "relay_log_pages",  # revision 7: the relay log
        "projection_behind",  # revision 8: forward compatibility
        "materialized_seeds",
        "materialized_transcript_items",  # revision 9: index facts
        "materialized_transcript_facts_stale",
        "maintenance_requests",  # revision 10: maintenance requests
        "maintenance_requests_open",
        "maintenance_requests_state",
        "materialized_transcript_view_stale",  # revision 12: items' role and text
        "transcript_search_keys",  # revision 13: the search index
        "transcript_search_text",
        "transcript_search",
        "transcript_search_added",
        "transcript_search_changed",
        "transcript_search_removed",
        "transcript_search_config",  # (the FTS5 table's own tables)
        "transcript_search_data",
        "transcript_search_docsize",
        "transcript_search_idx",
        "subagent_sessions",  # revision 14: sub-agent relations
        "subagent_sessions_parent",
        "elicitation_answers",  # revision 15: recorded answers
    }


def test_a_revision_2_store_is_migrated_in_place_on_the_first_writable_open(
    store_path: Path,
) -> None:
    create_revision_2_store(store_path)
    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        tables = {
            str(name)
            for (name,) in writer.connection.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'"
            )
        }
    assert "materialized_history_start" in tables
    # Revision 3 adds its ledger row and leaves the floor at 2; revision 4 raises it.
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        list(range(2, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )


def test_migrating_revision_2_keeps_every_row(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session())
        writer.connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 7, ?)",
            (encode(turn_started()).decode(),),
        )
    step_back_to_revision_2(store_path)
    assert metadata(store_path) == (2, [2], [(1, 2)])
    with open_writer(store_path) as writer:
        page = load_api_events(writer.connection, None, 0, 100)
        sessions = [str(s) for (s,) in writer.connection.execute("SELECT session_id FROM sessions")]
    assert sessions == ["session-1"]
    assert [(e.seq, e.recorded_at_ms) for e in page.events] == [(1, 7)]
    assert isinstance(page.events[0].event, ApiTurnStarted)
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        list(range(2, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )


def test_a_revision_1_store_is_migrated_all_the_way_to_the_current_revision(
    store_path: Path,
) -> None:
    create_legacy_store(store_path)
    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        tables = {
            str(name)
            for (name,) in writer.connection.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table'"
            )
        }
    assert {"checkpoint_operations", "materialized_history_start"} <= tables
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        list(range(1, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- migrating revision 1 --------------------------------------------------------------


def test_event_migration_preserves_cursors_and_keeps_unknown_history_explicit(
    store_path: Path,
) -> None:
    # Seed test 12: a revision-1 store with an old turn_ended at seq 2 and an old error
    # event at seq 8 is migrated on the first writable open.
    connection = legacy_store_with_session(store_path)
    with connection:
        connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 100, ?)",
            (encode(turn_started()).decode(),),
        )
        connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 100, ?)",
            (old_turn_ended_body(),),
        )
        connection.execute(
            "INSERT INTO api_events(seq, session_id, recorded_at_ms, body) VALUES (8, 'session-1', 1234, ?)",
            ('{"type":"error","data":{"command_id":"arbitrary","message":"old diagnostic"}}',),
        )
    connection.close()

    with open_writer(store_path) as writer:
        page = load_api_events(writer.connection, None, 0, 100)

    assert page.latest_seq == 8
    assert page.next_after_seq == 8
    assert [event.seq for event in page.events] == [1, 2, 8]
    assert page.events[2].recorded_at_ms == 1234
    notice = page.events[2].event
    assert isinstance(notice, ApiLegacyNotice)
    assert (notice.data.original_type, notice.data.command_id, notice.data.message) == (
        "error",
        "arbitrary",
        "old diagnostic",
    )
    ended = page.events[1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is TurnResultKind.COMPLETED
    assert isinstance(page.events[0].event, ApiTurnStarted)


def test_migration_gives_old_outcomes_their_semantic_result(store_path: Path) -> None:
    connection = legacy_store_with_session(store_path)
    bodies = [
        old_turn_ended_body("QuotaLimit"),
        encode(
            {
                "type": "turn_ended",
                "data": {
                    "turn": msgspec.structs.replace(
                        old_turn_outcome(), outcome=TurnOutcomeRejected(message="busy")
                    )
                },
            }
        ).decode(),
        encode(
            {
                "type": "turn_ended",
                "data": {
                    "turn": msgspec.structs.replace(
                        old_turn_outcome(),
                        outcome=TurnOutcomeInterrupted(
                            message="stopped", reason=OutcomeReason.REQUESTED_CANCELLATION
                        ),
                    )
                },
            }
        ).decode(),
    ]
    with connection:
        for body in bodies:
            connection.execute(
                "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 5, ?)",
                (body,),
            )
    connection.close()
    with open_writer(store_path) as writer:
        events = scan(writer.connection)
    results = []
    for event in events:
        assert isinstance(event.event, ApiTurnEnded)
        outcome = event.event.data.turn.outcome
        results.append((outcome.kind, outcome.reason, outcome.message))
    assert results == [
        (TurnResultKind.FAILED, OutcomeReason.QUOTA_LIMIT, "QuotaLimit"),
        (TurnResultKind.REJECTED, OutcomeReason.LEGACY_UNCLASSIFIED, "busy"),
        (TurnResultKind.CANCELLED, OutcomeReason.REQUESTED_CANCELLATION, "stopped"),
    ]


def test_a_legacy_error_event_without_a_command_keeps_a_null_command_id(store_path: Path) -> None:
    connection = legacy_store_with_session(store_path)
    # The legacy trigger writes the error event when last_error changes.
    with connection:
        connection.execute(
            "UPDATE sessions SET last_error = 'disk full' WHERE session_id = 'session-1'"
        )
    connection.close()
    with open_writer(store_path) as writer:
        [event] = scan(writer.connection)
    assert event.type == "legacy_notice"
    assert bytes(event.data) == b'{"original_type":"error","message":"disk full","command_id":null}'


def test_migration_leaves_seq_times_and_the_sequence_untouched(store_path: Path) -> None:
    connection = legacy_store_with_session(store_path)
    with connection:
        for at in (11, 22, 33):
            connection.execute(
                "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', ?, ?)",
                (at, old_turn_ended_body()),
            )
        connection.execute("DELETE FROM api_events WHERE seq = 3")
    connection.close()
    with open_writer(store_path) as writer:
        page = load_api_events(writer.connection, None, 0, 100)
    assert [(e.seq, e.recorded_at_ms) for e in page.events] == [(1, 11), (2, 22)]
    assert page.latest_seq == 3


def test_one_bad_legacy_body_rolls_the_whole_migration_back(store_path: Path) -> None:
    connection = legacy_store_with_session(store_path)
    good_error = '{"type":"error","data":{"message":"kept","command_id":null}}'
    with connection:
        connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 1, ?)",
            (good_error,),
        )
        connection.execute(
            "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 2, ?)",
            ('{"type":"turn_ended","data":{"turn":{"command_id":"p"}}}',),
        )
    connection.close()
    before = schema_objects(store_path)

    with pytest.raises(InvalidInput, match=r"API event seq 2 cannot be migrated") as caught:
        open_writer(store_path)

    assert caught.value.session_id == "session-1"
    assert metadata(store_path) == (1, [1], [(1, 1)])
    assert schema_objects(store_path) == before
    connection = raw(store_path)
    bodies = [body for (body,) in connection.execute("SELECT body FROM api_events ORDER BY seq")]
    connection.close()
    assert bodies[0] == good_error


def test_the_legacy_fixture_writes_error_events_from_its_triggers(store_path: Path) -> None:
    connection = legacy_store_with_session(store_path)
    with connection:
        connection.execute(
            "UPDATE sessions SET last_error = 'first' WHERE session_id = 'session-1'"
        )
        connection.execute(
            "UPDATE sessions SET last_error = 'first' WHERE session_id = 'session-1'"
        )
        connection.execute("UPDATE sessions SET last_error = NULL WHERE session_id = 'session-1'")
    bodies = [str(body) for (body,) in connection.execute("SELECT body FROM api_events")]
    connection.close()
    assert bodies == ['{"type":"error","data":{"message":"first","command_id":null}}']


# -- readers ---------------------------------------------------------------------------


def test_a_reader_refuses_a_store_that_needs_migration_and_never_migrates_it(
    store_path: Path,
) -> None:
    create_legacy_store(store_path)
    with pytest.raises(SchemaMismatch) as caught:
        open_reader(store_path)
    assert caught.value.reason is SchemaMismatchReason.NEEDS_MIGRATION
    assert (caught.value.found, caught.value.supported) == (1, SCHEMA_VERSION)
    assert f"relaystore schema 1 is not the supported schema {SCHEMA_VERSION}" in str(caught.value)
    assert metadata(store_path) == (1, [1], [(1, 1)])


def test_a_reader_refuses_a_revision_2_store_and_never_migrates_it(store_path: Path) -> None:
    create_revision_2_store(store_path)
    before = schema_objects(store_path)
    with pytest.raises(SchemaMismatch) as caught:
        open_reader(store_path)
    assert caught.value.reason is SchemaMismatchReason.NEEDS_MIGRATION
    assert (caught.value.found, caught.value.supported) == (2, SCHEMA_VERSION)
    assert f"relaystore schema 2 is not the supported schema {SCHEMA_VERSION}" in str(caught.value)
    assert metadata(store_path) == (2, [2], [(1, 2)])
    assert schema_objects(store_path) == before
    assert "materialized_history_start" not in {name for _, name, _ in before}


def test_a_reader_refuses_an_empty_file(store_path: Path) -> None:
    store_path.touch()
    with pytest.raises(SchemaMismatch) as caught:
        open_reader(store_path)
    assert caught.value.reason is SchemaMismatchReason.NEEDS_MIGRATION
    assert store_path.stat().st_size == 0


# -- newer stores ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "floor", [COMPATIBILITY_FLOOR, SCHEMA_VERSION], ids=["floor-unchanged", "floor-at-this-build"]
)
def test_a_newer_store_whose_floor_admits_this_build_stays_usable_and_unchanged(
    store_path: Path, floor: int
) -> None:
    open_writer(store_path).close()
    advance_to(store_path, FUTURE, floor=floor)
    with open_writer(store_path) as writer:
        assert writer.revision == FUTURE
        save_session(writer.connection, example_session())
        assert writer.check_schema() == FUTURE
    reader = open_reader(store_path)
    assert load_api_events(reader, None, 0, 10).latest_seq == 0
    reader.close()
    assert metadata(store_path) == (FUTURE, [SCHEMA_VERSION, FUTURE], [(1, floor)])


@pytest.mark.parametrize("opener", [open_writer, open_reader], ids=["writer", "reader"])
def test_a_newer_store_whose_floor_excludes_this_build_is_refused_untouched(
    store_path: Path, opener: Callable[[Path], object]
) -> None:
    open_writer(store_path).close()
    advance_to(store_path, FUTURE, floor=FUTURE)
    with pytest.raises(SchemaMismatch) as caught:
        opener(store_path)
    error = caught.value
    assert error.reason is SchemaMismatchReason.INCOMPATIBLE
    assert (error.found, error.supported, error.minimum) == (FUTURE, SCHEMA_VERSION, FUTURE)
    assert f"requires at least build schema {FUTURE}" in str(error)
    assert metadata(store_path) == (FUTURE, [SCHEMA_VERSION, FUTURE], [(1, FUTURE)])


# -- invalid metadata ------------------------------------------------------------------

BREAKAGES = {
    "floor table missing": "DROP TABLE schema_compatibility",
    "ledger missing": "DROP TABLE schema_migrations",
    "no floor row": "DELETE FROM schema_compatibility",
    "empty ledger": "DELETE FROM schema_migrations",
    "ledger ahead of user_version": f"INSERT INTO schema_migrations VALUES ({FUTURE}, 'x')",
    "floor above revision": (
        f"UPDATE schema_compatibility SET minimum_compatible_version = {FUTURE}"
    ),
    "two floor rows": (
        "DROP TABLE schema_compatibility;"
        "CREATE TABLE schema_compatibility(singleton INTEGER, minimum_compatible_version INTEGER);"
        f"INSERT INTO schema_compatibility VALUES (1, {COMPATIBILITY_FLOOR}),"
        f" (1, {COMPATIBILITY_FLOOR})"
    ),
    "floor zero": (
        "DROP TABLE schema_compatibility;"
        "CREATE TABLE schema_compatibility(singleton INTEGER, minimum_compatible_version INTEGER);"
        "INSERT INTO schema_compatibility VALUES (1, 0)"
    ),
}


@pytest.mark.parametrize("breakage", BREAKAGES.values(), ids=BREAKAGES.keys())
@pytest.mark.parametrize("opener", [open_writer, open_reader], ids=["writer", "reader"])
def test_invalid_compatibility_metadata_is_refused(
    store_path: Path, breakage: str, opener: Callable[[Path], object]
) -> None:
    open_writer(store_path).close()
    connection = raw(store_path)
    with connection:
        connection.execute(breakage)
    connection.close()
    with pytest.raises(SchemaMismatch) as caught:
        opener(store_path)
    assert caught.value.reason is SchemaMismatchReason.INVALID_METADATA
    assert caught.value.found == SCHEMA_VERSION
    assert "missing or invalid compatibility metadata" in str(caught.value)


def test_a_database_of_another_application_is_refused_not_initialised(store_path: Path) -> None:
    connection = raw(store_path)
    connection.execute("CREATE TABLE notes(text TEXT)")
    connection.close()
    with pytest.raises(SchemaMismatch) as caught:
        open_writer(store_path)
    assert caught.value.reason is SchemaMismatchReason.INVALID_METADATA
    connection = raw(store_path)
    tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_schema")]
    connection.close()
    assert tables == ["notes"]


def test_ensure_supported_decides_from_revision_then_floor() -> None:
    ensure_supported(SchemaState(revision=SCHEMA_VERSION, minimum_compatible=SCHEMA_VERSION))
    ensure_supported(SchemaState(revision=SCHEMA_VERSION, minimum_compatible=COMPATIBILITY_FLOOR))
    ensure_supported(SchemaState(revision=SCHEMA_VERSION + 5, minimum_compatible=1))
    reasons = []
    for state in (
        SchemaState(revision=1, minimum_compatible=1),
        SchemaState(revision=SCHEMA_VERSION - 1, minimum_compatible=COMPATIBILITY_FLOOR),
        SchemaState(revision=0, minimum_compatible=None),
        SchemaState(revision=SCHEMA_VERSION + 2, minimum_compatible=SCHEMA_VERSION + 1),
        SchemaState(revision=SCHEMA_VERSION, minimum_compatible=None),
    ):
        with pytest.raises(SchemaMismatch) as caught:
            ensure_supported(state)
        reasons.append(caught.value.reason)
    assert reasons == [
        SchemaMismatchReason.NEEDS_MIGRATION,
        SchemaMismatchReason.NEEDS_MIGRATION,
        SchemaMismatchReason.NEEDS_MIGRATION,
        SchemaMismatchReason.INCOMPATIBLE,
        SchemaMismatchReason.INVALID_METADATA,
    ]


# -- the writer's per-message check ----------------------------------------------------


def test_the_writer_check_returns_the_revision_to_remember(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        current = SCHEMA_VERSION
        assert check_writer_schema(writer.connection, current) == current
        advance_to(store_path, current + 2, floor=current)
        assert check_writer_schema(writer.connection, current) == current + 2
        assert read_schema_state(writer.connection) == SchemaState(
            revision=current + 2, minimum_compatible=current
        )


def test_the_writer_refuses_a_store_rolled_back_underneath_it_without_writing(
    store_path: Path,
) -> None:
    open_writer(store_path).close()
    advance_to(store_path, FUTURE, floor=COMPATIBILITY_FLOOR)
    with open_writer(store_path) as writer:
        assert writer.revision == FUTURE
        restored = raw(store_path)  # a backup of the current revision restored in place
        with restored:
            restored.execute(f"DELETE FROM schema_migrations WHERE version = {FUTURE}")
            restored.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        restored.close()
        changes = writer.connection.total_changes()
        with pytest.raises(SchemaMismatch) as caught:
            writer.check_schema()
        assert writer.connection.total_changes() == changes
        error = caught.value
        assert error.reason is SchemaMismatchReason.ROLLBACK
        assert (error.found, error.minimum, error.supported) == (
            SCHEMA_VERSION,
            FUTURE,
            SCHEMA_VERSION,
        )
        assert f"rolled back from {FUTURE} to {SCHEMA_VERSION}" in str(error)
        assert writer.revision == FUTURE  # it keeps refusing later messages too
        with pytest.raises(SchemaMismatch):
            writer.check_schema()


def test_the_writer_refuses_a_floor_raised_underneath_it(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        advance_to(store_path, FUTURE, floor=FUTURE)
        with pytest.raises(SchemaMismatch) as caught:
            writer.check_schema()
        assert caught.value.reason is SchemaMismatchReason.INCOMPATIBLE
        assert writer.revision == FUTURE


def test_the_writer_refuses_compatibility_metadata_dropped_underneath_it(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        other = raw(store_path)
        other.execute("DROP TABLE schema_compatibility")
        other.close()
        with pytest.raises(SchemaMismatch) as caught:
            check_writer_schema(writer.connection, writer.revision)
        assert caught.value.reason is SchemaMismatchReason.INVALID_METADATA


# -- revision 4 ------------------------------------------------------------------------


def _record(session_id: str, **changes: object) -> SessionRecord:
    return msgspec.structs.replace(example_session(session_id), **changes)


def test_the_revision_3_fixture_refuses_the_new_kinds_as_a_revision_3_build_did(
    store_path: Path,
) -> None:
    create_revision_3_store(store_path)
    assert metadata(store_path) == (3, [3], [(1, 2)])
    connection = raw(store_path)
    try:
        with pytest.raises(InvalidInput, match="CHECK constraint failed: harness_kind"):
            save_session(connection, _record("s-1", harness_kind=HarnessKind.OPENCODE))
    finally:
        connection.close()


def test_a_revision_3_store_is_migrated_to_admit_every_kind_and_state(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("kept"))
    step_back_to_revision_3(store_path)
    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        for kind in HarnessKind:
            save_session(writer.connection, _record(f"h-{kind.value}", harness_kind=kind))
        for state in SessionState:
            save_session(writer.connection, _record(f"s-{state.value}", state=state))
        sessions = {str(s) for (s,) in writer.connection.execute("SELECT session_id FROM sessions")}
    assert "kept" in sessions
    assert {"h-opencode", "s-startup-cleanup"} <= sessions
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [3, *range(4, SCHEMA_VERSION + 1)],
        [(1, COMPATIBILITY_FLOOR)],
    )


def test_the_sessions_checks_list_exactly_the_domains_values(store_path: Path) -> None:
    open_writer(store_path).close()
    connection = raw(store_path)
    try:
        with pytest.raises(apsw.ConstraintError):
            connection.execute(
                "UPDATE sessions SET harness_kind = 'notepad' WHERE 0 = 1;"
                "INSERT INTO session_contexts(session_id, workspace_id, bundle_id)"
                " VALUES ('x', 'default', 'b');"
                "INSERT INTO sessions(session_id, title, harness_kind, state, updated_at,"
                " record_json) VALUES ('x', 't', 'notepad', 'running', 'now', '{}')"
            )
        (sql,) = connection.execute(
            "SELECT sql FROM sqlite_schema WHERE name = 'sessions'"
        ).fetchone()
    finally:
        connection.close()
    for kind in HarnessKind:
        assert f"'{kind.value}'" in sql
    for state in SessionState:
        assert f"'{state.value}'" in sql


def test_a_revision_3_build_is_refused_by_a_revision_4_store(store_path: Path) -> None:
    open_writer(store_path).close()
    state = SchemaState(revision=SCHEMA_VERSION, minimum_compatible=COMPATIBILITY_FLOOR)
    assert state.minimum_compatible > 3  # the floor keeps a revision-3 build out
    with open_writer(store_path) as writer:
        assert read_schema_state(writer.connection) == state


# -- revision 6: the store id ----------------------------------------------------------


def store_id_of(path: Path) -> str:
    connection = open_reader(path)
    try:
        return read_store_id(connection)
    finally:
        connection.close()


def test_a_new_store_gets_a_random_id_that_reopening_keeps(tmp_path: Path) -> None:
    first, second = tmp_path / "a.sqlite3", tmp_path / "b.sqlite3"
    open_writer(first).close()
    open_writer(second).close()
    store_id = store_id_of(first)
    assert len(store_id) == 32
    assert set(store_id) <= set("0123456789abcdef")
    assert store_id != store_id_of(second)
    open_writer(first).close()
    assert store_id_of(first) == store_id


def test_a_revision_5_store_gets_its_id_once_when_migrated(store_path: Path) -> None:
    open_writer(store_path).close()
    step_back_to_revision_5(store_path)
    assert metadata(store_path)[:2] == (5, [5])
    assert "store_identity" not in {name for _, name, _ in schema_objects(store_path)}
    with open_writer(store_path) as writer:
        store_id = read_store_id(writer.connection)
    # Additive: the ledger gains rows 6 and 7, the floor stays.
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        list(range(5, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )
    open_writer(store_path).close()
    assert store_id_of(store_path) == store_id


def test_backup_and_vacuum_keep_the_store_id(tmp_path: Path) -> None:
    from relaystore.storage.maintenance import backup_store, vacuum_store

    path, copy = tmp_path / "store.sqlite3", tmp_path / "copy.sqlite3"
    with open_writer(path) as writer:
        store_id = read_store_id(writer.connection)
        vacuum_store(writer.connection)
        backup_store(writer.connection, copy)
    assert store_id_of(path) == store_id
    assert store_id_of(copy) == store_id


def test_a_store_without_its_id_row_is_invalid_metadata(store_path: Path) -> None:
    open_writer(store_path).close()
    connection = raw(store_path)
    connection.execute("DELETE FROM store_identity")
    connection.close()
    with pytest.raises(SchemaMismatch) as caught:
        store_id_of(store_path)
    assert caught.value.reason is SchemaMismatchReason.INVALID_METADATA


# -- the relay log (revision 7) ----------------------------------------------------------


def test_a_revision_6_store_gains_the_relay_log_and_keeps_its_floor(store_path: Path) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("kept"))
    step_back_to_revision_6(store_path)
    assert "relay_log_pages" not in {name for _, name, _ in schema_objects(store_path)}

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
    assert "relay_log_pages" in {name for _, name, _ in schema_objects(store_path)}
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        list(range(6, SCHEMA_VERSION + 1)),
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- forward compatibility (revision 8) ---------------------------------------------------


def test_a_revision_7_store_gains_the_forward_tables_keeps_its_rows_and_its_floor(
    store_path: Path,
) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("kept"))
    step_back_to_revision_7(store_path)
    before = {name for _, name, _ in schema_objects(store_path)}
    assert "projection_behind" not in before
    assert "materialized_seeds" not in before

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        assert load_session(writer.connection, "kept") is not None
    after = {name for _, name, _ in schema_objects(store_path)}
    assert {"projection_behind", "materialized_seeds"} <= after
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [
            RELAY_LOG_REVISION,
            FORWARD_REVISION,
            INDEX_FACTS_REVISION,
            REQUESTS_REVISION,
            CHANGES_REVISION,
            ITEM_VIEW_REVISION,
            SEARCH_REVISION,
            SUBAGENTS_REVISION,
            ANSWERS_REVISION,
            ACTIVITY_UNNUMBERED_REVISION,
            SEQUENCES_REVISION,
        ],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- index facts (revision 9) -------------------------------------------------------------


def test_a_revision_8_store_gains_the_index_facts_as_a_fresh_store_has_them(
    store_path: Path, tmp_path: Path
) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("kept"))
    step_back_to_revision_8(store_path)
    assert "materialized_transcript_facts_stale" not in {
        name for _, name, _ in schema_objects(store_path)
    }

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        assert load_session(writer.connection, "kept") is not None
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    migrated = {o for o in schema_objects(store_path) if o[0] != "table" or "transcript" in o[1]}
    assert migrated == {o for o in schema_objects(fresh) if o[0] != "table" or "transcript" in o[1]}
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [
            FORWARD_REVISION,
            INDEX_FACTS_REVISION,
            REQUESTS_REVISION,
            CHANGES_REVISION,
            ITEM_VIEW_REVISION,
            SEARCH_REVISION,
            SUBAGENTS_REVISION,
            ANSWERS_REVISION,
            ACTIVITY_UNNUMBERED_REVISION,
            SEQUENCES_REVISION,
        ],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- maintenance requests (revision 10) ---------------------------------------------------


def test_a_revision_9_store_gains_the_request_table_as_a_fresh_store_has_it(
    store_path: Path, tmp_path: Path
) -> None:
    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("kept"))
    step_back_to_revision_9(store_path)
    assert "maintenance_requests" not in {name for _, name, _ in schema_objects(store_path)}

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        assert load_session(writer.connection, "kept") is not None
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    migrated = {o for o in schema_objects(store_path) if "maintenance" in o[1]}
    assert len(migrated) == 3  # the table and its two indexes
    assert migrated == {o for o in schema_objects(fresh) if "maintenance" in o[1]}
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [
            INDEX_FACTS_REVISION,
            REQUESTS_REVISION,
            CHANGES_REVISION,
            ITEM_VIEW_REVISION,
            SEARCH_REVISION,
            SUBAGENTS_REVISION,
            ANSWERS_REVISION,
            ACTIVITY_UNNUMBERED_REVISION,
            SEQUENCES_REVISION,
        ],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- the change log (revision 11) ---------------------------------------------------------


def test_a_revision_9_store_numbers_what_it_holds_and_then_every_change(
    store_path: Path, tmp_path: Path
) -> None:
    from relaystore.storage.changes import latest_change, load_changes

    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("b-second"))
        save_session(writer.connection, example_session("a-first"))
    step_back_to_revision_9(store_path)
    assert "store_changes" not in {name for _, name, _ in schema_objects(store_path)}

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        numbered = load_changes(writer.connection, 0, 100)
        # What the store held, session by session: each one's record.
        assert [(c.change_seq, c.kind, c.session_id) for c in numbered] == [
            (1, "record", "a-first"),
            (2, "record", "b-second"),
        ]
        save_session(writer.connection, example_session("a-first"))  # changes: numbered
        later = load_changes(writer.connection, 2, 100)
        assert later
        assert {(c.kind, c.session_id) for c in later} == {("record", "a-first")}
        assert latest_change(writer.connection) == later[-1].change_seq
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    assert {o for o in schema_objects(store_path) if o[0] == "trigger"} == {
        o for o in schema_objects(fresh) if o[0] == "trigger"
    }
    assert metadata(store_path)[0] == SCHEMA_VERSION


# -- sub-agent relations (revision 14) ----------------------------------------------------


def test_a_revision_13_store_gains_the_relation_table_as_a_fresh_store_has_it(
    store_path: Path, tmp_path: Path
) -> None:
    from relaystore.domain.subagents import SubagentRecord
    from relaystore.storage.changes import load_changes
    from relaystore.storage.reads.sessions import list_sessions
    from relaystore.storage.subagents import save_subagent

    with open_writer(store_path) as writer:
        for session_id in ("child", "parent"):
            save_session(writer.connection, example_session(session_id))
    step_back_to_revision_13(store_path)
    assert "subagent_sessions" not in {name for _, name, _ in schema_objects(store_path)}

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        before = load_changes(writer.connection, 0, 1000)[-1].change_seq
        save_subagent(
            writer.connection,
            SubagentRecord(
                child_session_id="child",
                parent_session_id="parent",
                task_name="t",
                profile_id="p",
                initial_prompt="i",
                request_key="k",
                created_at="2026-09-15",
            ),
        )
        # The relation is numbered as the child's record change.
        assert [(c.kind, c.session_id) for c in load_changes(writer.connection, before, 10)] == [
            ("record", "child")
        ]
        listed = list_sessions(writer.connection, top_level_only=True)
        assert [s.id for s in listed.sessions] == ["parent"]
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    migrated = {o for o in schema_objects(store_path) if "subagent" in o[1]}
    assert len(migrated) == 5  # the table, its index and its three triggers
    assert migrated == {o for o in schema_objects(fresh) if "subagent" in o[1]}
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [
            SEARCH_REVISION,
            SUBAGENTS_REVISION,
            ANSWERS_REVISION,
            ACTIVITY_UNNUMBERED_REVISION,
            SEQUENCES_REVISION,
        ],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- recorded answers (revision 15) -------------------------------------------------------


def test_a_revision_14_store_gains_the_answers_table_as_a_fresh_store_has_it(
    store_path: Path, tmp_path: Path
) -> None:
    from relaystore.domain.elicitation.forms import ElicitationAccept
    from relaystore.domain.messages import RecordElicitationAnswer
    from relaystore.storage.answers import record_answer
    from relaystore.storage.changes import load_changes
    from relaystore.storage.reads.elicitations import load_elicitation_answers
    from tests.storage.answers_support import pend, question

    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("asked"))
        pend(writer.connection, "asked", question("q1"))
    step_back_to_revision_14(store_path)
    assert "elicitation_answers" not in {name for _, name, _ in schema_objects(store_path)}

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        before = load_changes(writer.connection, 0, 1000)[-1].change_seq
        record_answer(
            writer.connection,
            RecordElicitationAnswer(
                session_id="asked",
                elicitation_id="q1",
                answered_by="ada",
                response=ElicitationAccept(content={"name": "Ada", "pin": "1234"}),
                answered_at_ms=5,
            ),
        )
        # The answer is numbered as the session's record change, and reads back masked.
        assert [(c.kind, c.session_id) for c in load_changes(writer.connection, before, 10)] == [
            ("record", "asked")
        ]
        answers = load_elicitation_answers(writer.connection, "asked")
        assert answers is not None
        assert [(a.answered_by, a.answer) for a in answers.answers] == [
            ("ada", "accepted: name = Ada; pin = ***")
        ]
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    migrated = {o for o in schema_objects(store_path) if "elicitation_answers" in o[1]}
    assert len(migrated) == 4  # the table and its three triggers
    assert migrated == {o for o in schema_objects(fresh) if "elicitation_answers" in o[1]}
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [SUBAGENTS_REVISION, ANSWERS_REVISION, ACTIVITY_UNNUMBERED_REVISION, SEQUENCES_REVISION],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- activity changes unnumbered (revision 16) -------------------------------------------


def test_a_revision_15_store_stops_numbering_activity_changes_and_numbers_the_rest(
    store_path: Path, tmp_path: Path
) -> None:
    from relaystore.domain.api_events import ApiActivityState
    from relaystore.storage.activity import record_activities
    from relaystore.storage.changes import latest_change, load_changes

    def activity(state: str) -> ApiActivityState:
        return ApiActivityState(
            state=state, is_idle=False, waiting_for_input=False, capacity_retry=False
        )

    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("busy"))
    step_back_to_revision_15(store_path)
    with apsw.Connection(str(store_path)) as connection:  # as a revision-15 build wrote
        before = int(connection.execute("SELECT max(change_seq) FROM store_changes").get)
        connection.execute(
            "INSERT INTO api_session_activity(session_id, body) VALUES ('busy', '{}')"
        )
        numbered = int(connection.execute("SELECT max(change_seq) FROM store_changes").get)
        assert numbered == before + 1  # the revision-15 trigger numbered it

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        record_activities(writer.connection, [("busy", activity("working"))], 7)
        record_activities(writer.connection, [("busy", activity("idle"))], 8)
        # Two activity events in the feed, no change numbered for them.
        published = writer.connection.execute(
            "SELECT count(*) FROM api_events WHERE json_extract(body, '$.type') = ?",
            ("activity_changed",),
        ).get
        assert published == 2
        assert latest_change(writer.connection) == numbered
        save_session(writer.connection, _record("busy", title="renamed"))
        later = load_changes(writer.connection, numbered, 10)
        assert [(c.kind, c.session_id) for c in later] == [("record", "busy")]
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    assert schema_objects(store_path) == schema_objects(fresh)
    assert not [o for o in schema_objects(store_path) if o[0] == "trigger" and "activity" in o[1]]
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [ANSWERS_REVISION, ACTIVITY_UNNUMBERED_REVISION, SEQUENCES_REVISION],
        [(1, COMPATIBILITY_FLOOR)],
    )


# -- the feed and the changes numbered by the rowid (revision 17) -------------------------


def _events(path: Path) -> list[tuple[int, str]]:
    connection = raw(path)
    try:
        return [
            (int(s), str(i))
            for s, i in connection.execute("SELECT seq, session_id FROM api_events ORDER BY seq")
        ]
    finally:
        connection.close()


def test_a_revision_16_store_keeps_its_seqs_and_never_hands_a_deleted_one_out_again(
    store_path: Path, tmp_path: Path
) -> None:
    from relaystore.storage.changes import latest_change
    from relaystore.storage.events import insert_api_event
    from relaystore.storage.paging import load_latest_seq
    from relaystore.storage.sessions import delete_session

    with open_writer(store_path) as writer:
        for session_id in ("kept", "gone"):
            save_session(writer.connection, example_session(session_id))
        for session_id in ("kept", "gone", "kept", "gone"):
            insert_api_event(writer.connection, session_id, 1, turn_started())
    step_back_to_revision_16(store_path)
    connection = raw(store_path)  # a revision-16 build deletes the newest events
    try:
        connection.execute("DELETE FROM sessions WHERE session_id = 'gone'")
        counter = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'api_events'")
        assert counter.get == 4
        changes = int(connection.execute("SELECT max(change_seq) FROM store_changes").get)
    finally:
        connection.close()
    assert _events(store_path) == [(1, "kept"), (3, "kept")]

    with open_writer(store_path) as writer:
        assert writer.revision == SCHEMA_VERSION
        connection = writer.connection
        assert load_latest_seq(connection) == 4  # the sequence's mark, kept
        assert latest_change(connection) == changes
        assert insert_api_event(connection, "kept", 2, turn_started()) == 5
        # Deleting the newest events again: their seqs are never handed out again.
        save_session(connection, example_session("later"))
        assert insert_api_event(connection, "later", 3, turn_started()) == 6
        delete_session(connection, "later")
        assert load_latest_seq(connection) == 6
        assert insert_api_event(connection, "kept", 4, turn_started()) == 7
        assert latest_change(connection) > changes  # changes numbered on, by the rowid
    assert _events(store_path) == [(1, "kept"), (3, "kept"), (5, "kept"), (7, "kept")]
    fresh = tmp_path / "fresh.sqlite3"
    open_writer(fresh).close()
    assert schema_objects(store_path) == schema_objects(fresh)
    connection = raw(store_path)
    try:  # SQLite keeps no sequence for them any more
        assert connection.execute("SELECT count(*) FROM sqlite_sequence").get == 0
    finally:
        connection.close()
    assert metadata(store_path) == (
        SCHEMA_VERSION,
        [ACTIVITY_UNNUMBERED_REVISION, SEQUENCES_REVISION],
        [(1, SEQUENCES_REVISION)],
    )


def test_a_store_a_0_4_restore_adopted_numbers_its_changes_on_from_its_newest_row(
    store_path: Path,
) -> None:
    """A 0.4 ``restore`` removed the change numbers its own triggers took and left the
    counter above the newest row; those numbers were never committed, so the store
    migrates and numbers on from its newest row (as the source it mirrors does)."""
    from relaystore.storage.changes import latest_change, load_changes

    with open_writer(store_path) as writer:
        save_session(writer.connection, example_session("s"))
        newest = latest_change(writer.connection)
    step_back_to_revision_16(store_path)
    connection = raw(store_path)
    try:
        connection.execute("UPDATE sqlite_sequence SET seq = 99 WHERE name = 'store_changes'")
    finally:
        connection.close()
    with open_writer(store_path) as writer:
        assert latest_change(writer.connection) == newest
        save_session(writer.connection, _record("s", title="renamed"))
        assert [c.change_seq for c in load_changes(writer.connection, newest, 10)] == [newest + 1]
