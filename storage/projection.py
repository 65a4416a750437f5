"""Writing a page of a session's projection: one coalesced delta, one transaction.

A projector folds the events of a page into a :class:`~relaystore.domain.projection.page.PageDelta`
(pure domain code: the chain rule, the mutation rules and the coalescing live there);
:func:`commit_page` writes it. This module holds no rule of its own: where it checks the
page against stored rows it calls :mod:`relaystore.domain.projection.integrity`.

Guarantees:

* Compare-and-set on the frontier. The page is written only when the stored frontier is
  the page's start; a store already at or past the page's end writes nothing and reports
  0 events applied (idempotent re-delivery); any other stored frontier raises
  :class:`RelayChainError` (:meth:`PageDelta.write_needed`).
* All or nothing. Frontier, projection rows, the page's API events and its relay log
  row commit together;
  any error rolls the whole page back, so no ``seq`` is
  used up by a failed page.
* Coalescing. Each field and transcript item the page touches is written once, with its
  last value; intermediate frontiers are never persisted.
* Only a committed page may be acknowledged to the relay.
"""

from __future__ import annotations

import apsw

from ..domain.chain import checked_frontier
from ..domain.errors import (
    ProjectionError,
    RelayChainError,
    RelayLogUnavailable,
    UnknownSession,
)
from ..domain.materialized import MaterializedQueuedPrompt, TranscriptRemove, _Unset
from ..domain.projection.integrity import StoredItem, check_item_change
from ..domain.projection.page import PageDelta, PendingItem
from ..domain.relay.payloads import RelayCursor
from ..domain.seed import seed_needed
from ..domain.wire import encode
from .events import insert_api_events
from .item_views import VIEW_WRITTEN, stored_view
from .materialized import execution_columns, load_frontier, stored_facts
from .relay_log import write_log_page
from .transaction import transaction

__all__ = ["commit_page", "seed_projection"]


def commit_page(
    connection: apsw.Connection,
    session_id: str,
    page: PageDelta,
    *,
    log: bool = True,
    logged: bool = False,
) -> tuple[RelayCursor, int]:
    """Write ``page`` to ``session_id``'s projection: the stored frontier after it, and
    how many of the page's events it applied (0 when the store already held the page).

    Runs in one transaction (a savepoint when the caller already opened one). Raises
    :class:`UnknownSession` when the session has no projection row (save the session
    first), :class:`RelayChainError` when the stored frontier is neither the page's
    start nor at or past its end, and :class:`ProjectionError` when the stored frontier
    is corrupt, a stored transcript item would break an item-change rule, or the store
    refuses a row.

    With ``log`` (the store's ``relay_log`` option) the page's events are kept in the
    relay log in the same transaction (:func:`storage.relay_log.write_log_page`);
    ``logged`` says they are in it already (a reprojection writes what it read). A page
    that kept lines without projecting them (the session is behind its log) is refused
    with :class:`RelayLogUnavailable` when neither holds: those lines would be nowhere.
    """
    if page.session_id != session_id:
        raise ProjectionError(
            f"a page of session {page.session_id} cannot be written to session {session_id}",
            session_id=session_id,
        )
    if page.held and not (log or logged):
        raise RelayLogUnavailable(
            f"cannot keep {page.held} relay line(s) of session {session_id} from ordinal "
            f"{page.end.ordinal - page.held + 1} without projecting them: this store's relay "
            "log is off",
            session_id=session_id,
            ordinal=page.end.ordinal - page.held + 1,
        )
    with transaction(connection, f"commit a projection page to session {session_id}"):
        stored = load_frontier(connection, session_id)
        if stored is None:
            raise UnknownSession(session_id)
        try:
            checked_frontier(stored.ordinal, stored.digest, session_id=session_id)
        except RelayChainError as exc:
            raise ProjectionError(
                f"the stored projection is corrupt: {exc.detail}", session_id=session_id
            ) from exc
        if not page.write_needed(stored) or page.applied == 0:
            return stored, 0
        try:
            with connection:  # a savepoint, so a refused row is reported as the page's error
                _write_transcript(connection, session_id, page.transcript)
                if page.queued_prompts is not None:
                    _write_queue(connection, session_id, page)
                _write_side_tables(connection, session_id, page)
                _write_session_row(connection, session_id, page)
                if log:
                    write_log_page(connection, session_id, page)
        except apsw.ConstraintError as exc:
            raise ProjectionError(
                f"the store refused the projection page ending at ordinal {page.end.ordinal}: "
                f"{exc}",
                session_id=session_id,
                ordinal=page.end.ordinal,
            ) from exc
    return page.end, page.applied


def _text(value: object) -> str:
    """Compact serde-style JSON text of ``value`` (the store's TEXT columns)."""
    return encode(value).decode()


def _stored_items(
    connection: apsw.Connection, session_id: str, stable_ids: list[str]
) -> dict[str, StoredItem]:
    rows = connection.execute(
        "SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, "
        "last_changed_at_ms FROM materialized_transcript_items "
        "WHERE session_id = ? AND stable_id IN (SELECT value FROM json_each(?))",
        (session_id, _text(stable_ids)),
    )
    return {
        sid: StoredItem(position, latest, created, changed)
        for sid, position, latest, created, changed in rows
    }


def _write_transcript(
    connection: apsw.Connection, session_id: str, changes: dict[str, PendingItem]
) -> None:
    if not changes:
        return
    replaced = [
        sid
        for sid, pending in changes.items()
        if not isinstance(pending.change, TranscriptRemove) and not pending.remove_first
    ]
    stored = _stored_items(connection, session_id, replaced) if replaced else {}
    deletes: list[tuple[str, str]] = []
    updates: list[tuple[int | None, int, str, str, str, str, str, str]] = []
    inserts: list[tuple[str, str, int, int | None, int, int, str, str, str, str]] = []
    for sid in sorted(changes):
        pending = changes[sid]
        if isinstance(pending.change, TranscriptRemove):
            deletes.append((session_id, sid))
            continue
        item = pending.change.item
        body = _text(item.body)
        facts = stored_facts(item, pending.ordinal)
        role, text = stored_view(item.body)
        if pending.remove_first:
            deletes.append((session_id, sid))
        elif sid in stored:
            check_item_change(stored[sid], item, session_id=session_id, ordinal=pending.ordinal)
            updates.append(
                (
                    item.latest_content_event_ordinal,
                    item.last_changed_at_ms,
                    body,
                    facts,
                    role,
                    text,
                    session_id,
                    sid,
                )
            )
            continue
        inserts.append(
            (
                session_id,
                sid,
                item.position,
                item.latest_content_event_ordinal,
                item.created_at_ms,
                item.last_changed_at_ms,
                body,
                facts,
                role,
                text,
            )
        )
    if deletes:
        connection.executemany(
            "DELETE FROM materialized_transcript_items WHERE session_id = ? AND stable_id = ?",
            deletes,
        )
    if updates:
        connection.executemany(
            "UPDATE materialized_transcript_items SET latest_content_event_ordinal = ?, "
            "last_changed_at_ms = ?, body_json = ?, index_facts = ?, view_role = ?, "
            f"view_text = ?, {VIEW_WRITTEN} WHERE session_id = ? AND stable_id = ?",
            updates,
        )
    if inserts:
        connection.executemany(
            "INSERT INTO materialized_transcript_items(session_id, stable_id, position, "
            "latest_content_event_ordinal, created_at_ms, last_changed_at_ms, body_json, "
            "index_facts, view_role, view_text, view_writes)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
            inserts,
        )


def _write_queue(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    _replace_queue(connection, session_id, page.queued_prompts or [])


def _replace_queue(
    connection: apsw.Connection, session_id: str, queue: list[MaterializedQueuedPrompt]
) -> None:
    connection.execute(
        "DELETE FROM materialized_queued_prompts WHERE session_id = ?", (session_id,)
    )
    connection.executemany(
        "INSERT INTO materialized_queued_prompts(session_id, ordinal, command_id, "
        "kind_json, content_json, queued_at_ms, accepted_ordinal) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                session_id,
                index,
                entry.command_id,
                '"prompt"' if entry.kind is None else _text(entry.kind),
                _text(entry.content),
                entry.queued_at_ms,
                entry.accepted_ordinal,
            )
            for index, entry in enumerate(queue)
        ],
    )


def seed_projection(
    connection: apsw.Connection,
    session_id: str,
    start: RelayCursor,
    queued_prompts: list[MaterializedQueuedPrompt],
    source: str,
) -> RelayCursor:
    """Start an empty projection at ``start`` with ``queued_prompts``; return the frontier.

    One transaction. A projection already at or past ``start`` is left as it is (a second
    replay of a seeded worker root); one that holds events before ``start`` cannot
    continue there and raises :class:`RelayChainError` (``GAP``)
    (:func:`relaystore.domain.seed.seed_needed` decides). Raises
    :class:`UnknownSession` when the session has no projection row.
    """
    with transaction(connection, f"seed the projection of session {session_id}"):
        stored = load_frontier(connection, session_id)
        if stored is None:
            raise UnknownSession(session_id)
        if not seed_needed(stored, start, session_id=session_id):
            return stored
        connection.execute(
            "UPDATE materialized_sessions SET applied_event_ordinal = ?, "
            "applied_event_digest = ? WHERE session_id = ?",
            (start.ordinal, start.digest, session_id),
        )
        _replace_queue(connection, session_id, queued_prompts)
        connection.execute(
            "INSERT OR REPLACE INTO materialized_history_start(session_id, first_ordinal, source) "
            "VALUES (?, ?, ?)",
            (session_id, start.ordinal + 1, source),
        )
        if source == "seed":  # what a rebuild from the log starts from
            connection.execute(
                "INSERT OR REPLACE INTO materialized_seeds(session_id, start_ordinal, "
                "start_digest, queued_prompts_json) VALUES (?, ?, ?, ?)",
                (session_id, start.ordinal, start.digest, _text(queued_prompts)),
            )
    return start


def _write_side_tables(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    insert_api_events(connection, page.api_events)
    if page.finished_turns:
        connection.executemany(
            "INSERT OR REPLACE INTO session_turn_usage(session_id, command_id, "
            "completed_ordinal, turn_start_position, body) VALUES (?, ?, ?, ?, ?)",
            [
                (
                    session_id,
                    turn.command_id,
                    turn.completed_ordinal,
                    turn.turn_start_position,
                    _text(turn),
                )
                for turn in page.finished_turns
            ],
        )
    if page.provider_cost is not None:
        connection.execute(
            "INSERT OR REPLACE INTO session_provider_cost(session_id, body) VALUES (?, ?)",
            (session_id, _text(page.provider_cost)),
        )
    if page.config_results:
        connection.executemany(
            "INSERT OR REPLACE INTO api_config_results(session_id, command_id, error) "
            "VALUES (?, ?, ?)",
            [(session_id, cid, error) for cid, error in page.config_results.items()],
        )


def _write_behind(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    """Keep the session's behind marker as the page left it (a page that kept lines
    without projecting them)."""
    behind = page.behind
    if behind is None:
        return
    connection.execute(
        "INSERT INTO projection_behind(session_id, ordinal, kind, position, path, "
        "kept_ordinal, kept_digest) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(session_id) DO UPDATE SET kept_ordinal = excluded.kept_ordinal, "
        "kept_digest = excluded.kept_digest",
        (
            session_id,
            behind.ordinal,
            behind.kind,
            behind.position,
            behind.path,
            behind.kept_ordinal,
            behind.kept_digest,
        ),
    )


def _write_session_row(connection: apsw.Connection, session_id: str, page: PageDelta) -> None:
    _write_behind(connection, session_id, page)
    projected = page.projected_end
    if projected is None:
        return  # the page only kept lines: the projection's row is as it was
    sets: list[str] = []
    params: dict[str, object] = {
        "session_id": session_id,
        "activity": page.last_activity_at_ms,
        "ordinal": projected.ordinal,
        "digest": projected.digest,
    }
    if page.execution is not None:
        params["state"], params["started"] = execution_columns(page.execution)
        sets += ["execution_state = :state", "running_started_at_ms = :started"]
    if not isinstance(page.session_title, _Unset):
        params["title"] = page.session_title
        sets.append("session_title = :title")
    if page.configuration is not None:
        params["configuration"] = _text(page.configuration)
        sets.append("configuration_json = :configuration")
    if page.pending_elicitations is not None:
        params["elicitations"] = _text(page.pending_elicitations)
        sets.append("pending_elicitations_json = :elicitations")
    if not isinstance(page.active_turn, _Unset):
        turn = page.active_turn
        params["active_turn"] = None if turn is None else _text(turn)
        sets.append("active_turn_json = :active_turn")
    if page.last_turn_outcome is not None:
        params["outcome"] = _text(page.last_turn_outcome)
        sets.append("last_turn_outcome_json = :outcome")
    elif page.clear_turn_outcome:
        sets.append("last_turn_outcome_json = NULL")
    sets += [
        "last_activity_at_ms = CASE WHEN :activity IS NULL THEN last_activity_at_ms "
        "WHEN last_activity_at_ms IS NULL OR last_activity_at_ms < :activity THEN :activity "
        "ELSE last_activity_at_ms END",
        "applied_event_ordinal = :ordinal",
        "applied_event_digest = :digest",
    ]
    connection.execute(
        f"UPDATE materialized_sessions SET {', '.join(sets)} WHERE session_id = :session_id",
        params,
    )
