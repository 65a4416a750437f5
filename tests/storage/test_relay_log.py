"""The relay log: each committed page's journal lines, kept in the page's transaction.

A page and its log row commit or roll back together (the log's frontier is the
projection's), the kept bytes are the journal lines (digests verify from them), the
option turns the log off, and only a checkpoint-covered prefix may be pruned.
"""

from __future__ import annotations

import apsw
import pytest

from relaystore.domain.chain import GENESIS
from relaystore.domain.errors import InvalidInput, ProjectionError, RelayLogUnavailable
from relaystore.domain.materialized import MaterializedSessionMutation, ProjectionBehind
from relaystore.domain.projection.page import PageDelta
from relaystore.domain.relay import encode_relay_event
from relaystore.domain.relay.log import unpack_lines
from relaystore.storage.materialized import load_frontier, load_materialized_session
from relaystore.storage.projection import commit_page
from relaystore.storage.relay_log import load_relay_log, prune_relay_log
from relaystore.storage.reproject import commit_reprojection
from tests.storage.pages import SESSION, add, new_page
from tests.storage.test_projection_pages import chain


def log_rows(connection: apsw.Connection) -> list[tuple[int, int]]:
    return [
        (int(first), int(last))
        for first, last in connection.execute(
            "SELECT first_ordinal, last_ordinal FROM relay_log_pages ORDER BY first_ordinal"
        )
    ]


def test_a_committed_page_keeps_its_events_as_their_journal_lines(
    store: apsw.Connection,
) -> None:
    page = new_page(store)
    for _ in range(3):
        add(page, MaterializedSessionMutation(last_activity_at_ms=5))
    events = list(page.logged)

    commit_page(store, SESSION, page)

    stored = load_relay_log(store, SESSION)
    assert stored is not None
    assert [(first, last) for first, last, _ in stored.pages] == [(1, 3)]
    lines = unpack_lines(stored.pages[0][2], session_id=SESSION, first_ordinal=1)
    assert lines == [encode_relay_event(event) for event in events]
    assert stored.coverage.complete


def test_a_failed_page_leaves_no_log_row(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation()])
    with pytest.raises(ProjectionError, match="injected rollback"):
        chain(store, [MaterializedSessionMutation(), MaterializedSessionMutation()], fail=True)

    assert log_rows(store) == [(1, 1)]
    frontier = load_frontier(store, SESSION)
    assert frontier is not None
    assert frontier.ordinal == 1


def test_a_refused_log_row_rolls_the_page_back(store: apsw.Connection) -> None:
    # A stray row where the page's log row goes: the log insert fails, so must the page.
    store.execute(
        "INSERT INTO relay_log_pages(session_id, first_ordinal, last_ordinal, raw_bytes, lines)"
        " VALUES (?, 1, 1, 0, x'')",
        (SESSION,),
    )
    with pytest.raises(ProjectionError, match="refused the projection page"):
        chain(store, [MaterializedSessionMutation(session_title="T")])

    frontier = load_frontier(store, SESSION)
    assert frontier is not None
    assert frontier.ordinal == 0


def test_a_page_committed_without_the_log_leaves_a_hole_the_coverage_names(
    store: apsw.Connection,
) -> None:
    chain(store, [MaterializedSessionMutation()])
    page = new_page(store)
    add(page, MaterializedSessionMutation())
    commit_page(store, SESSION, page, log=False)
    chain(store, [MaterializedSessionMutation()])

    assert log_rows(store) == [(1, 1), (3, 3)]
    stored = load_relay_log(store, SESSION)
    assert stored is not None
    coverage = stored.coverage
    assert not coverage.complete
    assert coverage.hole_after == 1
    assert "hole after ordinal 1" in str(coverage.refusal(SESSION, "reproject"))


def _checkpoint(connection: apsw.Connection, frontier: int) -> None:
    connection.execute(
        "INSERT OR REPLACE INTO session_checkpoints(session_id, archive_path, sha256, "
        "created_at, event_frontier) VALUES (?, 'a.tar', ?, '2026-01-01T00:00:00Z', ?)",
        (SESSION, "0" * 64, frontier),
    )


def test_pruning_needs_a_checkpoint_that_covers_the_prefix(store: apsw.Connection) -> None:
    for _ in range(3):
        chain(store, [MaterializedSessionMutation(), MaterializedSessionMutation()])
    assert log_rows(store) == [(1, 2), (3, 4), (5, 6)]
    store.execute("DELETE FROM session_checkpoints WHERE session_id = ?", (SESSION,))

    with pytest.raises(RelayLogUnavailable, match="no verified checkpoint"):
        prune_relay_log(store, SESSION, 2)
    _checkpoint(store, 3)
    with pytest.raises(RelayLogUnavailable, match="covers events only through ordinal 3"):
        prune_relay_log(store, SESSION, 4)
    with pytest.raises(InvalidInput):
        prune_relay_log(store, SESSION, 0)
    assert log_rows(store) == [(1, 2), (3, 4), (5, 6)]

    report = prune_relay_log(store, SESSION, 3)  # the page 3..4 straddles 3: it stays

    assert (report.pages_pruned, report.events_pruned, report.log_starts_at) == (1, 2, 3)
    assert log_rows(store) == [(3, 4), (5, 6)]
    stored = load_relay_log(store, SESSION)
    assert stored is not None
    assert not stored.coverage.complete
    assert "starts at ordinal 3" in str(stored.coverage.refusal(SESSION, "reproject"))


def test_a_reprojection_behind_the_store_changes_nothing(store: apsw.Connection) -> None:
    chain(store, [MaterializedSessionMutation(session_title="T")])
    stored = load_relay_log(store, SESSION)
    assert stored is not None
    page = PageDelta.starting_at(SESSION, GENESIS)  # a rebuild that missed ordinal 1
    before = load_materialized_session(store, SESSION)

    with pytest.raises(ProjectionError, match="moved to ordinal 1 while it was reprojected"):
        commit_reprojection(store, SESSION, page)

    assert load_materialized_session(store, SESSION) == before


def _behind_at(ordinal: int, kept: PageDelta) -> ProjectionBehind:
    return ProjectionBehind(
        ordinal=ordinal,
        kind="future_kind",
        position="observation",
        path="$.observation.type",
        kept_ordinal=kept.end.ordinal,
        kept_digest=kept.end.digest,
    )


def test_a_page_that_keeps_lines_unprojected_needs_the_log_and_stores_where_each_stands(
    store: apsw.Connection,
) -> None:
    page = new_page(store)
    add(page, MaterializedSessionMutation(session_title="T"))
    projected = page.end
    draft = new_page(store)
    add(draft, MaterializedSessionMutation())
    add(draft, MaterializedSessionMutation())  # ordinal 2: where the kept lines end
    add(page, MaterializedSessionMutation(behind=_behind_at(2, draft)))
    assert page.end == draft.end  # the same synthetic event: the line kept

    with pytest.raises(RelayLogUnavailable, match="relay log is off"):
        commit_page(store, SESSION, page, log=False)
    frontier = load_frontier(store, SESSION)
    assert frontier is not None
    assert frontier.ordinal == 0  # nothing of the page was written

    commit_page(store, SESSION, page)
    session = load_materialized_session(store, SESSION)
    assert session is not None
    assert session.frontier == projected  # what an older build reads: the last projected
    assert session.projection_behind == _behind_at(2, draft)
    assert load_frontier(store, SESSION) == page.end  # where the chain stands
    assert log_rows(store) == [(1, 2)]
