"""Applying relay events to a session's stored projection, a page at a time.

A page is one transaction: :func:`apply_projection_page` opens it, hands a
:class:`ProjectionPage` to the caller's ``fill``, which feeds it events with
:meth:`ProjectionPage.apply`, then writes the coalesced result and commits.

Guarantees:

* All or nothing. Frontier, projection rows and the page's API events commit together;
  any error (from ``fill``, ``apply`` or the write) rolls the whole page back,
  ``sqlite_sequence`` included, so no ``seq`` is used up by a failed page.
* Idempotent re-delivery. An event at or below the page's frontier (with the frontier's
  digest, at the frontier itself) is ``ALREADY_APPLIED`` and writes nothing.
* Chain safety. A gap, a digest that disagrees with the frontier, or a previous digest
  that does not continue it raises :class:`RelayChainError` (``GAP`` / ``FORK``).
* Coalescing. Several events of a page touching the same field or transcript item
  write it once, with the last value; intermediate frontiers are never persisted.
* Only a committed page may be acknowledged to the relay.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import apsw

from relaystore.domain.api_events import ApiEventData, MaterializedTurn
from relaystore.domain.digests import is_relay_digest, validate_frontier
from relaystore.domain.elicitation import ElicitationRequest
from relaystore.domain.errors import (
    ChainFault,
    InvalidInput,
    ProjectionError,
    RelayChainError,
    UnknownSession,
)
from relaystore.domain.materialized import (
    UNCHANGED,
    MaterializedExecutionState,
    MaterializedQueuedPrompt,
    MaterializedSessionMutation,
    TranscriptItem,
    TranscriptRemove,
    TranscriptUpsert,
    _Unset,
)
from relaystore.domain.outcomes import MaterializedTurnOutcome, ProviderCost
from relaystore.domain.relay import RelayCursor, RelayEvent
from relaystore.domain.wire import JSON, encode
from relaystore.storage.events import insert_api_events
from relaystore.storage.materialized import execution_columns, load_frontier
from relaystore.storage.transaction import transaction

__all__ = [
    "ApplyOutcome",
    "ProjectionPage",
    "apply_projection_event",
    "apply_projection_page",
    "commit_page",
]

T = TypeVar("T")

_MAX_ORDINAL = 2**63 - 1  # SQLite INTEGER


class ApplyOutcome(enum.Enum):
    """What :meth:`ProjectionPage.apply` did with one event."""

    APPLIED = "applied"
    """The event continued the chain; its effects are part of the page."""
    ALREADY_APPLIED = "already_applied"
    """The event is at or below the frontier (a re-delivery); nothing was written."""


@dataclass(slots=True)
class _PendingItem:
    """The last transcript change of one stable id in the page."""

    change: TranscriptUpsert | TranscriptRemove
    remove_first: bool  # a remove came before the final upsert: delete, then insert
    ordinal: int  # the event that made ``change``, for error messages


@dataclass(slots=True)
class _Pending:
    """The page's coalesced writes; ``None`` / ``UNCHANGED`` mean "leave as stored"."""

    last_activity_at_ms: int | None = None
    execution: MaterializedExecutionState | None = None
    session_title: str | _Unset | None = UNCHANGED
    configuration: dict[str, JSON] | None = None
    transcript: dict[str, _PendingItem] = field(default_factory=dict)
    queued_prompts: tuple[int, list[MaterializedQueuedPrompt]] | None = None
    pending_elicitations: list[ElicitationRequest] | None = None
    active_turn: MaterializedTurn | _Unset | None = UNCHANGED
    clear_turn_outcome: bool = False
    last_turn_outcome: MaterializedTurnOutcome | None = None
    finished_turns: list[MaterializedTurnOutcome] = field(default_factory=list)
    config_results: dict[str, str | None] = field(default_factory=dict)
    provider_cost: ProviderCost | None = None
    api_events: list[tuple[str, int, ApiEventData]] = field(default_factory=list)


class ProjectionPage:
    """One page of relay events being applied inside a single write transaction.

    Made by :func:`apply_projection_page`; usable only inside its ``fill``. The page's
    frontier starts at the stored one and advances with every applied event.
    """

    __slots__ = (
        "_closed",
        "_connection",
        "_digest",
        "_dirty",
        "_ordinal",
        "_pending",
        "_session_id",
    )

    def __init__(self, connection: apsw.Connection, session_id: str, frontier: RelayCursor) -> None:
        self._connection = connection
        self._session_id = session_id
        self._ordinal = frontier.ordinal
        self._digest = frontier.digest
        self._pending = _Pending()
        self._dirty = False
        self._closed = False

    @property
    def session_id(self) -> str:
        """The session this page writes."""
        return self._session_id

    @property
    def frontier(self) -> RelayCursor:
        """The last event applied so far: the stored frontier plus this page's events."""
        return RelayCursor(ordinal=self._ordinal, digest=self._digest)

    def apply(
        self,
        ordinal: int,
        previous_digest: str,
        digest: str,
        mutation: MaterializedSessionMutation,
        *,
        recorded_at_ms: int | None = None,
    ) -> ApplyOutcome:
        """Fold the effects of relay event ``ordinal`` into the page.

        ``previous_digest`` is the event's chain link, or ``""`` for an unchained
        (format 2) event, which skips the link check. API events of ``mutation`` are
        recorded at ``mutation.last_activity_at_ms``, else at ``recorded_at_ms``, else 0.

        Checks, in order: ordinal positive; previous digest well formed; digest a valid
        frontier; below the frontier is ``ALREADY_APPLIED``; at the frontier the digest
        must match (else a ``FORK``) and it is ``ALREADY_APPLIED``; anything but the next
        ordinal is a ``GAP``; a previous digest other than the frontier's is a ``FORK``.
        An apply that raises leaves the page as it was.
        """
        if self._closed:
            raise InvalidInput(
                "this projection page is already written; apply events only inside the fill "
                "of apply_projection_page",
                session_id=self._session_id,
                ordinal=ordinal,
            )
        self._check_event(ordinal, previous_digest, digest)
        if ordinal < self._ordinal:
            return ApplyOutcome.ALREADY_APPLIED
        if ordinal == self._ordinal:
            if digest != self._digest:
                raise RelayChainError(
                    ChainFault.FORK,
                    f"relay event digest mismatch: projection has {self._digest}, "
                    f"received {digest}",
                    session_id=self._session_id,
                    ordinal=ordinal,
                )
            return ApplyOutcome.ALREADY_APPLIED
        expected = self._ordinal + 1
        if ordinal != expected:
            raise RelayChainError(
                ChainFault.GAP,
                f"relay event gap: expected ordinal {expected}, received {ordinal}",
                session_id=self._session_id,
                ordinal=ordinal,
            )
        if previous_digest and previous_digest != self._digest:
            raise RelayChainError(
                ChainFault.FORK,
                f"relay event chain diverged before ordinal {ordinal}: projection has "
                f"{self._digest}, event follows {previous_digest}",
                session_id=self._session_id,
                ordinal=ordinal,
            )
        self._check_mutation(ordinal, mutation)
        self._fold(ordinal, mutation, recorded_at_ms)
        self._ordinal, self._digest = ordinal, digest
        self._dirty = True
        return ApplyOutcome.APPLIED

    def flush(self) -> None:
        """Write the page's coalesced changes and its frontier (nothing if none).

        :func:`apply_projection_page` calls this once, after ``fill``; calling it earlier
        persists an intermediate frontier (still inside the page's transaction). A flush
        that raises writes nothing and keeps the pending changes.

        Order: transcript, queue, API events (in apply order), finished-turn usage,
        provider cost, config results, then one update of the session row (execution,
        title, configuration, questions, active turn, last outcome, activity, frontier).
        Raises :class:`ProjectionError` when a transcript item would change its position
        or creation time, move its change time or latest content ordinal backwards, or
        when the queue has a blank or repeated command id.
        """
        if not self._dirty:
            return
        pending = self._pending
        try:
            with self._connection:  # a savepoint: a failed flush writes nothing
                self._write_transcript(pending.transcript)
                if pending.queued_prompts is not None:
                    self._write_queue(*pending.queued_prompts)
                self._write_side_tables(pending)
                self._write_session_row(pending)
        except apsw.ConstraintError as exc:
            raise ProjectionError(
                f"the store refused the projection page ending at ordinal {self._ordinal}: {exc}",
                session_id=self._session_id,
                ordinal=self._ordinal,
            ) from exc
        self._pending = _Pending()
        self._dirty = False

    # -- apply ------------------------------------------------------------------------

    def _check_event(self, ordinal: int, previous_digest: str, digest: str) -> None:
        where: dict[str, Any] = {"session_id": self._session_id, "ordinal": ordinal}
        if ordinal <= 0:
            raise InvalidInput(f"relay event ordinal must be positive, got {ordinal}", **where)
        if ordinal > _MAX_ORDINAL:
            raise InvalidInput("materialized event ordinal overflow", **where)
        if previous_digest and not is_relay_digest(previous_digest):
            raise RelayChainError(
                ChainFault.BAD_DIGEST,
                "previous relay event digest must be a lowercase SHA-256 digest "
                f"(64 lowercase hexadecimal characters), got {previous_digest!r}",
                **where,
            )
        validate_frontier(ordinal, digest, session_id=self._session_id)

    def _check_mutation(self, ordinal: int, mutation: MaterializedSessionMutation) -> None:
        where: dict[str, Any] = {"session_id": self._session_id, "ordinal": ordinal}
        title = mutation.session_title
        if isinstance(title, str) and not title.strip():
            raise ProjectionError("materialized session title cannot be empty", **where)
        for change in mutation.transcript:
            if isinstance(change, TranscriptUpsert):
                try:
                    change.item.validate(ordinal)
                except InvalidInput as exc:
                    raise ProjectionError(exc.detail, **where) from exc
            elif not change.stable_id.strip():
                raise ProjectionError(
                    "cannot remove a transcript item with an empty stable id", **where
                )

    def _fold(
        self, ordinal: int, mutation: MaterializedSessionMutation, recorded_at_ms: int | None
    ) -> None:
        pending = self._pending
        activity = mutation.last_activity_at_ms
        if activity is not None:
            current = pending.last_activity_at_ms
            pending.last_activity_at_ms = activity if current is None else max(current, activity)
        if mutation.execution is not None:
            pending.execution = mutation.execution
        if not isinstance(mutation.session_title, _Unset):
            pending.session_title = mutation.session_title
        if mutation.configuration is not None:
            pending.configuration = mutation.configuration
        for change in mutation.transcript:
            stable_id = (
                change.item.stable_id if isinstance(change, TranscriptUpsert) else change.stable_id
            )
            entry = pending.transcript.get(stable_id)
            if entry is None:
                pending.transcript[stable_id] = _PendingItem(change, False, ordinal)
                continue
            if isinstance(change, TranscriptUpsert) and isinstance(entry.change, TranscriptRemove):
                entry.remove_first = True
            entry.change, entry.ordinal = change, ordinal
        if mutation.queued_prompts is not None:
            pending.queued_prompts = (ordinal, mutation.queued_prompts)
        if mutation.pending_elicitations is not None:
            pending.pending_elicitations = mutation.pending_elicitations
        for command_id, error in mutation.config_results:
            pending.config_results.pop(command_id, None)  # keep write order = last result order
            pending.config_results[command_id] = error
        if not isinstance(mutation.active_turn, _Unset):
            pending.active_turn = mutation.active_turn
        if mutation.clear_turn_outcome:
            pending.clear_turn_outcome = True
            pending.last_turn_outcome = None
        if mutation.last_turn_outcome is not None:
            pending.finished_turns.append(mutation.last_turn_outcome)
            pending.last_turn_outcome = mutation.last_turn_outcome
        if mutation.provider_cost is not None:
            pending.provider_cost = mutation.provider_cost
        if mutation.api_events:
            at = activity if activity is not None else (recorded_at_ms or 0)
            pending.api_events.extend(
                (self._session_id, at, event) for event in mutation.api_events
            )

    # -- flush ------------------------------------------------------------------------

    def _write_transcript(self, changes: dict[str, _PendingItem]) -> None:
        if not changes:
            return
        session_id = self._session_id
        checked = [
            sid
            for sid, p in changes.items()
            if isinstance(p.change, TranscriptUpsert) and not p.remove_first
        ]
        stored: dict[str, tuple[int, int | None, int, int]] = {}
        if checked:
            for sid, position, latest, created, changed in self._connection.execute(
                "SELECT stable_id, position, latest_content_event_ordinal, created_at_ms, "
                "last_changed_at_ms FROM materialized_transcript_items "
                "WHERE session_id = ? AND stable_id IN (SELECT value FROM json_each(?))",
                (session_id, encode(checked).decode()),
            ):
                stored[sid] = (position, latest, created, changed)
        deletes: list[tuple[str, str]] = []
        updates: list[tuple[int | None, int, str, str, str]] = []
        inserts: list[tuple[str, str, int, int | None, int, int, str]] = []
        for sid in sorted(changes):
            p = changes[sid]
            if isinstance(p.change, TranscriptRemove):
                deletes.append((session_id, sid))
                continue
            item = p.change.item
            body = _text(item.body)
            if p.remove_first:
                deletes.append((session_id, sid))
            elif sid in stored:
                self._check_integrity(item, stored[sid], p.ordinal)
                updates.append(
                    (
                        item.latest_content_event_ordinal,
                        item.last_changed_at_ms,
                        body,
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
                )
            )
        connection = self._connection
        if deletes:
            connection.executemany(
                "DELETE FROM materialized_transcript_items WHERE session_id = ? AND stable_id = ?",
                deletes,
            )
        if updates:
            connection.executemany(
                "UPDATE materialized_transcript_items SET latest_content_event_ordinal = ?, "
                "last_changed_at_ms = ?, body_json = ? WHERE session_id = ? AND stable_id = ?",
                updates,
            )
        if inserts:
            connection.executemany(
                "INSERT INTO materialized_transcript_items(session_id, stable_id, position, "
                "latest_content_event_ordinal, created_at_ms, last_changed_at_ms, body_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                inserts,
            )

    def _check_integrity(
        self, item: TranscriptItem, stored: tuple[int, int | None, int, int], ordinal: int
    ) -> None:
        position, latest, created, changed = stored
        where: dict[str, Any] = {"session_id": self._session_id, "ordinal": ordinal}
        name = f"transcript item {item.stable_id!r}"
        if item.position != position or item.created_at_ms != created:
            raise ProjectionError(
                f"{name} changed immutable identity fields: stored position {position} and "
                f"created_at_ms {created}, received position {item.position} and "
                f"created_at_ms {item.created_at_ms}",
                **where,
            )
        if item.last_changed_at_ms < changed:
            raise ProjectionError(
                f"{name} moved its changed timestamp backwards: stored {changed}, "
                f"received {item.last_changed_at_ms}",
                **where,
            )
        new_latest = item.latest_content_event_ordinal
        if latest is not None and (new_latest is None or new_latest < latest):
            raise ProjectionError(
                f"{name} moved its latest content ordinal backwards: stored {latest}, "
                f"received {new_latest}",
                **where,
            )

    def _write_queue(self, ordinal: int, queue: list[MaterializedQueuedPrompt]) -> None:
        where: dict[str, Any] = {"session_id": self._session_id, "ordinal": ordinal}
        seen: set[str] = set()
        for entry in queue:
            if not entry.command_id.strip():
                raise ProjectionError("materialized prompt queue has an empty command id", **where)
            if entry.command_id in seen:
                raise ProjectionError(
                    f"materialized prompt queue contains duplicate command {entry.command_id!r}",
                    **where,
                )
            seen.add(entry.command_id)
        self._connection.execute(
            "DELETE FROM materialized_queued_prompts WHERE session_id = ?", (self._session_id,)
        )
        self._connection.executemany(
            "INSERT INTO materialized_queued_prompts(session_id, ordinal, command_id, "
            "kind_json, content_json, queued_at_ms, accepted_ordinal) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    self._session_id,
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

    def _write_side_tables(self, pending: _Pending) -> None:
        connection, session_id = self._connection, self._session_id
        insert_api_events(connection, pending.api_events)
        if pending.finished_turns:
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
                    for turn in pending.finished_turns
                ],
            )
        if pending.provider_cost is not None:
            connection.execute(
                "INSERT OR REPLACE INTO session_provider_cost(session_id, body) VALUES (?, ?)",
                (session_id, _text(pending.provider_cost)),
            )
        if pending.config_results:
            connection.executemany(
                "INSERT OR REPLACE INTO api_config_results(session_id, command_id, error) "
                "VALUES (?, ?, ?)",
                [(session_id, cid, error) for cid, error in pending.config_results.items()],
            )

    def _write_session_row(self, pending: _Pending) -> None:
        sets: list[str] = []
        params: dict[str, object] = {
            "session_id": self._session_id,
            "activity": pending.last_activity_at_ms,
            "ordinal": self._ordinal,
            "digest": self._digest,
        }
        if pending.execution is not None:
            params["state"], params["started"] = execution_columns(pending.execution)
            sets += ["execution_state = :state", "running_started_at_ms = :started"]
        if not isinstance(pending.session_title, _Unset):
            params["title"] = pending.session_title
            sets.append("session_title = :title")
        if pending.configuration is not None:
            params["configuration"] = _text(pending.configuration)
            sets.append("configuration_json = :configuration")
        if pending.pending_elicitations is not None:
            params["elicitations"] = _text(pending.pending_elicitations)
            sets.append("pending_elicitations_json = :elicitations")
        if not isinstance(pending.active_turn, _Unset):
            turn = pending.active_turn
            params["active_turn"] = None if turn is None else _text(turn)
            sets.append("active_turn_json = :active_turn")
        if pending.last_turn_outcome is not None:
            params["outcome"] = _text(pending.last_turn_outcome)
            sets.append("last_turn_outcome_json = :outcome")
        elif pending.clear_turn_outcome:
            sets.append("last_turn_outcome_json = NULL")
        sets += [
            "last_activity_at_ms = CASE WHEN :activity IS NULL THEN last_activity_at_ms "
            "WHEN last_activity_at_ms IS NULL OR last_activity_at_ms < :activity THEN :activity "
            "ELSE last_activity_at_ms END",
            "applied_event_ordinal = :ordinal",
            "applied_event_digest = :digest",
        ]
        self._connection.execute(
            f"UPDATE materialized_sessions SET {', '.join(sets)} WHERE session_id = :session_id",
            params,
        )


def _text(value: object) -> str:
    """Compact serde-style JSON text of ``value`` (the store's TEXT columns)."""
    return encode(value).decode()


def apply_projection_page(
    connection: apsw.Connection, session_id: str, fill: Callable[[ProjectionPage], T]
) -> T:
    """Apply one page of relay events to ``session_id``'s projection; return ``fill``'s value.

    Runs in one transaction (a savepoint when the caller already opened one): reads the
    stored frontier, calls ``fill(page)``, writes the page with
    :meth:`ProjectionPage.flush` and commits. Any exception rolls back everything the
    page wrote, API events and their ``seq`` numbers included, and propagates.
    Raises :class:`UnknownSession` when the session has no projection row (save the
    session first) and :class:`ProjectionError` when the stored frontier is corrupt.
    """
    with transaction(connection, f"apply a projection page to session {session_id}"):
        frontier = load_frontier(connection, session_id)
        if frontier is None:
            raise UnknownSession(session_id)
        try:
            validate_frontier(frontier.ordinal, frontier.digest, session_id=session_id)
        except RelayChainError as exc:
            raise ProjectionError(
                f"the stored projection is corrupt: {exc.detail}", session_id=session_id
            ) from exc
        page = ProjectionPage(connection, session_id, frontier)
        try:
            result = fill(page)
            page.flush()
        finally:
            page._closed = True
    return result


def apply_projection_event(
    connection: apsw.Connection,
    session_id: str,
    ordinal: int,
    previous_digest: str,
    digest: str,
    mutation: MaterializedSessionMutation,
    *,
    recorded_at_ms: int | None = None,
) -> ApplyOutcome:
    """Apply exactly one relay event, as a page of one (see :func:`apply_projection_page`)."""
    return apply_projection_page(
        connection,
        session_id,
        lambda page: page.apply(
            ordinal, previous_digest, digest, mutation, recorded_at_ms=recorded_at_ms
        ),
    )


def commit_page(
    connection: apsw.Connection,
    session_id: str,
    page: Sequence[tuple[RelayEvent, MaterializedSessionMutation]],
) -> tuple[RelayCursor, int]:
    """Write a projector's page of projected events: the stored frontier after it, and
    how many of the page's events it applied.

    The writer's one entry point for projection pages. Events at or below the stored
    frontier write nothing, so the result tells the projector whether the store was
    ahead of it.
    """

    def fill(projection_page: ProjectionPage) -> tuple[RelayCursor, int]:
        applied = 0
        for event, mutation in page:
            outcome = projection_page.apply(
                event.ordinal, event.previous_digest, event.digest, mutation
            )
            applied += outcome is ApplyOutcome.APPLIED
        return projection_page.frontier, applied

    return apply_projection_page(connection, session_id, fill)
