"""Searching transcript text (schema revision 13): the index the store's triggers keep.

What a user relies on: every item written is found by its words, with where it is, its
role and a snippet with the matches marked; a changed item by its new text only; a
deleted one not at all (whoever wrote the change: this build, retention, an older
build, a deletion's cascade); a revision-12 store is indexed when it is migrated; a
query FTS5 cannot run is refused naming the field; pages follow their cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from relaystore.domain.errors import InvalidInput
from relaystore.domain.materialized import (
    AgentBody,
    MaterializedSessionMutation,
    SystemBody,
    ToolBody,
    TranscriptBody,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
    UserBody,
)
from relaystore.domain.search import SearchTranscripts, SnippetPart
from relaystore.domain.validation import validate_message
from relaystore.storage.connection import WriterConnection, open_reader, open_writer
from relaystore.storage.maintenance import vacuum_store
from relaystore.storage.projection import commit_page
from relaystore.storage.reads.search import search_transcripts
from relaystore.storage.retention import compact_transcript
from relaystore.storage.sessions import delete_session, save_session
from tests.storage.builders import running_session
from tests.storage.legacy import step_back_to_revision_12
from tests.storage.pages import SESSION, add, new_page

OTHER = "session-2"


def _text(text: str) -> UserBody:
    return UserBody(content=[{"type": "text", "text": text}])


def _item(position: int, stable_id: str, body: TranscriptBody, at_ms: int = 10) -> TranscriptItem:
    return TranscriptItem(
        stable_id=stable_id,
        position=position,
        latest_content_event_ordinal=position if isinstance(body, AgentBody) else None,
        created_at_ms=10,
        last_changed_at_ms=at_ms,
        body=body,
    )


def _write(
    connection: apsw.Connection,
    session_id: str,
    items: list[TranscriptItem],
    deletes: tuple[str, ...] = (),
) -> None:
    page = new_page(connection, session_id)
    for item in items:
        add(page, MaterializedSessionMutation(transcript=[TranscriptUpsert(item)]))
    if deletes:
        removals: list[TranscriptUpsert | TranscriptRemove] = [TranscriptRemove(d) for d in deletes]
        add(page, MaterializedSessionMutation(transcript=removals))
    commit_page(connection, session_id, page)


def _found(connection: apsw.Connection, query: str, **wanted: object) -> list[tuple[str, str]]:
    page = search_transcripts(connection, query, **wanted)  # type: ignore[arg-type]
    return [(hit.session_id, hit.stable_id) for hit in page.hits]


def _integrity(connection: apsw.Connection) -> None:
    """FTS5's own check: the index holds exactly what its content (the items) says."""
    connection.execute(
        "INSERT INTO transcript_search(transcript_search) VALUES ('integrity-check')"
    )
    keys = connection.execute("SELECT count(*) FROM transcript_search_keys").get
    known = connection.execute(
        "SELECT count(*) FROM materialized_transcript_items WHERE view_text IS NOT NULL"
    ).get
    assert keys == known


@pytest.fixture
def searched(store_path: Path) -> Iterator[WriterConnection]:
    with open_writer(store_path) as opened:
        save_session(opened.connection, running_session(SESSION))
        save_session(opened.connection, running_session(OTHER))
        for item in (  # one page each: the index numbers them in this order
            _item(1, "user:1", _text("Why does the build fail on a clean checkout?")),
            _item(
                2,
                "agent:1",
                AgentBody(
                    chunks=[
                        {"content": {"type": "text", "text": "The build fails: a missing crate."}}
                    ]
                ),
            ),
            _item(3, "tool:1", ToolBody(call={"title": "Run cargo build"})),
        ):
            _write(opened.connection, SESSION, [item])
        _write(opened.connection, OTHER, [_item(1, "user:1", _text("Résumé the build log"))])
        yield opened


def test_every_written_item_is_found_by_its_words_newest_first(searched: WriterConnection) -> None:
    connection = searched.connection
    assert _found(connection, "build") == [
        (OTHER, "user:1"),
        (SESSION, "tool:1"),
        (SESSION, "agent:1"),
        (SESSION, "user:1"),
    ]
    page = search_transcripts(connection, "missing crate")
    (hit,) = page.hits
    assert (hit.session_id, hit.stable_id, hit.role, hit.seq, hit.position) == (
        SESSION,
        "agent:1",
        "agent",
        2,
        2,
    )
    assert hit.snippet == "The build fails: a missing crate."
    assert hit.parts == [
        SnippetPart(text="The build fails: a "),
        SnippetPart(text="missing", match=True),
        SnippetPart(text=" "),
        SnippetPart(text="crate", match=True),
        SnippetPart(text="."),
    ]
    assert _found(connection, "resume") == [(OTHER, "user:1")]  # case and accents ignored
    assert _found(connection, "buil*", session_id=SESSION, role="tool") == [(SESSION, "tool:1")]
    assert _found(connection, '"clean checkout" OR crate', session_id=SESSION) == [
        (SESSION, "agent:1"),
        (SESSION, "user:1"),
    ]
    assert _found(connection, "build", session_id="nobody") == []
    _integrity(connection)


def test_pages_follow_their_cursor_to_the_last_hit(searched: WriterConnection) -> None:
    seen: list[tuple[str, str]] = []
    cursor = None
    while True:
        page = search_transcripts(searched.connection, "build", limit=1, cursor=cursor)
        seen += [(hit.session_id, hit.stable_id) for hit in page.hits]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == _found(searched.connection, "build")
    assert len(seen) == 4


def test_a_changed_item_is_found_by_its_new_text_and_a_deleted_one_not_at_all(
    searched: WriterConnection,
) -> None:
    connection = searched.connection
    _write(connection, SESSION, [_item(1, "user:1", _text("Why is the linker slow?"), at_ms=20)])
    assert _found(connection, "checkout") == []
    assert _found(connection, "linker") == [(SESSION, "user:1")]
    _write(connection, SESSION, [], deletes=("agent:1",))
    assert _found(connection, "crate") == []
    _integrity(connection)
    delete_session(connection, OTHER)  # the items go by the cascade
    assert _found(connection, "build") == [(SESSION, "tool:1")]
    _integrity(connection)


def test_an_older_builds_body_update_leaves_the_item_unfound_until_rewritten(
    searched: WriterConnection,
) -> None:
    """An older build changes a body without its view: the stale trigger forgets the
    view, and the index forgets the item with it (it never shows a text the item lost)."""
    connection = searched.connection
    connection.execute(
        "UPDATE materialized_transcript_items SET body_json = ?"
        " WHERE session_id = ? AND stable_id = 'user:1'",
        ('{"kind":"user","content":[{"type":"text","text":"other words"}]}', SESSION),
    )
    assert _found(connection, "checkout") == []
    _integrity(connection)
    _write(connection, SESSION, [_item(1, "user:1", _text("other words"), at_ms=30)])
    assert _found(connection, "other") == [(SESSION, "user:1")]
    _integrity(connection)


def test_retention_and_vacuum_keep_the_index_true(searched: WriterConnection) -> None:
    connection = searched.connection
    _write(connection, SESSION, [_item(4, "system:1", SystemBody(text="checkpoint saved"))])
    compact_transcript(connection, SESSION, frontier=10)
    _integrity(connection)
    vacuum_store(connection)
    _integrity(connection)
    assert _found(connection, "checkpoint") == [(SESSION, "system:1")]
    assert _found(connection, "crate") == [(SESSION, "agent:1")]


@pytest.mark.parametrize(
    "query", ['"unterminated', "a AND", "NEAR(a b", "*", "nosuchcolumn: x", "AND", ")("]
)
def test_a_query_fts5_cannot_run_is_refused_naming_the_field(
    searched: WriterConnection, query: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        search_transcripts(searched.connection, query)
    assert str(caught.value).startswith("SearchTranscripts.query: ")
    assert "SQLError" not in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"query": " "}, "query"),
        ({"query": "x" * 1001}, "query"),
        ({"query": "a\x00b"}, "query"),
        ({"query": "a", "limit": 0}, "limit"),
        ({"query": "a", "cursor": 0}, "cursor"),
        ({"query": "a", "role": "boss"}, "role"),
        ({"query": "a", "session_id": "../x"}, "session_id"),
        ({"query": 1}, "query"),
    ],
)
def test_every_field_is_checked_at_the_boundary(fields: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_message(SearchTranscripts(**fields))  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"SearchTranscripts.{named}")


def test_a_large_limit_gives_the_ceiling(searched: WriterConnection) -> None:
    validate_message(SearchTranscripts(query="a", limit=10**9))
    assert len(search_transcripts(searched.connection, "build", limit=10**9).hits) == 4


def test_a_revision_12_store_is_indexed_when_migrated(
    store_path: Path, searched: WriterConnection
) -> None:
    before = search_transcripts(searched.connection, "build")
    searched.close()
    step_back_to_revision_12(store_path)
    with open_writer(store_path) as migrated:
        assert search_transcripts(migrated.connection, "build") == before
        _integrity(migrated.connection)
    reader = open_reader(store_path)
    try:
        assert search_transcripts(reader, "crate").hits[0].stable_id == "agent:1"
    finally:
        reader.close()


def test_a_plain_query_matches_its_words_as_written_and_is_never_refused(
    searched: WriterConnection,
) -> None:
    """What a person types into a search box (``cargo-build``, ``it's``, a stray
    quote or operator) is words, not FTS5 syntax."""
    connection = searched.connection
    _write(connection, SESSION, [_item(4, "user:2", _text("don't run cargo-build AND stop"))])
    for query in ("cargo-build", "don't", 'AND "stop', "NOT", "a:b", "-", "'"):
        search_transcripts(connection, query, plain=True)  # never refused
    assert _found(connection, "cargo-build", plain=True) == [  # the phrase "cargo build"
        (SESSION, "user:2"),
        (SESSION, "tool:1"),
    ]
    assert _found(connection, "don't STOP", plain=True) == [(SESSION, "user:2")]
    assert _found(connection, "don't missing", plain=True) == []  # every word must match
    with pytest.raises(InvalidInput):
        search_transcripts(connection, "don't")
