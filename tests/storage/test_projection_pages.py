"""Writing projection pages: compare-and-set on the frontier, all-or-nothing, coalescing.

Pages are :class:`~domain.projection.page.PageDelta` values (pure: the chain rule through
:func:`domain.chain.advance`, the mutation rules, the coalescing); these tests write them
with :func:`storage.projection.commit_page` and read back what the store holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
from relaystore.domain.chain import GENESIS, Step
from relaystore.domain.errors import (
    ChainFault,
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
from relaystore.domain.projection import PageDelta, SessionProjection
from relaystore.domain.relay import (
    RELAY_EVENT_FORMAT_V1,
    RELAY_EVENT_FORMAT_V2,
    RELAY_EVENT_GENESIS_DIGEST,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    PromptCommand,
    PromptOutcome,
    RelayCursor,
    RelayEvent,
    RelayObservation,
    WarningObservation,
)
from relaystore.storage.connection import WriterConnection, open_writer
from relaystore.storage.materialized import load_frontier, load_materialized_session
from relaystore.storage.paging import load_api_events
from relaystore.storage.projection import commit_page
from tests.storage.builders import event_digest as digest
from tests.storage.pages import SESSION, add, new_page, synthetic_event


@contextmanager
def refused_session_update(connection: apsw.Connection) -> Iterator[None]:
    """Make the store refuse the page's last write (its session row): a late failure."""
    connection.execute(
        "CREATE TEMP TRIGGER refuse BEFORE UPDATE ON main.materialized_sessions "
        "BEGIN SELECT RAISE(ABORT, 'injected rollback'); END"
    )
    try:
        yield
    finally:
        connection.execute("DROP TRIGGER temp.refuse")


def chain(
    connection: apsw.Connection,
    mutations: list[MaterializedSessionMutation],
    *,
    fail: bool = False,
) -> tuple[RelayCursor, int]:
    """Commit ``mutations`` as the next events of the chain, in one page."""
    page = new_page(connection)
    for mutation in mutations:
        assert add(page, mutation) is Step.NEXT
    if fail:
        with refused_session_update(connection):
            return commit_page(connection, SESSION, page)
    return commit_page(connection, SESSION, page)


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


def messages(connection: apsw.Connection) -> list[str]:
    return [event.data.message for _, _, event in stored_events(connection)]  # type: ignore[union-attr]


# -- the chain: each event through domain.chain, the page through compare-and-set ---------


def test_a_page_applies_events_in_order_and_commits_only_its_last_frontier(
    store: apsw.Connection,
) -> None:
    assert chain(store, [MaterializedSessionMutation() for _ in range(3)]) == (
        RelayCursor(ordinal=3, digest=digest(3)),
        3,
    )
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=3, digest=digest(3))


def test_redelivered_events_at_or_below_the_frontier_are_already_applied_and_write_nothing(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation(api_events=[fault("once")]) for _ in range(3)])
    duplicate = MaterializedSessionMutation(api_events=[fault("again")], session_title="Changed")

    # A page projected from an older frontier, which the store already holds whole.
    stale = PageDelta.starting_at(SESSION, GENESIS)
    for _ in range(3):
        add(stale, duplicate)
    assert commit_page(store, SESSION, stale) == (RelayCursor(ordinal=3, digest=digest(3)), 0)

    # Events at or below the page's end fold nothing (the chain rule).
    page = new_page(store)
    below = RelayEvent(
        ordinal=1, digest="f" * 64, recorded_at_ms=0, observation=WarningObservation.of(message="x")
    )
    assert page.add(below, duplicate, digest_checked=True) is Step.ALREADY_APPLIED
    assert page.add(synthetic_event(2), duplicate, digest_checked=True) is Step.ALREADY_APPLIED
    # At the frontier with the frontier's digest (the seed's re-delivery probe).
    at_frontier = synthetic_event(3, format=RELAY_EVENT_FORMAT_V2)
    assert page.add(at_frontier, duplicate, digest_checked=True) is Step.ALREADY_APPLIED
    assert page.applied == 0
    assert commit_page(store, SESSION, page) == (RelayCursor(ordinal=3, digest=digest(3)), 0)

    assert messages(store) == ["once"] * 3
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert loaded.session_title is None
    assert loaded.applied_event_ordinal == 3


def test_a_page_committed_twice_is_written_once(store: apsw.Connection) -> None:
    page = new_page(store)
    add(page, MaterializedSessionMutation(api_events=[fault("once")]))

    assert commit_page(store, SESSION, page) == (RelayCursor(ordinal=1, digest=digest(1)), 1)
    assert commit_page(store, SESSION, page) == (RelayCursor(ordinal=1, digest=digest(1)), 0)
    assert len(stored_events(store)) == 1


def test_an_event_repeated_inside_one_page_is_already_applied(store: apsw.Connection) -> None:
    once = MaterializedSessionMutation(api_events=[fault("once")])
    page = new_page(store)

    assert [page.add(synthetic_event(1), once, digest_checked=True) for _ in range(2)] == [
        Step.NEXT,
        Step.ALREADY_APPLIED,
    ]
    assert commit_page(store, SESSION, page)[1] == 1
    assert len(stored_events(store)) == 1


def test_a_different_digest_at_the_frontier_is_a_fork(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    page = new_page(store)
    other = RelayEvent(
        format=RELAY_EVENT_FORMAT_V2,
        ordinal=2,
        digest="e" * 64,
        recorded_at_ms=0,
        observation=WarningObservation.of(message="x"),
    )

    with pytest.raises(RelayChainError) as caught:
        page.add(other, MaterializedSessionMutation(), digest_checked=True)

    error = caught.value
    assert error.fault is ChainFault.FORK
    assert (error.session_id, error.ordinal) == (SESSION, 2)
    assert "fork at ordinal 2" in str(error)
    assert SESSION in str(error)


def test_a_skipped_ordinal_is_a_gap_naming_the_expected_one(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()] * 3)
    page = new_page(store)

    with pytest.raises(RelayChainError) as caught:
        page.add(synthetic_event(5), MaterializedSessionMutation(), digest_checked=True)

    assert caught.value.fault is ChainFault.GAP
    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 5)
    assert "expected ordinal 4, found 5" in str(caught.value)


def test_a_previous_digest_that_does_not_continue_the_frontier_is_a_fork(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    page = new_page(store)
    stranger = RelayEvent(
        ordinal=3,
        previous_digest="a" * 64,
        digest=digest(3),
        recorded_at_ms=0,
        observation=WarningObservation.of(message="x"),
    )

    with pytest.raises(RelayChainError) as caught:
        page.add(stranger, MaterializedSessionMutation(), digest_checked=True)

    assert caught.value.fault is ChainFault.FORK
    assert "it follows aaaaaaaaaaaa" in str(caught.value)
    assert (page.applied, page.end) == (0, RelayCursor(ordinal=2, digest=digest(2)))
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_an_unchained_event_is_checked_by_ordinal_only(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()])
    page = new_page(store)

    assert add(page, MaterializedSessionMutation(), format=RELAY_EVENT_FORMAT_V2) is Step.NEXT
    commit_page(store, SESSION, page)

    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"ordinal": 0}, ChainFault.ORDINAL_OUT_OF_RANGE),
        ({"digest": "abc"}, ChainFault.BAD_DIGEST),
        ({"digest": RELAY_EVENT_GENESIS_DIGEST}, ChainFault.BAD_DIGEST),
    ],
)
def test_a_malformed_event_is_refused_by_the_chain_rule_and_nothing_is_written(
    store: apsw.Connection, fields: dict[str, object], expected: ChainFault
) -> None:
    good = RelayEvent.create(
        format=RELAY_EVENT_FORMAT_V1,
        ordinal=1,
        previous_digest=RELAY_EVENT_GENESIS_DIGEST,
        recorded_at_ms=0,
        observation=WarningObservation.of(message="x"),
    )
    arguments = {name: getattr(good, name) for name in good.__struct_fields__}
    bad = RelayEvent(**{**arguments, **fields})  # type: ignore[arg-type]
    page = new_page(store)

    with pytest.raises(RelayChainError) as caught:
        page.add(bad, MaterializedSessionMutation(api_events=[fault("never")]))

    assert caught.value.fault is expected
    assert commit_page(store, SESSION, page) == (GENESIS, 0)
    assert load_frontier(store, SESSION) == GENESIS
    assert stored_events(store) == []


def test_a_page_from_a_frontier_the_store_is_not_at_is_refused(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()] * 2)
    # The store is behind the page: a gap.
    ahead = PageDelta.starting_at(SESSION, RelayCursor(ordinal=3, digest=digest(3)))
    add(ahead, MaterializedSessionMutation(api_events=[fault("ahead")]))
    with pytest.raises(RelayChainError) as caught:
        commit_page(store, SESSION, ahead)
    assert caught.value.fault is ChainFault.GAP
    # The store holds part of the page: a fork of the page's start.
    overlapping = PageDelta.starting_at(SESSION, RelayCursor(ordinal=1, digest=digest(1)))
    for _ in range(3):
        add(overlapping, MaterializedSessionMutation(api_events=[fault("overlap")]))
    with pytest.raises(RelayChainError) as caught:
        commit_page(store, SESSION, overlapping)
    assert caught.value.fault is ChainFault.FORK
    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 2)
    assert stored_events(store) == []
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_a_page_for_a_session_without_a_projection_is_an_unknown_session(
    store: apsw.Connection,
) -> None:
    page = PageDelta.starting_at("missing", GENESIS)
    add(page, MaterializedSessionMutation())

    with pytest.raises(UnknownSession) as caught:
        commit_page(store, "missing", page)

    assert caught.value.session_id == "missing"


def test_a_page_of_one_session_is_not_written_to_another(store: apsw.Connection) -> None:
    page = PageDelta.starting_at("other", GENESIS)
    add(page, MaterializedSessionMutation())

    with pytest.raises(ProjectionError, match="cannot be written to session session-1"):
        commit_page(store, SESSION, page)


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

    with pytest.raises(ProjectionError, match="injected rollback") as caught:
        chain(store, turn, fail=True)

    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 2)
    assert stored_events(store) == []
    assert latest_seq(store) == 0
    assert load_frontier(store, SESSION) == GENESIS

    chain(store, turn)

    assert [(seq, at) for seq, at, _ in stored_events(store)] == [(1, 100), (2, 100)]
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_a_chain_error_late_in_a_page_leaves_the_page_as_it_was(
    store: apsw.Connection,
) -> None:
    page = new_page(store)
    add(page, MaterializedSessionMutation(api_events=[fault("a")]))
    add(page, MaterializedSessionMutation(session_title="T"))

    with pytest.raises(RelayChainError):
        page.add(synthetic_event(4), MaterializedSessionMutation(), digest_checked=True)

    assert (page.applied, page.end) == (2, RelayCursor(ordinal=2, digest=digest(2)))
    assert stored_events(store) == []
    loaded = load_materialized_session(store, SESSION)
    assert loaded is not None
    assert (loaded.applied_event_ordinal, loaded.session_title) == (0, None)


def test_a_page_inside_an_open_transaction_rolls_back_alone(store: apsw.Connection) -> None:
    with store:
        chain(store, [MaterializedSessionMutation(api_events=[fault("kept")])])
        with pytest.raises(ProjectionError):
            chain(store, [MaterializedSessionMutation(api_events=[fault("dropped")])], fail=True)
        chain(store, [MaterializedSessionMutation(api_events=[fault("kept too")])])

    assert messages(store) == ["kept", "kept too"]
    assert load_frontier(store, SESSION) == RelayCursor(ordinal=2, digest=digest(2))


def test_an_add_that_raises_leaves_the_page_as_it_was(store: apsw.Connection) -> None:
    page = new_page(store)
    bad = MaterializedSessionMutation(
        session_title="Bad",
        transcript=[TranscriptUpsert(system("late", 9, "position beyond the event"))],
        api_events=[fault("bad")],
    )
    with pytest.raises(ProjectionError, match="position 9 outside"):
        add(page, bad)
    add(page, MaterializedSessionMutation(api_events=[fault("good")]))

    commit_page(store, SESSION, page)

    assert messages(store) == ["good"]
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

    page = new_page(store)
    with pytest.raises(ProjectionError, match=text) as caught:
        add(page, mutation)

    assert (caught.value.session_id, caught.value.ordinal) == (SESSION, 1)
    assert page.applied == 0
    commit_page(store, SESSION, page)
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
    page = new_page(store)
    add(
        page,
        MaterializedSessionMutation(last_activity_at_ms=100, api_events=[started, fault("a")]),
    )
    add(page, MaterializedSessionMutation(api_events=[fault("b")]))
    add(page, MaterializedSessionMutation(api_events=[fault("c")]), recorded_at_ms=777)
    add(
        page,
        MaterializedSessionMutation(last_activity_at_ms=50, api_events=[fault("d")]),
        recorded_at_ms=999,
    )

    commit_page(store, SESSION, page)

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
    """The seed's ``page()``: format 1 events projected and committed as one page."""
    loaded = load_materialized_session(connection, SESSION)
    assert loaded is not None
    projection = SessionProjection(loaded)
    page = PageDelta.starting_at(SESSION, projection.frontier)
    for observation in observations:
        frontier = projection.frontier
        event = RelayEvent.create(
            format=RELAY_EVENT_FORMAT_V1,
            ordinal=frontier.ordinal + 1,
            previous_digest=frontier.digest,
            recorded_at_ms=100,
            observation=observation,
        )
        mutation = projection.apply(event)
        assert mutation is not None
        page.add(event, mutation, digest_checked=True)
    if fail:
        with refused_session_update(connection):
            commit_page(connection, SESSION, page)
    commit_page(connection, SESSION, page)
    return projection.session


def test_api_events_survive_coalescing_rollback_and_reopen(
    writer: WriterConnection, store_path: Path, store: apsw.Connection
) -> None:
    with pytest.raises(ProjectionError, match="injected rollback"):
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

        probe = RelayEvent(
            format=RELAY_EVENT_FORMAT_V2,
            ordinal=current.applied_event_ordinal,
            digest=current.applied_event_digest,
            recorded_at_ms=0,
            observation=WarningObservation.of(message="probe"),
        )
        page = PageDelta.starting_at(SESSION, current.frontier)
        assert page.add(probe, MaterializedSessionMutation()) is Step.ALREADY_APPLIED
        assert commit_page(connection, SESSION, page) == (current.frontier, 0)
        assert len(load_api_events(connection, after_seq=0).events) == 2
        assert load_api_events(connection, after_seq=None).events == []
    finally:
        reopened.close()
