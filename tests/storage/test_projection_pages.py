"""Projection pages: chain checks, idempotent re-delivery, coalescing, all-or-nothing."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from relaystore.domain.api_events import (
    ApiEventData,
    ApiSessionFault,
    ApiTurnStarted,
    MaterializedTurn,
    decode_api_event_data,
)
from relaystore.domain.errors import (
    ChainFault,
    InvalidInput,
    ProjectionError,
    RelayChainError,
    UnknownSession,
)
from relaystore.domain.materialized import (
    AgentBody,
    ExecutionRunning,
    MaterializedQueuedPrompt,
    MaterializedSession,
    MaterializedSessionMutation,
    SystemBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
)
from relaystore.domain.outcomes import (
    MaterializedTurnOutcome,
    OutcomeReason,
    ProviderCost,
    TurnOutcomeCompleted,
)
from relaystore.domain.projection import apply_committed_projection_event, project_relay_event
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_GENESIS_DIGEST,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCursor,
    RelayEvent,
    RelayObservation,
)
from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.storage.materialized import load_frontier, load_materialized_session
from relaystore.storage.paging import load_api_events
from relaystore.storage.projection import (
    ApplyOutcome,
    ProjectionPage,
    apply_projection_event,
    apply_projection_page,
)
from tests.storage.builders import event_digest as digest

SESSION = "session-1"


def fault(message: str) -> ApiSessionFault:
    return ApiSessionFault.of(
        reason=OutcomeReason.RUNTIME_UNAVAILABLE, message=message, command_id=None
    )


def system(
    stable_id: str, position: int, text: str, *, created: int = 10, changed: int = 10
) -> TranscriptItem:
    return TranscriptItem(
        stable_id=stable_id,
        position=position,
        created_at_ms=created,
        last_changed_at_ms=changed,
        body=SystemBody(text=text),
    )


def agent(stable_id: str, position: int, latest: int | None, text: str) -> TranscriptItem:
    return TranscriptItem(
        stable_id=stable_id,
        position=position,
        latest_content_event_ordinal=latest,
        created_at_ms=10,
        last_changed_at_ms=10 + (latest or 0),
        body=AgentBody(chunks=[{"content": {"type": "text", "text": text}}]),
    )


def chain(
    connection: apsw.Connection,
    mutations: list[MaterializedSessionMutation],
    *,
    fail: bool = False,
) -> list[ApplyOutcome]:
    """Apply ``mutations`` as the next events of the chain, in one page."""

    def fill(page: ProjectionPage) -> list[ApplyOutcome]:
        outcomes = []
        for mutation in mutations:
            ordinal = page.frontier.ordinal + 1
            outcomes.append(page.apply(ordinal, digest(ordinal - 1), digest(ordinal), mutation))
        if fail:
            raise RuntimeError("injected rollback")
        return outcomes

    return apply_projection_page(connection, SESSION, fill)


def stored_events(connection: apsw.Connection) -> list[tuple[int, int, ApiEventData]]:
    rows = connection.execute("SELECT seq, recorded_at_ms, body FROM api_events ORDER BY seq")
    return [(seq, at, decode_api_event_data(body)) for seq, at, body in rows]


def latest_seq(connection: apsw.Connection) -> int:
    row = connection.execute("SELECT seq FROM sqlite_sequence WHERE name = 'api_events'").fetchone()
    return 0 if row is None else int(row[0])


def stored_items(connection: apsw.Connection) -> dict[str, tuple[int, int, str]]:
    rows = connection.execute(
        "SELECT stable_id, position, created_at_ms, body_json FROM materialized_transcript_items"
    )
    return {sid: (position, created, body) for sid, position, created, body in rows}


# -- chain checks ---------------------------------------------------------------------


def test_a_page_applies_events_in_order_and_commits_only_its_last_frontier(
    store: apsw.Connection,
) -> None:
    outcomes = chain(store, [MaterializedSessionMutation() for _ in range(3)])

    assert outcomes == [ApplyOutcome.APPLIED] * 3
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=3, digest=digest(3))


def test_redelivered_events_at_or_below_the_frontier_are_already_applied_and_write_nothing(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation(api_events=[fault("once")]) for _ in range(3)])
    duplicate = MaterializedSessionMutation(api_events=[fault("again")], session_title="Changed")

    def fill(page: ProjectionPage) -> list[ApplyOutcome]:
        return [
            # Below the frontier the digest is not even compared.
            page.apply(1, "", "f" * 64, duplicate),
            page.apply(2, digest(1), digest(2), duplicate),
            # At the frontier with the frontier's digest (the seed's re-delivery probe).
            page.apply(3, "", digest(3), duplicate),
        ]

    assert apply_projection_page(store, SESSION, fill) == [ApplyOutcome.ALREADY_APPLIED] * 3
    assert [event.data.message for _, _, event in stored_events(store)] == ["once"] * 3  # type: ignore[union-attr]
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.session_title is None
    assert loaded.applied_event_ordinal == 3


def test_apply_projection_event_reports_already_applied_for_the_committed_frontier(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation(api_events=[fault("once")])])

    outcome = apply_projection_event(
        store, SESSION, 1, "", digest(1), MaterializedSessionMutation(api_events=[fault("dup")])
    )

    assert outcome is ApplyOutcome.ALREADY_APPLIED
    assert len(stored_events(store)) == 1


def test_an_event_repeated_inside_one_page_is_already_applied(store: apsw.Connection) -> None:
    once = MaterializedSessionMutation(api_events=[fault("once")])

    def fill(page: ProjectionPage) -> list[ApplyOutcome]:
        return [page.apply(1, digest(0), digest(1), once) for _ in range(2)]

    assert apply_projection_page(store, SESSION, fill) == [
        ApplyOutcome.APPLIED,
        ApplyOutcome.ALREADY_APPLIED,
    ]
    assert len(stored_events(store)) == 1


def test_a_different_digest_at_the_frontier_is_a_fork(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    other = "e" * 64

    with pytest.raises(RelayChainError) as caught:
        apply_projection_event(store, SESSION, 2, digest(1), other, MaterializedSessionMutation())

    error = caught.value
    assert error.fault is ChainFault.FORK
    assert (error.session_id, error.ordinal) == (SESSION, 2)
    assert "relay event digest mismatch" in str(error)
    assert f"projection has {digest(2)}, received {other}" in str(error)
    assert SESSION in str(error)


def test_a_skipped_ordinal_is_a_gap_naming_the_expected_one(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()] * 3)

    with pytest.raises(RelayChainError) as caught:
        apply_projection_event(
            store, SESSION, 5, digest(4), digest(5), MaterializedSessionMutation()
        )

    assert caught.value.fault is ChainFault.GAP
    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 5)
    assert "expected ordinal 4, received 5" in str(caught.value)


def test_a_previous_digest_that_does_not_continue_the_frontier_is_a_fork(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    stranger = "a" * 64

    with pytest.raises(RelayChainError) as caught:
        apply_projection_event(
            store, SESSION, 3, stranger, digest(3), MaterializedSessionMutation()
        )

    assert caught.value.fault is ChainFault.FORK
    assert "chain diverged before ordinal 3" in str(caught.value)
    assert f"projection has {digest(2)}, event follows {stranger}" in str(caught.value)
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_an_unchained_event_is_checked_by_ordinal_only(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()])

    outcome = apply_projection_event(
        store, SESSION, 2, "", digest(2), MaterializedSessionMutation()
    )

    assert outcome is ApplyOutcome.APPLIED
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


@pytest.mark.parametrize(
    ("ordinal", "previous", "event_digest", "error", "fault", "text"),
    [
        (0, "", digest(1), InvalidInput, None, "ordinal must be positive"),
        (
            1,
            "ABC",
            digest(1),
            RelayChainError,
            ChainFault.BAD_DIGEST,
            "previous relay event digest",
        ),
        (
            1,
            digest(0),
            digest(1).upper(),
            RelayChainError,
            ChainFault.BAD_DIGEST,
            "frontier must be",
        ),
        (1, digest(0), "abc", RelayChainError, ChainFault.BAD_DIGEST, "frontier must be"),
        (
            1,
            digest(0),
            RELAY_EVENT_GENESIS_DIGEST,
            RelayChainError,
            ChainFault.BAD_DIGEST,
            "inconsistent ordinal 1",
        ),
    ],
)
def test_malformed_events_are_refused_before_any_frontier_comparison(
    store: apsw.Connection,
    ordinal: int,
    previous: str,
    event_digest: str,
    error: type[Exception],
    fault: ChainFault | None,
    text: str,
) -> None:
    with pytest.raises(error, match=text) as caught:
        apply_projection_event(
            store, SESSION, ordinal, previous, event_digest, MaterializedSessionMutation()
        )

    if fault is not None:
        assert isinstance(caught.value, RelayChainError)
        assert caught.value.fault is fault
    assert load_frontier(store, SESSION) == RelayCursor(
        ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST
    )


def test_a_page_for_a_session_without_a_projection_is_an_unknown_session(
    store: apsw.Connection,
) -> None:
    called: list[ProjectionPage] = []

    with pytest.raises(UnknownSession) as caught:
        apply_projection_page(store, "missing", called.append)

    assert caught.value.session_id == "missing"
    assert called == []


def test_a_page_cannot_be_used_after_it_was_written(store: apsw.Connection) -> None:
    page = apply_projection_page(store, SESSION, lambda page: page)

    with pytest.raises(InvalidInput, match="already written"):
        page.apply(1, digest(0), digest(1), MaterializedSessionMutation())


# -- all or nothing -------------------------------------------------------------------


def test_a_failed_page_leaves_no_events_no_frontier_and_no_used_sequence_numbers(
    store: apsw.Connection,
) -> None:
    turn = [
        MaterializedSessionMutation(last_activity_at_ms=100, api_events=[fault("first")]),
        MaterializedSessionMutation(
            last_activity_at_ms=100, session_title="Titled", api_events=[fault("second")]
        ),
    ]

    with pytest.raises(RuntimeError, match="injected rollback"):
        chain(store, turn, fail=True)

    assert stored_events(store) == []
    assert latest_seq(store) == 0
    assert load_frontier(store, SESSION) == RelayCursor(
        ordinal=0, digest=RELAY_EVENT_GENESIS_DIGEST
    )

    chain(store, turn)

    assert [(seq, at) for seq, at, _ in stored_events(store)] == [(1, 100), (2, 100)]
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_a_chain_error_late_in_a_page_rolls_back_its_earlier_events(
    store: apsw.Connection,
) -> None:
    def fill(page: ProjectionPage) -> None:
        page.apply(1, digest(0), digest(1), MaterializedSessionMutation(api_events=[fault("a")]))
        page.apply(2, digest(1), digest(2), MaterializedSessionMutation(session_title="T"))
        page.apply(4, digest(3), digest(4), MaterializedSessionMutation())

    with pytest.raises(RelayChainError):
        apply_projection_page(store, SESSION, fill)

    assert stored_events(store) == []
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert (loaded.applied_event_ordinal, loaded.session_title) == (0, None)


def test_a_page_inside_an_open_transaction_rolls_back_alone(store: apsw.Connection) -> None:
    with store:
        chain(store, [MaterializedSessionMutation(api_events=[fault("kept")])])
        with pytest.raises(RuntimeError):
            chain(store, [MaterializedSessionMutation(api_events=[fault("dropped")])], fail=True)
        chain(store, [MaterializedSessionMutation(api_events=[fault("kept too")])])

    assert [event.data.message for _, _, event in stored_events(store)] == ["kept", "kept too"]  # type: ignore[union-attr]
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_an_apply_that_raises_leaves_the_page_as_it_was(store: apsw.Connection) -> None:
    def fill(page: ProjectionPage) -> None:
        bad = MaterializedSessionMutation(
            session_title="Bad",
            transcript=[TranscriptUpsert(system("late", 9, "position beyond the event"))],
            api_events=[fault("bad")],
        )
        with pytest.raises(ProjectionError, match="position 9 outside"):
            page.apply(1, digest(0), digest(1), bad)
        page.apply(1, digest(0), digest(1), MaterializedSessionMutation(api_events=[fault("good")]))

    apply_projection_page(store, SESSION, fill)

    assert [event.data.message for _, _, event in stored_events(store)] == ["good"]  # type: ignore[union-attr]
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert (loaded.session_title, loaded.transcript) == (None, [])


# -- mutation checks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutation", "text"),
    [
        (MaterializedSessionMutation(session_title="  "), "title cannot be empty"),
        (
            MaterializedSessionMutation(transcript=[TranscriptRemove(stable_id=" ")]),
            "empty stable id",
        ),
        (
            MaterializedSessionMutation(transcript=[TranscriptUpsert(agent("a", 1, None, "x"))]),
            "latest content ordinal",
        ),
        (
            MaterializedSessionMutation(
                queued_prompts=[
                    MaterializedQueuedPrompt(command_id="p", queued_at_ms=1),
                    MaterializedQueuedPrompt(command_id="p", queued_at_ms=2),
                ]
            ),
            "duplicate command 'p'",
        ),
        (
            MaterializedSessionMutation(
                queued_prompts=[MaterializedQueuedPrompt(command_id=" ", queued_at_ms=1)]
            ),
            "empty command id",
        ),
    ],
)
def test_a_mutation_the_projection_cannot_hold_is_a_projection_error(
    store: apsw.Connection, mutation: MaterializedSessionMutation, text: str
) -> None:
    mutation.api_events.append(fault("never"))

    with pytest.raises(ProjectionError, match=text) as caught:
        chain(store, [mutation])

    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 1)
    assert stored_events(store) == []


@pytest.mark.parametrize(
    ("replacement", "text"),
    [
        (system("item", 2, "moved"), "immutable identity"),
        (system("item", 1, "recreated", created=5, changed=30), "immutable identity"),
        (system("item", 1, "older", changed=15), "changed timestamp backwards"),
    ],
)
def test_rewriting_a_stored_transcript_item_keeps_its_identity(
    store: apsw.Connection, replacement: TranscriptItem, text: str
) -> None:
    chain(
        store,
        [
            MaterializedSessionMutation(
                transcript=[TranscriptUpsert(system("item", 1, "v1", changed=20))]
            )
        ],
    )
    chain(store, [MaterializedSessionMutation()])

    with pytest.raises(ProjectionError, match=text) as caught:
        chain(
            store,
            [
                MaterializedSessionMutation(
                    transcript=[TranscriptUpsert(replacement)], api_events=[fault("x")]
                )
            ],
        )

    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 3)
    assert "'item'" in str(caught.value)
    assert stored_items(store)["item"][2] == '{"kind":"system","text":"v1"}'
    assert stored_events(store) == []
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


@pytest.mark.parametrize("latest", [None, 2])
def test_an_agent_message_never_moves_its_latest_content_ordinal_back(
    store: apsw.Connection, latest: int | None
) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    chain(
        store, [MaterializedSessionMutation(transcript=[TranscriptUpsert(agent("a", 1, 3, "hi"))])]
    )
    regressed = TranscriptItem(
        stable_id="a",
        position=1,
        latest_content_event_ordinal=latest,
        created_at_ms=10,
        last_changed_at_ms=50,
        body=SystemBody(text="no longer an agent") if latest is None else AgentBody(chunks=[]),
    )

    with pytest.raises(ProjectionError, match="latest content ordinal backwards"):
        chain(store, [MaterializedSessionMutation(transcript=[TranscriptUpsert(regressed)])])


# -- coalescing -----------------------------------------------------------------------


def _count_writes(connection: apsw.Connection) -> None:
    connection.execute(
        """
        CREATE TEMP TABLE writes(target TEXT, kind TEXT, stable_id TEXT);
        CREATE TEMP TRIGGER item_inserted AFTER INSERT ON main.materialized_transcript_items
        BEGIN INSERT INTO writes VALUES ('item', 'insert', NEW.stable_id); END;
        CREATE TEMP TRIGGER item_updated AFTER UPDATE ON main.materialized_transcript_items
        BEGIN INSERT INTO writes VALUES ('item', 'update', NEW.stable_id); END;
        CREATE TEMP TRIGGER item_deleted AFTER DELETE ON main.materialized_transcript_items
        BEGIN INSERT INTO writes VALUES ('item', 'delete', OLD.stable_id); END;
        CREATE TEMP TRIGGER session_updated AFTER UPDATE ON main.materialized_sessions
        BEGIN INSERT INTO writes VALUES ('session', 'update', NULL); END;
        """
    )


def _writes(connection: apsw.Connection) -> list[tuple[str, str, str | None]]:
    rows = connection.execute("SELECT target, kind, stable_id FROM writes ORDER BY rowid")
    return [(target, kind, stable_id) for target, kind, stable_id in rows]


def test_many_updates_of_one_item_in_a_page_write_one_row_with_the_last_value(
    store: apsw.Connection,
) -> None:
    _count_writes(store)
    streamed = [
        MaterializedSessionMutation(
            last_activity_at_ms=100 + n,
            execution=ExecutionRunning(started_at_ms=100),
            transcript=[TranscriptUpsert(agent("agent:1", 1, n, "x" * n))],
        )
        for n in range(1, 129)
    ]

    chain(store, streamed)

    assert _writes(store) == [("item", "insert", "agent:1"), ("session", "update", None)]
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.transcript == [agent("agent:1", 1, 128, "x" * 128)]
    assert loaded.last_activity_at_ms == 228
    assert loaded.applied_event_ordinal == 128


def test_a_stored_item_updated_many_times_in_a_page_is_updated_once(
    store: apsw.Connection,
) -> None:
    chain(
        store, [MaterializedSessionMutation(transcript=[TranscriptUpsert(agent("a", 1, 1, "h"))])]
    )
    _count_writes(store)

    chain(
        store,
        [
            MaterializedSessionMutation(transcript=[TranscriptUpsert(agent("a", 1, n, "h" * n))])
            for n in range(2, 6)
        ],
    )

    assert _writes(store) == [("item", "update", "a"), ("session", "update", None)]
    assert (
        stored_items(store)["a"][2]
        == '{"kind":"agent","chunks":[{"content":{"type":"text","text":"hhhhh"}}],"streaming":false}'
    )


def test_a_remove_then_an_upsert_in_one_page_starts_a_new_item(store: apsw.Connection) -> None:
    chain(
        store,
        [
            MaterializedSessionMutation(
                transcript=[TranscriptUpsert(system("s", 1, "old", created=5, changed=5))]
            )
        ],
    )
    chain(store, [MaterializedSessionMutation()] * 2)
    _count_writes(store)
    fresh = system("s", 4, "new", created=40, changed=40)

    chain(
        store,
        [
            MaterializedSessionMutation(transcript=[TranscriptRemove(stable_id="s")]),
            MaterializedSessionMutation(transcript=[TranscriptUpsert(fresh)]),
        ],
    )

    assert _writes(store)[:2] == [("item", "delete", "s"), ("item", "insert", "s")]
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.transcript == [fresh]


def test_an_upsert_then_a_remove_in_one_page_leaves_no_row(store: apsw.Connection) -> None:
    chain(
        store, [MaterializedSessionMutation(transcript=[TranscriptUpsert(system("kept", 1, "k"))])]
    )

    chain(
        store,
        [
            MaterializedSessionMutation(
                transcript=[
                    TranscriptUpsert(system("gone", 2, "g")),
                    TranscriptRemove(stable_id="kept"),
                ]
            ),
            MaterializedSessionMutation(transcript=[TranscriptRemove(stable_id="gone")]),
        ],
    )

    assert stored_items(store) == {}


def test_page_fields_are_last_writer_wins_and_activity_never_moves_back(
    store: apsw.Connection,
) -> None:
    turn = MaterializedTurn(command_id="prompt-1", turn_start_position=1, started_at_ms=5)
    chain(store, [MaterializedSessionMutation(last_activity_at_ms=500)])

    chain(
        store,
        [
            MaterializedSessionMutation(
                last_activity_at_ms=300,
                session_title="First",
                configuration={"mode": "a"},
                active_turn=turn,
            ),
            MaterializedSessionMutation(session_title="Second", configuration={"mode": "b"}),
            MaterializedSessionMutation(last_activity_at_ms=400, active_turn=None),
        ],
    )

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert (loaded.session_title, loaded.configuration, loaded.active_turn) == (
        "Second",
        {"mode": "b"},
        None,
    )
    assert loaded.last_activity_at_ms == 500

    chain(store, [MaterializedSessionMutation(session_title=None, last_activity_at_ms=900)])

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert (loaded.session_title, loaded.last_activity_at_ms) == (None, 900)


def _outcome(command_id: str, completed: int) -> MaterializedTurnOutcome:
    return MaterializedTurnOutcome(
        command_id=command_id,
        turn_start_position=1,
        completed_ordinal=completed,
        completed_at_ms=completed * 10,
        outcome=TurnOutcomeCompleted(stop_reason="end_turn"),
    )


def test_turn_outcomes_are_recorded_per_turn_and_cleared_by_the_flag(
    store: apsw.Connection,
) -> None:
    chain(
        store,
        [
            MaterializedSessionMutation(last_turn_outcome=_outcome("p1", 1)),
            MaterializedSessionMutation(clear_turn_outcome=True),
            MaterializedSessionMutation(last_turn_outcome=_outcome("p2", 3)),
            MaterializedSessionMutation(
                provider_cost=ProviderCost(amount=0.05, currency="USD", observed_at_ms=7),
                config_results=[("cfg-1", None), ("cfg-2", "refused")],
            ),
        ],
    )

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.last_turn_outcome == _outcome("p2", 3)
    usage = store.execute(
        "SELECT command_id, completed_ordinal FROM session_turn_usage ORDER BY completed_ordinal"
    )
    assert list(usage) == [("p1", 1), ("p2", 3)]
    results = store.execute("SELECT command_id, error FROM api_config_results ORDER BY command_id")
    assert list(results) == [("cfg-1", None), ("cfg-2", "refused")]
    assert store.execute("SELECT body FROM session_provider_cost").fetchall() == [
        ('{"amount":0.05,"currency":"USD","observed_at_ms":7}',)
    ]

    chain(store, [MaterializedSessionMutation(clear_turn_outcome=True)])

    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.last_turn_outcome is None


# -- API events -----------------------------------------------------------------------


def test_api_events_keep_their_order_across_a_page_with_their_event_time(
    store: apsw.Connection,
) -> None:
    started = ApiTurnStarted.of(
        turn=MaterializedTurn(command_id="prompt-1", turn_start_position=1, started_at_ms=2)
    )

    def fill(page: ProjectionPage) -> None:
        page.apply(
            1,
            digest(0),
            digest(1),
            MaterializedSessionMutation(last_activity_at_ms=100, api_events=[started, fault("a")]),
        )
        page.apply(2, digest(1), digest(2), MaterializedSessionMutation(api_events=[fault("b")]))
        page.apply(
            3,
            digest(2),
            digest(3),
            MaterializedSessionMutation(api_events=[fault("c")]),
            recorded_at_ms=777,
        )
        page.apply(
            4,
            digest(3),
            digest(4),
            MaterializedSessionMutation(last_activity_at_ms=50, api_events=[fault("d")]),
            recorded_at_ms=999,
        )

    apply_projection_page(store, SESSION, fill)

    assert stored_events(store) == [
        (1, 100, started),
        (2, 100, fault("a")),
        (3, 0, fault("b")),
        (4, 777, fault("c")),
        (5, 50, fault("d")),
    ]


# -- the seed: real relay events through the projection ---------------------------------


def turn() -> list[RelayObservation]:
    """The seed's ``turn()``: a prompt queued, started and completed."""
    return [
        CommandQueued.of(
            command_id="prompt-1", command=PromptCommand.of(prompt=[]), created_at_ms=1
        ),
        CommandStarted.of(command_id="prompt-1", started_at_ms=2),
        CommandCompleted.of(
            command_id="prompt-1", outcome=PromptOutcome.of(stop_reason="end_turn")
        ),
    ]


def relay_page(
    connection: apsw.Connection, observations: list[RelayObservation], *, fail: bool = False
) -> MaterializedSession:
    """The seed's ``page()``: format 1 events projected and applied as one page."""
    current = load_materialized_session(connection, SESSION)
    assert current is not None

    def fill(page: ProjectionPage) -> MaterializedSession:
        nonlocal current
        assert current is not None
        for observation in observations:
            event = RelayEvent.create(
                format=RELAY_EVENT_FORMAT_V1,
                ordinal=current.applied_event_ordinal + 1,
                previous_digest=current.applied_event_digest,
                recorded_at_ms=100,
                observation=observation,
            )
            mutation = project_relay_event(current, event)
            page.apply(event.ordinal, event.previous_digest, event.digest, mutation)
            current = apply_committed_projection_event(current, event, mutation)
        if fail:
            raise RuntimeError("injected rollback")
        return current

    return apply_projection_page(connection, SESSION, fill)


def test_api_events_survive_coalescing_rollback_and_reopen(
    writer: WriterConnection, store_path: Path, store: apsw.Connection
) -> None:
    with pytest.raises(RuntimeError, match="injected rollback"):
        relay_page(store, turn(), fail=True)
    assert load_api_events(store, after_seq=0).events == []

    projected = relay_page(store, turn())

    writer.close()
    reopened = open_writer(store_path, synchronous="OFF")
    try:
        connection = reopened.connection
        first = load_api_events(connection, after_seq=0, limit=1)
        assert [(e.seq, e.kind) for e in first.events] == [(1, "turn_started")]
        rest = load_api_events(connection, after_seq=first.next_after_seq)
        assert [(e.seq, e.kind, e.recorded_at_ms) for e in rest.events] == [(2, "turn_ended", 100)]

        current = load_materialized_session(connection, SESSION)
        assert current == projected
        assert current is not None
        assert current.active_turn is None
        assert load_frontier(connection, SESSION) == RelayCursor(
            ordinal=3,
            digest="a6aff09e636ffa8e59dcb3548acbeebddd663a1a0f75068cbe781d5ec9c7ac2a",
        )

        outcome = apply_projection_event(
            connection,
            SESSION,
            current.applied_event_ordinal,
            "",
            current.applied_event_digest,
            MaterializedSessionMutation(),
        )

        assert outcome is ApplyOutcome.ALREADY_APPLIED
        assert len(load_api_events(connection, after_seq=0).events) == 2
        assert load_api_events(connection, after_seq=None).events == []
    finally:
        reopened.close()
