"""The origin's seed tests (``events.rs``), ported to messages that drive ``EventStore``.

Each test keeps the seed's scenario and assertions on kinds, order, seq, cursors and
fields; the seed's direct store calls become the contract's messages.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from relaystore.actors.store import EventStore
from relaystore.domain.api_events import (
    ApiActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiCommandEnded,
    ApiEventFilter,
    ApiInputRequired,
    ApiInputResolved,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnEnded,
)
from relaystore.domain.elicitation.acp import parse_acp_request
from relaystore.domain.errors import LifecycleConflict, RelayChainError
from relaystore.domain.materialized import SystemBody
from relaystore.domain.messages import (
    BeginCheckpoint,
    DeleteSession,
    FinishFailedCheckpoint,
    LoadApiEvents,
    LoadMaterializedSession,
    LoadRuntimeReceipt,
    LoadState,
    ObserveRelayEvents,
    RecordActivities,
    RecoverInterruptedCheckpoints,
    SaveLifecycleSession,
    SaveRequestedCheckpoint,
    SaveSession,
)
from relaystore.domain.outcomes import (
    CommandOwner,
    CommandResultKind,
    OutcomeReason,
    TurnResultKind,
)
from relaystore.domain.relay import (
    AgentInitialized,
    CommandCompleted,
    CommandInterrupted,
    CommandRejected,
    ElicitationRequested,
    ElicitationResolved,
    PromptOutcome,
    RelayCommandKind,
    SessionFault,
    SessionRestarted,
)
from relaystore.domain.runtime import (
    HarnessKind,
    RuntimeComponent,
    RuntimeIdentity,
    RuntimeProvenance,
)
from relaystore.domain.sessions.records import CheckpointMetadata, SessionState
from relaystore.testing import JournalBuilder, example_session
from tests.actors.seed import all_events, chain, page, turn


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "events.sqlite3"


@pytest.fixture
def store(path: Path):
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session("session-1", "project-1")))
        yield store


def test_the_seed_turn_has_the_pinned_format_1_digests(store: EventStore) -> None:
    # origin-projection.md §2: the seed's turn(), recorded at 100, chained from genesis.
    pinned = [
        "8a48a58151e0956de89f0c277b9156b021ae850b27e905f3d0df4b5e8d1e1b8d",
        "179bbba0f42d6b8c48f35dd542e2e6b06bc473d13e54c0cf4b4f1a253ec3dc75",
        "a6aff09e636ffa8e59dcb3548acbeebddd663a1a0f75068cbe781d5ec9c7ac2a",
    ]
    built = JournalBuilder(format=1, start_ms=100, step_ms=0).extend(turn())
    assert [event.digest for event in built] == pinned
    assert chain(store, turn()) == built


def runtime_observation(version: str) -> AgentInitialized:
    runtime = RuntimeIdentity(
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        components=[RuntimeComponent(name="provider", version=version)],
    )
    runtime.refresh_id()
    return AgentInitialized.of(
        protocol_version=1, capabilities={}, agent_info=None, runtime=runtime
    )


@pytest.mark.integration
def test_runtime_identity_history_survives_reopen_and_resume_without_rewriting_old_runs(
    path: Path,
) -> None:
    with EventStore.open(path) as store:
        store.ask(SaveSession(record=example_session()))
        page(store, [runtime_observation("first")])
        first = store.ask(LoadRuntimeReceipt(session_id="session-1"))
        assert first is not None
        page(store, [SessionRestarted(), runtime_observation("second")])
    with EventStore.open(path) as reopened:  # a new process: the projector reloads from disk
        second = reopened.ask(LoadRuntimeReceipt(session_id="session-1"))
        assert second is not None
        assert first.id != second.id
        assert first.event_ordinal < second.event_ordinal
        receipts = [
            event.event.data.receipt
            for event in all_events(reopened)
            if isinstance(event.event, ApiRuntimeResolved)
        ]
        assert receipts == [first, second]


@pytest.mark.integration
def test_api_events_survive_coalescing_rollback_and_reopen(store: EventStore) -> None:
    with pytest.raises(RelayChainError):
        page(store, turn(), fail=True)
    assert all_events(store) == []
    events = chain(store, turn())
    store.ask(ObserveRelayEvents(session_id="session-1", events=events))
    first = store.ask(LoadApiEvents(after_seq=0, limit=1))
    assert [event.kind for event in first.events] == ["turn_started"]
    assert first.events[0].seq == 1
    rest = store.ask(LoadApiEvents(after_seq=first.next_after_seq, limit=100))
    assert [event.kind for event in rest.events] == ["turn_ended"]
    assert rest.events[0].seq == 2
    current = store.ask(LoadMaterializedSession(session_id="session-1"))
    assert current is not None
    assert current.active_turn is None
    # Re-delivering the committed frontier is already applied and adds nothing.
    report = store.ask(ObserveRelayEvents(session_id="session-1", events=[events[-1]]))
    assert (report.applied, report.already_applied) == (0, 1)
    assert len(all_events(store)) == 2
    assert all_events(store, after=None) == []


@pytest.mark.integration
def test_api_events_filter_and_keep_cursors_after_forgetting_sessions(store: EventStore) -> None:
    page(store, turn())
    empty = store.ask(LoadApiEvents(filter=ApiEventFilter(session_id="other"), after_seq=0))
    assert empty.events == []
    assert empty.next_after_seq == 2
    workspace = store.ask(LoadApiEvents(filter=ApiEventFilter(workspace_id="default"), after_seq=0))
    assert len(workspace.events) == 2
    store.ask(DeleteSession(session_id="session-1"))
    deleted = store.ask(LoadApiEvents(after_seq=2))
    assert deleted.events == []
    assert deleted.latest_seq == 2


@pytest.mark.integration
def test_api_events_capture_free_text_questions_resolution_and_errors(store: EventStore) -> None:
    request = parse_acp_request(
        "question-1",
        {
            "mode": "form",
            "sessionId": "session-1",
            "message": "Which directory?",
            "requestedSchema": {
                "type": "object",
                "properties": {"directory": {"type": "string"}},
                "required": ["directory"],
            },
        },
    )
    observations = turn()
    observations[2:2] = [
        ElicitationRequested.of(request=request),
        ElicitationResolved.of(elicitation_id=request.id, action="accept"),
    ]
    page(store, observations)
    record = example_session()
    record.last_error = "provisioning failed"
    store.ask(SaveSession(record=record))
    store.ask(SaveSession(record=record))
    events = all_events(store)
    assert [event.kind for event in events] == [
        "turn_started",
        "input_required",
        "input_resolved",
        "turn_ended",
        "session_fault",
    ]
    required = events[1].event
    assert isinstance(required, ApiInputRequired)
    assert required.data.request == request
    assert required.data.turn_id == 1
    resolved = events[2].event
    assert isinstance(resolved, ApiInputResolved)
    assert (resolved.data.turn_id, resolved.data.action) == (1, "accept")
    current = store.ask(LoadMaterializedSession(session_id="session-1"))
    assert current is not None
    assert current.pending_elicitations == []
    assert current.active_turn is None
    assert current.last_turn_outcome is not None
    assert current.last_turn_outcome.accepted_ordinal == 1


def test_a_lifecycle_save_that_records_a_launch_failure_emits_one_error_event(
    store: EventStore,
) -> None:
    record = example_session()
    record.state = SessionState.ERROR
    record.last_error = "worker bootstrap failed: Connection closed by host"
    store.ask(SaveLifecycleSession(record=record))
    store.ask(SaveLifecycleSession(record=record))
    faults = [
        event.event.data.message
        for event in all_events(store)
        if isinstance(event.event, ApiSessionFault)
    ]
    assert faults == ["worker bootstrap failed: Connection closed by host"]


@pytest.mark.integration
def test_api_events_preserve_command_identity_for_failed_completions(store: EventStore) -> None:
    observations = turn()
    observations[-1] = CommandCompleted.of(
        command_id="prompt-1", outcome=PromptOutcome.of(stop_reason="provider_error")
    )
    page(store, observations)
    events = all_events(store)
    assert len(events) == 2
    ended = events[1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.command_id == "prompt-1"
    assert ended.data.turn.accepted_ordinal == 1
    assert ended.data.turn.outcome.kind is TurnResultKind.FAILED
    assert ended.data.turn.outcome.stop_reason == "provider_error"


def test_api_activity_events_track_changes_without_repeating_or_reviving_forgotten_sessions(
    store: EventStore,
) -> None:
    idle = ApiActivityState(
        state="running",
        details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=100),
        is_idle=True,
        waiting_for_input=False,
        capacity_retry=False,
    )
    store.ask(RecordActivities(activities=[("session-1", idle)], recorded_at_ms=100))
    store.ask(RecordActivities(activities=[("session-1", idle)], recorded_at_ms=200))
    background = msgspec.structs.replace(
        idle,
        is_idle=False,
        details=ApiActivityDetails(kind=ApiActivityKind.BACKGROUND, background_started_at_ms=250),
    )
    store.ask(RecordActivities(activities=[("session-1", background)], recorded_at_ms=250))
    waiting = msgspec.structs.replace(background, waiting_for_input=True)
    store.ask(RecordActivities(activities=[("session-1", waiting)], recorded_at_ms=300))
    unknown = ApiActivityState(
        state="disconnected", is_idle=False, waiting_for_input=False, capacity_retry=False
    )
    store.ask(RecordActivities(activities=[("session-1", unknown)], recorded_at_ms=400))
    events = all_events(store)
    assert len(events) == 4
    assert events[-1].event == ApiActivityChanged.of(activity=unknown)
    assert events[2].event == ApiActivityChanged.of(activity=waiting)
    assert [event.recorded_at_ms for event in events] == [100, 250, 300, 400]
    store.ask(DeleteSession(session_id="session-1"))
    store.ask(RecordActivities(activities=[("session-1", idle)], recorded_at_ms=500))
    page_after = store.ask(LoadApiEvents(after_seq=4))
    assert page_after.events == []
    assert page_after.latest_seq == 4


@pytest.mark.integration
def test_checkpoint_cleanup_does_not_end_a_turn_or_hide_control_failure(store: EventStore) -> None:
    page(store, turn()[:2])
    for command_id, reason in [
        ("arbitrary-one", OutcomeReason.CONTROLLER_DISCONNECTED),
        ("arbitrary-two", OutcomeReason.OWNER_LOST_ON_RESTART),
    ]:
        page(
            store,
            [
                CommandInterrupted.of(
                    command_id=command_id,
                    command=RelayCommandKind.BEGIN_CHECKPOINT,
                    reason=reason,
                    message="diagnostic wording is not a contract",
                )
            ],
        )
    page(
        store,
        [
            CommandRejected.of(
                command_id="arbitrary-three",
                command=RelayCommandKind.COMPLETE_CHECKPOINT,
                reason=OutcomeReason.COMMAND_FAILED,
                message="Cannot save recovery floor",
            )
        ],
    )
    current = store.ask(LoadMaterializedSession(session_id="session-1"))
    assert current is not None
    assert current.active_turn is not None
    assert current.last_turn_outcome is None
    texts = [item.body.text for item in current.transcript if isinstance(item.body, SystemBody)]
    assert not any("diagnostic wording" in text for text in texts)
    assert any("Cannot save recovery floor" in text for text in texts)
    page(store, [turn()[-1]])
    events = all_events(store)
    assert len(events) == 5
    for event in events[1:3]:
        ended = event.event
        assert isinstance(ended, ApiCommandEnded)
        assert ended.data.outcome is CommandResultKind.CANCELLED
        assert ended.data.command_kind == "begin_checkpoint"
    failed = events[3].event
    assert isinstance(failed, ApiCommandEnded)
    assert failed.data.outcome is CommandResultKind.FAILED
    last = events[4].event
    assert isinstance(last, ApiTurnEnded)
    assert last.data.turn.outcome.kind is TurnResultKind.COMPLETED


@pytest.mark.parametrize(
    ("terminal", "expected"),
    [
        (
            CommandCompleted.of(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                outcome=PromptOutcome.of(stop_reason="Cancelled"),
            ),
            TurnResultKind.CANCELLED,
        ),
        (
            CommandCompleted.of(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                outcome=PromptOutcome.of(stop_reason="QuotaLimit"),
            ),
            TurnResultKind.FAILED,
        ),
        (
            CommandRejected.of(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                reason=OutcomeReason.ADMISSION_REJECTED,
                message="unavailable",
            ),
            TurnResultKind.REJECTED,
        ),
        (
            CommandInterrupted.of(
                command_id="prompt-1",
                command=RelayCommandKind.PROMPT,
                reason=OutcomeReason.RUNTIME_STOPPED,
                message="runtime stopped",
            ),
            TurnResultKind.INTERRUPTED,
        ),
    ],
)
@pytest.mark.integration
def test_terminal_prompt_results_are_semantic_and_not_duplicate_error_events(
    store: EventStore, terminal, expected: TurnResultKind
) -> None:
    observations = turn()
    observations[-1] = terminal
    page(store, observations)
    events = all_events(store)
    assert len(events) == 2
    ended = events[1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is expected
    assert ended.data.turn.command_id == "prompt-1"


@pytest.mark.integration
def test_typed_runtime_fault_does_not_rewrite_a_completed_turn(store: EventStore) -> None:
    page(store, turn())
    page(
        store, [SessionFault.of(reason=OutcomeReason.RUNTIME_UNAVAILABLE, message="runtime exited")]
    )
    events = all_events(store)
    assert len(events) == 3
    ended = events[1].event
    assert isinstance(ended, ApiTurnEnded)
    assert ended.data.turn.outcome.kind is TurnResultKind.COMPLETED
    fault = events[2].event
    assert isinstance(fault, ApiSessionFault)
    assert fault.data.reason is OutcomeReason.RUNTIME_UNAVAILABLE


def test_checkpoint_recovery_consumes_attempt_identity_once_and_preserves_correlation(
    path: Path,
) -> None:
    from relaystore.domain.messages import CorrelateCheckpointBarrier

    with EventStore.open(path) as store:
        record = example_session()
        record.state = SessionState.RUNNING
        store.ask(SaveSession(record=record))
        record.state = SessionState.CHECKPOINTING
        store.ask(BeginCheckpoint(session=record, command_id="attempt-1"))
        with pytest.raises(LifecycleConflict):
            store.ask(BeginCheckpoint(session=record, command_id="attempt-2"))
        store.ask(
            CorrelateCheckpointBarrier(
                session_id="session-1", operation_id="attempt-1", command_id="barrier-1"
            )
        )
    with EventStore.open(path) as store:  # the controller restarted
        assert store.ask(RecoverInterruptedCheckpoints(updated_at="2026-09-27T12:00:00Z")) == 1
        assert store.ask(RecoverInterruptedCheckpoints(updated_at="2026-09-27T12:00:01Z")) == 0
        events = all_events(store)
        assert len(events) == 1
        ended = events[0].event
        assert isinstance(ended, ApiCommandEnded)
        assert ended.data.command_id == "attempt-1"
        assert ended.data.related_command_ids == ["barrier-1"]
        assert ended.data.owner is CommandOwner.DAEMON
        assert ended.data.reason is OutcomeReason.CONTROLLER_RESTARTED
        state = store.ask(LoadState())
        assert state.sessions["session-1"].state is SessionState.RUNNING


def test_requested_checkpoint_result_commits_with_metadata_and_only_for_its_owner(
    store: EventStore, tmp_path: Path
) -> None:
    record = example_session()
    record.state = SessionState.RUNNING
    store.ask(SaveSession(record=record))
    previous_checkpoint = record.checkpoint
    record.state = SessionState.CHECKPOINTING
    store.ask(BeginCheckpoint(session=record, command_id="owner"))
    record.state = SessionState.RUNNING
    record.checkpoint = CheckpointMetadata(
        archive_path=str(tmp_path / "verified.tar"),
        sha256="a" * 64,
        created_at="2026-09-27T12:00:00Z",
        event_frontier=0,
    )
    with pytest.raises(LifecycleConflict):
        store.ask(SaveRequestedCheckpoint(session=record, command_id="stale-owner"))
    store.ask(
        FinishFailedCheckpoint(
            session=record, command_id="stale-owner", deferred=False, message="late failure"
        )
    )
    assert all_events(store) == []
    assert store.ask(LoadState()).sessions["session-1"].checkpoint == previous_checkpoint
    store.ask(SaveRequestedCheckpoint(session=record, command_id="owner"))
    store.ask(
        FinishFailedCheckpoint(
            session=record, command_id="owner", deferred=False, message="late cleanup failure"
        )
    )
    events = all_events(store)
    assert len(events) == 1
    ended = events[0].event
    assert isinstance(ended, ApiCommandEnded)
    assert ended.data.outcome is CommandResultKind.SUCCEEDED
    assert ended.data.command_id == "owner"
    assert store.ask(LoadState()).sessions["session-1"].checkpoint == record.checkpoint


@pytest.mark.parametrize("deferred", [False, True])
def test_checkpoint_failure_and_deferral_are_distinct_and_preserve_previous_archive(
    path: Path, tmp_path: Path, deferred: bool
) -> None:
    with EventStore.open(path) as store:
        record = example_session()
        record.state = SessionState.RUNNING
        record.checkpoint = CheckpointMetadata(
            archive_path=str(tmp_path / "previous.tar"),
            sha256="a" * 64,
            created_at="2026-09-27T12:00:00Z",
            event_frontier=0,
        )
        store.ask(SaveSession(record=record))
        previous = record.checkpoint
        previous_warning = record.last_checkpoint_error
        record.state = SessionState.CHECKPOINTING
        store.ask(BeginCheckpoint(session=record, command_id="owner"))
        record.state = SessionState.RUNNING
        if not deferred:
            record.last_checkpoint_error = "archive verification failed"
        for _ in range(2):
            store.ask(
                FinishFailedCheckpoint(
                    session=record, command_id="owner", deferred=deferred, message="diagnostic"
                )
            )
        loaded = store.ask(LoadState()).sessions["session-1"]
        assert loaded.checkpoint == previous
        assert loaded.last_checkpoint_error == (
            previous_warning if deferred else "archive verification failed"
        )
        events = all_events(store)
        assert len(events) == 1
        ended = events[0].event
        assert isinstance(ended, ApiCommandEnded)
        assert ended.data.outcome is (
            CommandResultKind.REJECTED if deferred else CommandResultKind.FAILED
        )
