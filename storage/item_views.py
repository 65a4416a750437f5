"""Each transcript item's stored role and text: the columns, and filling them.

Schema revision 12 keeps beside every item's body its role and flattened text
(``view_role``, ``view_text``), so a transcript page, history page, turn summary or
title reads them instead of flattening every body. This module owns what those columns
hold and how they are written: :func:`stored_view` (the domain's
:func:`~relaystore.domain.transcript_views.item_role` and
:func:`~relaystore.domain.transcript_views.item_text` of a body: the rule stays in the
domain, every write takes it from here), :data:`VIEW_WRITTEN` (the assignment that tells
this build's writes from an older build's), :func:`fill_item_views` (the revision-12
step's backfill) and :func:`fill_search_index` (the revision-13 step's: the full-text
index of ``view_text``, which the store's triggers keep from then on, see
:data:`~relaystore.storage.schema_ddl.SEARCH_DDL`).

Guarantees: a write that stores a body stores its view in the same statement; a body
changed without its view (an older build's write) has it forgotten by the store's
trigger (NULL: unknown, read from the body). It reads no page and decides nothing about
one: :mod:`relaystore.storage.reads.transcript` reads the columns.
"""

from __future__ import annotations

import apsw
import msgspec

from ..domain.materialized import TranscriptBody
from ..domain.roles import TranscriptRole
from ..domain.transcript_views import item_role, item_text
from .stored_columns import TRANSCRIPT_BODY

__all__ = ["VIEW_WRITTEN", "fill_item_views", "fill_search_index", "stored_view"]

VIEW_WRITTEN = "view_writes = COALESCE(view_writes, 0) % 1000000000 + 1"
"""The assignment every write of an item's ``view_role`` and ``view_text`` carries: it
makes ``view_writes`` differ from the value before, so the store's trigger
``materialized_transcript_view_stale`` forgets the view only when an update changed the
body without it. It counts modulo a billion, so no value (one edited by hand to the
largest integer) makes it overflow into a REAL the STRICT column refuses."""

_FILL_BATCH = 1024
"""Items :func:`fill_item_views` flattens per statement."""


def stored_view(body: TranscriptBody) -> tuple[TranscriptRole, str]:
    """The ``view_role`` and ``view_text`` of an item holding ``body``: the domain's
    role and flattened text of it."""
    return item_role(body), item_text(body)


def fill_item_views(connection: apsw.Connection) -> None:
    """Write every stored item's role and text, ``_FILL_BATCH`` rows at a time, inside
    the caller's transaction (the revision-12 step), with the rule new writes use. A
    body that does not decode keeps NULL (unknown): a read of it refuses it as before."""
    after = 0
    while True:
        rows = connection.execute(
            "SELECT rowid, body_json FROM materialized_transcript_items WHERE rowid > ?"
            " ORDER BY rowid LIMIT ?",
            (after, _FILL_BATCH),
        ).fetchall()
        if not rows:
            return
        views: list[tuple[str, str, int]] = []
        for rowid, body_json in rows:
            try:
                body = TRANSCRIPT_BODY.decode(str(body_json))
            except msgspec.DecodeError:
                continue
            role, text = stored_view(body)
            views.append((role, text, int(rowid)))  # type: ignore[arg-type]
        connection.executemany(
            "UPDATE materialized_transcript_items SET view_role = ?, view_text = ?,"
            " view_writes = 1 WHERE rowid = ?",
            views,
        )
        after = int(rows[-1][0])  # type: ignore[arg-type]


def fill_search_index(connection: apsw.Connection) -> None:
    """Index every stored item whose text is known, inside the caller's transaction (the
    revision-13 step): number them in the order they were created, then have FTS5 read
    their text through its content view (``'rebuild'``). From then on the store's
    triggers keep the index with every write."""
    connection.execute(
        "INSERT OR IGNORE INTO transcript_search_keys(session_id, stable_id)"
        " SELECT session_id, stable_id FROM materialized_transcript_items"
        " WHERE view_text IS NOT NULL ORDER BY created_at_ms, rowid"
    )
    connection.execute("INSERT INTO transcript_search(transcript_search) VALUES ('rebuild')")
