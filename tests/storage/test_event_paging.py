"""The API event feed: appending, the paging contract, filters, cursors and receipts."""

from __future__ import annotations

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import (
    ApiEvent,
    ApiEventFilter,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnEnded,
)
from relaystore.domain.errors import InvalidInput, UnknownSession
from relaystore.domain.outcomes import OutcomeReason, TurnResultKind
from relaystore.domain.paging import MAX_PAGE_LIMIT, clamp_page_limit
from relaystore.domain.runtime import HarnessKind, RuntimeProvenance, RuntimeReceipt
from relaystore.storage.events import (
    api_event_from_row,
    append_api_events,
    insert_api_event,
    insert_api_events,
)
from relaystore.storage.paging import (
    load_api_events,
    load_latest_seq,
    load_runtime_receipt,
)
from relaystore.storage.sessions import delete_session, save_session
from tests.storage.builders import (
    insert_turn,
    kinds,
    running_session,
    scan,
    turn_ended,
    turn_started,
)


def fault(message: str) -> ApiSessionFault:
    return ApiSessionFault.of(
        reason=OutcomeReason.RUNTIME_UNAVAILABLE, message=message, command_id=None
    )


def receipt(ordinal: int) -> RuntimeReceipt:
    return RuntimeReceipt(
        id=f"mj-runtime-v1:{ordinal}",
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        event_ordinal=ordinal,
        observed_at_ms=100,
    )


# -- seed tests --------------------------------------------------------------------------


def test_api_events_survive_rollback_and_page_with_a_cursor(session_db: apsw.Connection) -> None:
    # The storage part of seed test 2.
    db = session_db

    def rolled_back() -> None:
        with db:
            insert_turn(db)
            raise RuntimeError("injected rollback")

    with pytest.raises(RuntimeError, match="injected rollback"):
        rolled_back()
    assert load_api_events(db, None, 0, 100).events == []
    assert load_latest_seq(db) == 0

    insert_turn(db)
    first = load_api_events(db, ApiEventFilter(), 0, 1)
    assert [(e.seq, e.type) for e in first.events] == [(1, "turn_started")]
    assert first.next_after_seq == 1
    rest = load_api_events(db, ApiEventFilter(), first.next_after_seq, 100)
    assert [(e.seq, e.type) for e in rest.events] == [(2, "turn_ended")]
    now = load_api_events(db, ApiEventFilter(), None, 100)
    assert now.events == []
    assert (now.next_after_seq, now.latest_seq) == (2, 2)


def test_api_events_filter_and_keep_cursors_after_forgetting_sessions(
    session_db: apsw.Connection,
) -> None:
    # Seed test 3.
    db = session_db
    insert_turn(db)
    empty = load_api_events(db, ApiEventFilter(session_id="other"), 0, 100)
    assert empty.events == []
    assert empty.next_after_seq == 2
    in_workspace = load_api_events(db, ApiEventFilter(workspace_id="default"), 0, 100)
    assert len(in_workspace.events) == 2
    delete_session(db, "session-1")
    deleted = load_api_events(db, ApiEventFilter(), 2, 100)
    assert deleted.events == []
    assert deleted.latest_seq == 2
    assert load_api_events(db, ApiEventFilter(), 0, 100).events == []


def test_failed_completions_keep_their_command_identity(session_db: apsw.Connection) -> None:
    # The stored shape seed test 6 reads back.
    insert_api_event(session_db, "session-1", 100, turn_started())
    insert_api_event(session_db, "session-1", 100, turn_ended("provider_error"))
    events = scan(session_db)
    assert len(events) == 2
    body = events[1].event
    assert isinstance(body, ApiTurnEnded)
    turn = body.data.turn
    assert (turn.command_id, turn.accepted_ordinal) == ("prompt-1", 1)
    assert (turn.outcome.kind, turn.outcome.stop_reason) == (
        TurnResultKind.FAILED,
        "provider_error",
    )


# -- the contract ------------------------------------------------------------------------


def test_an_event_reads_back_exactly_as_built(session_db: apsw.Connection) -> None:
    seq = insert_api_event(session_db, "session-1", 123, turn_ended())
    [event] = scan(session_db)
    assert event == ApiEvent.of(
        seq=seq, session_id="session-1", recorded_at_ms=123, event=turn_ended()
    )
    assert event.event == turn_ended()
    wire = msgspec.json.encode(event)
    assert wire.startswith(
        b'{"seq":1,"session_id":"session-1","recorded_at_ms":123,"type":"turn_ended","data":{"turn":'
    )


def test_the_page_limit_is_clamped_to_one_through_a_thousand(session_db: apsw.Connection) -> None:
    insert_api_events(
        session_db, [("session-1", i, fault(str(i))) for i in range(MAX_PAGE_LIMIT + 5)]
    )
    assert [clamp_page_limit(n) for n in (-3, 0, 1, 999, 1000, 5000)] == [1, 1, 1, 999, 1000, 1000]
    assert len(load_api_events(session_db, None, 0, 0).events) == 1
    assert len(load_api_events(session_db, None, 0, -7).events) == 1
    page = load_api_events(session_db, None, 0, 5000)
    assert len(page.events) == MAX_PAGE_LIMIT
    assert page.next_after_seq == MAX_PAGE_LIMIT
    assert len(load_api_events(session_db, None, page.next_after_seq, 5000).events) == 5


def test_a_cursor_never_moves_backwards(session_db: apsw.Connection) -> None:
    insert_turn(session_db)
    ahead = load_api_events(session_db, None, 50, 10)
    assert ahead.events == []
    assert (ahead.next_after_seq, ahead.latest_seq) == (50, 2)
    fresh = load_api_events(session_db, None, 0, 10)
    assert fresh.next_after_seq == 2


def test_an_empty_store_pages_from_zero(db: apsw.Connection) -> None:
    page = load_api_events(db, None, None, 10)
    assert (page.events, page.next_after_seq, page.latest_seq) == ([], 0, 0)


def test_a_negative_cursor_is_refused(db: apsw.Connection) -> None:
    with pytest.raises(InvalidInput, match="after_seq must be 0 or more"):
        load_api_events(db, None, -1, 10)


def test_session_and_workspace_filters_combine(db: apsw.Connection) -> None:
    save_session(db, running_session("a"))
    save_session(db, msgspec.structs.replace(running_session("b"), workspace_id="team"))
    save_session(db, msgspec.structs.replace(running_session("c"), workspace_id="team"))
    insert_api_events(db, [(sid, 0, fault(sid)) for sid in ("a", "b", "c", "a", "b", "c")])

    def seqs(event_filter: ApiEventFilter) -> list[int]:
        return [event.seq for event in scan(db, event_filter)]

    assert seqs(ApiEventFilter()) == [1, 2, 3, 4, 5, 6]
    assert seqs(ApiEventFilter(session_id="b")) == [2, 5]
    assert seqs(ApiEventFilter(workspace_id="team")) == [2, 3, 5, 6]
    assert seqs(ApiEventFilter(workspace_id="default")) == [1, 4]
    assert seqs(ApiEventFilter(session_id="b", workspace_id="team")) == [2, 5]
    assert seqs(ApiEventFilter(session_id="b", workspace_id="default")) == []
    assert seqs(ApiEventFilter(workspace_id="nowhere")) == []


def test_a_filtered_full_page_stops_at_its_last_match(db: apsw.Connection) -> None:
    save_session(db, running_session("a"))
    save_session(db, running_session("b"))
    insert_api_events(db, [(sid, 0, fault(sid)) for sid in ("a", "b", "a", "b", "b")])
    page = load_api_events(db, ApiEventFilter(session_id="a"), 0, 1)
    assert page.next_after_seq == 1
    page = load_api_events(db, ApiEventFilter(session_id="a"), page.next_after_seq, 1)
    assert [e.seq for e in page.events] == [3]
    page = load_api_events(db, ApiEventFilter(session_id="a"), page.next_after_seq, 1)
    assert page.events == []
    assert page.next_after_seq == 5


def test_latest_seq_survives_deleting_the_newest_events(db: apsw.Connection) -> None:
    save_session(db, running_session("a"))
    save_session(db, running_session("b"))
    insert_api_events(db, [("a", 0, fault("1")), ("b", 0, fault("2")), ("b", 0, fault("3"))])
    delete_session(db, "b")
    assert load_latest_seq(db) == 3
    assert insert_api_event(db, "a", 0, fault("4")) == 4


def test_appending_for_an_unknown_session_is_refused(db: apsw.Connection) -> None:
    with pytest.raises(UnknownSession) as caught:
        insert_api_event(db, "ghost", 0, fault("x"))
    assert caught.value.session_id == "ghost"
    save_session(db, running_session("a"))
    with pytest.raises(UnknownSession, match="ghost"):
        insert_api_events(db, [("a", 0, fault("x")), ("ghost", 0, fault("y"))])
    assert load_latest_seq(db) == 0


def test_appending_in_the_callers_transaction_writes_and_refuses_as_inserting_does(
    db: apsw.Connection,
) -> None:
    save_session(db, running_session("a"))
    for append in (insert_api_events, lambda c, rows: append_api_events(c.cursor(), rows)):
        with db:
            append(db, [])
            append(db, [("a", 0, fault("1"))])
            append(db, [("a", 1, fault("2")), ("a", 2, fault("3"))])
        with pytest.raises(UnknownSession, match="ghost"), db:
            append(db, [("a", 0, fault("x")), ("ghost", 0, fault("y"))])
    assert [(e.seq, e.recorded_at_ms) for e in scan(db)] == [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 0),
        (5, 1),
        (6, 2),
    ]
    assert [e.event for e in scan(db)] == [fault(n) for n in "123123"]


def test_a_body_that_does_not_decode_fails_the_whole_page(session_db: apsw.Connection) -> None:
    insert_turn(session_db)
    session_db.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 0, ?)",
        ('{"type":"turn_started","data":{"turn":{"command_id":7}}}',),
    )
    with pytest.raises(InvalidInput, match="API event seq 3") as caught:
        load_api_events(session_db, None, 0, 100)
    assert caught.value.session_id == "session-1"
    assert len(load_api_events(session_db, None, 0, 2).events) == 2


def test_a_body_of_an_unknown_kind_fails_the_page(session_db: apsw.Connection) -> None:
    session_db.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 0, ?)",
        ('{"type":"error","data":{"message":"m","command_id":null}}',),
    )
    with pytest.raises(InvalidInput, match="API event seq 1"):
        load_api_events(session_db, None, 0, 100)


def test_a_body_in_another_key_order_or_spacing_reads_the_same(session_db: apsw.Connection) -> None:
    canonical = insert_api_event(session_db, "session-1", 5, turn_started())
    session_db.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES ('session-1', 5, ?)",
        (
            '{ "data" : {"turn":{"command_id":"prompt-1","accepted_ordinal":1,"turn_start_position":1,"started_at_ms":2}}, "type": "turn_started" }',
        ),
    )
    first, second = scan(session_db)
    assert first.seq == canonical
    assert (second.type, bytes(second.data), second.event) == (
        first.type,
        bytes(first.data),
        first.event,
    )


def test_a_row_decodes_by_slicing_the_canonical_body() -> None:
    body = '{"type":"session_fault","data":{"reason":"runtime_unavailable","message":"a \\"quoted\\" \\\\ end","command_id":null}}'
    event = api_event_from_row(9, "s", 1, body)
    assert event.type == "session_fault"
    assert event.event == ApiSessionFault.of(
        reason=OutcomeReason.RUNTIME_UNAVAILABLE, message='a "quoted" \\ end', command_id=None
    )


# -- runtime receipts --------------------------------------------------------------------


def test_the_runtime_receipt_is_the_newest_resolved_runtime(session_db: apsw.Connection) -> None:
    assert load_runtime_receipt(session_db, "session-1") is None
    insert_api_event(session_db, "session-1", 1, ApiRuntimeResolved.of(receipt=receipt(1)))
    insert_turn(session_db)
    insert_api_event(session_db, "session-1", 1, ApiRuntimeResolved.of(receipt=receipt(4)))
    insert_turn(session_db)
    assert load_runtime_receipt(session_db, "session-1") == receipt(4)
    receipts = [
        e.event.data.receipt for e in scan(session_db) if isinstance(e.event, ApiRuntimeResolved)
    ]
    assert receipts == [receipt(1), receipt(4)]
    assert load_runtime_receipt(session_db, "other") is None


def test_kinds_of_a_mixed_page_come_back_in_seq_order(session_db: apsw.Connection) -> None:
    insert_turn(session_db)
    insert_api_event(session_db, "session-1", 1, fault("runtime exited"))
    assert kinds(scan(session_db)) == ["turn_started", "turn_ended", "session_fault"]
