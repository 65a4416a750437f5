"""Session records: saving, lifecycle updates, deletion, loading and session faults."""

from __future__ import annotations

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import ApiSessionFault
from relaystore.domain.errors import InvalidInput, UnknownSession
from relaystore.domain.outcomes import OutcomeReason
from relaystore.domain.relay import RELAY_EVENT_GENESIS_DIGEST
from relaystore.domain.sessions.provisioning import ContainerAllocation
from relaystore.domain.sessions.records import (
    CheckpointMetadata,
    SessionRecord,
    SessionState,
    State,
)
from relaystore.domain.sessions.targets import LocalBareTarget
from relaystore.storage.activity import record_activities
from relaystore.storage.checkpoints import begin_checkpoint
from relaystore.storage.paging import load_api_events, load_latest_seq
from relaystore.storage.sessions import (
    delete_session,
    load_session,
    load_state,
    save_lifecycle_session,
    save_session,
)
from relaystore.testing import example_session
from tests.storage.builders import (
    count_rows,
    idle_activity,
    insert_turn,
    kinds,
    running_session,
    scan,
)


def replace(record: SessionRecord, **changes: object) -> SessionRecord:
    return msgspec.structs.replace(record, **changes)


def faults(connection: apsw.Connection) -> list[tuple[OutcomeReason, str]]:
    found = []
    for event in scan(connection):
        body = event.event
        if isinstance(body, ApiSessionFault):
            found.append((body.data.reason, body.data.message))
    return found


# -- saving ------------------------------------------------------------------------------


def test_a_saved_record_loads_back_unchanged(db: apsw.Connection) -> None:
    save_session(db, example_session())
    assert load_session(db, "session-1") == example_session()
    assert load_state(db) == State(sessions={"session-1": example_session()})


def test_a_full_save_replaces_every_field(db: apsw.Connection) -> None:
    save_session(db, example_session())
    changed = replace(
        example_session(),
        title="renamed",
        native_session_id="native-2",
        draft_input="half a thought",
        archived=True,
        checkpoint=None,
        additional_mounts=[],
        viewed_through_event_ordinal=9,
    )
    save_session(db, changed)
    assert load_session(db, "session-1") == changed
    assert count_rows(db, "session_checkpoints") == 0


def test_saving_creates_the_empty_materialized_projection_once(db: apsw.Connection) -> None:
    save_session(db, example_session())
    db.execute(
        "UPDATE materialized_sessions SET applied_event_ordinal = 3, applied_event_digest = ?",
        ("b" * 64,),
    )
    save_session(db, example_session())
    rows = db.execute(
        "SELECT session_id, applied_event_ordinal FROM materialized_sessions"
    ).fetchall()
    assert rows == [("session-1", 3)]
    save_session(db, example_session("session-2"))
    digest = db.execute(
        "SELECT applied_event_ordinal, applied_event_digest FROM materialized_sessions WHERE session_id = 'session-2'"
    ).fetchone()
    assert digest == (0, RELAY_EVENT_GENESIS_DIGEST)


def test_a_session_saved_again_after_deletion_gets_a_fresh_projection(
    db: apsw.Connection,
) -> None:
    save_session(db, replace(example_session(), viewed_through_event_ordinal=10))
    db.execute(
        "UPDATE materialized_sessions SET applied_event_ordinal = 3, applied_event_digest = ?",
        ("b" * 64,),
    )
    delete_session(db, "session-1")
    save_session(db, replace(example_session(), viewed_through_event_ordinal=4))
    frontier = db.execute(
        "SELECT applied_event_ordinal, applied_event_digest FROM materialized_sessions"
    ).fetchall()
    assert frontier == [(0, RELAY_EVENT_GENESIS_DIGEST)]
    stored = load_session(db, "session-1")
    assert stored is not None
    assert stored.viewed_through_event_ordinal == 4


def test_an_invalid_record_is_refused_before_anything_is_written(db: apsw.Connection) -> None:
    with pytest.raises(InvalidInput, match="empty title") as caught:
        save_session(db, replace(example_session(), title="  "))
    assert caught.value.session_id == "session-1"
    with pytest.raises(InvalidInput, match="invalid session id"):
        save_session(db, replace(example_session(), id="../escape"))
    with pytest.raises(InvalidInput, match="SHA-256"):
        save_session(
            db,
            replace(
                example_session(),
                checkpoint=CheckpointMetadata(
                    archive_path="a", sha256="XYZ", created_at="t", event_frontier=0
                ),
            ),
        )
    for table in ("sessions", "session_contexts", "materialized_sessions", "api_events"):
        assert count_rows(db, table) == 0


def test_a_session_keeps_its_bundle(db: apsw.Connection) -> None:
    save_session(db, example_session())
    with pytest.raises(
        InvalidInput, match="already associated with bundle project-1, not project-2"
    ) as caught:
        save_session(db, example_session(bundle_id="project-2"))
    assert caught.value.session_id == "session-1"
    assert load_session(db, "session-1") == example_session()


def test_a_session_keeps_its_workspace(db: apsw.Connection) -> None:
    save_session(db, example_session())
    with pytest.raises(InvalidInput, match="belongs to workspace default, not team"):
        save_session(db, replace(example_session(), workspace_id="team"))


def test_a_new_workspace_is_registered_by_the_first_session_in_it(db: apsw.Connection) -> None:
    save_session(db, replace(example_session(), workspace_id="team"))
    workspaces = [name for (name,) in db.execute("SELECT workspace_id FROM workspaces ORDER BY 1")]
    assert workspaces == ["default", "team"]


def test_viewed_through_never_moves_backwards(db: apsw.Connection) -> None:
    save_session(db, replace(example_session(), viewed_through_event_ordinal=10))
    save_session(db, replace(example_session(), viewed_through_event_ordinal=4))
    stored = load_session(db, "session-1")
    assert stored is not None
    assert stored.viewed_through_event_ordinal == 10
    save_lifecycle_session(db, replace(example_session(), viewed_through_event_ordinal=2))
    stored = load_session(db, "session-1")
    assert stored is not None
    assert stored.viewed_through_event_ordinal == 10
    save_lifecycle_session(db, replace(example_session(), viewed_through_event_ordinal=12))
    stored = load_session(db, "session-1")
    assert stored is not None
    assert stored.viewed_through_event_ordinal == 12


# -- session faults ----------------------------------------------------------------------


def test_a_new_last_error_emits_one_session_fault_and_resaves_emit_none(
    db: apsw.Connection,
) -> None:
    record = example_session()
    save_session(db, record)
    record.last_error = "provisioning failed"
    save_session(db, record, now_ms=77)
    save_session(db, record, now_ms=78)
    [event] = scan(db)
    assert event.type == "session_fault"
    assert event.recorded_at_ms == 77
    assert (
        bytes(event.data)
        == b'{"reason":"lifecycle_failed","message":"provisioning failed","command_id":null}'
    )


def test_clearing_the_error_emits_nothing_and_a_different_error_emits_again(
    db: apsw.Connection,
) -> None:
    save_session(db, replace(example_session(), last_error="first"))
    save_session(db, example_session())
    save_session(db, replace(example_session(), last_error="first"))
    save_session(db, replace(example_session(), last_error="second"))
    assert faults(db) == [
        (OutcomeReason.LIFECYCLE_FAILED, "first"),
        (OutcomeReason.LIFECYCLE_FAILED, "first"),
        (OutcomeReason.LIFECYCLE_FAILED, "second"),
    ]


def test_a_lifecycle_save_that_records_a_launch_failure_emits_one_error_event(
    db: apsw.Connection,
) -> None:
    # Seed test 5.
    record = example_session()
    save_session(db, record)
    record.state = SessionState.ERROR
    record.last_error = "worker bootstrap failed: Connection closed by host"
    save_lifecycle_session(db, record)
    save_lifecycle_session(db, record)
    assert faults(db) == [
        (OutcomeReason.LIFECYCLE_FAILED, "worker bootstrap failed: Connection closed by host")
    ]


def test_a_fault_commits_with_its_row_or_not_at_all(db: apsw.Connection) -> None:
    save_session(db, example_session())

    def rolled_back() -> None:
        with db:
            save_lifecycle_session(db, replace(example_session(), last_error="boom"))
            raise RuntimeError("caller rolls back")

    with pytest.raises(RuntimeError, match="caller rolls back"):
        rolled_back()
    stored = load_session(db, "session-1")
    assert stored is not None
    assert stored.last_error is None
    assert load_latest_seq(db) == 0


# -- lifecycle saves ---------------------------------------------------------------------


def test_a_lifecycle_save_changes_only_the_lifecycle_fields(db: apsw.Connection) -> None:
    original = example_session()
    save_session(db, original)
    update = replace(
        original,
        # lifecycle-owned
        title="relaunched",
        state=SessionState.RUNNING,
        updated_at="2026-08-13T00:00:00Z",
        last_checkpoint_error=None,
        resource_allocation=ContainerAllocation(cpus=2, memory_bytes=1024),
        target=LocalBareTarget(worker_root="/srv/workers/session-1"),
        project_directory="/work/project",
        # not lifecycle-owned
        native_session_id="native-2",
        acp_session_title="Other title",
        draft_input="draft",
        archived=True,
        additional_mounts=[],
        container_cpus="4",
        checkpoint=None,
    )
    save_lifecycle_session(db, update)
    assert load_session(db, "session-1") == replace(
        original,
        title="relaunched",
        state=SessionState.RUNNING,
        updated_at="2026-08-13T00:00:00Z",
        last_checkpoint_error=None,
        resource_allocation=ContainerAllocation(cpus=2, memory_bytes=1024),
        target=LocalBareTarget(worker_root="/srv/workers/session-1"),
        project_directory="/work/project",
    )


def test_a_lifecycle_save_of_an_unknown_session_is_refused(db: apsw.Connection) -> None:
    with pytest.raises(UnknownSession) as caught:
        save_lifecycle_session(db, example_session())
    assert caught.value.session_id == "session-1"
    assert count_rows(db, "sessions") == 0


def test_a_lifecycle_save_never_revives_a_deleted_session(db: apsw.Connection) -> None:
    save_session(db, example_session())
    delete_session(db, "session-1")
    with pytest.raises(UnknownSession):
        save_lifecycle_session(db, replace(example_session(), last_error="late"))
    assert load_session(db, "session-1") is None
    assert load_latest_seq(db) == 0


# -- deleting ----------------------------------------------------------------------------


def test_deleting_a_session_removes_everything_but_its_context_and_the_cursor(
    db: apsw.Connection,
) -> None:
    save_session(db, running_session())
    insert_turn(db)
    record_activities(db, [("session-1", idle_activity())], 5)
    begin_checkpoint(db, replace(running_session(), state=SessionState.CHECKPOINTING), "attempt-1")
    delete_session(db, "session-1")
    assert load_session(db, "session-1") is None
    assert load_state(db) == State()
    for table in (
        "sessions",
        "api_events",
        "api_session_activity",
        "checkpoint_operations",
        "session_checkpoints",
        "materialized_sessions",
    ):
        assert count_rows(db, table) == 0, table
    assert db.execute("SELECT bundle_id, workspace_id FROM session_contexts").fetchall() == [
        ("project-1", "default")
    ]
    assert load_latest_seq(db) == 3


def test_deleting_an_unknown_session_does_nothing(db: apsw.Connection) -> None:
    save_session(db, example_session())
    delete_session(db, "never-saved")
    assert load_session(db, "session-1") == example_session()


def test_a_deleted_session_id_can_be_saved_again_in_its_bundle_only(db: apsw.Connection) -> None:
    save_session(db, example_session())
    delete_session(db, "session-1")
    with pytest.raises(InvalidInput, match="bundle"):
        save_session(db, example_session(bundle_id="project-2"))
    save_session(db, example_session())
    assert load_session(db, "session-1") == example_session()


# -- loading -----------------------------------------------------------------------------


def test_the_state_holds_every_session_ordered_by_id(db: apsw.Connection) -> None:
    for session_id in ("c", "a", "b"):
        save_session(db, example_session(session_id))
    state = load_state(db)
    assert list(state.sessions) == ["a", "b", "c"]
    assert state.sessions["b"] == example_session("b")


def test_a_record_stored_by_another_tool_that_does_not_decode_is_reported(
    db: apsw.Connection,
) -> None:
    save_session(db, example_session())
    db.execute('UPDATE sessions SET record_json = \'{"id":"session-1"}\'')
    with pytest.raises(InvalidInput, match="stored session record") as caught:
        load_state(db)
    assert caught.value.session_id == "session-1"


def test_events_of_a_saved_session_carry_its_id_and_kinds(db: apsw.Connection) -> None:
    save_session(db, running_session())
    insert_turn(db)
    page = load_api_events(db, None, 0, 10)
    assert kinds(page.events) == ["turn_started", "turn_ended"]
    assert {event.session_id for event in page.events} == {"session-1"}
