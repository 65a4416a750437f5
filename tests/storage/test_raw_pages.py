"""Raw pages of the feed: the stored bytes in the ``ApiEvent`` wire shape, undecoded.

A raw page must be the typed page (:func:`load_api_events`) byte for byte: every event's
``json`` is ``msgspec.json.encode`` of the typed event, and the cursors, snapshot and
errors are the same. The sweeps here are plain loops over a generated store (no
hypothesis), so every kind, filter, cursor and limit is read both ways.
"""

from __future__ import annotations

import apsw
import msgspec
import pytest

from relaystore.domain.api_events import (
    API_EVENT_KINDS,
    ApiActivityChanged,
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    ApiCommandEnded,
    ApiEventData,
    ApiEventFilter,
    ApiEventPage,
    ApiInputRequired,
    ApiInputResolved,
    ApiLegacyNotice,
    ApiRuntimeResolved,
    ApiSessionFault,
    ApiTurnStarted,
    MaterializedTurn,
    RawApiEvent,
    RawApiEventPage,
)
from relaystore.domain.errors import InvalidInput
from relaystore.domain.outcomes import (
    CommandOwner,
    CommandResult,
    CommandResultKind,
    OutcomeReason,
)
from relaystore.domain.paging import MAX_PAGE_LIMIT
from relaystore.domain.runtime import HarnessKind, RuntimeProvenance, RuntimeReceipt
from relaystore.storage.events import insert_api_event, insert_api_events
from relaystore.storage.migrations import migrate_schema
from relaystore.storage.paging import (
    load_api_events,
    load_raw_api_events,
)
from relaystore.storage.sessions import delete_session, save_session
from tests.storage.builders import running_session, turn_ended

# Text that needs every kind of JSON escape, and some that needs none but is not ASCII.
AWKWARD = 'quote " backslash \\ newline \n tab \t nul \x00 del \x7f é 😀 \u2028 </script>'
SESSIONS = {"s-a": "default", "s-b": "team", "s.c_3": "team", "s-d": "lab"}


def every_kind(n: int) -> list[ApiEventData]:
    """One event of every kind (in ``API_EVENT_KINDS`` order), varied by ``n``."""
    receipt = RuntimeReceipt(
        id=f"mj-runtime-v1:{n}",
        harness=HarnessKind.CODEX,
        platform="test-target",
        provenance=RuntimeProvenance.TARGET_INSTALLATION,
        event_ordinal=n,
        observed_at_ms=100 + n,
    )
    events: list[ApiEventData] = [
        ApiRuntimeResolved.of(receipt=receipt),
        ApiTurnStarted.of(
            turn=MaterializedTurn(
                command_id=f"prompt-{n}",
                accepted_ordinal=n if n % 2 else None,
                turn_start_position=n + 1,
                started_at_ms=2**53 + n,
            )
        ),
        turn_ended("end_turn" if n % 2 else AWKWARD),
        ApiCommandEnded(
            data=CommandResult(
                owner=CommandOwner.DAEMON,
                command_id=f"op-{n}",
                command_kind="checkpoint",
                outcome=CommandResultKind.REJECTED,
                reason=OutcomeReason.CHECKPOINT_DEFERRED,
                message=AWKWARD,
                related_command_ids=[f"barrier-{n}"] * (n % 3),
            )
        ),
        ApiSessionFault.of(
            reason=OutcomeReason.STARTUP_FAILED,
            message=f"{AWKWARD} {n}",
            command_id=None if n % 2 else f"c-{n}",
        ),
        ApiLegacyNotice.of(original_type="error", message=AWKWARD),
        ApiInputRequired.of(turn_id=n if n % 2 else None),
        ApiInputResolved.of(elicitation_id=f"question-{n}", action="accept"),
        ApiActivityChanged.of(
            activity=ApiActivityState(
                state=AWKWARD if n % 2 else "running",
                details=ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=n),
                is_idle=bool(n % 2),
                waiting_for_input=False,
                capacity_retry=False,
            )
        ),
    ]
    assert [event.kind for event in events] == list(API_EVENT_KINDS)
    return events


def fill(db: apsw.Connection, rounds: int = 3) -> int:
    """Save the sessions of ``SESSIONS`` and write every kind for each; return the count."""
    for session_id, workspace_id in SESSIONS.items():
        record = msgspec.structs.replace(running_session(session_id), workspace_id=workspace_id)
        save_session(db, record)
    rows = [
        # recorded_at_ms: plain, negative, the largest INTEGER, zero
        (session_id, [n * 1000 + 1, -(n + 1), 2**63 - 1 - n, 0][index], event)
        for n in range(rounds)
        for index, session_id in enumerate(SESSIONS)
        for event in every_kind(n + index)
    ]
    insert_api_events(db, rows)
    return len(rows)


def assert_same_page(raw: RawApiEventPage, typed: ApiEventPage) -> None:
    """``raw`` is ``typed`` as bytes: same events, kinds, cursors, and the encoded bytes."""
    assert [(event.seq, event.kind, event.json) for event in raw.events] == [
        (event.seq, event.type, msgspec.json.encode(event)) for event in typed.events
    ]
    assert (raw.next_after_seq, raw.latest_seq) == (typed.next_after_seq, typed.latest_seq)
    assert all(type(event) is RawApiEvent for event in raw.events)


FILTERS = [
    None,
    ApiEventFilter(),
    *(ApiEventFilter(session_id=session_id) for session_id in SESSIONS),
    ApiEventFilter(session_id="unknown"),
    *(ApiEventFilter(workspace_id=workspace) for workspace in ("default", "team", "nowhere")),
    ApiEventFilter(session_id="s-b", workspace_id="team"),
    ApiEventFilter(session_id="s-b", workspace_id="default"),
]


def test_every_kind_every_filter_cursor_and_limit_reads_as_the_typed_page(
    store: apsw.Connection,
) -> None:
    total = fill(store)
    kinds_seen: set[str] = set()
    for event_filter in FILTERS:
        for limit in (-3, 0, 1, 2, 7, 9, 100, MAX_PAGE_LIMIT, MAX_PAGE_LIMIT + 1):
            for after_seq in (None, 0, 1, 5, 17, total - 1, total, total + 5):
                raw = load_raw_api_events(store, event_filter, after_seq, limit)
                assert_same_page(raw, load_api_events(store, event_filter, after_seq, limit))
                kinds_seen.update(event.kind for event in raw.events)
    assert kinds_seen == set(API_EVENT_KINDS)


def test_paging_raw_from_zero_yields_every_event_of_the_full_typed_scan(
    store: apsw.Connection,
) -> None:
    total = fill(store, rounds=4)
    typed = load_api_events(store, None, 0, MAX_PAGE_LIMIT).events
    assert len(typed) == total
    for limit in (1, 3, 10, 64):
        cursor, lines = 0, []
        while True:
            page = load_raw_api_events(store, None, cursor, limit)
            lines += [event.json for event in page.events]
            assert page.next_after_seq >= cursor
            cursor = page.next_after_seq
            if not page.events:
                break
        assert lines == [msgspec.json.encode(event) for event in typed]
        assert cursor == total


def test_raw_cursors_follow_the_paging_contract(store: apsw.Connection) -> None:
    for _ in range(3):
        insert_api_event(store, "session-1", 1, ApiInputRequired.of())
    now = load_raw_api_events(store, None, None, 100)
    assert (now.events, now.next_after_seq, now.latest_seq) == ([], 3, 3)
    # An empty filtered page fast-forwards to latest; a cursor never moves backwards.
    nobody = load_raw_api_events(store, ApiEventFilter(session_id="nobody"), 1, 100)
    assert (nobody.events, nobody.next_after_seq) == ([], 3)
    ahead = load_raw_api_events(store, None, 10, 100)
    assert (ahead.events, ahead.next_after_seq, ahead.latest_seq) == ([], 10, 3)
    assert [e.seq for e in load_raw_api_events(store, None, 0, 0).events] == [1]
    assert [e.seq for e in load_raw_api_events(store, None, 0, 2).events] == [1, 2]
    # Events of a deleted session are gone; latest_seq keeps the high-water mark.
    delete_session(store, "session-1")
    gone = load_raw_api_events(store, None, 0, 100)
    assert (gone.events, gone.next_after_seq, gone.latest_seq) == ([], 3, 3)
    assert_same_page(gone, load_api_events(store, None, 0, 100))


def test_a_negative_cursor_is_the_typed_invalid_input(store: apsw.Connection) -> None:
    with pytest.raises(InvalidInput) as typed:
        load_api_events(store, None, -1, 100)
    with pytest.raises(InvalidInput) as raw:
        load_raw_api_events(store, None, -1, 100)
    assert raw.value.detail == typed.value.detail == "after_seq must be 0 or more, not -1"


def _insert_body(db: apsw.Connection, body: str, session_id: str = "session-1") -> None:
    db.execute(
        "INSERT INTO api_events(session_id, recorded_at_ms, body) VALUES (?, 7, ?)",
        (session_id, body),
    )


@pytest.mark.parametrize(
    "body",
    [
        '{"data":{"turn_id":3},"type":"input_required"}',  # type after data
        '{ "type": "input_required", "data": { "turn_id": 3 } }',  # spaces
        '{"type":"input_required",\n"data":{"turn_id":3}}',  # a newline
        '{"type":"input_required","data":{"turn_id":3}} ',  # trailing space
        '{"type":"session_fault","data":{"message":"m","reason":"startup_failed"}}',  # order
    ],
)
def test_a_body_in_another_layout_is_decoded_and_encoded_as_the_typed_path_does(
    store: apsw.Connection, body: str
) -> None:
    insert_api_event(store, "session-1", 1, ApiInputRequired.of(turn_id=1))
    _insert_body(store, body)
    insert_api_event(store, "session-1", 2, ApiInputRequired.of(turn_id=2))
    raw = load_raw_api_events(store, None, 0, 100)
    assert_same_page(raw, load_api_events(store, None, 0, 100))
    assert b" " not in raw.events[1].json
    assert b"\n" not in raw.events[1].json


def test_a_body_that_does_not_decode_fails_the_raw_page_as_the_typed_one(
    store: apsw.Connection,
) -> None:
    _insert_body(store, '{"type":"no_such_kind","data":{}}')
    with pytest.raises(InvalidInput) as typed:
        load_api_events(store, None, 0, 100)
    with pytest.raises(InvalidInput) as raw:
        load_raw_api_events(store, None, 0, 100)
    assert raw.value.detail == typed.value.detail
    assert "seq 1" in raw.value.detail


def test_a_body_in_relaystore_layout_is_trusted_not_decoded_again(
    store: apsw.Connection,
) -> None:
    # What the raw path saves: it never re-checks data it wrote itself. A body forged in
    # relaystore's layout with data of the wrong shape is printed as stored.
    body = '{"type":"input_required","data":{"turn_id":"not an int"}}'
    _insert_body(store, body)
    with pytest.raises(InvalidInput):
        load_api_events(store, None, 0, 100)
    (event,) = load_raw_api_events(store, None, 0, 100).events
    assert event.kind == "input_required"
    assert (
        event.json == b'{"seq":1,"session_id":"session-1","recorded_at_ms":7,' + body[1:].encode()
    )


def test_sqlite_json_quote_escapes_every_character_as_msgspec_does(db: apsw.Connection) -> None:
    # The raw path quotes session ids with SQLite's json_quote; the typed path with msgspec.
    points = [*range(0x800), 0x2028, 0x2029, 0xFEFF, 0xFFFD, 0xFFFF, 0x1F600, 0x10FFFF]
    texts = [f"a{chr(point)}b" for point in points if not 0xD800 <= point < 0xE000]
    texts += [AWKWARD, "", "s-1"]
    for text in texts:
        quoted = db.execute("SELECT CAST(json_quote(?) AS BLOB)", (text,)).get
        assert quoted == msgspec.json.encode(text), repr(text)


def test_a_session_id_that_needs_escapes_prints_as_the_typed_path_prints_it(
    store: apsw.Connection,
) -> None:
    # Only hand-written SQL can store such an id (the store refuses it); reads still agree.
    store.pragma("foreign_keys", False)
    try:
        for session_id in ['odd"id', "back\\slash", "new\nline", "é😀"]:
            insert_api_event(store, session_id, 5, ApiInputRequired.of(turn_id=1))
    finally:
        store.pragma("foreign_keys", True)
    raw = load_raw_api_events(store, None, 0, 100)
    assert len(raw.events) == 4
    assert_same_page(raw, load_api_events(store, None, 0, 100))


def test_a_store_whose_text_is_utf16_reads_through_the_typed_path() -> None:
    db = apsw.Connection(":memory:")
    db.execute("PRAGMA encoding = 'UTF-16le'")
    migrate_schema(db)
    assert db.execute("PRAGMA encoding").get == "UTF-16le"
    save_session(db, running_session())
    insert_api_events(db, [("session-1", 9, event) for event in every_kind(1)])
    raw = load_raw_api_events(db, None, 0, 100)
    assert len(raw.events) == len(API_EVENT_KINDS)
    assert_same_page(raw, load_api_events(db, None, 0, 100))
