"""Each transcript item's stored role and text (schema revision 12).

Written with the body by every write (pages, retention), filled for the items a
revision-11 store holds when it is migrated, forgotten (NULL) when a body changes
without them (an older build's write), and read instead of flattening the body: every
read answers as it would from the body.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from relaystore.domain.errors import InvalidInput, ProjectionError
from relaystore.domain.materialized import (
    AgentBody,
    MaterializedSessionMutation,
    SystemBody,
    ToolBody,
    TranscriptBody,
    TranscriptItem,
    TranscriptUpsert,
    UserBody,
)
from relaystore.domain.wire import decode_json, encode
from relaystore.storage.connection import open_writer
from relaystore.storage.item_views import stored_view
from relaystore.storage.projection import commit_page
from relaystore.storage.reads.transcript import (
    load_raw_transcript_page,
    load_transcript_history,
    load_transcript_page,
)
from relaystore.storage.reads.turns import load_projection_tail, load_turn_summary
from relaystore.storage.retention import compact_transcript
from relaystore.storage.sessions import save_session
from tests.storage.builders import running_session
from tests.storage.legacy import step_back_to_revision_11
from tests.storage.pages import SESSION, add, new_page

_ITEMS: list[tuple[str, TranscriptBody]] = [
    ("user:1", UserBody(content=[{"type": "text", "text": "Fix the build, please"}])),
    (
        "agent:a",
        AgentBody(chunks=[{"messageId": "a", "content": {"type": "text", "text": "On it."}}]),
    ),
    ("tool:1", ToolBody(call={"title": "Run \x1b[1mtests\x1b[0m", "rawOutput": "x" * 5000})),
    ("system:1", SystemBody(text="done")),
]


def _item(position: int, stable_id: str, body: TranscriptBody) -> TranscriptItem:
    return TranscriptItem(
        stable_id=stable_id,
        position=position,
        latest_content_event_ordinal=position if isinstance(body, AgentBody) else None,
        created_at_ms=10,
        last_changed_at_ms=10,
        body=body,
    )


def _write(connection: apsw.Connection, items: list[TranscriptItem]) -> None:
    """One event per item (an item's position is at most its event's ordinal)."""
    page = new_page(connection)
    for item in items:
        add(page, MaterializedSessionMutation(transcript=[TranscriptUpsert(item)]))
    commit_page(connection, SESSION, page)


def _store(path: Path) -> None:
    with open_writer(path) as writer:
        save_session(writer.connection, running_session())
        _write(
            writer.connection,
            [_item(n, sid, body) for n, (sid, body) in enumerate(_ITEMS, start=1)],
        )


def _views(connection: apsw.Connection) -> dict[str, tuple[Any, Any, Any]]:
    rows = connection.execute(
        "SELECT stable_id, view_role, view_text, view_writes FROM materialized_transcript_items"
    )
    return {str(sid): (role, text, writes) for sid, role, text, writes in rows}


def _bodies(connection: apsw.Connection) -> dict[str, TranscriptBody]:
    rows = connection.execute("SELECT stable_id, body_json FROM materialized_transcript_items")
    return {str(sid): decode_json(str(body), TranscriptBody) for sid, body in rows}  # type: ignore[arg-type]


def _reads(connection: apsw.Connection) -> tuple[object, ...]:
    return (
        load_transcript_page(connection, SESSION, 0, limit=100),
        load_transcript_page(connection, SESSION, 0, limit=100, roles=("tool", "user")),
        load_transcript_history(connection, SESSION),
        load_turn_summary(connection, SESSION, 1, 4),
        load_projection_tail(connection, SESSION),
    )


def test_every_written_item_stores_the_domains_role_and_text(store_path: Path) -> None:
    _store(store_path)
    with open_writer(store_path) as writer:
        views = _views(writer.connection)
        bodies = _bodies(writer.connection)
    assert views == {sid: (*stored_view(bodies[sid]), 1) for sid, _ in _ITEMS}
    assert views["tool:1"][:2] == ("tool", "Run tests")


def test_a_read_answers_from_the_stored_text_as_from_the_body(store_path: Path) -> None:
    _store(store_path)
    with open_writer(store_path) as writer:
        stored = _reads(writer.connection)
        writer.connection.execute(  # forget them: the reads flatten the bodies instead
            "UPDATE materialized_transcript_items SET view_role = NULL, view_text = NULL"
        )
        assert _reads(writer.connection) == stored
        writer.connection.execute(  # a damaged text is what a page shows: audit finds it
            "UPDATE materialized_transcript_items SET view_role = 'system', view_text = 'x'"
            " WHERE stable_id = 'system:1'"
        )
        page = load_transcript_page(writer.connection, SESSION, 0, limit=100)
    assert page is not None
    assert page.items[-1].text == "x"


def test_an_update_keeps_the_view_and_an_older_builds_update_forgets_it(
    store_path: Path,
) -> None:
    _store(store_path)
    with open_writer(store_path) as writer:
        db = writer.connection
        same_text = AgentBody(
            chunks=[{"messageId": "a", "content": {"type": "text", "text": "On it."}}],
            streaming=True,
        )
        _write(db, [_item(2, "agent:a", same_text)])
        assert _views(db)["agent:a"] == ("agent", "On it.", 2)
        # An older build rewrites the body alone: the trigger forgets role and text.
        db.execute(
            "UPDATE materialized_transcript_items SET body_json = ? WHERE stable_id = 'system:1'",
            ('{"kind":"system","text":"changed"}',),
        )
        assert _views(db)["system:1"] == (None, None, None)
        page = load_transcript_page(db, SESSION, 0, limit=100)
        assert page is not None
        assert page.items[-1].text == "changed"
        assert encode(load_raw_transcript_page(db, SESSION, 0, limit=100)) == encode(page)
        _write(db, [_item(4, "system:1", SystemBody(text="again"))])
        assert _views(db)["system:1"] == ("system", "again", 1)


def test_retention_writes_the_role_and_text_of_what_it_keeps(store_path: Path) -> None:
    _store(store_path)
    with open_writer(store_path) as writer:
        done = compact_transcript(writer.connection, SESSION, frontier=10)
        assert done.items == 1
        views = _views(writer.connection)
        body = _bodies(writer.connection)["tool:1"]
    assert views["tool:1"] == (*stored_view(body), 2)


def test_a_revision_11_store_is_given_every_items_role_and_text(store_path: Path) -> None:
    _store(store_path)
    with open_writer(store_path) as writer:
        before = _reads(writer.connection)
    step_back_to_revision_11(store_path)
    connection = apsw.Connection(str(store_path))
    try:
        assert "view_text" not in {
            str(row[1])
            for row in connection.execute("PRAGMA table_info(materialized_transcript_items)")
        }
        connection.execute(  # a body no build can read keeps an unknown view
            "INSERT INTO materialized_transcript_items(session_id, stable_id, position,"
            " created_at_ms, last_changed_at_ms, body_json)"
            " VALUES (?, 'bad', 99, 1, 1, '{\"kind\":\"mystery\"}')",
            (SESSION,),
        )
    finally:
        connection.close()

    with open_writer(store_path) as writer:
        views = _views(writer.connection)
        assert views.pop("bad") == (None, None, None)
        bodies = _bodies_except(writer.connection, "bad")
        assert views == {sid: (*stored_view(bodies[sid]), 1) for sid, _ in _ITEMS}
        writer.connection.execute(
            "DELETE FROM materialized_transcript_items WHERE stable_id = 'bad'"
        )
        assert _reads(writer.connection) == before


def _bodies_except(connection: apsw.Connection, stable_id: str) -> dict[str, TranscriptBody]:
    rows = connection.execute(
        "SELECT stable_id, body_json FROM materialized_transcript_items WHERE stable_id != ?",
        (stable_id,),
    )
    return {str(sid): decode_json(str(body), TranscriptBody) for sid, body in rows}  # type: ignore[arg-type]


def test_a_damaged_stored_role_or_text_is_refused_naming_where(store_path: Path) -> None:
    """A role edited past this build (an operator's sqlite3 shell) never reaches a page (the
    table is STRICT, so the text is always text)."""
    _store(store_path)
    with open_writer(store_path) as writer:
        for role, text in (("bogus", "x"), ("", "x"), ("System", "x")):
            writer.connection.execute(
                "UPDATE materialized_transcript_items SET view_role = ?, view_text = ?"
                " WHERE stable_id = 'system:1'",
                (role, text),
            )
            for read in (
                lambda: load_transcript_page(writer.connection, SESSION, 0, limit=100),
                lambda: load_raw_transcript_page(writer.connection, SESSION, 0, limit=100),
                lambda: load_transcript_history(writer.connection, SESSION),
            ):
                with pytest.raises(
                    ProjectionError, match=r"position 4: its stored role .* is no role word"
                ) as info:
                    read()
                assert info.value.session_id == SESSION


@pytest.mark.parametrize(
    "body", ['{"kind":"system","text":"x",}', '{"kind":"system","text":"open}', "[1, 2]", "7"]
)
def test_a_body_edited_past_json_fails_the_raw_page_as_the_typed_one(
    store_path: Path, body: str
) -> None:
    """Past the table's CHECK (an operator's sqlite3 shell): the raw page never passes a
    body that is not one JSON object through; it refuses, naming the item, as the typed
    page does."""
    _store(store_path)
    with open_writer(store_path) as writer:
        db = writer.connection
        db.execute("PRAGMA ignore_check_constraints = ON")
        db.execute(
            "UPDATE materialized_transcript_items SET body_json = ? WHERE stable_id = 'system:1'",
            (body,),
        )
        db.execute("PRAGMA ignore_check_constraints = OFF")
        errors = []
        for read in (load_transcript_page, load_raw_transcript_page):
            with pytest.raises(ProjectionError, match="system:1") as info:
                read(db, SESSION, 0, limit=100)
            errors.append(type(info.value))
            assert info.value.session_id == SESSION
        assert errors[0] is errors[1]


@pytest.mark.parametrize("count", [2**63 - 1, -(2**63), 1_000_000_000])
def test_a_hand_edited_write_count_never_blocks_the_next_write(
    store_path: Path, count: int
) -> None:
    """(Found by a review.) A ``view_writes`` edited to the largest integer made the next
    write's count overflow into a REAL the STRICT column refuses, so every later page
    touching the item failed; the count wraps instead, and the view is written."""
    _store(store_path)
    with open_writer(store_path) as writer:
        db = writer.connection
        db.execute(
            "UPDATE materialized_transcript_items SET view_writes = ? WHERE stable_id = 'system:1'",
            (count,),
        )
        _write(db, [_item(4, "system:1", SystemBody(text="rewritten"))])
        role, text, writes = _views(db)["system:1"]
        assert (role, text) == ("system", "rewritten")
        assert writes != count
        page = load_transcript_page(db, SESSION, 0, limit=100)
        assert page is not None
        assert [item.text for item in page.items if item.stable_id == "system:1"] == ["rewritten"]


def _edit_bodies(db: apsw.Connection, bodies: dict[str, str | bytes]) -> None:
    """Write ``bodies`` (by stable id) past the table's CHECK, keeping the stored views
    (as an operator's sqlite3 shell can)."""
    db.execute("PRAGMA ignore_check_constraints = ON")
    for stable_id, body in bodies.items():
        value = body if isinstance(body, str) else f"CAST(x'{body.hex()}' AS TEXT)"
        db.execute(
            f"UPDATE materialized_transcript_items SET body_json = {'?' if isinstance(body, str) else value},"
            " view_writes = view_writes + 1 WHERE stable_id = ?",
            (body, stable_id) if isinstance(body, str) else (stable_id,),
        )
    db.execute("PRAGMA ignore_check_constraints = OFF")


@pytest.mark.parametrize(
    ("bodies", "refused"),
    [
        # Neither is JSON alone; joined with a comma they made a page of two objects.
        (
            {
                "user:1": '{"kind":"user","content":[]},{"kind":"user","content":[],"x":"',
                "agent:a": '"}',
            },
            ProjectionError,
        ),
        (
            {"system:1": '{"kind":"system","text":' + "[" * 100_000 + "]" * 100_000 + "}"},
            ProjectionError,
        ),
        ({"system:1": b'{"kind":"system","text":"\xff"}'}, InvalidInput),
    ],
    ids=["bodies-that-join-into-json", "nested-past-the-decoder", "not-utf-8"],
)
def test_a_hostile_body_is_refused_by_both_pages(
    store_path: Path, bodies: dict[str, str | bytes], refused: type[Exception]
) -> None:
    """(Found by a hostile probe.) Bodies that are JSON only together, nested past the
    decoder's depth, or not UTF-8: both the typed and the raw page refuse them with the
    same relaystore error, never a made-up body, a RecursionError or a UnicodeDecodeError."""
    _store(store_path)
    with open_writer(store_path) as writer:
        db = writer.connection
        _edit_bodies(db, bodies)
        for read in (load_transcript_page, load_raw_transcript_page):
            with pytest.raises(refused):
                read(db, SESSION, 0, limit=100)
