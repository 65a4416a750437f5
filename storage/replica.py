"""Applying a published store's commits to a local store: ``restore`` and ``mirror``.

:func:`apply_commits` takes the messages of one source store between two of its commit
markers (or several such spans) and applies them in **one transaction** together with
the stream position and the :class:`~relaystore.domain.replication.Mark` (the source's
change and seq) they reach (``replica_sources``; the mark as two rows of scopes
``SCOPE#change`` and ``SCOPE#seq``), so a crash re-applies nothing and loses nothing:
the next run starts after the position committed last and drops what the mark covers.
What a span holds was checked whole before it gets here
(:func:`~relaystore.domain.replication.cut_span`).

Guarantees:

* **Rows as published.** A ``record`` change upserts the session's rows (its context
  and workspace, which are never changed once written, its checkpoint, open checkpoint
  operation, last activity and recorded answers; a ``None`` one deletes them), a session of None deletes
  the session (its projection, log and feed go with it, as in the source), a ``start``
  change its seed and history start, a ``log`` change inserts the page's bytes as
  published. Changes apply in their number's order, so the last value wins.
* **The feed.** ``restore`` inserts each API event with its seq and its body as the
  source stored it (so ``relaystore events`` prints the same bytes and a consumer's
  cursor stays valid; a seq it holds already must hold the same event, else
  :class:`StoreError`); ``mirror`` appends them, in seq order, with seqs of its own.
  Events of a session the target does not hold (deleted since) are skipped. An
  ``activity_changed`` event also sets its session's last activity (a source of
  revision 16 or later numbers no change for it), so a session's activity is the
  newest of its record's and its feed's; while a catch-up's span ends before the
  source's newest events it may be one the record already passed, never at the span
  that reaches them.
* **The projection is derived, not copied.** Each session whose log or start changed
  is projected again by this build's rules (:mod:`relaystore.domain.projection.rebuild`):
  from where its stored projection stands when the new pages continue it, else from
  its history start over a reset projection. The feed is never appended to here:
  what the rules derive is compared by ``relaystore audit``.
* **Numbering.** With ``adopt`` (a whole store restored into a store that took its
  id), the target keeps the source's change numbers (the rows its own triggers made
  while applying are replaced by the published ones) and counters (its latest change
  and seq are the mark's), so it publishes on as the same store with no gap; the
  publisher's fork rule refuses it while it lacks what the stream holds.
* **Ownership.** :func:`restore_target` says what a target holds that a restore of a
  store did not write (the domain refuses it before anything is written); ``restore`` refuses (:class:`InvalidInput`, nothing written) a
  session the target holds that it did not restore from this store
  (``replica_sessions``); ``mirror`` gives a session whose id another store's session
  holds in the target a qualified id
  (:func:`~relaystore.domain.replication.mirror_session_id`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import apsw
import msgspec

from ..domain.activity import published_activity
from ..domain.errors import InvalidInput, StoreError, UnknownSession
from ..domain.projection.rebuild import rebuild, rebuild_from
from ..domain.relay.log import unpack_events
from ..domain.relay.payloads import RelayCursor
from ..domain.replication import (
    Incoming,
    LogPageRow,
    Mark,
    RecordState,
    StartState,
    WireEvent,
    mirror_session_id,
    stored_body,
)
from .activity import PUBLISH_ACTIVITY
from .answers import apply_answer_rows
from .materialized import load_frontier, load_materialized_session
from .projection import commit_page
from .relay_log import load_relay_log
from .replica_sources import mark_scopes
from .reproject import reset_projection
from .sequences import NEXT_SEQ, RAISE_HIGH_WATER
from .subagents import apply_subagent_row
from .transaction import transaction

__all__ = ["ApplyReport", "apply_commits"]


@dataclasses.dataclass(slots=True)
class ApplyReport:
    """What one :func:`apply_commits` wrote."""

    events: int = 0
    changes: int = 0
    sessions: set[str] = dataclasses.field(default_factory=set)
    """The local ids of the sessions it touched."""


class _Target:
    """How source sessions map to local ones (restore: the same id; mirror: qualified
    when taken), inside the apply transaction."""

    def __init__(self, connection: apsw.Connection, store_id: str, *, mirror: bool) -> None:
        self.connection = connection
        self.store_id = store_id
        self.mirror = mirror
        self.known: dict[str, str] = {}

    def local(self, session_id: str, *, create: bool) -> str | None:
        """The local id of ``session_id`` (None: not held and not to be created)."""
        if session_id in self.known:
            return self.known[session_id]
        connection = self.connection
        row = connection.execute(
            "SELECT session_id FROM replica_sessions WHERE store_id = ? AND source_session_id = ?",
            (self.store_id, session_id),
        ).fetchone()
        if row is not None:
            local = str(row[0])
        elif not create:
            return None
        else:
            taken = (
                connection.execute(
                    "SELECT 1 FROM session_contexts WHERE session_id = ?1 UNION ALL "
                    "SELECT 1 FROM replica_sessions WHERE session_id = ?1",
                    (session_id,),
                ).fetchone()
                is not None
            )
            if taken and not self.mirror:
                raise InvalidInput(
                    f"the store already holds a session {session_id} that it did not restore "
                    f"from store {self.store_id}; restore into an empty store (or one holding "
                    "none of the sessions restored)",
                    session_id=session_id,
                )
            local = mirror_session_id(session_id, self.store_id, taken)
            connection.execute(
                "INSERT INTO replica_sessions(session_id, store_id, source_session_id) "
                "VALUES (?, ?, ?)",
                (local, self.store_id, session_id),
            )
        self.known[session_id] = local
        return local


_RECORD_ID = msgspec.json.Decoder(dict[str, object])


def _record_json(text: str, local: str, source: str) -> str:
    """``record_json`` under its local id (a mirror's qualified one)."""
    if local == source:
        return text
    document = _RECORD_ID.decode(text)
    document["id"] = local
    return msgspec.json.encode(document).decode()


def _put(connection: apsw.Connection, table: str, local: str, row: msgspec.Struct | None) -> None:
    """The session's one row of ``table`` (one of this module's, named in code) as
    ``row``'s fields, or no row for None."""
    if row is None:
        connection.execute(f"DELETE FROM {table} WHERE session_id = ?", (local,))
        return
    fields = row.__struct_fields__
    connection.execute(
        f"INSERT OR REPLACE INTO {table}(session_id, {', '.join(fields)}) "
        f"VALUES (?{', ?' * len(fields)})",
        (local, *msgspec.structs.astuple(row)),
    )


def _apply_record(connection: apsw.Connection, local: str, state: RecordState) -> bool:
    """Write the record's rows; False when the session is (now) deleted."""
    if state.workspace is not None:
        connection.execute(
            "INSERT INTO workspaces(workspace_id, created_at) VALUES (?, ?) "
            "ON CONFLICT(workspace_id) DO NOTHING",
            (state.workspace.workspace_id, state.workspace.created_at),
        )
    if state.context is not None:
        context = state.context
        connection.execute(
            "INSERT INTO session_contexts(session_id, bundle_id, created_at, workspace_id) "
            "VALUES (?, ?, ?, ?) ON CONFLICT(session_id) DO NOTHING",
            (local, context.bundle_id, context.created_at, context.workspace_id),
        )
    row = state.session
    if row is None:
        connection.execute("DELETE FROM sessions WHERE session_id = ?", (local,))
        return False
    connection.execute(
        "INSERT INTO sessions(session_id, title, harness_kind, state, updated_at, "
        "viewed_through_event_ordinal, last_error, last_checkpoint_error, native_session_id, "
        "record_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE "
        "SET title = excluded.title, harness_kind = excluded.harness_kind, "
        "state = excluded.state, updated_at = excluded.updated_at, "
        "viewed_through_event_ordinal = excluded.viewed_through_event_ordinal, "
        "last_error = excluded.last_error, last_checkpoint_error = excluded.last_checkpoint_error, "
        "native_session_id = excluded.native_session_id, record_json = excluded.record_json",
        (
            local,
            row.title,
            row.harness_kind,
            row.state,
            row.updated_at,
            row.viewed_through_event_ordinal,
            row.last_error,
            row.last_checkpoint_error,
            row.native_session_id,
            _record_json(row.record_json, local, state.session_id),
        ),
    )
    connection.execute(
        "INSERT INTO materialized_sessions(session_id) VALUES (?) "
        "ON CONFLICT(session_id) DO NOTHING",
        (local,),
    )
    _put(connection, "session_checkpoints", local, state.checkpoint)
    _put(connection, "checkpoint_operations", local, state.operation)
    _put(connection, "api_session_activity", local, state.activity)
    return True


def _apply_start(connection: apsw.Connection, local: str, state: StartState) -> None:
    _put(connection, "materialized_seeds", local, state.seed)
    if state.first_ordinal is None or state.source is None:
        connection.execute("DELETE FROM materialized_history_start WHERE session_id = ?", (local,))
    else:
        connection.execute(
            "INSERT OR REPLACE INTO materialized_history_start(session_id, first_ordinal, "
            "source) VALUES (?, ?, ?)",
            (local, state.first_ordinal, state.source),
        )


def _projected(connection: apsw.Connection, local: str) -> bool:
    return load_frontier(connection, local) is not None


def _project_again(connection: apsw.Connection, local: str, new_pages: list[LogPageRow]) -> None:
    """Project the session again from its log (see the module doc): on top of its stored
    projection when ``new_pages`` continue it, else its whole history."""
    stored = load_materialized_session(connection, local)
    if stored is None:
        return
    first_new = new_pages[0].first_ordinal if new_pages else None
    if (
        first_new is not None
        and stored.projection_behind is None
        and stored.applied_event_ordinal == first_new - 1
        and stored.applied_event_ordinal > 0
    ):
        events = [
            event
            for page in new_pages
            for event in unpack_events(
                page.lines, session_id=local, first_ordinal=page.first_ordinal
            )
        ]
        rebuilt = rebuild_from(stored, events)
    else:
        log = load_relay_log(connection, local)
        if log is None:
            return
        end = log.pages[-1][1] if log.pages else log.history_first - 1
        log = dataclasses.replace(log, frontier=RelayCursor(ordinal=end, digest="0" * 64))
        rebuilt = rebuild(log, action="restore")
        reset_projection(connection, local, rebuilt.page)
    page = rebuilt.page
    page.api_events = []  # the feed is the source's, as published
    commit_page(connection, local, page, log=False, logged=True)


def _insert_events(
    connection: apsw.Connection, target: _Target, events: Sequence[WireEvent], *, mirror: bool
) -> int:
    held: dict[str, bool] = {}
    written = 0
    for event in events:  # in seq order (the span's)
        local = target.local(event.session_id, create=False)
        if local is None:
            continue
        if local not in held:
            held[local] = (
                connection.execute(
                    "SELECT 1 FROM sessions WHERE session_id = ?", (local,)
                ).fetchone()
                is not None
            )
        if not held[local]:
            continue
        body = stored_body(event)
        if mirror:
            connection.execute(
                "INSERT INTO api_events(seq, session_id, recorded_at_ms, body) "
                f"VALUES ({NEXT_SEQ}, ?, ?, ?)",
                (local, event.recorded_at_ms, body),
            )
        else:
            connection.execute(
                "INSERT INTO api_events(seq, session_id, recorded_at_ms, body) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(seq) DO NOTHING",
                (event.seq, local, event.recorded_at_ms, body),
            )
            if not connection.changes():  # restored already (another --session scope)?
                held_row = connection.execute(
                    "SELECT session_id, recorded_at_ms, body FROM api_events WHERE seq = ?",
                    (event.seq,),
                ).fetchone()
                if held_row != (local, event.recorded_at_ms, body):
                    raise StoreError(
                        f"API event seq {event.seq} of store {target.store_id} is held by the "
                        "store with other contents; nothing of the span applied"
                    )
                continue
        activity = published_activity(event.type, event.data, where=f"API event seq {event.seq}")
        if activity is not None:
            connection.execute(PUBLISH_ACTIVITY, (local, activity))
        written += 1
    return written


def apply_commits(
    connection: apsw.Connection,
    *,
    store_id: str,
    stream: str,
    scope: str,
    stream_seq: int,
    mark: Mark,
    messages: Sequence[Incoming],
    sessions: frozenset[str] | None,
    mirror: bool,
    adopt: bool,
) -> ApplyReport:
    """Apply one source store's ``messages`` (whole commit spans, as
    :func:`~relaystore.domain.replication.cut_span` cut them) and record ``mark`` and
    ``stream_seq`` as applied, in one transaction; see the module doc. ``sessions``:
    only these source sessions (None: all)."""
    report = ApplyReport()
    with transaction(connection, f"apply the commits of store {store_id}"):
        ours = connection.execute("SELECT coalesce(max(change_seq), 0) FROM store_changes").get
        target = _Target(connection, store_id, mirror=mirror)
        changes = sorted(
            (message for message in messages if message.kind in ("record", "start", "log")),
            key=lambda message: message.number,
        )
        pages: dict[str, list[LogPageRow]] = {}
        starts: set[str] = set()
        for message in changes:
            source = message.session_id
            assert source is not None
            if sessions is not None and source not in sessions:
                continue
            value = message.value
            local = target.local(source, create=isinstance(value, RecordState))
            report.changes += 1
            if local is None:
                continue
            try:
                if isinstance(value, RecordState):
                    if not _apply_record(connection, local, value):
                        pages.pop(local, None)
                        starts.discard(local)
                    else:
                        parent = functools.partial(target.local, create=False)
                        apply_subagent_row(connection, local, value.subagent, parent)
                        apply_answer_rows(connection, local, value.answers)
                elif not _projected(connection, local):
                    continue  # deleted since (or never held): nothing to keep it under
                elif isinstance(value, StartState):
                    _apply_start(connection, local, value)
                    starts.add(local)
                elif isinstance(value, LogPageRow):
                    connection.execute(
                        "INSERT OR REPLACE INTO relay_log_pages(session_id, first_ordinal, "
                        "last_ordinal, raw_bytes, lines) VALUES (?, ?, ?, ?, ?)",
                        (
                            local,
                            value.first_ordinal,
                            value.last_ordinal,
                            value.raw_bytes,
                            value.lines,
                        ),
                    )
                    pages.setdefault(local, []).append(value)
            except apsw.ConstraintError as exc:
                raise StoreError(
                    f"change {message.number} of store {store_id} (session {source}) does not "
                    f"fit the store: {exc}"
                ) from exc
            report.sessions.add(local)
        events = [
            message.value
            for message in messages
            if isinstance(message.value, WireEvent)
            and (sessions is None or message.value.session_id in sessions)
        ]
        try:
            report.events = _insert_events(connection, target, events, mirror=mirror)
        except apsw.ConstraintError as exc:
            raise StoreError(
                f"an API event of store {store_id} does not fit the store: {exc}"
            ) from exc
        for local in sorted(pages.keys() | starts):
            try:
                _project_again(connection, local, [] if local in starts else pages.get(local, []))
            except UnknownSession:
                continue
        if adopt:
            connection.execute("DELETE FROM store_changes WHERE change_seq > ?", (ours,))
            connection.executemany(
                "INSERT INTO store_changes(change_seq, kind, session_id, first_ordinal) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(change_seq) DO NOTHING",
                [
                    (message.number, message.kind, message.session_id, message.first_ordinal)
                    for message in changes
                ],
            )
            # Its counters as the source's: the numbers its own triggers took while
            # applying were replaced above (so the newest change row is the mark's), and
            # the events it lacks were deleted in the source: never to be handed out.
            connection.execute(RAISE_HIGH_WATER, (mark.seq,))
        change_scope, seq_scope = mark_scopes(scope)
        connection.executemany(
            "INSERT INTO replica_sources(store_id, stream, scope, stream_seq) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(store_id, stream, scope) DO UPDATE SET stream_seq = excluded.stream_seq",
            [
                (store_id, stream, scope, stream_seq),
                (store_id, stream, change_scope, mark.change),
                (store_id, stream, seq_scope, mark.seq),
            ],
        )
    return report
