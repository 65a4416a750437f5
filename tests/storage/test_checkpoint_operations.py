"""Checkpoint operations: ownership, exactly-once completion, correlation and recovery."""

from __future__ import annotations

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import ApiCommandEnded
from relaystore.domain.errors import InvalidInput, LifecycleConflict, UnknownSession
from relaystore.domain.outcomes import CommandOwner, CommandResult, CommandResultKind, OutcomeReason
from relaystore.domain.sessions.records import CheckpointMetadata, SessionRecord, SessionState
from relaystore.storage.checkpoints import (
    RECOVERED_CHECKPOINT_ERROR,
    begin_checkpoint,
    correlate_checkpoint_barrier,
    finish_failed_checkpoint,
    recover_interrupted_checkpoints,
    save_requested_checkpoint,
)
from relaystore.storage.paging import load_latest_seq
from relaystore.storage.sessions import delete_session, load_session, load_state, save_session
from tests.storage.builders import count_rows, running_session, scan


def with_state(record: SessionRecord, state: SessionState, **changes: object) -> SessionRecord:
    return msgspec.structs.replace(record, state=state, **changes)


def results(connection: apsw.Connection) -> list[CommandResult]:
    found = []
    for event in scan(connection):
        assert isinstance(event.event, ApiCommandEnded), event.type
        found.append(event.event.data)
    return found


def new_checkpoint(name: str = "verified.tar") -> CheckpointMetadata:
    return CheckpointMetadata(
        archive_path=f"/archives/{name}",
        sha256="a" * 64,
        created_at="2026-09-27T12:00:00Z",
        event_frontier=0,
    )


def test_checkpoint_recovery_consumes_attempt_identity_once_and_preserves_correlation(
    session_db: apsw.Connection,
) -> None:
    # Seed test 11.
    db = session_db
    record = with_state(running_session(), SessionState.CHECKPOINTING)
    with db:
        begin_checkpoint(db, record, "attempt-1")
        with pytest.raises(
            LifecycleConflict, match="session session-1 is already in a lifecycle operation"
        ):
            begin_checkpoint(db, record, "attempt-2")
        correlate_checkpoint_barrier(db, "session-1", "attempt-1", "barrier-1")

    assert recover_interrupted_checkpoints(db, "2026-09-27T12:00:00Z") == 1
    assert recover_interrupted_checkpoints(db, "2026-09-27T12:00:01Z") == 0

    [result] = results(db)
    assert result == CommandResult(
        owner=CommandOwner.DAEMON,
        command_id="attempt-1",
        command_kind="checkpoint",
        outcome=CommandResultKind.FAILED,
        reason=OutcomeReason.CONTROLLER_RESTARTED,
        message="Checkpoint operation interrupted by controller restart",
        related_command_ids=["barrier-1"],
    )
    stored = load_session(db, "session-1")
    assert stored is not None
    assert (stored.state, stored.updated_at, stored.last_checkpoint_error, stored.last_error) == (
        SessionState.RUNNING,
        "2026-09-27T12:00:00Z",
        RECOVERED_CHECKPOINT_ERROR,
        None,
    )


def test_requested_checkpoint_result_commits_with_metadata_and_only_for_its_owner(
    session_db: apsw.Connection,
) -> None:
    # Seed test 13.
    db = session_db
    record = running_session()
    previous_checkpoint = record.checkpoint
    begin_checkpoint(db, with_state(record, SessionState.CHECKPOINTING), "owner")
    record = with_state(record, SessionState.RUNNING, checkpoint=new_checkpoint())

    def uncommitted() -> None:
        with db:
            with pytest.raises(LifecycleConflict, match="no longer owns session session-1"):
                save_requested_checkpoint(db, record, "stale-owner")
            finish_failed_checkpoint(db, record, "stale-owner", False, "late failure")
            assert count_rows(db, "api_events") == 0
            save_requested_checkpoint(db, record, "owner")
            raise RuntimeError("not committed")

    with pytest.raises(RuntimeError, match="not committed"):
        uncommitted()

    assert load_state(db).sessions["session-1"].checkpoint == previous_checkpoint
    assert scan(db) == []

    with db:
        save_requested_checkpoint(db, record, "owner")
        finish_failed_checkpoint(db, record, "owner", False, "late cleanup failure")

    [result] = results(db)
    assert (result.outcome, result.command_id, result.owner) == (
        CommandResultKind.SUCCEEDED,
        "owner",
        CommandOwner.DAEMON,
    )
    assert (result.reason, result.message, result.related_command_ids) == (None, None, [])
    assert load_state(db).sessions["session-1"].checkpoint == record.checkpoint


@pytest.mark.parametrize("deferred", [False, True], ids=["failed", "deferred"])
def test_checkpoint_failure_and_deferral_are_distinct_and_preserve_previous_archive(
    db: apsw.Connection, deferred: bool
) -> None:
    # Seed test 14.
    record = running_session()
    record.checkpoint = new_checkpoint("previous.tar")
    save_session(db, record)
    previous, previous_warning = record.checkpoint, record.last_checkpoint_error
    with db:
        begin_checkpoint(db, with_state(record, SessionState.CHECKPOINTING), "owner")
        if not deferred:
            record.last_checkpoint_error = "archive verification failed"
        record.checkpoint = None  # a failed attempt has no archive; the old one stays
        finish_failed_checkpoint(db, record, "owner", deferred, "diagnostic")
        finish_failed_checkpoint(db, record, "owner", deferred, "diagnostic")

    loaded = load_state(db).sessions["session-1"]
    assert loaded.checkpoint == previous
    assert loaded.last_checkpoint_error == (
        previous_warning if deferred else "archive verification failed"
    )
    assert loaded.state is SessionState.RUNNING
    [result] = results(db)
    if deferred:
        assert (result.outcome, result.reason) == (
            CommandResultKind.REJECTED,
            OutcomeReason.CHECKPOINT_DEFERRED,
        )
    else:
        assert (result.outcome, result.reason) == (
            CommandResultKind.FAILED,
            OutcomeReason.CHECKPOINT_FAILED,
        )
    assert result.message == "diagnostic"


def test_a_successful_checkpoint_saves_the_native_session_id_too(
    session_db: apsw.Connection,
) -> None:
    record = running_session()
    begin_checkpoint(session_db, with_state(record, SessionState.CHECKPOINTING), "owner")
    done = with_state(
        record, SessionState.STOPPED, checkpoint=new_checkpoint(), native_session_id="native-9"
    )
    save_requested_checkpoint(session_db, done, "owner")
    assert load_session(session_db, "session-1") == done


def test_a_checkpoint_cannot_begin_during_another_lifecycle_operation(db: apsw.Connection) -> None:
    for state in (SessionState.CHECKPOINTING, SessionState.CLOSING, SessionState.DESTROYING):
        save_session(db, with_state(running_session(), state))
        with pytest.raises(LifecycleConflict, match="already in a lifecycle operation"):
            begin_checkpoint(db, with_state(running_session(), SessionState.CHECKPOINTING), "c-1")
    assert count_rows(db, "checkpoint_operations") == 0


def test_a_session_has_at_most_one_open_checkpoint(session_db: apsw.Connection) -> None:
    begin_checkpoint(session_db, with_state(running_session(), SessionState.CHECKPOINTING), "first")
    save_session(session_db, running_session())  # a full save does not end the operation
    with pytest.raises(LifecycleConflict, match="already has checkpoint operation first"):
        begin_checkpoint(
            session_db, with_state(running_session(), SessionState.CHECKPOINTING), "second"
        )


def test_a_command_id_owns_at_most_one_checkpoint(db: apsw.Connection) -> None:
    save_session(db, running_session("a"))
    save_session(db, running_session("b"))
    begin_checkpoint(db, with_state(running_session("a"), SessionState.CHECKPOINTING), "same")
    with pytest.raises(
        LifecycleConflict,
        match="command id same already owns the checkpoint operation of session a",
    ):
        begin_checkpoint(db, with_state(running_session("b"), SessionState.CHECKPOINTING), "same")
    stored = load_session(db, "b")
    assert stored is not None
    assert stored.state is SessionState.RUNNING


def test_beginning_a_checkpoint_of_an_unknown_session_is_refused(db: apsw.Connection) -> None:
    with pytest.raises(UnknownSession):
        begin_checkpoint(db, running_session(), "c-1")


def test_beginning_a_checkpoint_with_a_blank_command_id_is_refused(
    session_db: apsw.Connection,
) -> None:
    with pytest.raises(InvalidInput, match="command id is blank"):
        begin_checkpoint(session_db, running_session(), " ")


def test_beginning_a_checkpoint_appends_no_event(session_db: apsw.Connection) -> None:
    begin_checkpoint(session_db, with_state(running_session(), SessionState.CHECKPOINTING), "c-1")
    assert load_latest_seq(session_db) == 0
    stored = load_session(session_db, "session-1")
    assert stored is not None
    assert stored.state is SessionState.CHECKPOINTING


def test_a_successful_checkpoint_without_archive_metadata_is_refused(
    session_db: apsw.Connection,
) -> None:
    begin_checkpoint(session_db, with_state(running_session(), SessionState.CHECKPOINTING), "owner")
    with pytest.raises(InvalidInput, match="no archive metadata"):
        save_requested_checkpoint(
            session_db,
            with_state(running_session(), SessionState.RUNNING, checkpoint=None),
            "owner",
        )
    assert count_rows(session_db, "checkpoint_operations") == 1
    assert load_latest_seq(session_db) == 0


def test_barriers_are_correlated_only_with_their_operation(session_db: apsw.Connection) -> None:
    begin_checkpoint(session_db, with_state(running_session(), SessionState.CHECKPOINTING), "owner")
    correlate_checkpoint_barrier(session_db, "session-1", "owner", "barrier-1")
    correlate_checkpoint_barrier(session_db, "session-1", "someone-else", "barrier-x")
    correlate_checkpoint_barrier(session_db, "other-session", "owner", "barrier-y")
    correlate_checkpoint_barrier(session_db, "session-1", "owner", "barrier-2")
    finish_failed_checkpoint(session_db, running_session(), "owner", False, "failed")
    [result] = results(session_db)
    assert result.related_command_ids == ["barrier-1", "barrier-2"]


def test_recovery_fails_every_open_checkpoint_and_returns_the_sessions_it_restarted(
    db: apsw.Connection,
) -> None:
    for session_id in ("a", "b"):
        save_session(db, running_session(session_id))
        begin_checkpoint(
            db,
            with_state(running_session(session_id), SessionState.CHECKPOINTING),
            f"op-{session_id}",
        )
    save_session(
        db, with_state(running_session("c"), SessionState.CHECKPOINTING)
    )  # no operation row
    assert recover_interrupted_checkpoints(db, "2026-09-27T12:00:00Z", now_ms=5) == 3
    assert [(r.command_id, r.reason) for r in results(db)] == [
        ("op-a", OutcomeReason.CONTROLLER_RESTARTED),
        ("op-b", OutcomeReason.CONTROLLER_RESTARTED),
    ]
    assert {event.recorded_at_ms for event in scan(db)} == {5}
    assert {record.state for record in load_state(db).sessions.values()} == {SessionState.RUNNING}


def test_recovery_needs_a_timestamp(db: apsw.Connection) -> None:
    with pytest.raises(InvalidInput, match="recovery timestamp is empty"):
        recover_interrupted_checkpoints(db, " ")


def test_deleting_a_session_drops_its_open_checkpoint(session_db: apsw.Connection) -> None:
    begin_checkpoint(session_db, with_state(running_session(), SessionState.CHECKPOINTING), "owner")
    delete_session(session_db, "session-1")
    assert recover_interrupted_checkpoints(session_db, "2026-09-27T12:00:00Z") == 0
    assert load_latest_seq(session_db) == 0
